"""The quota tree in a real browser: the tree map draws every group, re-colours when another
resource is picked, and cash exhaustion events arrive in the live feed."""

from __future__ import annotations

import pytest

from quotas import services

from .test_console_live import log_in, publish_from_another_thread
from .conftest import wait_js, wait_live

pytestmark = pytest.mark.browser
RED = "rgb(197, 48, 48)"
SECTORS = "#quota-treemap .treemaplayer g.slice"


@pytest.fixture
def tree(transactional_db) -> list[str]:
    """Two roots; on pods "org-a" is exactly full (its child carved all of it), on limits.cpu it
    is a quarter used (thousands of cores: the tiles print them grouped)."""
    services.create_group(name="org", parent=None, hard={"limits.cpu": "10000", "pods": "100"})
    services.create_group(name="org-a", parent="org", hard={"limits.cpu": "4000", "pods": "10"})
    services.create_group(name="org-b", parent="org", hard={"limits.cpu": "2000", "pods": "5"})
    services.create_group(name="org-a-1", parent="org-a", hard={"limits.cpu": "1000", "pods": "10"})
    services.create_group(name="other", parent=None, hard={"limits.cpu": "3000", "pods": "3"})
    return ["org", "org-a", "org-a-1", "org-b", "other"]


def sector_fills(page) -> dict[str, str]:
    """Group name → fill colour of its tree map sector (the labelled fleet sector is not a group)."""
    return page.evaluate("""(selector) => {
      const fills = {};
      document.querySelectorAll(selector).forEach((slice) => {
        const label = slice.querySelector("text"), surface = slice.querySelector("path.surface");
        if (label && surface) fills[(label.querySelector("tspan.line") || label).textContent] = surface.style.fill;
      });
      return fills;
    }""", SECTORS)


def test_the_treemap_draws_every_group_and_recolours_per_resource(page, asgi_server, viewer, tree):
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/quotas/")
    page.locator("#quota-treemap .main-svg").first.wait_for(timeout=15000)
    wait_js(page, f"document.querySelectorAll('{SECTORS}').length > 0")

    fills = sector_fills(page)
    assert sorted(name for name in fills if name in tree) == tree
    assert page.locator(SECTORS).count() == len(tree) + 1, "every group, plus one fleet sector over the two roots"
    assert fills["org-a"] != RED and RED not in fills.values(), "on limits.cpu nothing is full"
    assert "1,000 / 4,000" in page.locator('#quota-tree li[data-i="1"]').first.inner_text()

    page.select_option("#quota-key", "pods")
    wait_js(page, f"""() => Array.from(document.querySelectorAll('{SECTORS}'))
        .some((s) => s.querySelector('path.surface').style.fill === '{RED}')""", timeout=10000)
    recoloured = sector_fills(page)
    assert recoloured["org-a"] == RED, "org-a's pods are all carved out by its child"
    assert recoloured != fills
    assert "10 / 10" in page.locator('#quota-tree li[data-i="1"]').first.inner_text(), "the list follows the picker"
    assert page.locator("#quota-tree-keyname").inner_text() == "pods"
    assert "key=pods" in page.url


def test_every_tile_is_framed_and_prints_its_values(page, asgi_server, viewer, tree):
    """Groups at the same level of use have the same colour: without frames and values the map
    read as one block of colour (the demo's tree, every group sized to 2/3 of its hard)."""
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/quotas/")
    wait_js(page, f"document.querySelectorAll('{SECTORS}').length > 0")
    tiles = page.evaluate("""(selector) => Array.from(document.querySelectorAll(selector)).map((slice) => {
      const surface = slice.querySelector("path.surface"), style = getComputedStyle(surface);
      return {text: slice.textContent, stroke: style.stroke, width: parseFloat(style.strokeWidth), fill: style.fill};
    })""", SECTORS)
    assert len(tiles) == len(tree) + 1
    for tile in tiles:
        assert tile["width"] >= 2 and tile["stroke"] not in (tile["fill"], "none"), f"{tile['text']} has no visible frame"
    leaf = next(tile["text"] for tile in tiles if tile["text"].startswith("org-b"))
    assert "0 / 2,000 limits.cpu (0%)" in leaf, f"the tile prints used / hard, grouped: {leaf!r}"
    page.select_option("#quota-key", "pods")
    wait_js(page, f"""() => Array.from(document.querySelectorAll('{SECTORS}')).some((s) => s.textContent.includes('pods'))""")
    assert "0 / 3 pods (0%)" in page.locator(SECTORS, has_text="other").first.text_content()


def sector_names(page) -> list[str]:
    """The groups' names: a tile's first line (the second prints used / hard)."""
    return page.evaluate("""(selector) => Array.from(document.querySelectorAll(selector)).map((g) =>
      (g.querySelector("text tspan.line") || g).textContent)""", SECTORS)


def test_a_click_roots_the_map_at_a_group_and_links_to_it(page, asgi_server, viewer, tree):
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/quotas/")
    wait_js(page, f"document.querySelectorAll('{SECTORS}').length > 0")
    focus = "document.getElementById('quota-treemap').dataset.focus === '{}'"
    page.locator(SECTORS, has_text="org-a").first.click(position={"x": 5, "y": 5})
    wait_js(page, focus.format("org-a"))
    assert sorted(sector_names(page)) == ["org-a", "org-a-1"]
    assert page.locator("#quota-treemap-open").get_attribute("href") == "/quotas/groups/org-a/"
    page.locator(SECTORS).first.click(position={"x": 5, "y": 5})  # the root sector goes up one level
    wait_js(page, focus.format("org"))
    assert sorted(sector_names(page)) == ["org", "org-a", "org-a-1", "org-b"]


def test_a_5000_group_tree_is_drawn_a_few_levels_at_a_time(page, asgi_server, viewer):
    from tests.quotas.test_pages import bulk_tree

    assert bulk_tree(50, 9, 10) == 5000
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/quotas/")
    wait_js(page, f"document.querySelectorAll('{SECTORS}').length > 0", timeout=30000)
    assert len(sector_names(page)) == 1 + 50 + 450, "fleet, roots and their children; grandchildren on demand"
    page.locator(SECTORS, has_text="r7").first.click(position={"x": 5, "y": 5})
    wait_js(page, "document.getElementById('quota-treemap').dataset.focus === 'r7'")
    names = sector_names(page)
    assert len(names) == 1 + 9 + 90 and "r7-c3-g9" in names
    assert page.locator("#quota-tree li[data-i]").count() == 5000, "the list holds the whole tree"


def test_cash_exhaustion_events_show_in_the_live_feed(page, asgi_server, viewer, tree):
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/quotas/")
    wait_live(page)
    assert page.locator("#stat-cash-exhausted").inner_text() == "0"
    publish_from_another_thread("quotas", "quotas.cash_exhausted", {
        "group": "org-b", "exhausted": ["cash/limits.cpu"], "newly": ["cash/limits.cpu"],
        "used": {"cash/limits.cpu": "101"}, "hard": {"cash/limits.cpu": "100"}})
    entry = page.locator('#quota-feed li[data-group="org-b"]')
    entry.wait_for(timeout=10000)
    assert "cash exhausted" in entry.inner_text() and "cash/limits.cpu" in entry.inner_text()
    assert entry.locator("a").get_attribute("href") == "/quotas/groups/org-b/"
    assert page.locator("#stat-cash-exhausted").inner_text() == "1"
