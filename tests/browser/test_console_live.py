"""The console as a person uses it: log in, see the overview go live, receive events, switch theme and language."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from core import events
from tests.conftest import PASSWORD
from .conftest import wait_js

pytestmark = pytest.mark.browser


def publish_from_another_thread(*args) -> int:
    """As a worker would: this thread runs Playwright's event loop, where async_to_sync cannot."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(events.send_now, *args).result(timeout=10)


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/fleet/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/fleet/")


def test_overview_goes_live_and_shows_events(page, asgi_server, viewer):
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/")
    indicator = page.locator("#live-indicator")
    indicator.and_(page.locator(".connected")).wait_for(timeout=10000)
    assert indicator.inner_text() == "Live"

    wait_js(page, "document.body.dataset.live === '1'")
    page.wait_for_timeout(300)  # the subscribe message is in flight once the socket opened
    publish_from_another_thread("system", "system.status", {"workers": 2, "jobs_running": 7})
    page.locator("#stat-jobs-running", has_text="7").wait_for(timeout=10000)
    assert page.locator("#stat-workers").inner_text() == "2"
    publish_from_another_thread("fleet", "cluster.registered", {"cluster": "bj-9"})
    entry = page.locator("#event-feed li", has_text="Cluster bj-9 registered")
    entry.wait_for(timeout=10000)
    assert entry.locator("a").get_attribute("href") == "/fleet/clusters/bj-9/", "the sentence links to what it is about"
    feed = page.locator("#event-feed").inner_text()
    assert "system.status" not in feed and "cluster.registered" not in feed, "sentences, not event types or heartbeats"


def test_the_overview_lists_what_needs_attention_live_and_big_numbers_fit_their_cards(page, asgi_server, viewer):
    """At fleet scale (200,000 nodes, 16 million cores) every stat stays inside its card, on a
    laptop and a narrow window; a cluster going down appears in its section when the fleet's
    next event arrives, linking to the cluster."""
    from fleet.models import Cluster

    Cluster.objects.create(name="big", connector="simulated", ready=True, node_count=200000, ready_node_count=198512,
                           cpu_allocatable_milli=16_000_000_000, cpu_requested_milli=12_345_678_901)
    log_in(page, asgi_server, viewer.username)
    overflowing = """() => Array.from(document.querySelectorAll('.cards .stat, .attention > .card')).filter((card) =>
        card.scrollWidth > card.clientWidth + 1 || Array.from(card.children).some((c) => c.getBoundingClientRect().right >
        card.getBoundingClientRect().right + 1)).map((card) => card.textContent.trim())"""
    one_line = """() => { const value = document.getElementById('stat-nodes');
        return value.getBoundingClientRect().height < 1.5 * parseFloat(getComputedStyle(value).fontSize); }"""
    for width in (1400, 1280, 760, 420):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{asgi_server}/")
        assert page.locator("#stat-nodes").inner_text() == "198,512/200,000"
        assert page.evaluate(overflowing) == [], f"a number spills out of its card at {width}px"
        assert page.evaluate(one_line), f"the figure is broken over two lines at {width}px"

    assert page.locator("#attention-clusters .attention-count").inner_text() == "0"
    wait_js(page, "document.body.dataset.live === '1'")
    page.wait_for_timeout(300)
    Cluster.objects.create(name="bj-3", connector="simulated", ready=False, status_message="connection refused")
    publish_from_another_thread("fleet", "cluster.registered", {"cluster": "bj-3"})
    page.locator("#attention-clusters .attention-count", has_text="1").wait_for(timeout=10000)
    link = page.locator("#attention-clusters a", has_text="bj-3")
    assert link.get_attribute("href") == "/fleet/clusters/bj-3/"
    assert "connection refused" in page.locator("#attention-clusters").inner_text()


def test_theme_and_language_switch(page, asgi_server, viewer):
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/")
    before = page.evaluate("document.documentElement.dataset.theme")
    page.click("#theme-toggle")
    after = page.evaluate("document.documentElement.dataset.theme")
    assert {before, after} == {"light", "dark"}
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == after, "the choice is remembered"

    with page.expect_navigation():
        page.select_option("#language", "zh-hans")
    assert page.locator("nav").inner_text().split()[:1] == ["总览"]


def test_anonymous_visitor_is_sent_to_login(page, asgi_server):
    page.goto(f"{asgi_server}/audit/")
    assert "/accounts/login/?next=/audit/" in page.url
    assert page.locator("h1").inner_text() == "Log in to Meridian"


def test_fleet_page_rerenders_when_the_fleet_changes(page, asgi_server, viewer):
    from fleet.models import Cluster

    Cluster.objects.create(name="bj-3", connector="simulated", ready=True, node_count=10, ready_node_count=10,
                           cpu_allocatable_milli=100_000, cpu_requested_milli=25_000)
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/fleet/")
    wait_js(page, "document.body.dataset.live === '1'")
    assert "25.0%" in page.locator('tr[data-cluster="bj-3"]').inner_text()
    page.wait_for_timeout(300)
    Cluster.objects.filter(name="bj-3").update(cpu_requested_milli=75_000)
    publish_from_another_thread("fleet", "fleet.summary", {"clusters": 1})
    page.locator('tr[data-cluster="bj-3"]', has_text="75.0%").wait_for(timeout=10000)
