"""HTTP load for the benchmarks: a server in a subprocess, keep-alive callers on raw sockets,
and a bare ASGI endpoint to measure the same client against.

Callers either send again the moment they are answered (closed loop: the server's capacity)
or on a fixed, staggered schedule (open loop: latency at a given rate).
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

BARE_APP = """
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 304, "headers": [(b"etag", b'"x"')]})
    await send({"type": "http.response.body", "body": b""})
"""


@dataclass(frozen=True)
class Load:
    rps: float
    p50: float
    p99: float
    statuses: dict[int, int]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(app: str, env: dict, cwd: str) -> tuple[subprocess.Popen, int]:
    """uvicorn serving ``app`` (``module:attribute``); returns the process and its port."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
                                "--lifespan", "off", "--no-access-log", "--log-level", "warning", "--http", "httptools"],
                               env=env, cwd=cwd)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{app} did not start")


async def _caller(port: int, requests: list[bytes], stop: float, interval: float | None, offset: float,
                  latencies: list[float], statuses: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    next_send, i = time.perf_counter() + offset, 0
    while (next_send if interval else time.perf_counter()) < stop:
        if interval:
            await asyncio.sleep(max(0.0, next_send - time.perf_counter()))
            next_send += interval
        started = time.perf_counter()
        writer.write(requests[i % len(requests)])
        i += 1
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
        if length:
            await reader.readexactly(length)
        latencies.append(time.perf_counter() - started)
        statuses[int(head[9:12])] = statuses.get(int(head[9:12]), 0) + 1
    writer.close()


def load(port: int, requests: list[bytes], seconds: float, connections: int, rate: float | None = None) -> Load:
    """Send ``requests`` round robin over ``connections`` for ``seconds``; ``rate`` paces the
    callers (requests per second in all), staggered so the load arrives evenly."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    async def run() -> None:
        stop = time.perf_counter() + seconds
        interval = connections / rate if rate else None
        await asyncio.gather(*(_caller(port, requests[c::connections] or requests, stop, interval, c / rate if rate else 0.0,
                                       latencies, statuses) for c in range(connections)))

    started = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - started
    latencies.sort()
    if not latencies:
        return Load(0.0, float("nan"), float("nan"), statuses)
    return Load(len(latencies) / elapsed, latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)], statuses)
