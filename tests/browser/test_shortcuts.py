"""The keyboard, in a real browser: shortcuts for search and navigation with their help dialog
(never while typing in a field), and the header's language picker, which arrowing through does
not switch until a language is chosen."""

from __future__ import annotations

import pytest

from .test_console_live import log_in

pytestmark = pytest.mark.browser

GO = {"o": "/", "f": "/fleet/", "n": "/nodeconfig/", "q": "/quotas/", "d": "/federation/", "s": "/scheduling/"}


def blur(page) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")


def test_shortcuts_search_navigate_and_explain_themselves(page, asgi_server, viewer):
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/fleet/")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.matches('input[data-table-search]')"), "/ focuses the table search"
    page.keyboard.type("g n?/")
    assert page.url == f"{asgi_server}/fleet/", "keys typed in a field stay in the field"
    assert page.input_value("input[data-table-search]") == "g n?/"
    assert page.locator("#shortcuts-help").is_hidden()

    blur(page)
    for key, path in GO.items():
        with page.expect_navigation():
            page.keyboard.press("g")
            page.keyboard.press(key)
        assert page.url == f"{asgi_server}{path}", key
    page.keyboard.press("g")
    page.wait_for_timeout(1700)  # the sequence lapses: a lone key later does nothing
    page.keyboard.press("n")
    page.wait_for_timeout(300)
    assert page.url == f"{asgi_server}/scheduling/"

    page.keyboard.press("?")
    help_dialog = page.locator("#shortcuts-help")
    help_dialog.wait_for(state="visible")
    text = help_dialog.inner_text()
    assert "Keyboard shortcuts" in text and "Go to node config" in text and "Search this page's table" in text
    page.keyboard.press("g")
    page.keyboard.press("f")
    page.wait_for_timeout(300)
    assert page.url == f"{asgi_server}/scheduling/", "no shortcut runs behind the open dialog"
    page.keyboard.press("Escape")
    help_dialog.wait_for(state="hidden")
    page.click("#shortcuts-button")
    help_dialog.wait_for(state="visible")
    help_dialog.locator("button", has_text="Close").click()
    help_dialog.wait_for(state="hidden")


def test_arrowing_through_the_language_picker_does_not_switch_until_chosen(page, asgi_server, viewer):
    log_in(page, asgi_server, viewer.username)
    page.goto(f"{asgi_server}/fleet/")
    page.evaluate("window.notReloaded = true")
    page.focus("#language")
    page.keyboard.press("ArrowDown")
    page.wait_for_timeout(500)
    assert page.input_value("#language") == "zh-hans", "the arrow moved the choice"
    assert page.evaluate("window.notReloaded === true") and page.evaluate("document.documentElement.lang") == "en"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowDown")
    page.wait_for_timeout(300)
    assert page.evaluate("window.notReloaded === true"), "still not switched while arrowing"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.evaluate("document.documentElement.lang") == "zh-hans"
    assert page.url == f"{asgi_server}/fleet/"

    page.evaluate("window.notReloaded = true")  # arrowing back and leaving the field chooses too
    page.focus("#language")
    page.keyboard.press("ArrowUp")
    page.wait_for_timeout(300)
    assert page.evaluate("window.notReloaded === true")
    with page.expect_navigation():
        page.keyboard.press("Tab")
    assert page.evaluate("document.documentElement.lang") == "en"

    with page.expect_navigation():  # a pick with the mouse (or a touch) switches at once
        page.select_option("#language", "zh-hans")
    assert page.evaluate("document.documentElement.lang") == "zh-hans"
