"""A mixed load, as production sees it: node agents polling, API servers calling the quota
webhook, and a paced rollout moving through the fleet — at once, on PostgreSQL.

Prints, per stream, requests/s, p50/p99 and errors (not pass/fail):

* 10,000 simulated node agents, each polling every 30 s (≈333 requests/s, paced), answered
  304 from the fast path until the rollout reaches them, then 200 with the new config;
* 64 webhook callers paced at 500 decisions/s (every review admitted and committed);
* a rollout of a config target over the 10,000 nodes in waves of 10%, reconciled by a real
  Celery worker (beat running), a wave released every 3 s (as an operator pressing
  "advance": agents here poll but do not report), while both streams run.

Goals: 0 errors on every stream; webhook p99 ≤50 ms; agent p99 ≤100 ms.

    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/meridian_bench python bench/bench_mixed.py [--seconds 60]

Needs PostgreSQL (``BENCH_DATABASE_URL``; the database is created if missing and emptied of
Meridian's rows) and a Redis (``REDIS_URL``, default db 12 of the local server).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from http_load import CpuShares, load, serve  # noqa: E402

NODES = 10_000
POLL_SECONDS = 30
WEBHOOK_RATE = 500
WEBHOOK_CALLERS = 64
AGENT_CONNECTIONS = 64


def setup(database_url: str) -> None:
    import psycopg

    base, _, name = database_url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["MERIDIAN_VAR_DIR"] = tempfile.mkdtemp(prefix="meridian-bench-mixed-")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/12")
    os.environ["DATABASE_URL"] = database_url
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    call_command("migrate", verbosity=0)  # roles and seed config types again after the flush


def build_fleet() -> dict:
    """10,000 nodes of one cluster, their node configs, tokens, 64 quota groups."""
    from django.utils import timezone

    from core.context import acting_as
    from core.redis import get_redis
    from fleet.models import Cluster, Node
    from core.sql import insert_rows
    from fleet.tokens import issue_token
    from nodeconfig.etags import refresh_etags
    from nodeconfig.models import ConfigType
    from nodeconfig.reconcile import reconcile
    from quotas import services as quota_services

    get_redis().flushdb()
    cluster = Cluster.objects.create(name="c1", connector=Cluster.ConnectorKind.KUBERNETES, ready=True)
    defaults = {f.attname: f.get_default() for f in Node._meta.concrete_fields if not f.primary_key}
    rows = [defaults | {"cluster_id": cluster.pk, "name": f"n{i:05d}", "labels": {"pool": f"p{i % 10}"}, "ready": True}
            for i in range(NODES)]
    insert_rows(Node, rows, timezone.now())
    config_type = ConfigType.objects.get(name="AdminQoSConfiguration")
    with acting_as("system:bench"):
        reconcile(config_type)
        for g in range(WEBHOOK_CALLERS):
            quota_services.create_group(name=f"mix-{g}", parent=None, hard={"limits.cpu": "100000000"})
    refresh_etags(list(Node.objects.filter(cluster=cluster).values_list("pk", flat=True)))
    return {"agent": issue_token(cluster, "agent")[1], "webhook": issue_token(cluster, "webhook")[1],
            "type": config_type.pk}


def agent_requests(token: str) -> list[bytes]:
    from fleet.models import Node
    from nodeconfig.agent import effective_config

    out = []
    for node in Node.objects.select_related("cluster").order_by("name"):
        _, etag = effective_config(node)
        out.append((f"GET /api/agent/v1/clusters/c1/nodes/{node.name}/config HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {token}\r\nIf-None-Match: {etag}\r\n\r\n").encode())
    random.Random(3).shuffle(out)
    return out


def webhook_requests(token: str, count: int) -> list[bytes]:
    out = []
    for i in range(count):
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": f"mix-{i}", "operation": "CREATE", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"}, "name": f"mix-{i}",
            "namespace": "bench", "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
                "name": f"mix-{i}", "namespace": "bench", "labels": {"biz.group.resource.quota": f"mix-{i % WEBHOOK_CALLERS}"}},
                "spec": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "app", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}}}).encode()
        out.append(b"POST /api/admission/v1/quotas/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: " + str(len(body)).encode() +
                   b"\r\n\r\n" + body)
    return out


def start_rollout(type_id: int) -> int:
    from core.context import acting_as
    from nodeconfig.models import ConfigType
    from nodeconfig.services import TargetSpec, save_target

    config_type = ConfigType.objects.get(pk=type_id)
    with acting_as("system:bench"):
        target, _ = save_target(config_type, TargetSpec(
            name="mixed-rollout", config={"reclaimedResourceConfig": {"enableReclaim": False}}, wave_size="10%",
            wave_interval_seconds=2, failure_threshold_percent=100), reason="mixed load")
    return target.pk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    database_url = os.environ.get("BENCH_DATABASE_URL")
    if not database_url or not database_url.startswith("postgres"):
        print("bench_mixed: set BENCH_DATABASE_URL to a PostgreSQL database (e.g. postgres://postgres@127.0.0.1:5432/meridian_bench)")
        return
    setup(database_url)
    started = time.perf_counter()
    fleet = build_fleet()
    agents, hooks = agent_requests(fleet["agent"]), webhook_requests(fleet["webhook"], 200_000)
    print(f"fleet of {NODES:,} nodes, {WEBHOOK_CALLERS} quota groups, tokens: {time.perf_counter() - started:.1f} s")

    env = dict(os.environ)
    server, port = serve("config.asgi:application", env, str(ROOT))
    worker = subprocess.Popen([sys.executable, "manage.py", "meridian_worker", "--concurrency", "1", "--loglevel", "WARNING"],
                              cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    beat = subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "WARNING"], cwd=ROOT, env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL)
    try:
        load(port, agents[:2000], 2.0, AGENT_CONNECTIONS)  # warm the token and ETag caches
        load(port, hooks[-2000:], 2.0, WEBHOOK_CALLERS, rate=WEBHOOK_RATE)
        from nodeconfig.models import ConfigTarget
        from nodeconfig.rollout import progress

        target_id = start_rollout(fleet["type"])
        results: dict[str, object] = {}
        stop = threading.Event()

        def advance() -> None:
            from django.db import connection

            from nodeconfig.rollout import advance_rollout
            while not stop.wait(3.0):
                advance_rollout(ConfigTarget.objects.get(pk=target_id), force=True)
            connection.close()
        shares = CpuShares(server.pid)
        threads = [
            threading.Thread(target=lambda: results.__setitem__(
                "agents", load(port, agents, args.seconds, AGENT_CONNECTIONS, rate=NODES / POLL_SECONDS))),
            threading.Thread(target=lambda: results.__setitem__(
                "webhook", load(port, hooks, args.seconds, WEBHOOK_CALLERS, rate=WEBHOOK_RATE))),
        ]
        operator = threading.Thread(target=advance)
        operator.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stop.set()
        operator.join()
        cpu = shares.report()
        target = ConfigTarget.objects.select_related("config_type", "revision").get(pk=target_id)
        rollout = progress(target)
    finally:
        for proc in (worker, beat):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        server.terminate()
        server.wait()

    def errors(result) -> int:
        return sum(n for status, n in result.statuses.items() if status >= 400)

    agents_load, hooks_load = results["agents"], results["webhook"]
    print(f"agents ({NODES:,} polling every {POLL_SECONDS} s, {AGENT_CONNECTIONS} connections): {agents_load.rps:,.0f} req/s, "
          f"p50 {agents_load.p50 * 1000:.1f} ms, p99 {agents_load.p99 * 1000:.1f} ms, statuses {agents_load.statuses}, "
          f"errors {errors(agents_load)} (goal p99 ≤100 ms, 0 errors)")
    print(f"webhook ({WEBHOOK_CALLERS} callers paced at {WEBHOOK_RATE}/s): {hooks_load.rps:,.0f} decisions/s, "
          f"p50 {hooks_load.p50 * 1000:.1f} ms, p99 {hooks_load.p99 * 1000:.1f} ms, statuses {hooks_load.statuses}, "
          f"errors {errors(hooks_load)} (goal p99 ≤50 ms, 0 errors)")
    print(f"rollout meanwhile: {rollout['delivered']:,} of {rollout['targeted']:,} nodes released, {rollout['applied']:,} "
          f"applied, state {rollout['rollout_state']}")
    if cpu:
        print(f"  {cpu}")


if __name__ == "__main__":
    main()
