"""Water levels per member cluster: what the dashboard shows now and over time.

Deploy rate is requested / allocatable (the seed's 部署率); the dynamic weight is the one a
CPU workload would get now (``weights.dynamic_weights`` over every ready, uncordoned
cluster). One query for the clusters (cordons included), one bulk insert per sample.

History at fleet scale (500 clusters × 4 weeks) stays cheap by grain: raw minute samples are
kept for a day (``MERIDIAN_WATER_LEVEL_RETENTION_DAYS``), hourly averages for 35 days and daily
ones for 400 (``WaterLevelRollup``, rolled up as the minutes pass). A chart asks for the range
it shows and gets the finest grain that range can afford: a zoom re-queries at a finer one.
Drains, cordons and emergency downgrades in the range come with it (from the audit log), so
the charts can mark what moved the levels.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, Max, Min, Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core import events, jobs
from core.models import ObjectChange
from fleet.models import Cluster
from fleet.simulator import unit

from .models import WaterLevelRollup, WaterLevelSample
from .weights import dynamic_weights

#: (key, label, allocatable column, requested column, divisor, unit): labels and units as the
#: pages show them (lazily translated; JSON payloads encode them as text).
RESOURCES = (
    ("cpu", gettext_lazy("CPU"), "cpu_allocatable_milli", "cpu_requested_milli", 1000, gettext_lazy("cores")),
    ("memory", gettext_lazy("Memory"), "memory_allocatable_bytes", "memory_requested_bytes", 2**30, "GiB"),
    ("gpu", gettext_lazy("GPU"), "gpu_allocatable", "gpu_requested", 1, gettext_lazy("GPUs")),
)
_COLUMNS = ("name", "ready", "pk", "cordoned", "drain", *(c for r in RESOURCES for c in r[2:4]))


def _cores(milli: int) -> int:
    return -(-milli // 1000) if milli >= 0 else -(-(-milli) // 1000)


def current_weights(rows: list[dict[str, Any]]) -> dict[str, int]:
    """CPU dynamic weights over the clusters that could take new replicas (others get 0)."""
    usable = [r for r in rows if r["ready"] and not r["cordoned"]]
    weights = dynamic_weights([
        (r["name"], {"cpu": _cores(r["cpu_allocatable_milli"])},
         {"cpu": _cores(r["cpu_allocatable_milli"] - r["cpu_requested_milli"])}) for r in usable])
    return {r["name"]: weights.get(r["name"], 0) for r in rows}


def _resource(row: dict[str, Any], key: str, alloc: str, req: str, divisor: int) -> dict[str, Any]:
    allocatable, requested = row[alloc], row[req]
    return {
        "resource": key,
        "allocatable": round(allocatable / divisor, 1),
        "requested": round(requested / divisor, 1),
        "available": round((allocatable - requested) / divisor, 1),
        "deploy_rate": round(100.0 * requested / allocatable, 1) if allocatable else 0.0,
    }


def water_levels() -> dict[str, Any]:
    """Every cluster's levels, its weight and cordon state, and fleet totals."""
    rows = list(Cluster.objects.order_by("name").values(*_COLUMNS))
    weights = current_weights(rows)
    clusters = []
    for row in rows:
        clusters.append({
            "name": row["name"], "ready": row["ready"], "weight": weights[row["name"]],
            "cordoned": row["cordoned"], "draining": row["cordoned"] and row["drain"],
            "resources": {key: _resource(row, key, alloc, req, div) for key, _, alloc, req, div, _ in RESOURCES},
        })
    totals = {}
    for key, _, alloc, req, div, _ in RESOURCES:
        summed = {alloc: sum(r[alloc] for r in rows), req: sum(r[req] for r in rows)}
        totals[key] = _resource(summed, key, alloc, req, div)
    return {"clusters": clusters, "totals": totals, "units": {key: unit for key, _, _, _, _, unit in RESOURCES},
            "at": timezone.now().isoformat()}


#: The sample columns (everything but the cluster and the time).
LEVEL_COLUMNS = tuple(c for r in RESOURCES for c in r[2:4]) + ("weight",)
GRAINS = {"minute": timedelta(minutes=1), WaterLevelRollup.Grain.HOUR: timedelta(hours=1),
          WaterLevelRollup.Grain.DAY: timedelta(days=1)}
#: Days each rollup grain is kept.
ROLLUP_RETENTION_DAYS = {WaterLevelRollup.Grain.HOUR: 35, WaterLevelRollup.Grain.DAY: 400}
#: The longest range one request may ask for, and the shortest.
MAX_RANGE, MIN_RANGE = timedelta(days=400), timedelta(minutes=1)
#: Audit verbs drawn on the history charts: what moves water levels by hand.
EVENT_VERBS = ("drain", "cordon", "uncordon", "emergency_downgrade", "restore")
EVENTS_SHOWN = 200


def raw_retention() -> timedelta:
    return timedelta(days=getattr(settings, "MERIDIAN_WATER_LEVEL_RETENTION_DAYS", 1))


def record_samples(now: datetime | None = None) -> int:
    """One history point per cluster; the hours and days this completes are rolled up, and
    points older than each grain's retention are dropped."""
    now = now or timezone.now()
    rows = list(Cluster.objects.values(*_COLUMNS))
    weights = current_weights(rows)
    WaterLevelSample.objects.bulk_create([
        WaterLevelSample(cluster_id=r["pk"], at=now, weight=weights[r["name"]],
                         **{c: r[c] for res in RESOURCES for c in res[2:4]}) for r in rows])
    roll_up(now)
    prune(now)
    events.publish("water-levels", "water_level.sampled", {"at": now.isoformat(), "clusters": len(rows)})
    return len(rows)


def prune(now: datetime) -> None:
    WaterLevelSample.objects.filter(at__lt=now - raw_retention()).delete()
    for grain, days in ROLLUP_RETENTION_DAYS.items():
        WaterLevelRollup.objects.filter(grain=grain, at__lt=now - timedelta(days=days)).delete()


def floor_time(at: datetime, span: timedelta) -> datetime:
    """The start of the UTC hour or day holding ``at``."""
    epoch = datetime(1970, 1, 1, tzinfo=at.tzinfo)
    return epoch + (at - epoch) // span * span


def roll_up(now: datetime | None = None) -> int:
    """Average every completed hour of raw samples, then every completed day of hours, that has
    no rollup yet: one grouped query per bucket, so the minute beat does two cheap MAX reads
    and nothing else until an hour passes. Returns the rollup rows written."""
    now = now or timezone.now()
    written = _roll(WaterLevelSample.objects.all(), WaterLevelRollup.Grain.HOUR, now)
    return written + _roll(WaterLevelRollup.objects.filter(grain=WaterLevelRollup.Grain.HOUR),
                           WaterLevelRollup.Grain.DAY, now)


def _roll(source: QuerySet, grain: str, now: datetime) -> int:
    span = GRAINS[grain]
    end = floor_time(now, span)
    last = WaterLevelRollup.objects.filter(grain=grain).aggregate(m=Max("at"))["m"]
    first = source.aggregate(m=Min("at"))["m"]
    if first is None:
        return 0
    bucket = max(last + span if last else floor_time(first, span), floor_time(first, span),
                 end - timedelta(days=ROLLUP_RETENTION_DAYS[grain]))
    written = 0
    while bucket < end:
        jobs.checkpoint()  # a catch-up after an outage is hundreds of buckets: a canceled job stops between them
        rows = (source.filter(at__gte=bucket, at__lt=bucket + span).order_by().values("cluster_id")
                .annotate(n=Count("pk"), **{c: Avg(c) for c in LEVEL_COLUMNS}))
        made = WaterLevelRollup.objects.bulk_create([
            WaterLevelRollup(cluster_id=r["cluster_id"], grain=grain, at=bucket, samples=r["n"],
                             **{c: round(r[c] or 0) for c in LEVEL_COLUMNS}) for r in rows], ignore_conflicts=True)
        written += len(made)
        bucket += span
    return written


def grain_for(start: datetime, end: datetime, now: datetime | None = None) -> str:
    """The finest grain a range can afford: raw minutes for up to 36 hours inside the raw
    retention, hours for up to two weeks, days beyond."""
    now = now or timezone.now()
    span = end - start
    if span <= timedelta(hours=36) and start >= now - raw_retention() - timedelta(hours=1):
        return "minute"
    if span <= timedelta(days=14) and start >= now - timedelta(days=ROLLUP_RETENTION_DAYS[WaterLevelRollup.Grain.HOUR]):
        return WaterLevelRollup.Grain.HOUR
    return WaterLevelRollup.Grain.DAY


def samples_of(grain: str) -> QuerySet:
    """The rows holding one grain: raw samples for "minute", else that grain's rollups."""
    if grain == "minute":
        return WaterLevelSample.objects.all()
    return WaterLevelRollup.objects.filter(grain=grain)


def _sample_times(samples, max_points: int) -> list[datetime]:
    """At most ``max_points`` sample times spread over the window.

    Every sample pass (and every rollup) writes one row per cluster at the same time, so the
    times of one cluster in the latest pass are every pass's times: read through the
    (cluster, at) index instead of a DISTINCT over every row of the window.
    """
    latest = samples.order_by("-at").values_list("cluster_id", flat=True).first()
    if latest is None:
        return []
    times = list(samples.filter(cluster_id=latest).order_by("at").values_list("at", flat=True))
    stride = max(1, -(-len(times) // max(1, max_points)))
    picked = times[::stride]
    if times[-1] not in picked:
        picked.append(times[-1])
    return picked


def history(cluster: Cluster | None = None, *, hours: float = 24, start: datetime | None = None,
            end: datetime | None = None, max_points: int = 500) -> dict[str, Any]:
    """Series per cluster (or one cluster) over ``start``..``end`` (default: the last
    ``hours``): times, deploy rate per resource, weight, at the grain the range affords, and
    the drains, cordons and downgrades in it.

    Long ranges are thinned in SQL to ``max_points`` times, so 4 weeks at 500 clusters reads
    ``500 × max_points`` rows of daily or hourly averages, never the minutes.
    """
    now = timezone.now()
    end = end or now
    start = start or end - timedelta(hours=hours)
    grain = grain_for(start, end, now)
    samples = samples_of(grain).filter(at__gte=start - GRAINS[grain], at__lte=end)
    if cluster is not None:
        samples = samples.filter(cluster=cluster)
    times = _sample_times(samples, max_points)
    names = dict(Cluster.objects.values_list("pk", "name"))
    series: dict[str, dict[str, list]] = {}
    fields = ("cluster_id", "at", "weight", *(c for r in RESOURCES for c in r[2:4]))
    for row in samples.filter(at__in=times).order_by("cluster_id", "at").values_list(*fields):
        sample = dict(zip(fields, row, strict=True))
        entry = series.setdefault(names.get(sample["cluster_id"], "?"), {"at": [], "weight": [], "cpu": [], "memory": [], "gpu": []})
        entry["at"].append(sample["at"].isoformat())
        entry["weight"].append(sample["weight"])
        for key, _, alloc, req, _, _ in RESOURCES:
            entry[key].append(round(100.0 * sample[req] / sample[alloc], 1) if sample[alloc] else 0.0)
    return {"since": start.isoformat(), "until": end.isoformat(), "grain": grain, "series": series,
            "events": level_events(start, end, cluster)}


def level_events(start: datetime, end: datetime, cluster: Cluster | None = None) -> list[dict[str, Any]]:
    """Drains, cordons, uncordons and emergency downgrades (and their restores) in the range,
    from the audit log (indexed by time), oldest first; for one cluster only its own cordons
    and the downgrades (a downgrade's scope may hold it)."""
    changes = ObjectChange.objects.filter(time__gte=start, time__lte=end, verb__in=EVENT_VERBS)
    if cluster is not None:
        changes = changes.filter(Q(verb__in=("emergency_downgrade", "restore")) | Q(object_repr=cluster.name))
    return [{"at": c.time.isoformat(), "kind": c.verb, "object": c.object_repr, "reason": c.reason, "actor": c.actor}
            for c in changes.order_by("time")[:EVENTS_SHOWN]]


# ---------------------------------------------------------------------------- simulation


def _level(name: str, age_hours: float, days: int) -> float:
    """The simulated fraction of today's requests a cluster held ``age_hours`` ago: a daily
    wave peaking mid-afternoon, quieter weekends, growth of up to 15% over the range toward
    today, and a little noise (stable per cluster and hour: ``fleet.simulator.unit``)."""
    phase = unit(name, "phase") * 2.0
    growth = 1.0 - (0.05 + 0.10 * unit(name, "growth")) * min(age_hours / (24 * days), 1.0)
    daily = 0.06 * math.sin(2 * math.pi * ((-age_hours) % 24 - 8 + phase) / 24) - 0.06 * math.sin(2 * math.pi * (-8 + phase) / 24)
    weekend = -0.04 if int((age_hours + 24 * unit(name, "day")) // 24) % 7 in (5, 6) else 0.0
    noise = 0.02 * (unit(name, "noise", int(age_hours)) - 0.5)
    return max(0.05, growth + daily + weekend + noise)


def _insert(model: type, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Plain multi-row INSERTs: the seed writes half a million rows at fleet scale, where
    building and preparing a model instance per row (``bulk_create``) costs most of the time."""
    ops = connection.ops
    table = ops.quote_name(model._meta.db_table)
    names = ", ".join(ops.quote_name(model._meta.get_field(c).column) for c in columns)
    sql = f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 5000):
            cursor.executemany(sql, rows[start:start + 5000])


def simulate_history(days: int = 28, *, now: datetime | None = None, raw_minutes: int = 5,
                     clusters: Iterable[Cluster] | None = None) -> dict[str, int]:
    """Write ``days`` of history ending now, as the simulator's clusters would have produced it:
    hourly averages for the range, daily ones for its complete days, raw samples every
    ``raw_minutes`` for the raw retention; each point's weights computed over the fleet of that
    moment, as the live sampler does. Today's levels are where the curves end. Replaces the
    history of those clusters (a seed path: under a second for the demo's 5 clusters, about
    20 s for 500 × 4 weeks on SQLite, ``bench/bench_water_history.py``)."""
    now = now or timezone.now()
    rows = list((Cluster.objects.filter(pk__in=[c.pk for c in clusters]) if clusters is not None else Cluster.objects)
                .values(*_COLUMNS))
    ids = [r["pk"] for r in rows]
    requested = [c for r in RESOURCES for c in r[3:4]]
    adapt = connection.ops.adapt_datetimefield_value

    def point(age_hours: float) -> list[tuple]:
        """(cluster id, *LEVEL_COLUMNS) of every cluster ``age_hours`` ago."""
        moment = []
        for r in rows:
            level = _level(r["name"], age_hours, days)
            moment.append(r | {c: min(round(r[c] * level), max(r[c], r[c.replace("requested", "allocatable")]))
                               for c in requested})
        weights = current_weights(moment)
        return [(m["pk"], *(m[c] for c in LEVEL_COLUMNS[:-1]), weights[m["name"]]) for m in moment]

    hour, day = GRAINS[WaterLevelRollup.Grain.HOUR], GRAINS[WaterLevelRollup.Grain.DAY]
    hourly: list[tuple] = []
    by_day: dict[tuple[int, datetime], list[tuple]] = {}
    at = floor_time(now - timedelta(days=days), hour)
    while at + hour <= now:
        stamp, today = adapt(at), floor_time(at, day)
        for values in point((now - (at + hour / 2)).total_seconds() / 3600):
            hourly.append((values[0], WaterLevelRollup.Grain.HOUR.value, stamp, 60, *values[1:]))
            by_day.setdefault((values[0], today), []).append(values[1:])
        at += hour
    daily = [(cluster_id, WaterLevelRollup.Grain.DAY.value, adapt(start), 24,
              *(round(sum(column) / 24) for column in zip(*hours, strict=True)))
             for (cluster_id, start), hours in by_day.items() if len(hours) == 24]  # complete days, as the rollup
    raw: list[tuple] = []
    at = now - raw_retention()
    while at <= now:
        stamp = adapt(at)
        raw.extend((values[0], stamp, *values[1:]) for values in point((now - at).total_seconds() / 3600))
        at += timedelta(minutes=raw_minutes)
    with transaction.atomic():
        WaterLevelSample.objects.filter(cluster_id__in=ids).delete()
        WaterLevelRollup.objects.filter(cluster_id__in=ids).delete()
        rollup_columns = ("cluster", "grain", "at", "samples", *LEVEL_COLUMNS)
        _insert(WaterLevelRollup, rollup_columns, hourly)
        _insert(WaterLevelRollup, rollup_columns, daily)
        _insert(WaterLevelSample, ("cluster", "at", *LEVEL_COLUMNS), raw)
    return {"clusters": len(rows), "raw": len(raw), "hourly": len(hourly), "daily": len(daily)}
