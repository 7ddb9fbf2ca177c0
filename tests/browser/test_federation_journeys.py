"""Journeys 4 and 5 (``spec/journeys.md``) walked in a real browser on the demo fleet the seed
commands make (``seed_demo``, ``seed_federation_demo``): scaling ``checkout`` without churn,
its image rollout watched as unavailable vs budget, pause and rollback at hand, ``sh-1``
cordoned and drained from its cluster page; then the Monday capacity review over four weeks of
history, zoomed, in both themes, and a what-if for a new 300-replica, 8-core service."""

from __future__ import annotations

import time

import pytest
import yaml
from django.core.management import call_command

from core import live
from federation.models import FederatedObject
from federation.reconcile import reconcile_object
from federation.views import status_summary
from fleet.models import Cluster

from .conftest import wait_js
from .test_console_live import log_in
from .test_federation_live import in_worker, wait_live

pytestmark = pytest.mark.browser


@pytest.fixture
def demo(transactional_db, page):
    """The demo fleet as ``make run`` seeds it (fewer nodes, one-second ticks so rollouts move
    at test speed), and the federation demo on it; seeded off the browser's thread, as its
    events are sent from a worker."""
    in_worker(call_command, "seed_demo", "--clusters=5", "--nodes=400", "--tick-seconds=1")
    in_worker(call_command, "seed_federation_demo")
    return FederatedObject.objects.get(name="checkout")


def reconcile(pk: int) -> FederatedObject:
    """One pass, as the shard worker runs it, then the beat's coalesced live summaries."""
    reconcile_object(pk)
    live.publish_pending()
    return FederatedObject.objects.get(pk=pk)


def placed(page) -> dict[str, int]:
    """The placement table as the page shows it: cluster → replicas of the placed rows."""
    return page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('#placement tr.fed-outcome-placed'))
        .map((tr) => [tr.dataset.cluster, parseInt(tr.querySelector('td.fed-num').textContent, 10)]))""")


def shown_unavailable(page) -> tuple[int, int]:
    el = page.locator("#fed-unavailable")
    return int(el.get_attribute("data-unavailable")), int(el.get_attribute("data-budget"))


def edit_template(page, change, cause: str) -> None:
    """Change the template in the page's YAML editor and save it, as the owner does."""
    field = page.locator("#id_edit-template")
    template = yaml.safe_load(field.input_value())
    change(template)
    field.fill(yaml.safe_dump(template, sort_keys=False))
    page.fill("#id_edit-change_cause", cause)
    page.click("#template-edit button[type=submit]")
    page.wait_for_load_state()


def follow(page, fed: FederatedObject, *, budget: int, progress: list | None = None, seconds: float = 120) -> list[int]:
    """Reconcile once a tick until Ready; after every pass wait until the page shows the
    server's unavailable count live, and check it is within the budget. Returns what it
    showed; ``progress`` gets, per pass, which clusters the member table shows done
    (updated = scheduled) or still rolling."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fed = in_worker(reconcile, fed.pk)
        expected = status_summary(fed)
        wait_js(page, f"(document.getElementById('fed-unavailable') || {{}}).dataset?.unavailable === '{expected['unavailable']}'",
                timeout=10000)
        unavailable, shown_budget = shown_unavailable(page)
        assert shown_budget == budget and unavailable <= budget, f"{unavailable} unavailable of {budget}"
        seen.append(unavailable)
        if progress is not None:
            progress.append(page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('#fed-members tr[data-cluster]'))
                .map((tr) => [tr.dataset.cluster, tr.querySelector('[data-fed-field="updated"]').textContent.trim()
                              === tr.querySelector('[data-fed-field="scheduled"]').textContent.trim() ? 'done' : 'rolling']))"""))
        if fed.phase == FederatedObject.Phase.READY:
            return seen
        time.sleep(1.0)
    raise AssertionError(f"{fed} did not settle: {fed.phase} {fed.message}")


def settle(fed: FederatedObject, seconds: float = 60) -> FederatedObject:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fed = in_worker(reconcile, fed.pk)
        if fed.phase == FederatedObject.Phase.READY:
            return fed
        time.sleep(1.0)
    raise AssertionError(f"{fed} did not settle: {fed.phase} {fed.message}")


def test_journey_4_scaling_checkout_without_churn_then_rolling_and_draining(page, asgi_server, operator, demo):
    checkout = settle(demo)
    assert set(checkout.placement) == {"bj-1", "sh-1", "gz-1"} and sum(checkout.placement.values()) == 30
    log_in(page, asgi_server, operator.username)
    page.goto(f"{asgi_server}/federation/objects/{checkout.pk}/")
    wait_live(page)
    before = placed(page)
    assert before == checkout.placement
    assert shown_unavailable(page) == (0, 3), "maxUnavailable 3 of 30"

    # Scale 30 → 15: the placement view shows only stops, no replica moves between clusters.
    edit_template(page, lambda t: t["spec"].update(replicas=15), "scale down for the night")
    assert "Saved revision 2" in page.locator(".messages").inner_text()
    wait_live(page)
    page.evaluate("window.__sameDocument = true")
    follow(page, checkout, budget=3)
    wait_js(page, "Array.from(document.querySelectorAll('#placement tr.fed-outcome-placed'))"
                  ".reduce((n, tr) => n + parseInt(tr.querySelector('td.fed-num').textContent, 10), 0) === 15", timeout=10000)
    after = placed(page)
    assert sum(after.values()) == 15 and set(after) <= set(before)
    assert all(after[name] <= before[name] for name in after), f"only stops: {before} → {after}"
    assert page.evaluate("window.__sameDocument") is True, "the placement table followed live"

    # Update the image: cluster by cluster, never more unavailable than the budget; pause and
    # roll back are at hand throughout.
    edit_template(page, lambda t: t["spec"]["template"]["spec"]["containers"][0].update(image="registry.local/checkout:2.4.0"),
                  "checkout 2.4.0")
    wait_live(page)
    assert page.locator('#revisions form.fed-rollback button', has_text="Roll back to r2").count() == 1
    checkout = in_worker(reconcile, checkout.pk)
    page.fill("#rollout-form input[name='pause-reason']", "watching error rates")
    page.click("#rollout-form button[value=pause]")
    assert "Rollout paused." in page.locator(".messages").inner_text()
    assert page.locator("#fed-summary .badge.paused").is_visible()
    page.fill("#rollout-form input[name='pause-reason']", "error rates fine")
    page.click("#rollout-form button[value=resume]")
    assert "Rollout resumed." in page.locator(".messages").inner_text()
    wait_live(page)
    progress: list[dict[str, str]] = []
    seen = follow(page, checkout, budget=3, progress=progress)
    assert max(seen) <= 3
    assert any(len({row for row in step.values()}) > 1 for step in progress), \
        f"the clusters rolled one after another, not all at once: {progress}"
    checkout.refresh_from_db()
    assert checkout.status["updatedReplicas"] == 15 and checkout.revision == 3

    # An SRE cordons sh-1 for maintenance and drains it, from the cluster's page.
    page.goto(f"{asgi_server}/fleet/clusters/sh-1/")
    page.fill("#id_cordon-reason", "maintenance MNT-208")
    page.click("#cordon-form button[value=cordon]")
    assert page.locator("#cordon-state").get_attribute("data-state") == "cordoned"
    page.fill("#id_cordon-reason", "maintenance MNT-208: drain")
    page.click("#cordon-form button[value=drain]")
    assert page.locator("#cordon-state").get_attribute("data-state") == "draining"
    assert "Draining sh-1" in page.locator(".messages").inner_text()

    # Its replicas move to the other clusters within the same budget.
    page.goto(f"{asgi_server}/federation/objects/{checkout.pk}/")
    wait_live(page)
    follow(page, checkout, budget=3)
    wait_js(page, "!document.querySelector('#placement tr.fed-outcome-placed[data-cluster=\"sh-1\"]')", timeout=10000)
    moved = placed(page)
    assert "sh-1" not in moved and sum(moved.values()) == 15
    assert "cordoned" in page.locator('#placement tr[data-cluster="sh-1"]').inner_text()
    assert Cluster.objects.get(name="sh-1").drain


NEW_SERVICE = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: search-indexer, namespace: search}
spec:
  replicas: 300
  selector: {matchLabels: {app: search-indexer}}
  template:
    metadata: {labels: {app: search-indexer}}
    spec:
      containers:
      - name: indexer
        image: registry.local/search-indexer:1.0.0
        resources: {requests: {cpu: "8", memory: 16Gi}}
"""


def history_state(page) -> dict:
    return page.evaluate("""() => { const el = document.getElementById('fed-chart-history-rate');
        return {grain: document.body.dataset.historyGrain || '', traces: (el.data || []).length,
                points: el.data && el.data[0] ? el.data[0].x.length : 0,
                marks: ((el.layout || {}).annotations || []).map((a) => a.text),
                font: el._fullLayout ? el._fullLayout.font.color : ''}; }""")


def zoom(page, start: str, end: str) -> None:
    """What dragging across the chart does: a relayout of the x range."""
    page.evaluate("([a, b]) => Plotly.relayout(document.getElementById('fed-chart-history-rate'),"
                  " {'xaxis.range[0]': a, 'xaxis.range[1]': b})", [start, end])


def test_journey_5_capacity_review_over_four_weeks_and_a_what_if(page, asgi_server, operator, demo):
    from datetime import UTC, datetime, timedelta

    from federation.water import water_levels
    from fleet import services as fleet_services

    in_worker(lambda: fleet_services.cordon(Cluster.objects.get(name="hz-1"), drain=True, reason="rack retirement"))
    log_in(page, asgi_server, operator.username)
    page.goto(f"{asgi_server}/federation/water-levels/")
    page.locator("#fed-chart-history-rate .main-svg").first.wait_for(timeout=15000)

    # Per cluster and resource: allocatable, requested, available, deploy rate, dynamic weight.
    levels = {c["name"]: c for c in water_levels()["clusters"]}
    assert set(levels) == {"bj-1", "sh-1", "gz-1", "sz-1", "hz-1"}
    for name, level in levels.items():
        cpu = level["resources"]["cpu"]
        row = page.locator(f"#cluster-{name}")
        cell = row.locator('td[data-res="cpu"]').inner_text()
        assert f"{cpu['deploy_rate']:g}%" in cell.replace(",", "")
        assert f"{cpu['requested']:,.1f}".removesuffix(".0") in cell and f"{cpu['available']:,.1f}".removesuffix(".0") in cell
        assert row.locator('[data-f="weight"]').inner_text() == str(level["weight"])
    assert levels["hz-1"]["weight"] == 0 and page.locator("#cluster-hz-1").get_attribute("data-state") == "draining"
    assert sum(level["weight"] for level in levels.values()) in range(995, 1006)

    # Four weeks of history: daily averages, the drain marked on the chart.
    page.select_option("#fed-hours", "672")
    wait_js(page, "document.body.dataset.historyGrain === 'day'", timeout=15000)
    month = history_state(page)
    assert month["traces"] == 5 and 27 <= month["points"] <= 29
    assert any(mark.startswith("drain hz-1") for mark in month["marks"]), month["marks"]
    assert "hours=672" in page.url

    # Zoom in: three days of a fortnight ago come as hourly averages, four hours of today as minutes.
    now = datetime.now(UTC)
    fmt = "%Y-%m-%d %H:%M:%S"
    zoom(page, (now - timedelta(days=14)).strftime(fmt), (now - timedelta(days=11)).strftime(fmt))
    wait_js(page, "document.body.dataset.historyGrain === 'hour'", timeout=15000)
    assert 70 <= history_state(page)["points"] <= 74
    assert page.locator("#fed-history-grain").inner_text() == "hourly averages"
    zoom(page, (now - timedelta(hours=4)).strftime(fmt), now.strftime(fmt))
    wait_js(page, "document.body.dataset.historyGrain === 'minute'", timeout=15000)
    assert 45 <= history_state(page)["points"] <= 50, "a raw point every 5 minutes"
    page.evaluate("Plotly.relayout(document.getElementById('fed-chart-history-rate'), {'xaxis.autorange': true})")
    wait_js(page, "document.body.dataset.historyGrain === 'day'", timeout=15000)

    # The plots follow the theme switch.
    light = history_state(page)["font"]
    page.click("#theme-toggle")
    dark_text = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--text').trim()")
    wait_js(page, f"document.getElementById('fed-chart-history-rate')._fullLayout.font.color === '{dark_text}'"
                  f" && document.getElementById('fed-chart-rates')._fullLayout.font.color === '{dark_text}'", timeout=5000)
    assert light != dark_text and page.evaluate("document.documentElement.dataset.theme") == "dark"

    # What if a new 300-replica, 8-core service came: where it lands, the levels after.
    page.goto(f"{asgi_server}/federation/what-if/")
    page.fill("#id_object", NEW_SERVICE)
    page.select_option("#id_policy", "/spread-by-water-level")
    page.click("#whatif-form button[type=submit]")
    result = page.locator("#whatif-result")
    assert "It would land on" in result.locator("h2").inner_text()
    rows = page.evaluate("""() => Array.from(document.querySelectorAll('.fed-whatif-levels tbody tr')).map((tr) =>
        [tr.dataset.cluster, parseInt(tr.querySelector('td').textContent, 10), tr.querySelectorAll('td')[1].textContent])""")
    assert sum(replicas for _name, replicas, _cpu in rows) == 300
    assert "hz-1" not in {name for name, _r, _c in rows}, "nothing lands on the draining cluster"
    for name, replicas, cpu in rows:
        before, after = (float(v.strip().rstrip("%")) for v in cpu.split("→"))
        assert after > before, f"{name}: {cpu}"
    page.locator("#fed-chart-whatif .main-svg").first.wait_for(timeout=15000)
    assert page.locator("#fed-chart-whatif g.trace.bars").count() == 2, "before and after"
    assert page.evaluate("document.getElementById('fed-chart-whatif')._fullLayout.font.color") == dark_text, \
        "the saved theme holds on the next page"
