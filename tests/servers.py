"""A real server for tests that need one: uvicorn serving the ASGI app in a thread of the test
process (so it shares the test database), on a free port."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def asgi_server(transactional_db):
    from config.asgi import application

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off", log_level="warning",
                                           timeout_keep_alive=60))
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
    application.application_mapping["http"].close()  # the fast paths' threads' connections, before the test database goes
