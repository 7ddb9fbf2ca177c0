"""Plots follow the theme: a switch recolours every Plotly chart on the page at once (text and
grid), whatever area drew it, and the next page draws in the saved theme."""

from __future__ import annotations

import pytest

from .conftest import wait_js
from .test_console_live import log_in
from .test_quotas_live import tree  # noqa: F401 (fixture)

pytestmark = pytest.mark.browser


def font(page, chart: str) -> str:
    return page.evaluate(f"document.querySelector('{chart}')._fullLayout.font.color")


def text_colour(page) -> str:
    return page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--text').trim()")


def test_the_quota_tree_map_follows_a_theme_switch(page, asgi_server, viewer, tree):  # noqa: F811
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/quotas/")
    page.locator("#quota-treemap .main-svg").first.wait_for(timeout=15000)
    start = page.evaluate("document.documentElement.dataset.theme")
    before = font(page, "#quota-treemap")
    assert before == text_colour(page)
    page.click("#theme-toggle")
    assert page.evaluate("document.documentElement.dataset.theme") != start
    wait_js(page, f"document.querySelector('#quota-treemap')._fullLayout.font.color === '{text_colour(page)}'", timeout=5000)
    assert font(page, "#quota-treemap") != before
    page.reload()
    page.locator("#quota-treemap .main-svg").first.wait_for(timeout=15000)
    assert font(page, "#quota-treemap") == text_colour(page) != before, "the saved theme holds"
