"""A real browser (Debian's headless Chromium, driven by Playwright) against the real ASGI app.

The server is uvicorn serving ``config.asgi.application`` in a thread of the test process,
so it shares the test database; Redis and the channel layer are the suite's real ones.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pytest
import uvicorn

CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def asgi_server(transactional_db):
    from config.asgi import application

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def chromium(monkeypatch):
    """Playwright's sync API keeps an event loop running in this thread; Django's ORM guard
    would then refuse the test's own (synchronous, safe) queries while the browser is open."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    executable = shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(locale="en-US")
    page = context.new_page()
    yield page
    context.close()
