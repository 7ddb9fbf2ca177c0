"""Watching 500 clusters (#32, goal 5): real-API member clusters watched by two worker processes.

Serves ``--clusters`` member clusters (``--nodes-per-cluster`` nodes and a few pods each) from
``tests.kubeapi``'s API server emulator, all in one separate process on one port (cluster
``i`` at ``http://127.0.0.1:<port>/c/<i>``; the emulator's watches wake on a change instead of
polling, and send a bookmark a minute as kube-apiserver does). Starts the product as in
production, on PostgreSQL and Redis (``manage.py meridian_run --no-seed``: web, one
``meridian_worker`` with its default two pool processes, beat), registers every cluster through
the REST API and waits until each one's six kinds are watched (the watches the emulator holds
open). Then:

- per worker pool process: the clusters and watches it holds, its threads and RSS at steady
  state (psutil) and what each watched cluster added to them, and the CPU of the window (of
  every process by role, and of the whole machine, which others may share);
- a node label changed in one cluster after another (a random node, every cluster at least
  once, the first change right after the last cluster is watched), from the emulator's write
  to the label being visible through ``GET /api/v1/fleet/nodes/?labelSelector=…`` (polled
  every 50 ms): p50, p95, max (goal p95 ≤2 s), and the clusters whose change never showed
  (a starved watch; goal none);
- a fault: one cluster answers 429 (``Retry-After``) and another 500 for ``--fault-seconds``
  (their open watches cut), while labels keep changing on the healthy clusters: the healthy
  clusters' change latency during the fault, and whether each healthy cluster's inventory was
  still written on time — ``Cluster.last_sync`` read from the database every 2 s; a watched
  cluster is written at least every 15 s, so one older than 30 s missed its sync (goal: none,
  as before the fault). Then how soon the faulted clusters' changes show after they heal.

A summary at the end puts each figure beside its goal (met / MISSED).

    python bench/bench_watch.py [--clusters 500] [--nodes-per-cluster 20] [--seconds 60] [--fault-seconds 60]

Uses database ``bench_watch`` on ``--postgres`` (created and dropped) and Redis ``--redis``
(db 11, flushed before and after); every process it starts is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_idle import PASSWORD, USERNAME, wait_ready
from http_load import free_port

TOKEN = "bench-watch"
DATABASE = "bench_watch"
LABEL = "bench-change"
#: The kinds a cluster's watcher follows (``fleet.informer.INFORMED_KINDS``), as the emulator names them.
WATCHED_KINDS = ("nodes", "pods", "deployments", "statefulsets", "replicasets", "jobs")
#: A watched cluster's writer writes at least this often (``Watcher.write_every_seconds``), and
#: beat asks for a sync of every cluster as often (``MERIDIAN_FLEET_SYNC_SECONDS``).
SYNC_SECONDS = 15.0
MISSED_AFTER = 2 * SYNC_SECONDS
#: A change not visible after this long counts as never seen (a starved watch).
SEEN_TIMEOUT = 30.0
POLL_SECONDS = 0.05
GOAL_P95 = 2.0
BOOKMARK_SECONDS = 60.0  # kube-apiserver sends a watch bookmark about once a minute


# -- the emulated fleet (runs in its own process: --serve-emulator) ---------------------------------

_client_port: contextvars.ContextVar[int] = contextvars.ContextVar("client_port", default=0)


def _emulator_classes():
    """The emulator subclass (imported here: the bench process itself needs none of it)."""
    from tests.kubeapi import ApiServer

    class FleetApiServer(ApiServer):
        """An ``ApiServer`` whose watches wait for a change (or the next bookmark) instead of
        looking every 20 ms: 3,000 watches polling would take the emulator's whole core. Every
        change is made on the event loop's thread (the control requests), so a future per
        waiting watch is enough. ``cut`` ends every open watch (a fault's start)."""

        def __init__(self) -> None:
            super().__init__(token=TOKEN, bookmark_seconds=BOOKMARK_SECONDS)
            self.requests = deque(maxlen=100)  # the emulator keeps every request otherwise
            self.wakeups: set[asyncio.Future] = set()
            self.open: dict[int, tuple[str, int, float]] = {}  # id -> (plural, client port, timeoutSeconds)
            self.cuts = 0

        def _event(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
            super()._event(resource, kind, obj)
            self.wake()

        def wake(self) -> None:
            for future in list(self.wakeups):
                if not future.done():
                    future.set_result(None)

        def cut(self) -> None:
            self.cuts += 1
            self.wake()

        def _watch_opened(self, rtype: Any, timeout: float) -> tuple[object, int]:
            handle = object()  # alive as long as the watch: its id keys the entry
            self.open[id(handle)] = (rtype.plural, _client_port.get(), timeout)
            return handle, self.cuts

        def _watch_goes_on(self, handle: tuple[object, int]) -> bool:
            return self.cuts == handle[1]

        async def _watch_idle(self, until: float) -> None:
            wait = until - time.monotonic()
            if wait <= 0:
                return
            future = asyncio.get_running_loop().create_future()
            self.wakeups.add(future)
            try:
                await asyncio.wait_for(future, wait)
            except TimeoutError:
                pass
            finally:
                self.wakeups.discard(future)

        def _watch_closed(self, handle: tuple[object, int]) -> None:
            self.open.pop(id(handle[0]), None)

    return FleetApiServer


def node_object(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i:04d}", "labels": {"pool": "a", "zone": f"z{i % 3}"}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "capacity": {"cpu": "32", "memory": "128Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_object(i: int, nodes: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:04d}", "namespace": "shop"},
            "spec": {"nodeName": f"n{i % nodes:04d}",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}}


def emulator_app(clusters: int, nodes: int, pods: int):
    """One ASGI app for the whole fleet: ``/c/<i>/…`` is cluster i's API server, ``/control/…``
    the bench's controls (a label change, a fault, healing, the open watches, request counts)."""
    from tests.kubeapi import read_body

    fleet_api_server = _emulator_classes()
    servers = []
    for _ in range(clusters):
        api = fleet_api_server()
        for i in range(nodes):
            api.put("v1/nodes", node_object(i))
        for i in range(pods):
            api.put("v1/pods", pod_object(i, nodes))
        servers.append(api)
    requests: Counter = Counter()

    async def control(path: str, body: dict) -> Any:
        if path == "/control/ready":
            return {"clusters": len(servers)}
        if path == "/control/label":
            api = servers[body["cluster"]]
            obj = api.object("v1/nodes", body["node"])
            obj["metadata"].setdefault("labels", {})[LABEL] = body["value"]
            api.put("v1/nodes", obj)
            return {"time": time.time()}
        if path == "/control/fault":
            api = servers[body["cluster"]]
            api.fail(body["status"], retry_after=body.get("retry_after", 1))
            api.cut()
            return {"time": time.time()}
        if path == "/control/heal":
            servers[body["cluster"]].heal()
            return {"time": time.time()}
        if path == "/control/watches":
            return [[i, plural, port, timeout] for i, api in enumerate(servers) for plural, port, timeout in api.open.values()]
        if path == "/control/requests":
            return {"total": sum(requests.values()), "watches": requests["watch"]}
        raise KeyError(path)

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.startswith("/c/"):
            index, _, rest = path[3:].partition("/")
            _client_port.set((scope.get("client") or ("", 0))[1])
            requests["all"] += 1
            if b"watch=true" in scope.get("query_string", b""):
                requests["watch"] += 1
            await servers[int(index)](dict(scope, path="/" + rest, raw_path=("/" + rest).encode()), receive, send)
            return
        try:
            status, answer = 200, await control(path, json.loads(await read_body(receive) or b"{}"))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            status, answer = 400, {"error": repr(exc)}
        raw = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]})
        await send({"type": "http.response.body", "body": raw})

    requests["all"] = 0
    return app


def serve_emulator(port: int, clusters: int, nodes: int, pods: int) -> None:
    import uvicorn

    app = emulator_app(clusters, nodes, pods)
    uvicorn.run(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning", access_log=False, loop="uvloop",
                http="httptools", backlog=8192, timeout_keep_alive=120)


# -- the bench -----------------------------------------------------------------------------------


class Processes:
    """What the bench started, each in a session of its own; ``stop_all`` ends every one and
    whatever they started (descendants seen while running, killed if they outlive their group)."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen] = []
        self.seen: dict[int, psutil.Process] = {}

    def start(self, argv: list[str], env: dict, log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.started.append(proc)
        return proc

    def note_descendants(self) -> None:
        for proc in self.started:
            try:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    self.seen.setdefault(child.pid, child)
            except psutil.NoSuchProcess:
                pass

    def stop_all(self) -> None:
        """The last started first (Meridian before the clusters it watches), each given 60 s."""
        self.note_descendants()
        for proc in reversed(self.started):
            for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
                if proc.poll() is not None:
                    break
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(wait)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
        for child in self.seen.values():  # only those still the very processes seen (pid and start time)
            try:
                if child.is_running():
                    child.kill()
            except psutil.NoSuchProcess:
                pass


def wait_http(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{url}: the process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer within {timeout:.0f} s")


def database_admin(postgres: str, statements: list[str]) -> None:
    import psycopg

    with psycopg.connect(f"{postgres}/postgres", autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


class Meridian:
    """The REST API with a write-enabled token."""

    def __init__(self, base: str) -> None:
        answer = httpx.post(f"{base}/api/v1/auth/token/", timeout=30,
                            json={"username": USERNAME, "password": PASSWORD, "write_enabled": True})
        answer.raise_for_status()
        self.base, self.headers = base, {"Authorization": f"Token {answer.json()['token']}"}

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers=self.headers, timeout=60)


def register_all(meridian: Meridian, emulator: str, clusters: int) -> float:
    """Every cluster through ``POST /api/v1/fleet/clusters/`` (four at a time, as a script
    would); seconds taken."""
    from tests.kubeapi import registration

    local = threading.local()

    def one(i: int) -> None:
        client = getattr(local, "client", None) or meridian.client()
        local.client = client
        for attempt in range(5):
            answer = client.post("/api/v1/fleet/clusters/", json=registration(cluster_name(i), f"{emulator}/c/{i}", TOKEN))
            if answer.status_code == 201:
                return
            if answer.status_code < 500 and answer.status_code != 429:
                raise SystemExit(f"registering {cluster_name(i)}: {answer.status_code} {answer.text[:300]}")
            time.sleep(1 + attempt)
        raise SystemExit(f"registering {cluster_name(i)}: {answer.status_code} {answer.text[:300]}")

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(clusters)))
    return time.monotonic() - started


def cluster_name(i: int) -> str:
    return f"w{i:04d}"


def open_watches(emulator: httpx.Client) -> list[tuple[int, str, int, float]]:
    """The emulator's open watches, ``(cluster, kind, client port, timeoutSeconds)``; only
    long ones (a sync's one-second watches are not a watcher's)."""
    return [tuple(w) for w in emulator.get("/control/watches").json() if w[3] > 5]


def watched_clusters(watches: list[tuple[int, str, int, float]]) -> set[int]:
    kinds: dict[int, set[str]] = {}
    for cluster, kind, _, _ in watches:
        kinds.setdefault(cluster, set()).add(kind)
    return {cluster for cluster, seen in kinds.items() if seen >= set(WATCHED_KINDS)}


def wait_watched(emulator: httpx.Client, clusters: int, timeout: float) -> set[int]:
    """Until every cluster has all its kinds watched (renewals may leave a gap: two looks
    together count) or ``timeout``; the clusters watched."""
    deadline, previous, watched = time.monotonic() + timeout, [], set()
    while time.monotonic() < deadline:
        current = open_watches(emulator)
        watched = watched_clusters(current) | watched_clusters(current + previous)
        if len(watched) == clusters:
            return watched
        previous = current
        time.sleep(1)
    return watched


def worker_pool_processes(run: subprocess.Popen) -> list[psutil.Process]:
    """The Celery pool processes: children of a ``celery worker`` process with its command line."""
    def is_worker(proc: psutil.Process) -> bool:
        try:
            line = " ".join(proc.cmdline())
        except psutil.Error:
            return False
        return "celery" in line and " worker" in line

    return [p for p in psutil.Process(run.pid).children(recursive=True) if is_worker(p) and is_worker(p.parent())]


def watches_per_process(pools: list[psutil.Process], watches: list, emulator_port: int) -> dict[int, tuple[int, int]]:
    """pid -> (clusters, watches) it holds open, matched by the client port of each watch."""
    owner: dict[int, int] = {}
    for proc in pools:
        try:
            for conn in proc.net_connections("tcp"):
                if conn.raddr and conn.raddr.port == emulator_port:
                    owner[conn.laddr.port] = proc.pid
        except psutil.Error:
            pass
    held: dict[int, tuple[set, int]] = {p.pid: (set(), 0) for p in pools}
    for cluster, _, port, _ in watches:
        pid = owner.get(port)
        if pid is not None:
            clusters, count = held[pid]
            clusters.add(cluster)
            held[pid] = (clusters, count + 1)
    return {pid: (len(clusters), count) for pid, (clusters, count) in held.items()}


@dataclass
class Change:
    cluster: int
    node: str
    value: str
    written: float  # the emulator's clock (this machine's) when the API server stored it
    seen: float | None = None


@dataclass
class Tracker:
    """Label changes and when each became visible through the REST API (a poller thread)."""

    meridian: Meridian
    emulator: httpx.Client
    nodes: int
    changes: list[Change] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    polls: int = 0

    def change(self, cluster: int) -> Change:
        with self.lock:
            busy = {c.node for c in self.changes if c.cluster == cluster and c.seen is None}
        node = random.choice([f"n{i:04d}" for i in range(self.nodes) if f"n{i:04d}" not in busy] or [f"n{0:04d}"])
        value = f"v{len(self.changes)}"
        written = self.emulator.post("/control/label", json={"cluster": cluster, "node": node, "value": value}).json()["time"]
        record = Change(cluster, node, value, written)
        with self.lock:
            self.changes.append(record)
        return record

    def poll(self) -> None:
        client = self.meridian.client()
        while not self.stopping.is_set():
            now = time.time()
            with self.lock:
                pending = {c.value: c for c in self.changes if c.seen is None and now - c.written < SEEN_TIMEOUT}
            values = list(pending)
            for start in range(0, len(values), 100):
                chunk = values[start : start + 100]
                answer = client.get("/api/v1/fleet/nodes/", params={"labelSelector": f"{LABEL} in ({','.join(chunk)})",
                                                                    "page_size": 1000})
                arrived = time.time()
                self.polls += 1
                if answer.status_code != 200:
                    continue
                for row in answer.json()["results"]:
                    found = pending.get((row.get("labels") or {}).get(LABEL))
                    if found is not None and row["cluster"] == cluster_name(found.cluster) and row["name"] == found.node:
                        with self.lock:
                            found.seen = found.seen or arrived
            self.stopping.wait(POLL_SECONDS)

    def settle(self, changes: list[Change]) -> None:
        """Wait until each of ``changes`` is seen or timed out."""
        while any(c.seen is None and time.time() - c.written < SEEN_TIMEOUT for c in changes):
            time.sleep(0.2)


@dataclass
class SyncMonitor:
    """``Cluster.last_sync`` of every cluster, read from the database every 2 s: the oldest
    age seen per cluster, per phase; and the most connections the product held at once."""

    url: str
    phase: str = ""
    oldest: dict[str, dict[str, float]] = field(default_factory=dict)  # phase -> cluster -> age
    peak_connections: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stopping.wait(2.0):
                rows = conn.execute("SELECT name, extract(epoch FROM now() - last_sync) FROM fleet_cluster "
                                    "WHERE last_sync IS NOT NULL").fetchall()
                active = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [DATABASE]).fetchone()[0]
                self.peak_connections = max(self.peak_connections, active - 1)  # less this monitor's own
                if self.phase:
                    ages = self.oldest.setdefault(self.phase, {})
                    for name, age in rows:
                        ages[name] = max(ages.get(name, 0.0), float(age))


def run_changes(tracker: Tracker, clusters: list[int], seconds: float) -> list[Change]:
    """Changes one after another, over ``clusters`` in random order (each at least once, again
    and again while time is left), every ``min(0.5 s, seconds / clusters)``."""
    interval = min(0.5, seconds / max(1, len(clusters)))
    made: list[Change] = []
    started = time.monotonic()
    order: list[int] = []
    while not made or time.monotonic() - started < seconds or len({c.cluster for c in made}) < len(clusters):
        if not order:
            order = random.sample(clusters, len(clusters))
        made.append(tracker.change(order.pop()))
        time.sleep(max(0.0, started + len(made) * interval - time.monotonic()))
    return made


def percentiles(changes: list[Change]) -> str:
    latencies = sorted(c.seen - c.written for c in changes if c.seen is not None)
    if not latencies:
        return "none seen"
    p95 = statistics.quantiles(latencies, n=100)[94] if len(latencies) > 1 else latencies[0]
    return f"p50 {statistics.median(latencies):.2f} s, p95 {p95:.2f} s, max {latencies[-1]:.2f} s"


def p95_of(changes: list[Change]) -> float:
    latencies = sorted((c.seen - c.written) if c.seen is not None else float("inf") for c in changes)
    return statistics.quantiles(latencies, n=100)[94] if len(latencies) > 1 else (latencies[0] if latencies else float("inf"))


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def memory_and_threads(procs: list[psutil.Process]) -> dict[int, tuple[int, int]]:
    """pid -> (RSS bytes, threads)."""
    found = {}
    for proc in procs:
        try:
            found[proc.pid] = (proc.memory_info().rss, proc.num_threads())
        except psutil.Error:
            pass
    return found


def process_figures(pools: list[psutil.Process], watches: list, emulator_port: int, cpu: dict[int, float],
                    idle: dict[int, tuple[int, int]]) -> list[str]:
    """A line per pool process; per watched cluster: what it added to the process as it was
    before any cluster was registered (``idle``)."""
    held = watches_per_process(pools, watches, emulator_port)
    lines = []
    for pid, (rss, threads) in memory_and_threads(pools).items():
        clusters, count = held.get(pid, (0, 0))
        rss0, threads0 = idle.get(pid, (0, 0))
        per = (f"; per watched cluster {(threads - threads0) / clusters:.1f} threads, {(rss - rss0) / clusters / 2**20:.2f} MB"
               if clusters and pid in idle else "")
        lines.append(f"  pool process {pid}: {clusters} clusters watched ({count} watches), {threads:,} threads "
                     f"(idle: {threads0}), "
                     f"RSS {rss / 2**20:,.0f} MB (idle: {rss0 / 2**20:,.0f} MB), CPU {cpu.get(pid, 0) * 100:.0f}% of a core{per}")
    missing = {p.pid for p in pools} - set(memory_and_threads(pools))
    lines += [f"  pool process {pid}: gone" for pid in missing]
    return lines


def cpu_seconds(procs: list[psutil.Process]) -> dict[int, float]:
    times = {}
    for proc in procs:
        try:
            t = proc.cpu_times()
            times[proc.pid] = t.user + t.system
        except psutil.Error:
            pass
    return times


def cpu_by_role(processes: Processes, bench_pid: int) -> dict[str, float]:
    """CPU seconds so far: each of the bench's own processes by role, PostgreSQL (all of its
    processes: the server is shared), and the whole machine (``psutil.cpu_times``)."""
    roles: Counter = Counter()
    mine = {p.pid for p in processes.started} | set(processes.seen) | {bench_pid}
    for proc in psutil.process_iter(["pid", "name", "cmdline", "cpu_times"]):
        info = proc.info
        times = info["cpu_times"]
        if times is None:
            continue
        used = times.user + times.system
        line = " ".join(info["cmdline"] or [])
        if (info["name"] or "").startswith("postgres"):
            roles["PostgreSQL"] += used
        elif info["pid"] not in mine:
            continue
        elif info["pid"] == bench_pid:
            roles["bench"] += used
        elif "--serve-emulator" in line:
            roles["emulator"] += used
        elif "uvicorn" in line:
            roles["web"] += used
        elif "celery" in line and " beat" in line:
            roles["beat"] += used
        elif "celery" in line and " worker" in line:
            try:
                pool = "celery" in " ".join(proc.parent().cmdline())
            except psutil.Error:
                pool = False
            roles["worker pools" if pool else "worker main"] += used
        else:
            roles["supervisors"] += used
    machine = psutil.cpu_times()
    roles["machine"] = machine.user + machine.system + getattr(machine, "nice", 0) + getattr(machine, "irq", 0) + getattr(
        machine, "softirq", 0)
    return roles


def cpu_line(before: dict[str, float], after: dict[str, float], wall: float) -> str:
    share = {role: (after.get(role, 0) - before.get(role, 0)) / wall * 100 for role in after}
    roles = ("worker pools", "worker main", "web", "beat", "supervisors", "emulator", "bench", "PostgreSQL")
    return (", ".join(f"{role} {share.get(role, 0):.0f}" for role in roles) + f" (% of one core); the whole machine "
            f"{share['machine'] / (os.cpu_count() or 1):.0f}% of its {os.cpu_count()} cores, shared")


@dataclass
class Bench:
    """What the phases share: the running fleet and product, and the summary's lines."""

    args: argparse.Namespace
    processes: Processes
    run: subprocess.Popen
    emulator: httpx.Client
    emulator_port: int
    meridian: Meridian
    monitor: SyncMonitor
    tracker: Tracker
    summary: list[str] = field(default_factory=list)

    def goal(self, what: str, figure: str, ok: bool | None) -> None:
        self.summary.append(f"  {what:<56} {figure:<50} {'' if ok is None else verdict(ok)}")


def start_all(args: argparse.Namespace, processes: Processes, var_dir: Path) -> Bench:
    """The emulated fleet, a fresh database and Redis db, and Meridian, each ready."""
    database_admin(args.postgres, [f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)", f"CREATE DATABASE {DATABASE}"])
    flush_redis(args.redis)
    emulator_port, web_port = free_port(), free_port()
    emulator_url = f"http://127.0.0.1:{emulator_port}"
    emulator_proc = processes.start(
        [sys.executable, __file__, "--serve-emulator", str(emulator_port), "--clusters", str(args.clusters),
         "--nodes-per-cluster", str(args.nodes_per_cluster), "--pods-per-cluster", str(args.pods_per_cluster)],
        dict(os.environ, PYTHONUNBUFFERED="1"), var_dir / "emulator.log")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "MERIDIAN_ENV")}
    env |= {"MERIDIAN_VAR_DIR": str(var_dir), "DATABASE_URL": f"{args.postgres}/{DATABASE}", "REDIS_URL": args.redis,
            # web, two pool processes, beat and the supervisors: at most ~20 PostgreSQL connections in all
            "MERIDIAN_DB_POOL_MIN": "1", "MERIDIAN_DB_POOL_MAX": "5",
            "MERIDIAN_ADMIN_USERNAME": USERNAME, "MERIDIAN_ADMIN_PASSWORD": PASSWORD, "PYTHONUNBUFFERED": "1"}
    run = processes.start([sys.executable, "manage.py", "meridian_run", "--no-seed", "--port", str(web_port)], env,
                          var_dir / "run.log")
    wait_http(f"{emulator_url}/control/ready", emulator_proc, 300)
    wait_ready(web_port, run)
    deadline = time.monotonic() + 120
    while len(worker_pool_processes(run)) < 2 and time.monotonic() < deadline:
        time.sleep(1)
    meridian = Meridian(f"http://127.0.0.1:{web_port}")
    emulator = httpx.Client(base_url=emulator_url, timeout=30)
    monitor = SyncMonitor(f"{args.postgres}/{DATABASE}")
    threading.Thread(target=monitor.run, daemon=True).start()
    print(f"fleet: {args.clusters} clusters × {args.nodes_per_cluster} nodes, {args.pods_per_cluster} pods each, served by the "
          f"API emulator in one process ({emulator_url}/c/<i>); Meridian on PostgreSQL ({DATABASE}) and Redis "
          f"({args.redis}): web, one worker of 2 pool processes, beat", flush=True)
    return Bench(args, processes, run, emulator, emulator_port, meridian, monitor,
                 Tracker(meridian, emulator, args.nodes_per_cluster))


def register_and_watch(bench: Bench) -> dict[int, tuple[int, int]]:
    """Register every cluster and wait until each is watched; the pool processes' (RSS,
    threads) from before the first registration."""
    args = bench.args
    idle = memory_and_threads(worker_pool_processes(bench.run))
    registered = time.monotonic()
    took = register_all(bench.meridian, str(bench.emulator.base_url).rstrip("/"), args.clusters)
    print(f"registered {args.clusters} clusters through the REST API in {took:.1f} s", flush=True)
    watched = wait_watched(bench.emulator, args.clusters, 300 + 2 * args.clusters)
    missing = sorted(set(range(args.clusters)) - watched)
    print(f"clusters watched (all {len(WATCHED_KINDS)} kinds): {len(watched)} of {args.clusters}, "
          f"{time.monotonic() - registered:.0f} s after the first registration"
          + (f"; never watched: {', '.join(map(cluster_name, missing[:10]))}" if missing else ""), flush=True)
    bench.goal("clusters watched", f"{len(watched)} of {args.clusters}", not missing)
    bench.processes.note_descendants()
    return idle


def steady(bench: Bench, idle: dict[int, tuple[int, int]]) -> None:
    """Label changes across the fleet (the first at once), per-process figures at the end."""
    args, tracker = bench.args, bench.tracker
    pools = worker_pool_processes(bench.run)
    bench.processes.note_descendants()
    roles_before, cpu_before, wall_before = cpu_by_role(bench.processes, os.getpid()), cpu_seconds(pools), time.monotonic()
    requests_before = bench.emulator.get("/control/requests").json()
    bench.monitor.phase = "steady"
    first = tracker.change(random.randrange(args.clusters))
    changes = [first, *run_changes(tracker, list(range(args.clusters)), args.seconds)]
    tracker.settle(changes)
    wall = time.monotonic() - wall_before
    requests_after = bench.emulator.get("/control/requests").json()
    cpu = {pid: (seconds - cpu_before.get(pid, 0)) / wall for pid, seconds in cpu_seconds(pools).items()}
    roles_after = cpu_by_role(bench.processes, os.getpid())
    watches = open_watches(bench.emulator)
    print(f"steady state, {len(watches):,} watches open; per worker pool process:")
    for line in process_figures(pools, watches, bench.emulator_port, cpu, idle):
        print(line)
    now, clusters = memory_and_threads(pools), len(watched_clusters(watches)) or 1
    added = [(r - idle[pid][0], t - idle[pid][1]) for pid, (r, t) in now.items() if pid in idle]
    bench.goal("worker pool processes: threads", " + ".join(f"{t:,}" for _, t in now.values())
               + f" ({sum(t for _, t in added) / clusters:.1f} per watched cluster)", None)
    bench.goal("worker pool processes: RSS", " + ".join(f"{r / 2**20:,.0f} MB" for r, _ in now.values())
               + f" ({sum(r for r, _ in added) / clusters / 2**20:.2f} MB per watched cluster)", None)
    print(f"  CPU over the {wall:.0f} s window: {cpu_line(roles_before, roles_after, wall)}")
    print(f"  API requests to the emulator: {(requests_after['total'] - requests_before['total']) * 60 / wall:,.0f}/min "
          f"({(requests_after['watches'] - requests_before['watches']) * 60 / wall:,.0f} watch requests/min)")
    p95 = p95_of(changes)
    first_latency = f"{first.seen - first.written:.2f} s" if first.seen else "never seen"
    ok = p95 <= GOAL_P95 and first.seen is not None
    print(f"label change → REST API: {len(changes)} changes in {wall:.0f} s over {len({c.cluster for c in changes})} clusters: "
          f"{percentiles(changes)}; the first, right after the last cluster was watched: {first_latency} "
          f"(goal p95 ≤{GOAL_P95:.0f} s, the first included: {verdict(ok)})")
    bench.goal(f"label change visible, p95 (goal ≤{GOAL_P95:.0f} s)", f"{p95:.2f} s (first {first_latency})", ok)
    starved = sorted({c.cluster for c in changes if c.seen is None})
    print(f"clusters with a change never seen within {SEEN_TIMEOUT:.0f} s (a starved watch): {len(starved)} of {args.clusters}"
          + (f" ({', '.join(map(cluster_name, starved[:10]))})" if starved else "") + f" (goal none: {verdict(not starved)})",
          flush=True)
    bench.goal("watches starved (goal none)", f"{len(starved)} of {args.clusters}", not starved)


def fault(bench: Bench) -> None:
    """One cluster throttles, another fails, for ``--fault-seconds``; the others must not notice."""
    args, tracker, emulator = bench.args, bench.tracker, bench.emulator
    throttled, failing = random.sample(range(args.clusters), 2)
    healthy = [i for i in range(args.clusters) if i not in (throttled, failing)]
    bench.monitor.phase = "fault"
    emulator.post("/control/fault", json={"cluster": throttled, "status": 429, "retry_after": 5})
    emulator.post("/control/fault", json={"cluster": failing, "status": 500})
    started = time.monotonic()
    during = run_changes(tracker, healthy, args.fault_seconds)
    time.sleep(max(0.0, args.fault_seconds - (time.monotonic() - started)))
    healed_at = time.time()
    for cluster in (throttled, failing):
        emulator.post("/control/heal", json={"cluster": cluster})
    bench.monitor.phase = "after"
    recovered = [tracker.change(throttled), tracker.change(failing)]
    tracker.settle(during)
    p95 = p95_of(during)
    unseen = sorted({c.cluster for c in during if c.seen is None})
    ok = p95 <= GOAL_P95 and not unseen
    print(f"fault: {cluster_name(throttled)} answered 429 (Retry-After 5 s) and {cluster_name(failing)} 500 for "
          f"{args.fault_seconds:.0f} s, their watches cut; meanwhile {len(during)} changes over "
          f"{len({c.cluster for c in during})} healthy clusters: {percentiles(during)}, never seen: {len(unseen)} "
          f"(goal unaffected, p95 ≤{GOAL_P95:.0f} s and none unseen: {verdict(ok)})")
    bench.goal("healthy clusters' label change during the fault, p95", f"{p95:.2f} s, {len(unseen)} never seen", ok)
    names = {cluster_name(i) for i in healthy}
    for phase, label in (("steady", "before the fault"), ("fault", "during the fault")):
        ages = {n: a for n, a in bench.monitor.oldest.get(phase, {}).items() if n in names}
        late = sorted(n for n, a in ages.items() if a > MISSED_AFTER)
        worst = max(ages.values(), default=float("nan"))
        print(f"healthy clusters' inventory {label}: oldest last sync {worst:.1f} s; clusters that went "
              f">{MISSED_AFTER:.0f} s without a sync: {len(late)} of {len(names)}" + (f" ({', '.join(late[:8])})" if late else "")
              + (f" (goal none: {verdict(not late)})" if phase == "fault" else ""))
        if phase == "fault":
            bench.goal("healthy clusters that missed a sync during the fault",
                       f"{len(late)} of {len(names)} (oldest {worst:.0f} s)", not late)
    deadline, client = time.time() + args.recover_seconds, bench.meridian.client()
    while any(c.seen is None for c in recovered) and time.time() < deadline:
        time.sleep(0.5)
        for change in recovered:  # the poller gives up after 30 s: look for these here
            if change.seen is None:
                rows = client.get("/api/v1/fleet/nodes/", params={
                    "cluster": cluster_name(change.cluster), "labelSelector": f"{LABEL}={change.value}"}).json()["results"]
                change.seen = time.time() if rows else None
    for change, why in zip(recovered, ("429", "500")):
        after = f"{change.seen - healed_at:.1f} s after healing" if change.seen else f"not within {args.recover_seconds:.0f} s"
        print(f"  {cluster_name(change.cluster)} ({why}) back: a change made at healing visible {after} "
              "(the watches' retry backs off 15 s doubling to 5 min)")
        bench.goal(f"faulted cluster ({why}) back after healing", after, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--nodes-per-cluster", type=int, default=20)
    parser.add_argument("--pods-per-cluster", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60,
                        help="the label-change window (longer if needed to reach every cluster)")
    parser.add_argument("--fault-seconds", type=float, default=60, help="how long the two faulty clusters answer 429 / 500")
    parser.add_argument("--recover-seconds", type=float, default=150,
                        help="how long to wait for the faulted clusters after they heal")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432",
                        help=f"the server (no database): {DATABASE} is created there and dropped after")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/11", help="flushed before and after")
    parser.add_argument("--serve-emulator", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_emulator:
        serve_emulator(args.serve_emulator, args.clusters, args.nodes_per_cluster, args.pods_per_cluster)
        return
    if args.clusters < 4:
        raise SystemExit("--clusters: at least 4 (two of them are made to fail)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below stops everything
    var_dir = Path(tempfile.mkdtemp(prefix="meridian-watch-"))
    processes = Processes()
    bench: Bench | None = None
    try:
        bench = start_all(args, processes, var_dir)
        idle = register_and_watch(bench)
        threading.Thread(target=bench.tracker.poll, daemon=True).start()
        steady(bench, idle)
        fault(bench)
        print(f"PostgreSQL connections held by Meridian at most: {bench.monitor.peak_connections}")
        print(f"summary (#32 goal 5: {args.clusters} watched clusters on 2 worker processes):")
        print("\n".join(bench.summary))
    finally:
        if bench is not None:
            bench.tracker.stopping.set()
            bench.monitor.stopping.set()
        processes.stop_all()
        try:
            database_admin(args.postgres, [f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)"])
            flush_redis(args.redis)
        except Exception as exc:  # noqa: BLE001 - say so, the figures are printed already
            print(f"cleanup: {exc}")
        print(f"(logs: {var_dir / 'run.log'}, {var_dir / 'emulator.log'})")


if __name__ == "__main__":
    main()
