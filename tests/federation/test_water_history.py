"""Water-level history at fleet scale: raw minutes for a day, hourly and daily averages beyond,
written by the rollup as time passes or by the simulator's four-week seed; the dashboard's
JSON answers a range at the grain it affords (a zoom gets finer points), with the drains,
cordons and downgrades in it, and refuses a bad range with a 400 naming the parameter."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from federation import water
from federation.models import WaterLevelRollup, WaterLevelSample
from fleet import services as fleet_services
from fleet.models import Cluster
from nodeconfig.services import emergency_downgrade

pytestmark = pytest.mark.django_db

WATER_JSON = "/federation/water-levels.json"


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def test_completed_hours_and_days_are_averaged_once(fleet3):
    bj = Cluster.objects.get(name="bj-1")
    day = datetime(2026, 3, 2, tzinfo=UTC)
    rates = []
    for minute in range(0, 24 * 60, 30):  # a sample every half hour for a day, CPU requests climbing
        requested = bj.cpu_allocatable_milli * (minute // 60) // 48
        Cluster.objects.filter(pk=bj.pk).update(cpu_requested_milli=requested)
        water.record_samples(now=day + timedelta(minutes=minute))
        rates.append(requested)
    hourly = WaterLevelRollup.objects.filter(cluster=bj, grain="hour").order_by("at")
    assert hourly.count() == 23, "the 23:00 hour is not over yet"
    first = hourly.first()
    assert (first.at, first.samples, first.cpu_requested_milli) == (day, 2, rates[0])
    assert hourly.last().cpu_requested_milli == rates[44], "hour 22 averages its two samples"
    assert not WaterLevelRollup.objects.filter(grain="day").exists()

    water.record_samples(now=day + timedelta(hours=24, minutes=1))
    assert WaterLevelRollup.objects.filter(cluster=bj, grain="hour").count() == 24
    daily = WaterLevelRollup.objects.get(cluster=bj, grain="day")
    hours = list(WaterLevelRollup.objects.filter(cluster=bj, grain="hour").values_list("cpu_requested_milli", flat=True))
    assert daily.at == day and daily.samples == 24 and daily.cpu_requested_milli == round(sum(hours) / 24)
    assert WaterLevelRollup.objects.filter(grain="day").count() == 3, "one per cluster"
    assert water.roll_up(day + timedelta(hours=24, minutes=2)) == 0, "nothing is rolled up twice"
    # The raw minutes are kept for a day only; the hours stay.
    assert not WaterLevelSample.objects.filter(at__lt=day + timedelta(minutes=1)).exists()
    water.record_samples(now=day + timedelta(days=36))
    assert not WaterLevelRollup.objects.filter(grain="hour", at__lt=day + timedelta(days=1)).exists(), "35 days of hours"
    assert WaterLevelRollup.objects.filter(grain="day", at=day).count() == 3, "days are kept for 400"


def test_a_range_gets_the_finest_grain_it_can_afford():
    now = timezone.now()
    assert water.grain_for(now - timedelta(hours=6), now, now) == "minute"
    assert water.grain_for(now - timedelta(hours=24), now, now) == "minute"
    assert water.grain_for(now - timedelta(days=7), now, now) == "hour"
    assert water.grain_for(now - timedelta(days=28), now, now) == "day"
    assert water.grain_for(now - timedelta(days=10, hours=6), now - timedelta(days=10), now) == "hour", \
        "zooming into hours long past: raw minutes are gone, hourly averages are not"


def test_four_weeks_of_simulated_history_are_read_at_the_grain_of_each_range(client, viewer, fleet3):
    counts = water.simulate_history(days=28)
    assert counts["clusters"] == 3 and counts["hourly"] == 3 * 672 and counts["daily"] in (3 * 27, 3 * 28)
    assert counts["raw"] == 3 * 289, "every 5 minutes over the raw day, both ends"
    client.force_login(viewer)

    month = json.loads(client.get(WATER_JSON, {"hours": 672}).content)
    history = month["history"]
    assert history["grain"] == "day" and set(history["series"]) == {"bj-1", "gz-1", "sh-1"}
    assert 26 <= len(history["series"]["bj-1"]["t"]) <= 29
    assert history["t1"] - history["t0"] == 672 * 3600 * 1000
    rates = history["series"]["bj-1"]["cpu"]
    assert min(rates) < max(rates), "the levels move over four weeks"
    assert all(0 <= w <= 1000 for w in history["series"]["bj-1"]["weight"])

    # Zoomed to three days, then to six hours of today: finer points each time.
    end = timezone.now()
    days3 = json.loads(client.get(WATER_JSON, {"start": ms(end - timedelta(days=13)), "end": ms(end - timedelta(days=10))}).content)
    assert days3["history"]["grain"] == "hour" and 70 <= len(days3["history"]["series"]["sh-1"]["t"]) <= 74
    hours6 = json.loads(client.get(WATER_JSON, {"start": ms(end - timedelta(hours=6)), "end": ms(end)}).content)
    assert hours6["history"]["grain"] == "minute" and 70 <= len(hours6["history"]["series"]["sh-1"]["t"]) <= 74
    # The newest raw point is today's level, where the curves end.
    bj = Cluster.objects.get(name="bj-1")
    today = round(100.0 * bj.cpu_requested_milli / bj.cpu_allocatable_milli, 1)
    assert abs(hours6["history"]["series"]["bj-1"]["cpu"][-1] - today) <= 2.0


def test_the_month_view_stays_cheap_at_fleet_scale(client, viewer):
    """100 clusters × 4 weeks: the page and the JSON read daily averages thinned to the point
    budget, in a fixed number of queries."""
    Cluster.objects.bulk_create([
        Cluster(name=f"c-{i:03d}", connector="simulated", ready=True, cpu_allocatable_milli=64_000 * (1 + i % 4),
                cpu_requested_milli=32_000 + 100 * i, memory_allocatable_bytes=2**38, memory_requested_bytes=2**36)
        for i in range(100)])
    counts = water.simulate_history(days=28)
    assert counts["hourly"] == 100 * 672
    client.force_login(viewer)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(WATER_JSON, {"hours": 672})
    payload = json.loads(response.content)
    assert payload["history"]["grain"] == "day" and len(payload["history"]["series"]) == 100
    assert len(queries) <= 20, [q["sql"][:120] for q in queries.captured_queries]
    assert len(response.content) < 400_000
    assert client.get("/federation/water-levels/", {"hours": 672}).status_code == 200


def test_drains_cordons_and_downgrades_in_the_range_come_with_the_history(client, viewer, fleet3):
    water.record_samples()
    sh = Cluster.objects.get(name="sh-1")
    fleet_services.cordon(sh, reason="maintenance window")
    fleet_services.cordon(sh, drain=True, reason="kernel upgrade")
    target, _created, _job = emergency_downgrade(cluster="gz-1", selector="", reason="latency incident INC-4411")
    client.force_login(viewer)
    history = json.loads(client.get(WATER_JSON, {"hours": 1}).content)["history"]
    marks = [(e["kind"], e["object"], e["reason"]) for e in history["events"]]
    assert marks == [("cordon", "sh-1", "maintenance window"), ("drain", "sh-1", "kernel upgrade"),
                     ("emergency_downgrade", str(target), "latency incident INC-4411")]
    assert all(0 <= e["t"] <= (history["t1"] - history["t0"]) / 1000 for e in history["events"])
    old = json.loads(client.get(WATER_JSON, {"start": ms(timezone.now() - timedelta(days=3)),
                                             "end": ms(timezone.now() - timedelta(days=2))}).content)
    assert old["history"]["events"] == [], "only the range's events"
    one = water.history(Cluster.objects.get(name="bj-1"), hours=1)
    assert [e["kind"] for e in one["events"]] == ["emergency_downgrade"], "another cluster's drain is not on bj-1's chart"


@pytest.mark.parametrize(("query", "field"), [
    ({"start": "yesterday", "end": "1"}, "start"),
    ({"start": "1700000000000"}, "end"),
    ({"start": "1700000000000", "end": "1700000000000"}, "end"),
    ({"start": "1600000000000", "end": "1700000000000"}, "start"),
    ({"start": "1700000000000", "end": "9" * 30}, "end"),
])
def test_a_bad_range_is_a_400_naming_the_parameter(client, viewer, query, field):
    client.force_login(viewer)
    response = client.get(WATER_JSON, query)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_a_canceled_catch_up_of_rollups_stops_between_buckets_and_the_next_run_finishes_it(fleet3):
    """A day of raw minutes not rolled up yet (an outage of the beat): the job rolling them up
    is canceled, so it stops before the next hour and writes nothing more; the next run rolls
    up every hour, none twice."""
    from core.jobs import JobCanceled, bound
    from core.models import Job

    day = datetime(2026, 3, 2, tzinfo=UTC)
    WaterLevelSample.objects.bulk_create([
        WaterLevelSample(cluster=cluster, at=day + timedelta(minutes=minute), weight=1, cpu_requested_milli=minute)
        for cluster in Cluster.objects.all() for minute in range(0, 24 * 60, 30)])
    job = Job.objects.create(kind="federation.sample_water_levels", status=Job.Status.CANCELED)
    with bound(job), pytest.raises(JobCanceled):
        water.roll_up(day + timedelta(hours=24, minutes=1))
    assert not WaterLevelRollup.objects.exists()
    assert water.roll_up(day + timedelta(hours=24, minutes=1)) == 3 * 24 + 3  # every hour of each cluster, then its day
