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
