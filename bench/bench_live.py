"""The live console at scale (#32, goal 4): a thousand browsers' websockets while a 10,000-node
rollout runs.

Starts the one-command product (``manage.py meridian_run``, as ``make run`` does: embedded SQLite
and Redis, web, worker and beat) in a temporary directory with a demo fleet of ``--nodes``
nodes, lets the start-up work settle, and delivers a global target of a config type no other
target uses to every node. Then ``--browsers`` websockets sign in with an API token and
subscribe to what a browser on the overview and on that target's page subscribes to (the
overview's ``system fleet nodeconfig federation quotas`` and ``nodeconfig-target-<id>``), and,
``--socket-settle`` seconds after the last one subscribed (1,000 sockets opening in a few seconds
is its own storm: counted in, it put one 3 s stall into every browser's figures), the target's
config changes with waves of ``--wave-size``: a paced rollout over every node, watched by every
socket until it is complete.

Prints, over the rollout: event → browser latency (a socket's receipt time less the ``time``
the event was sent with, the same clock: p50, p95, p99; goal p95 ≤300 ms), the most messages
any one browser got in one second (goal ≤2, coalesced), the web process's CPU, and the sockets
still open at the end (goal: all). ``--soak-hours`` then leaves the sockets quiet for that
long and checks every one still answers a ping (the 2-hour soak of the goal; not in CI).

    python bench/bench_live.py [--browsers 1000] [--nodes 10000] [--wave-size 20%] [--soak-hours 0]

The clients run in this process (asyncio), beside the product on the same machine: their
own scheduling delay is part of the latency measured, as a real browser's would be.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_idle import PASSWORD, USERNAME, start, stop, wait_ready  # noqa: E402
from http_load import free_port  # noqa: E402

OVERVIEW_TOPICS = ("system", "fleet", "nodeconfig", "federation", "quotas")
CONFIG_TYPE = "AuthConfiguration"  # the demo has no target of this type: a global one reaches every node
GOALS = {"p95_ms": 300.0, "per_second": 2}


def web_process(run: subprocess.Popen) -> psutil.Process:
    """The supervised ASGI server (uvicorn) among meridian_run's children."""
    for child in psutil.Process(run.pid).children(recursive=True):
        if "uvicorn" in " ".join(child.cmdline()):
            return child
    raise SystemExit("no web process under meridian_run")


class API:
    """The REST API as an operator's script uses it: one write-enabled token."""

    def __init__(self, base: str) -> None:
        self.base = base
        answer = httpx.post(f"{base}/api/v1/auth/token/", json={"username": USERNAME, "password": PASSWORD,
                                                                "write_enabled": True}, timeout=30)
        answer.raise_for_status()
        self.token = answer.json()["token"]
        self.client = httpx.Client(base_url=base, headers={"Authorization": f"Token {self.token}"}, timeout=60)

    def call(self, method: str, path: str, **kwargs) -> dict:
        answer = self.client.request(method, path, **kwargs)
        if answer.status_code >= 400:
            raise SystemExit(f"{method} {path}: {answer.status_code} {answer.text[:500]}")
        return answer.json()

    def target(self, pk: int) -> dict:
        return self.call("GET", f"/api/v1/nodeconfig/targets/{pk}/")

    def progress(self, pk: int) -> dict:
        return self.call("GET", f"/api/v1/nodeconfig/targets/{pk}/progress/")


def wait_delivered(api: API, pk: int, timeout: float) -> dict:
    """Poll until every node the target reaches runs its current revision (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        progress = api.progress(pk)
        target = api.target(pk)
        if (target["rollout_state"] == "complete" and progress["delivery"] == "delivered" and progress["targeted"]
                and progress["held"] == 0 and progress["pending"] == 0):
            return progress
        if time.monotonic() > deadline:
            raise SystemExit(f"the rollout did not complete in {timeout:.0f} s: {target['rollout_state']}, {progress}")
        time.sleep(2)


@dataclass
class Browser:
    """One socket: what it received while counting, per second of arrival."""

    socket: websockets.ClientConnection | None = None
    latencies: list[float] = field(default_factory=list)
    per_second: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)  # (topic, event type) -> messages
    late: Counter = field(default_factory=Counter)  # (topic, event type, second sent) -> events over a second late
    by_kind: dict = field(default_factory=dict)  # (topic, event type) -> latencies
    counting: bool = False
    errors: list[str] = field(default_factory=list)


async def open_browser(url: str, origin: str, token: str, topics: list[str]) -> Browser:
    browser = Browser()
    browser.socket = await websockets.connect(url, additional_headers={"Authorization": f"Token {token}"}, origin=origin,
                                              max_queue=None, open_timeout=120, ping_interval=None)
    hello = json.loads(await browser.socket.recv())
    if hello.get("type") != "hello":
        raise SystemExit(f"the websocket said {hello} instead of hello")
    for topic in topics:
        await browser.socket.send(json.dumps({"type": "subscribe", "topic": topic}))
    subscribed = 0
    while subscribed < len(topics):
        message = json.loads(await browser.socket.recv())
        if message.get("type") == "subscribed":
            subscribed += 1
        elif message.get("type") == "error":
            raise SystemExit(f"subscribing said {message}")
    return browser


async def listen(browser: Browser) -> None:
    """Record every event's latency (receipt less its send time) while counting."""
    try:
        async for raw in browser.socket:
            now = time.time()
            message = json.loads(raw)
            events = message["events"] if message.get("type") == "batch" else [message]
            if browser.counting and events[0].get("type") == "event":
                browser.per_second[int(now)] += 1  # a message, however many events it carries
                for event in events:
                    browser.latencies.append(now - event["time"])
                    browser.kinds[event["topic"], event["event"]] += 1
                    browser.by_kind.setdefault((event["topic"], event["event"]), []).append(now - event["time"])
                    if now - event["time"] > 1.0:
                        browser.late[event["topic"], event["event"], int(event["time"])] += 1
    except websockets.ConnectionClosed as exc:
        browser.errors.append(f"closed: {exc}")


async def open_all(count: int, url: str, origin: str, token: str, topics: list[str], parallel: int = 50) -> list[Browser]:
    gate = asyncio.Semaphore(parallel)

    async def one() -> Browser:
        async with gate:
            return await open_browser(url, origin, token, topics)

    return await asyncio.gather(*(one() for _ in range(count)))


async def still_open(browsers: list[Browser], timeout: float = 30) -> int:
    """Sockets that answer a ping now (the server's pong arrives through ``listen``'s loop)."""
    async def answers(browser: Browser) -> bool:
        try:
            await asyncio.wait_for(await browser.socket.ping(), timeout)
            return True
        except (websockets.ConnectionClosed, TimeoutError):
            return False

    return sum(await asyncio.gather(*(answers(b) for b in browsers)))


async def loop_lag(lags: list[float], stop: asyncio.Event, every: float = 0.02) -> None:
    """How late this process's own event loop wakes (the clients' share of every latency)."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        due = loop.time() + every
        await asyncio.sleep(every)
        lags.append(loop.time() - due)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 1000) - 1] if len(values) > 1 else (values[0] if values else 0.0)


async def watch_rollout(args, base: str, api: API, web: psutil.Process) -> None:
    pk = api.call("POST", "/api/v1/nodeconfig/targets/", json={
        "type": CONFIG_TYPE, "name": "bench-live", "config": {"bench": {"round": 0}},
        "reason": "bench: the first delivery"})["id"]
    first = wait_delivered(api, pk, args.timeout)
    print(f"target bench-live ({CONFIG_TYPE}, global) delivered to {first['targeted']:,} nodes; opening {args.browsers:,} "
          f"websockets")
    topics = [*OVERVIEW_TOPICS, f"nodeconfig-target-{pk}"]
    started = time.monotonic()
    browsers = await open_all(args.browsers, base.replace("http", "ws", 1) + "/ws/", base, api.token, topics)
    print(f"  {len(browsers):,} sockets open and subscribed to {len(topics)} topics each in {time.monotonic() - started:.1f} s")
    listeners = [asyncio.create_task(listen(b)) for b in browsers]
    await asyncio.sleep(args.socket_settle)  # the web process has subscriptions to finish and 2,000 log lines to write
    for browser in browsers:
        browser.counting = True
    cpu_before, wall_before = web.cpu_times(), time.monotonic()
    psutil.cpu_percent()
    lags: list[float] = []
    stop_lag = asyncio.Event()
    lagging = asyncio.create_task(loop_lag(lags, stop_lag))
    api.call("PATCH", f"/api/v1/nodeconfig/targets/{pk}/", json={
        "config": {"bench": {"round": 1}}, "wave_size": args.wave_size, "wave_interval_seconds": 1,
        "reason": "bench: a paced rollout watched by every socket"})
    progress = await asyncio.to_thread(wait_delivered, api, pk, args.timeout)
    await asyncio.sleep(2)  # the last summaries
    cpu_after, wall = web.cpu_times(), time.monotonic() - wall_before
    machine = psutil.cpu_percent()
    stop_lag.set()
    await lagging
    for browser in browsers:
        browser.counting = False
    report(browsers, progress, wall, (cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system) / wall)
    lags.sort()
    print(f"  the clients' own event loop woke late by p50 {percentile(lags, 0.5) * 1000:.0f} ms, p95 "
          f"{percentile(lags, 0.95) * 1000:.0f} ms, max {lags[-1] * 1000:.0f} ms (part of every latency above); "
          f"the machine's CPUs {machine:.0f}% busy")
    print(f"sockets still answering after the rollout: {await still_open(browsers):,} of {len(browsers):,} (goal: all)")
    if args.soak_hours:
        await asyncio.sleep(args.soak_hours * 3600)
        print(f"after {args.soak_hours:g} h quiet: {await still_open(browsers):,} of {len(browsers):,} sockets answer "
              f"(goal: all)")
    for browser in browsers:
        await browser.socket.close()
    await asyncio.gather(*listeners, return_exceptions=True)


def report(browsers: list[Browser], progress: dict, seconds: float, cpu: float) -> None:
    latencies = sorted(x * 1000 for b in browsers for x in b.latencies)
    busiest = max((max(b.per_second.values(), default=0) for b in browsers), default=0)
    rates = [sum(b.per_second.values()) / seconds for b in browsers]
    print(f"rollout of {progress['targeted']:,} nodes in waves, watched for {seconds:.0f} s by {len(browsers):,} sockets: "
          f"{len(latencies):,} events received")
    if latencies:
        p95 = percentile(latencies, 0.95)
        print(f"  event → browser: p50 {percentile(latencies, 0.50):.0f} ms, p95 {p95:.0f} ms, p99 "
              f"{percentile(latencies, 0.99):.0f} ms, max {latencies[-1]:.0f} ms (goal p95 ≤{GOALS['p95_ms']:.0f} ms: "
              f"{'met' if p95 <= GOALS['p95_ms'] else 'MISSED'})")
    print(f"  messages per browser: {statistics.mean(rates):.2f}/s on average, at most {busiest} in one second "
          f"(goal ≤{GOALS['per_second']}: {'met' if busiest <= GOALS['per_second'] else 'MISSED'})")
    kinds = sum((b.kinds for b in browsers), Counter())
    print("  events a browser got, per second: " + ", ".join(
        f"{topic} {event} {count / len(browsers) / seconds:.2f}" for (topic, event), count in kinds.most_common(8)))
    for kind in sorted({k for b in browsers for k in b.by_kind}):
        values = sorted(x * 1000 for b in browsers for x in b.by_kind.get(kind, ()))
        print(f"    {kind[0]} {kind[1]}: p50 {percentile(values, 0.5):.0f} ms, p95 {percentile(values, 0.95):.0f} ms "
              f"({len(values):,} events)")
    late = sum((b.late for b in browsers), Counter())
    if late:
        print("  events over a second late (topic, type, the second it was sent: browsers): " + ", ".join(
            f"{topic} {event} {time.strftime('%H:%M:%S', time.gmtime(at))}: {count}"
            for (topic, event, at), count in late.most_common(6)))
    print(f"  web process CPU over the rollout: {cpu * 100:.0f}% of one core")
    closed = [e for b in browsers for e in b.errors]
    if closed:
        print(f"  sockets closed during the rollout: {len(closed)} (first: {closed[0]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--browsers", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10_000, help="nodes in the demo fleet, all of them in the rollout")
    parser.add_argument("--wave-size", default="20%")
    parser.add_argument("--socket-settle", type=float, default=10,
                        help="seconds between the last socket subscribing and the rollout (the count starts then)")
    parser.add_argument("--settle", type=float, default=60, help="seconds after start-up before the bench begins")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a delivery may take")
    parser.add_argument("--soak-hours", type=float, default=0.0)
    args = parser.parse_args()
    var_dir = Path(tempfile.mkdtemp(prefix="meridian-live-"))
    port = free_port()
    run = start(var_dir, port, "--demo-nodes", str(args.nodes))
    try:
        wait_ready(port, run)
        time.sleep(args.settle)
        base = f"http://127.0.0.1:{port}"
        asyncio.run(watch_rollout(args, base, API(base), web_process(run)))
    finally:
        stop(run)
    print(f"(the run's log: {var_dir / 'run.log'})")


if __name__ == "__main__":
    main()
