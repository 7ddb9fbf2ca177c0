"""Scaling of the highly available deployment (issue 28): shard workers and web processes.

No goal: figures, and ratios against a baseline measured in the same run.

1. Shard workers. 1, 2 and 4 processes of the README's ``python manage.py meridian_worker
   --shards all`` (default concurrency, 2 pool processes each) on one sync-heavy workload:
   ``--clusters`` simulated clusters of ``--nodes`` nodes each, registered through
   ``fleet.services.register_cluster`` in one transaction, so that their first syncs are all
   queued at once when it commits; timed from the commit until every sync job (Job row) has
   finished, by the jobs' own ``finished`` stamps. Prints syncs/s and nodes/s per worker count
   and the ratio to one worker; then when the follow-up work the syncs queued (node config
   matching, quota charges) was done too. Each round starts from the same state: the previous
   round's clusters are deleted, the same clusters registered again, workers started and ready
   (heartbeat in Redis) before the clock starts, and stopped (SIGTERM) after.
2. Web. Requests/s and p50/p99 for closed-loop callers (``http_load``: every caller sends again
   the moment it is answered, so latency is queueing) on a mix of a REST list
   (``GET /api/v1/fleet/clusters/``, API token), agent config polls with ``If-None-Match``
   (304) and quota webhook reviews (``POST /api/admission/v1/quotas/validate``, each a new
   Deployment admitted and charged), at 1 and 2 web processes behind nginx (``Nginx`` of the
   fault suite: the production proxy configuration), and the same to one process without
   nginx: the proxy's own cost. ``--web-layout instances`` (default) runs the README's web
   command with ``--workers 1`` as separate instances on ports of their own, nginx balancing
   over them: that is the highly available layout (a process or machine lost is one upstream
   nginx passes over), and it keeps the balancing nginx's round robin, the same at 1 and 2;
   ``--web-layout workers`` puts one instance with ``--workers 2`` (the kernel spreads the
   connections nginx opens over its two processes) behind nginx instead.

Everything runs in production mode (``MERIDIAN_ENV=production``, plain HTTP:
``SECURE_SSL_REDIRECT=false``) with the README's commands (``tests/faults/processes``), on a
PostgreSQL (initdb in a temp dir, own port) and a Redis of the bench's own, migrated with
``manage.py migrate``; all of it is stopped and removed at the end, on failure too. Each
measurement prints where the machine's CPU went (by process tree; "other" is everyone
else's work): on a 2-core machine 4 worker processes, or 2 web processes plus nginx, the
database and the load generator, cannot scale past the cores.

    python bench/bench_ha.py [--clusters 40] [--nodes 300] [--workers 1,2,4]
                             [--seconds 10] [--callers 64] [--web-nodes 2000] [--web-layout instances]
                             [--skip-workers] [--skip-web]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from http_load import load  # noqa: E402

from tests.faults.processes import Meridian, Nginx, PrivatePostgres, PrivateRedis, wait_until  # noqa: E402

#: Requests of each kind in the web mix, per 9: a REST list is rare next to agent polls and
#: admission reviews, which every node and every API server send all day.
MIX = {"REST list": 1, "agent poll (304)": 4, "quota webhook": 4}
EXPECTED = {"REST list": 200, "agent poll (304)": 304, "quota webhook": 200}
WEBHOOK_GROUPS = 64


# --- where the CPU went ----------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid → (parent pid, CPU seconds used so far) of every process."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    text = stat.read()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2 :].split()
            table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return table


def _machine_busy() -> tuple[int, int]:
    """(busy, all) jiffies of the machine since boot, every core."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)


class CpuMeter:
    """CPU used during a measurement, per named process tree (a root pid and its descendants),
    by this process alone (``own``: the load generator), and by the rest of the machine (other users)."""

    def __init__(self, trees: dict[str, list[int]], own: str = "load generator") -> None:
        self.trees, self.own = trees, own
        self._start, self._machine, self._wall = _proc_table(), _machine_busy(), time.monotonic()

    def report(self) -> str:
        end, (busy, total), wall = _proc_table(), _machine_busy(), time.monotonic() - self._wall
        children: dict[int, list[int]] = defaultdict(list)
        for pid, (parent, _) in end.items():
            children[parent].append(pid)
        used = {pid: seconds - self._start.get(pid, (0, 0.0))[1] for pid, (_, seconds) in end.items()}
        shares, assigned = {self.own: used.get(os.getpid(), 0.0)}, {os.getpid()}
        for name, roots in self.trees.items():
            members, frontier = set(), list(roots)
            while frontier:
                pid = frontier.pop()
                if pid not in members and pid not in assigned:
                    members.add(pid)
                    frontier.extend(children.get(pid, ()))
            shares[name] = sum(used.get(pid, 0.0) for pid in members)
            assigned |= members
        cores = os.cpu_count() or 1
        machine = (busy - self._machine[0]) / max(total - self._machine[1], 1) * cores * 100
        parts = [f"{name} {seconds / wall * 100:.0f}%" for name, seconds in shares.items()]
        other = machine - sum(shares.values()) / wall * 100
        return (f"CPU (% of one core; {cores} cores = {cores * 100}%): " + ", ".join(parts) +
                f", other processes {max(other, 0):.0f}%, idle {max(cores * 100 - machine, 0):.0f}%")


# --- the private deployment -------------------------------------------------------------------


def production_env(database_url: str, redis_url: str, var_dir: Path) -> dict[str, str]:
    return {"MERIDIAN_ENV": "production", "SECRET_KEY": secrets.token_urlsafe(50), "DATABASE_URL": database_url,
            "REDIS_URL": redis_url, "ALLOWED_HOSTS": "127.0.0.1,localhost", "SECURE_SSL_REDIRECT": "false",
            "MERIDIAN_PROXY_COUNT": "1", "MERIDIAN_VAR_DIR": str(var_dir)}


def setup_django(env: dict[str, str]) -> None:
    """This process on the private deployment, as one more process of it (the database is
    migrated already, by the README's command)."""
    for inherited in ("MERIDIAN_WORKER_CONCURRENCY", "MERIDIAN_SHARDS", "DATABASE_POOL", "BENCH_DATABASE_URL"):
        os.environ.pop(inherited, None)
    os.environ.update(env, LOG_LEVEL="WARNING", DJANGO_SETTINGS_MODULE="config.settings")
    import django

    django.setup()
    from core.jobs import load_task_modules

    load_task_modules()  # the first send would do it, inside a timed round


def postmaster_pid(pg: PrivatePostgres) -> int:
    return int((pg.data / "postmaster.pid").read_text().split()[0])


def stop(meridian: Meridian, name: str, timeout: float = 60) -> None:
    """SIGTERM (running tasks finish, as a rolling restart does); kill -9 what is left after ``timeout``."""
    proc = meridian.procs.get(name)
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
        meridian.procs.pop(name, None)
    except subprocess.TimeoutExpired:
        print(f"  ({name} did not stop within {timeout:.0f} s: killed)")
        meridian.kill(name)


# --- 1. shard workers -------------------------------------------------------------------------


def shard_round(meridian: Meridian, count: int, specs: list, trees: dict[str, list[int]], timeout: float) -> dict:
    from django.db import transaction

    from core.context import acting_as
    from core.models import Job
    from core.worker_signals import live_workers
    from fleet import services
    from fleet.models import Cluster, Node, Pod
    from fleet.simstore import config_for

    names = [spec.name for spec in specs]
    with transaction.atomic():
        Cluster.objects.filter(name__in=names).delete()  # the same clusters, fresh, every round
    workers = [f"worker-{count}-{i}" for i in range(count)]
    for name in workers:
        meridian.start_worker(name)
    try:
        prefixes = [meridian.worker_node(name) for name in workers]
        wait_until(lambda: sum(any(w.startswith(p) for p in prefixes) for w in live_workers()) >= count, timeout=120,
                   what=f"{count} workers to be ready")
        last_job = Job.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        meter = CpuMeter({"workers": [meridian.procs[name].pid for name in workers], **trees}, own="bench process")
        with acting_as("system:bench"), transaction.atomic():
            for spec in specs:
                services.register_cluster({"name": spec.name, "connector": "simulated", "connector_config": config_for(spec)})
            started = time.time()  # the syncs are sent as this transaction commits
        syncs = list(Job.objects.filter(pk__gt=last_job, task_name=services.SYNC_TASK).values_list("pk", flat=True))
        assert len(syncs) == len(specs), f"{len(syncs)} sync jobs for {len(specs)} clusters"
        wait_until(lambda: not Job.objects.filter(pk__in=syncs).exclude(status__in=Job.FINISHED).exists(), timeout=timeout,
                   interval=0.1, what=f"{len(syncs)} syncs to finish with {count} workers")
        cpu = meter.report()
        wait_until(lambda: not Job.objects.filter(pk__gt=last_job).exclude(status__in=Job.FINISHED).exists(), timeout=timeout,
                   interval=0.1, what="the syncs' follow-up jobs to finish")
        jobs = list(Job.objects.filter(pk__gt=last_job).values("pk", "task_name", "status", "error", "finished"))
    finally:
        for name in workers:
            stop(meridian, name)
    failed = [job for job in jobs if job["status"] != Job.Status.SUCCEEDED]
    for job in failed[:5]:
        print(f"  job {job['pk']} {job['task_name']} {job['status']}: {job['error'][:300]}")
    synced_at = max(job["finished"].timestamp() for job in jobs if job["pk"] in syncs)
    settled_at = max(job["finished"].timestamp() for job in jobs)
    return {"workers": count, "seconds": synced_at - started, "settled": settled_at - started, "cpu": cpu,
            "syncs": len(syncs), "followups": len(jobs) - len(syncs), "failed": len(failed),
            "nodes": Node.objects.filter(cluster__name__in=names).count(),
            "pods": Pod.objects.filter(cluster__name__in=names).count()}


def bench_workers(meridian: Meridian, args, trees: dict[str, list[int]]) -> None:
    from fleet.simulator import large_fleet

    specs = large_fleet(clusters=args.clusters, nodes=args.clusters * args.nodes)
    print(f"== shard workers: {args.clusters} simulated clusters × {args.nodes} nodes, first syncs all queued at once; "
          "`manage.py meridian_worker --shards all`, 2 pool processes each")
    rounds = []
    for count in args.workers:
        result = shard_round(meridian, count, specs, trees, args.timeout)
        rounds.append(result)
        base = rounds[0]
        ratio = base["seconds"] / result["seconds"]
        print(f"{count} worker process(es) ({2 * count} pool processes): {result['syncs']} syncs in {result['seconds']:.1f} s: "
              f"{result['syncs'] / result['seconds']:.2f} syncs/s, {result['nodes'] / result['seconds']:,.0f} nodes/s "
              f"({result['nodes']:,} nodes, {result['pods']:,} pods); {ratio:.2f}x the {base['workers']}-process figure"
              + (f"; {result['failed']} job(s) FAILED" if result["failed"] else ""))
        print(f"  follow-up jobs ({result['followups']}: node config matching, quota charges) all done at "
              f"{result['settled']:.1f} s ({base['settled'] / result['settled']:.2f}x)")
        print(f"  {result['cpu']}")


# --- 2. web -----------------------------------------------------------------------------------


def web_fixtures(nodes: int) -> dict:
    """A cluster of ``nodes`` nodes whose agents poll (configs matched, ETags in Redis), its
    tokens, an API token, quota groups the webhook charges."""
    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from core.context import acting_as
    from core.models import APIToken
    from core.sql import insert_rows
    from fleet.models import Cluster, Node
    from fleet.tokens import issue_token
    from nodeconfig.agent import effective_config
    from nodeconfig.etags import refresh_etags
    from nodeconfig.models import ConfigType
    from nodeconfig.reconcile import reconcile
    from quotas import services as quota_services

    cluster = Cluster.objects.create(name="agents", connector=Cluster.ConnectorKind.KUBERNETES, ready=True)
    defaults = {f.attname: f.get_default() for f in Node._meta.concrete_fields if not f.primary_key}
    insert_rows(Node, [defaults | {"cluster_id": cluster.pk, "name": f"n{i:05d}", "labels": {"pool": f"p{i % 10}"}, "ready": True}
                       for i in range(nodes)], timezone.now())
    node_ids = list(Node.objects.filter(cluster=cluster).values_list("pk", flat=True))
    with acting_as("system:bench"):
        reconcile(ConfigType.objects.get(name="AdminQoSConfiguration"), node_ids=node_ids)
        for g in range(WEBHOOK_GROUPS):
            quota_services.create_group(name=f"ha-{g}", parent=None, hard={"limits.cpu": "100000000", "pods": "100000000"})
    refresh_etags(node_ids)
    user = User.objects.create_user("bench-ha", password=secrets.token_urlsafe(20))
    user.groups.add(Group.objects.get(name="admin"))
    polling = Node.objects.filter(cluster=cluster).select_related("cluster")
    return {"api": APIToken.issue(user)[1], "agent": issue_token(cluster, "agent")[1],
            "webhook": issue_token(cluster, "webhook")[1], "etags": {node.name: effective_config(node)[1] for node in polling}}


def webhook_request(token: str, name: str, group: str) -> bytes:
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": name, "operation": "CREATE", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "name": name, "namespace": "bench",
        "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": name, "namespace": "bench", "labels": {"biz.group.resource.quota": group}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "app", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}}}).encode()
    return (b"POST /api/admission/v1/quotas/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def mix(fixtures: dict, prefix: str, count: int) -> list[bytes]:
    """``count`` requests in ``MIX`` proportions, shuffled; every webhook review a new Deployment."""
    per = count // sum(MIX.values()) + 1
    agents = [(f"GET /api/agent/v1/clusters/agents/nodes/{node}/config HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Authorization: Bearer {fixtures['agent']}\r\nIf-None-Match: {etag}\r\n\r\n").encode()
              for node, etag in fixtures["etags"].items()]
    listing = (f"GET /api/v1/fleet/clusters/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n"
               f"Authorization: Token {fixtures['api']}\r\n\r\n").encode()
    out = [listing] * (per * MIX["REST list"])
    out += [agents[i % len(agents)] for i in range(per * MIX["agent poll (304)"])]
    out += [webhook_request(fixtures["webhook"], f"{prefix}-{i}", f"ha-{i % WEBHOOK_GROUPS}")
            for i in range(per * MIX["quota webhook"])]
    random.Random(prefix).shuffle(out)
    return out


def kind_of(request: bytes) -> str:
    return "quota webhook" if request.startswith(b"POST") else "agent poll (304)" if b"/api/agent/" in request else "REST list"


def check_answers(port: int, fixtures: dict, prefix: str) -> None:
    """One request of each kind answered as expected through ``port``, before it is measured."""
    import http.client

    for raw in mix(fixtures, prefix, sum(MIX.values()) * 3):
        kind = kind_of(raw)
        head, body = raw.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        method, path, _ = lines[0].split(" ")
        headers = dict(line.split(": ", 1) for line in lines[1:] if not line.startswith("Host"))
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request(method, path, body=body or None, headers=headers)
        response = connection.getresponse()
        text = response.read()
        connection.close()
        if response.status != EXPECTED[kind]:
            raise RuntimeError(f"{kind} through port {port}: HTTP {response.status} (expected {EXPECTED[kind]}): {text[:300]!r}")
        if kind == "quota webhook" and not json.loads(text)["response"]["allowed"]:
            raise RuntimeError(f"quota webhook denied a review: {text[:300]!r}")


def bench_web(meridian: Meridian, args, trees: dict[str, list[int]]) -> None:
    started = time.perf_counter()
    fixtures = web_fixtures(args.web_nodes)
    print(f"== web: closed-loop callers ({args.callers}), {args.seconds:.0f} s each, mix per 9 requests: "
          + ", ".join(f"{n} {kind}" for kind, n in MIX.items())
          + f"; {args.web_nodes:,} polling nodes, {WEBHOOK_GROUPS} quota groups (fixtures {time.perf_counter() - started:.1f} s)")
    one = meridian.start_web("web-1", workers=1)
    if args.web_layout == "instances":
        two, two_names, layout = [one, meridian.start_web("web-2", workers=1)], ["web-1", "web-2"], "2 instances × --workers 1"
    else:
        two, two_names, layout = [meridian.start_web("web-2x", workers=2)], ["web-2x"], "1 instance × --workers 2"
    configurations = [("1 process, straight to uvicorn (no proxy)", None, ["web-1"]),
                      ("1 process behind nginx", [one], ["web-1"]),
                      (f"2 processes behind nginx ({layout})", two, two_names)]
    results = {}
    per_run = max(2000, int(args.seconds * 2500))
    for index, (label, upstreams, names) in enumerate(configurations):
        nginx = Nginx(upstreams).start() if upstreams else None
        try:
            port = nginx.port if nginx else one
            check_answers(port, fixtures, f"check{index}")
            load(port, mix(fixtures, f"warm{index}", 2000), 2.0, args.callers)
            meter = CpuMeter({"web": [meridian.procs[name].pid for name in names],
                              **({"nginx": [nginx.proc.pid]} if nginx else {}), **trees})
            results[label] = (load(port, mix(fixtures, f"run{index}", per_run), args.seconds, args.callers, kind=kind_of),
                              meter.report())
        finally:
            if nginx:
                nginx.close()
    direct, behind_one, behind_two = (results[c[0]][0] for c in configurations)
    for label, (result, cpu) in results.items():
        unexpected = {status: n for status, n in result.statuses.items() if status not in EXPECTED.values()}
        print(f"{label}: {result.rps:,.0f} requests/s, p50 {result.p50 * 1000:.1f} ms, p99 {result.p99 * 1000:.1f} ms, "
              f"statuses {result.statuses}" + (f"  UNEXPECTED {unexpected}" if unexpected else ""))
        print("  " + "; ".join(f"{kind}: {rps:,.0f}/s p50 {p50 * 1000:.1f} ms p99 {p99 * 1000:.1f} ms"
                               for kind, (rps, p50, p99) in sorted(result.kinds.items())))
        print(f"  {cpu}")
    print(f"2 vs 1 web process behind nginx: {behind_two.rps / behind_one.rps:.2f}x requests/s "
          f"(p99 {behind_two.p99 * 1000:.1f} vs {behind_one.p99 * 1000:.1f} ms)")
    print(f"nginx's own cost at 1 process: {behind_one.rps / direct.rps:.2f}x the requests/s straight to uvicorn "
          f"(p50 {behind_one.p50 * 1000:.1f} vs {direct.p50 * 1000:.1f} ms; nginx opens a new upstream connection per request, "
          "as the production configuration has no upstream keep-alive)")


# --- main -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=40)
    parser.add_argument("--nodes", type=int, default=300, help="nodes per cluster")
    parser.add_argument("--workers", type=lambda s: [int(n) for n in s.split(",")], default=[1, 2, 4],
                        help="worker process counts, comma-separated; the first is the baseline")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a round's syncs may take")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load per web configuration")
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--web-nodes", type=int, default=2000, help="nodes whose agents poll")
    parser.add_argument("--web-layout", choices=("instances", "workers"), default="instances")
    parser.add_argument("--skip-workers", action="store_true")
    parser.add_argument("--skip-web", action="store_true")
    args = parser.parse_args()
    try:
        PrivatePostgres._bin_dir()
    except RuntimeError as exc:
        print(f"bench_ha: skipped: {exc} (it runs a PostgreSQL of its own)")
        return
    if not args.skip_web and not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()):
        print("bench_ha: skipped: no nginx (apt-get install nginx-light), or pass --skip-web")
        return

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up (below) when stopped, too
    var_dir = Path(tempfile.mkdtemp(prefix="meridian-bench-ha-"))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, var_dir, ignore_errors=True)
        started = time.perf_counter()
        pg = PrivatePostgres()
        cleanup.callback(pg.close)
        pg.init()
        redis = PrivateRedis()
        cleanup.callback(redis.close)
        redis.start()
        env = production_env(pg.url, redis.url, var_dir)
        meridian = Meridian(database_url=pg.url, redis_url=redis.url, var_dir=var_dir, extra_env=env)
        meridian.env.pop("DATABASE_POOL", None)  # the production default: the pool on
        cleanup.callback(meridian.close)
        meridian.manage("migrate", "--noinput", timeout=600)
        setup_django(env)
        print(f"private PostgreSQL :{pg.port} and Redis :{redis.port}, migrated in {time.perf_counter() - started:.0f} s; "
              f"production mode; {os.cpu_count()} cores")
        trees = {"PostgreSQL": [postmaster_pid(pg)], "Redis": [redis.proc.pid]}
        try:
            if not args.skip_workers:
                bench_workers(meridian, args, trees)
            if not args.skip_web:
                bench_web(meridian, args, trees)
        except Exception:  # what the processes said last (not when stopped: SIGTERM, ^C)
            for name in sorted(p.name for p in var_dir.glob("*.log")):
                print(f"--- {name} (end)\n{meridian.log(name.removesuffix('.log'))[-2000:]}", file=sys.stderr)
            raise
        finally:
            from django.db import connections

            connections.close_all()  # before the database stops


if __name__ == "__main__":
    main()
