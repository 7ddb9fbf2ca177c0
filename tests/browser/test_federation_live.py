"""Federation in a real browser: an object's page follows a reconcile pass live (phase and
per-cluster table, no reload), and the water-level dashboard draws its Plotly charts, follows
a new sample live and cordons through its reason dialog."""

from __future__ import annotations


import pytest

from core import live
from federation import services
from federation.reconcile import reconcile_object
from federation.water import record_samples
from fleet.models import Cluster
from tests.federation.conftest import deployment, fleet3, spread_policy  # noqa: F401 (fixtures)

from .test_console_live import log_in
from .conftest import in_worker, wait_js, wait_live

pytestmark = pytest.mark.browser


def reconcile(pk: int) -> str | None:
    """What a shard worker and then the beat do: one reconcile pass, then the coalesced live
    summaries (``core.live``: one ``object.status`` per object per tick)."""
    phase = reconcile_object(pk)
    live.publish_pending()
    return phase


def member_rows(page) -> dict[str, dict[str, str]]:
    return page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll('#fed-members tr[data-cluster]'))
        .map((tr) => [tr.dataset.cluster, {state: tr.dataset.state,
          scheduled: tr.querySelector('[data-fed-field="scheduled"]').textContent.trim(),
          updated: tr.querySelector('[data-fed-field="updated"]').textContent.trim(),
          bar: tr.querySelector('.fed-bar.updated > span').style.width}]))""")


def test_an_object_page_follows_a_reconcile_live(page, asgi_server, viewer, fleet3, spread_policy):  # noqa: F811
    fed, _ = in_worker(lambda: services.submit(deployment(replicas=30), propagation_policy="/spread"))
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/federation/objects/{fed.pk}/")
    assert page.locator("#fed-object-phase .fed-phase").get_attribute("data-phase") == "Pending"
    assert page.locator("#fed-members tr[data-cluster]").count() == 0
    assert "Not scheduled yet" in page.locator("#fed-members").inner_text()
    wait_live(page)
    page.evaluate("window.__sameDocument = true")

    assert in_worker(reconcile, fed.pk) == "Ready"
    page.locator('#fed-object-phase .fed-phase[data-phase="Ready"]').wait_for(timeout=10000)
    wait_js(page, "document.querySelectorAll('#fed-members tr[data-cluster]').length === 3", timeout=10000)
    fed.refresh_from_db()
    rows = member_rows(page)
    assert {name: int(row["scheduled"]) for name, row in rows.items()} == fed.placement
    assert all(row["state"] == "applied" and row["updated"] == row["scheduled"] and row["bar"] == "100%"
               for row in rows.values())
    assert page.locator("#fed-summary .fed-phase").inner_text() == "Ready"
    assert page.locator('#fed-summary [data-fed-field="ready"]').inner_text().replace(" ", "") == "30/30"
    assert page.evaluate("window.__sameDocument") is True, "updated in place, not reloaded"
    assert page.locator("#live-indicator").inner_text() == "Live"

    # Deleted elsewhere: once the reconciler forgets it, the page says so (event object.deleted).
    in_worker(services.delete, fed)
    assert in_worker(reconcile, fed.pk) is None
    page.locator("#fed-deleted-note").wait_for(state="visible", timeout=10000)
    assert page.locator("#fed-deleted-note").inner_text() == "This object was deleted."
    assert page.evaluate("window.__sameDocument") is True


def test_the_index_relabels_phases_live(page, asgi_server, viewer, fleet3, spread_policy):  # noqa: F811
    fed, _ = in_worker(lambda: services.submit(deployment(name="api", replicas=6), propagation_policy="/spread"))
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/federation/")
    badge = f'#fed-objects tr[data-object-id="{fed.pk}"] .fed-phase'
    assert page.locator(badge).get_attribute("data-phase") == "Pending"
    assert page.locator('#fed-phase-counts [data-count="Pending"]').inner_text() == "1"
    wait_live(page)
    in_worker(reconcile, fed.pk)
    page.locator(f'{badge}[data-phase="Ready"]').wait_for(timeout=10000)
    page.locator('#fed-phase-counts [data-count="Ready"]', has_text="1").wait_for(timeout=10000)
    assert page.locator('#fed-phase-counts [data-count="Pending"]').inner_text() == "0"


def test_the_water_level_dashboard_draws_its_charts_and_follows_samples(page, asgi_server, operator, fleet3):  # noqa: F811
    in_worker(record_samples)
    log_in(page, asgi_server, operator.username)
    page.goto(f"{asgi_server}/federation/water-levels/")
    for chart in ("rates", "weights", "history-rate", "history-weight"):
        page.locator(f"#fed-chart-{chart} .main-svg").first.wait_for(timeout=15000)
    assert page.locator("#fed-chart-rates g.trace.bars").count() == 3, "one bar trace per resource"
    assert page.locator("#fed-chart-rates g.point").count() == 9, "three clusters × three resources"
    assert page.locator("#fed-chart-weights g.point").count() == 3
    assert page.locator("#fed-chart-history-rate g.trace.scatter").count() == 3

    wait_live(page)
    cpu = '#cluster-bj-1 td[data-res="cpu"]'
    before = page.locator(f"{cpu} span").inner_text()
    bj = Cluster.objects.get(name="bj-1")
    Cluster.objects.filter(pk=bj.pk).update(cpu_requested_milli=bj.cpu_allocatable_milli * 95 // 100)
    in_worker(record_samples)
    page.locator(f"{cpu} span", has_text="95%").wait_for(timeout=10000)
    assert before != "95%" and page.locator(cpu).get_attribute("class") == "hot"
    wait_js(page, """() => {
        const trace = document.getElementById('fed-chart-rates').data[0];
        return trace.y[trace.x.indexOf('bj-1')] === 95; }""", timeout=10000)

    page.click('#cluster-gz-1 a[data-cordon="drain"]')
    assert page.locator("#fed-cordon-dialog").is_visible()
    assert page.locator("#fed-cordon-title").inner_text() == "Drain gz-1"
    page.fill("#fed-cordon-reason", "rack maintenance")
    page.click("#fed-cordon-submit")
    page.wait_for_url(f"{asgi_server}/federation/water-levels/#cluster-gz-1")
    assert "Draining gz-1" in page.locator(".messages").inner_text()
    assert page.locator("#cluster-gz-1").get_attribute("data-state") == "draining"
    gz = Cluster.objects.get(name="gz-1")
    assert gz.cordoned and gz.drain and gz.cordon_reason == "rack maintenance" and gz.cordoned_by == operator.username
