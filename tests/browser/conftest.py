"""A real browser (Debian's headless Chromium, driven by Playwright) against the real ASGI app.

The server is uvicorn serving ``config.asgi.application`` in a thread of the test process,
so it shares the test database; Redis and the channel layer are the suite's real ones.
"""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from tests.servers import asgi_server  # noqa: F401  (the fixture: uvicorn in a thread, sharing the test database)


def in_worker(function, *args):
    """Run writes that publish events in another thread, as a worker would: this thread runs
    Playwright's event loop, where ``async_to_sync`` cannot. The thread's database connections
    are closed when it is done, so PostgreSQL can drop the test database and the pool does not
    run dry (a thread that ends with a connection checked out keeps it for good)."""
    def run():
        try:
            return function(*args)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result(timeout=30)


CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture
def chromium(monkeypatch):
    """Playwright's sync API keeps an event loop running in this thread; Django's ORM guard
    would then refuse the test's own (synchronous, safe) queries while the browser is open.

    With a loop running, Django keeps this thread's connections apart from its usual ones (in a
    context variable, as for async code), so they are closed before the browser goes: left open,
    each held a pooled connection and its PostgreSQL session until the suite's end ("test_test
    is being accessed by other sessions" when the test database was dropped)."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
        connections.close_all()


@pytest.fixture
def page(chromium):
    """A fresh browser page; a test fails if any page it visited broke the Content-Security-Policy
    (the browser then refused a script, a style or a connection: part of the page silently dead)."""
    context = chromium.new_context(locale="en-US")
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None)
    yield page
    context.close()
    assert violations == [], violations


def wait_js(page, predicate: str, *, timeout: float = 30000) -> None:
    """Wait until a JavaScript expression (or ``() => …`` function) is truthy in the page.

    Playwright's ``wait_for_function`` polls by evaluating the string inside the page, which
    the pages' Content-Security-Policy forbids (no ``'unsafe-eval'``): it passes only when the
    predicate already holds on the first try. ``page.evaluate`` goes through the DevTools
    protocol, which the policy does not govern, so the polling happens here instead.
    """
    script = predicate if predicate.lstrip().startswith("(") and "=>" in predicate else f"() => ({predicate})"
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(script):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout / 1000:.0f} s: {predicate}")
        page.wait_for_timeout(50)


def wait_live(page) -> None:
    """Until the page's live socket is open, and a moment more: its subscribe messages are in
    flight once it opened."""
    wait_js(page, "document.body.dataset.live === '1'")
    page.wait_for_timeout(300)
