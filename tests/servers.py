"""A real server for tests that need one: uvicorn serving the ASGI app in a thread of the test
process (so it shares the test database), on a free port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(app: Any, **options: Any) -> Iterator[str]:
    """Run the ASGI ``app`` with uvicorn in a thread on a free loopback port; yields its URL."""
    port = free_port()
    options.setdefault("timeout_graceful_shutdown", 3)  # open websockets are closed, not waited for
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning", **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        # The channel layer is one per process and remembers the event loop receiving on it: a
        # websocket this server still held (a page left open) would keep that loop receiving,
        # and the next server's or test's consumers would be refused ("Two event loops are
        # trying to receive() on one channel layer at once!"). Each server gets a fresh layer.
        from channels.layers import channel_layers

        channel_layers.backends.clear()


@pytest.fixture
def asgi_server(transactional_db):
    from config.asgi import application

    with serve(application, timeout_keep_alive=60) as url:
        yield url
    application.application_mapping["http"].close()  # the fast paths' threads' connections, before the test database goes
