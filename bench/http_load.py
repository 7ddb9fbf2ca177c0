"""HTTP load for the benchmarks: a server in a subprocess, keep-alive callers on raw sockets,
and a bare ASGI endpoint to measure the same client against.

Callers either send again the moment they are answered (closed loop: the server's capacity)
or on a fixed, staggered schedule (open loop: latency at a given rate).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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
    #: With ``load(kind=...)``: per kind of request, (requests/s, p50, p99).
    kinds: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(app: str, env: dict, cwd: str) -> tuple[subprocess.Popen, int]:
    """uvicorn serving ``app`` (``module:attribute``); returns the process and its port."""
    port = free_port()
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
                  latencies: list[float], statuses: dict[int, int], kinds: list[str] | None = None,
                  kind: Callable[[bytes], str] | None = None) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    next_send, i = time.perf_counter() + offset, 0
    while (next_send if interval else time.perf_counter()) < stop:
        if interval:
            await asyncio.sleep(max(0.0, next_send - time.perf_counter()))
            next_send += interval
        started = time.perf_counter()
        request = requests[i % len(requests)]
        writer.write(request)
        i += 1
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.lower().split(b"\r\n")
        length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length:")), 0)
        if length:
            await reader.readexactly(length)
        latencies.append(time.perf_counter() - started)
        statuses[int(head[9:12])] = statuses.get(int(head[9:12]), 0) + 1
        if kinds is not None and kind is not None:
            kinds.append(kind(request))
        if b"connection: close" in lines:  # a proxy ends keep-alive after so many requests (nginx: 1000)
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()


def bare_baseline(env: dict, seconds: float, connections: int) -> Load:
    """The same server and client answering with a bare ASGI app (304, no Django): the
    ceiling a Meridian endpoint's figures are compared with, measured in the same run."""
    bare_dir = Path(env["MERIDIAN_VAR_DIR"])
    (bare_dir / "bare_asgi.py").write_text(BARE_APP)
    process, port = serve("bare_asgi:app", dict(env, PYTHONPATH=str(bare_dir)), str(bare_dir))
    request = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"]
    try:
        load(port, request, 1.0, connections)  # warm up
        return load(port, request, seconds, connections)
    finally:
        process.terminate()
        process.wait()


def load(port: int, requests: list[bytes], seconds: float, connections: int, rate: float | None = None,
         kind: Callable[[bytes], str] | None = None) -> Load:
    """Send ``requests`` round robin over ``connections`` for ``seconds``; ``rate`` paces the
    callers (requests per second in all), staggered so the load arrives evenly. ``kind`` names
    each request's kind, for figures per kind as well (``Load.kinds``)."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    kinds: list[str] | None = [] if kind else None

    async def run() -> None:
        stop = time.perf_counter() + seconds
        interval = connections / rate if rate else None
        await asyncio.gather(*(_caller(port, requests[c::connections] or requests, stop, interval, c / rate if rate else 0.0,
                                       latencies, statuses, kinds, kind) for c in range(connections)))

    started = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - started
    per_kind: dict[str, tuple[float, float, float]] = {}
    if kinds:
        grouped: dict[str, list[float]] = {}
        for name, latency in zip(kinds, latencies):
            grouped.setdefault(name, []).append(latency)
        for name, values in grouped.items():
            values.sort()
            per_kind[name] = (len(values) / elapsed, values[len(values) // 2], values[int(len(values) * 0.99)])
    latencies.sort()
    if not latencies:
        return Load(0.0, float("nan"), float("nan"), statuses)
    return Load(len(latencies) / elapsed, latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)], statuses,
                per_kind)


class CpuShares:
    """Where the machine's CPU went during a measurement (Linux ``/proc``; empty elsewhere).

    The server, the database and the load generator share the cores, so figures only mean
    something next to how busy the machine was, and with what.
    """

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self._start = self._snapshot()

    def report(self) -> str:
        end = self._snapshot()
        if not end or not self._start:
            return ""
        seconds = end["wall"] - self._start["wall"]
        share = {k: (end.get(k, 0.0) - self._start.get(k, 0.0)) / seconds * 100 for k in ("server", "postgres", "self", "all")}
        other = share["all"] - share["server"] - share["postgres"] - share["self"]
        return (f"CPU of {os.cpu_count()} cores: server {share['server']:.0f}%, PostgreSQL {share['postgres']:.0f}%, "
                f"load generator {share['self']:.0f}%, everything else {max(other, 0):.0f}%")

    def _snapshot(self) -> dict[str, float]:
        try:
            tick = os.sysconf("SC_CLK_TCK")
            totals = {"server": 0.0, "postgres": 0.0, "self": 0.0, "all": 0.0, "wall": time.monotonic()}
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    self._add(totals, int(entry), tick)
            return totals
        except OSError:
            return {}

    def _add(self, totals: dict[str, float], pid: int, tick: int) -> None:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
        except OSError:
            return
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        used = (int(fields[11]) + int(fields[12])) / tick
        totals["all"] += used
        if pid == self.server_pid or int(fields[1]) == self.server_pid:
            totals["server"] += used
        elif name.startswith("postgres"):
            totals["postgres"] += used
        elif pid == os.getpid():
            totals["self"] += used
