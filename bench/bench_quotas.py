"""Quotas at scale: webhook decisions under concurrency, the full resync, the tree page.

Prints figures and ratios (not pass/fail):

1. webhook decisions/s and p50/p99 latency at 64 concurrent callers through uvicorn (goal
   ≥500/s, p99 ≤30 ms on PostgreSQL): every request admitted and committed (the costly
   case), spread over 64 groups, and all on one hot group; against a bare ASGI endpoint
   measured in the same run;
2. full resync of 5,000 groups and 100,000 workloads (goal ≤30 s), then a no-change pass;
3. the tree page for 5,000 groups (goal ≤500 ms server time).

    python bench/bench_quotas.py [--groups 5000] [--workloads 100000] [--seconds 5] [--webhook-only]

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from django_setup import add_sizes, setup_from_command_line  # noqa: E402
from http_load import CpuShares, bare_baseline, load, serve  # noqa: E402

CPU = ("500m", "1", "2", "4")
PACED_RATE = 500
MODELS = ("A1", "A2", "A3", "A4")


ROOT_HARD = {"limits.cpu": "100000000", "requests.cpu": "100000000", "pods": "1000000000"}
CHILD_HARD = {"limits.cpu": "100000", "requests.cpu": "100000", "pods": "1000000"}
TEAM_HARD = {"limits.cpu": "1000", "requests.cpu": "1000", "pods": "10000"}


def build_tree(groups: int) -> list[str]:
    """A realistic shape: business units (1 per 100 groups), 9 departments each, teams below."""
    from core.context import acting_as
    from quotas import services

    roots = max(1, groups // 100)
    names = [f"bu-{r}" for r in range(roots)]
    departments: list[str] = []
    with acting_as("system:bench"):
        for root in names:
            services.create_group(name=root, parent=None, hard=ROOT_HARD)
        i = 0
        while len(names) < groups:
            if len(departments) < roots * 9:
                parent, child = names[len(departments) % roots], f"dept-{len(departments)}"
                departments.append(child)
            else:
                parent, child = departments[i % len(departments)], f"team-{i}"
                i += 1
            services.create_group(name=child, parent=parent, hard=CHILD_HARD if child.startswith("dept") else TEAM_HARD)
            names.append(child)
    return names


def insert_workloads(cluster, names: list[str], count: int) -> None:
    from fleet.models import Workload
    from core.sql import insert_rows
    from django.utils import timezone

    rng = random.Random(7)
    rows = []
    for i in range(count):
        cpu = rng.choice(CPU)
        labels = {"app": f"w{i}", "biz.group.resource.quota": rng.choice(names)}
        if rng.random() < 0.3:
            labels["biz.group.resource.quota/cpu-type"] = rng.choice(MODELS)
        rows.append({"cluster_id": cluster.pk, "namespace": f"ns-{i % 50}", "api_version": "apps/v1", "kind": "Deployment",
                     "name": f"w{i}", "uid": f"uid-{i}", "labels": labels, "replicas": rng.randint(1, 6), "ready_replicas": 0,
                     "pod_requests": {"cpu": cpu, "memory": "1Gi"}, "pod_limits": {"cpu": cpu, "memory": "1Gi"},
                     "cpu_request_milli": 0, "memory_request_bytes": 0, "gpu_request": 0, "status": "", "content_hash": str(i)})
    for start in range(0, len(rows), 20_000):
        insert_rows(Workload, rows[start : start + 20_000], timezone.now())


def bench_resync(groups: int, workloads: int) -> list[str]:
    from django.utils import timezone

    from fleet.models import Cluster
    from quotas.reconcile import resync_all

    started = time.perf_counter()
    names = build_tree(groups)
    built = time.perf_counter() - started
    cluster = Cluster.objects.create(name="c1", connector="simulated", connector_config={"node_count": 1, "seed": 1},
                                     last_sync=timezone.now())
    insert_workloads(cluster, names, workloads)
    started = time.perf_counter()
    first = resync_all()
    full = time.perf_counter() - started
    started = time.perf_counter()
    again = resync_all()
    noop = time.perf_counter() - started
    print(f"tree of {groups:,} groups created through the services in {built:.1f} s")
    print(f"full resync, {groups:,} groups × {workloads:,} workloads: {full:.2f} s (goal ≤30 s), {first}")
    print(f"  again with nothing changed: {noop:.2f} s ({full / noop:.1f}× faster), {again}")
    return names


def bench_tree_page(groups: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user = get_user_model().objects.create_superuser("bench-admin", password="x")
    client = Client()
    client.force_login(user)
    client.get("/quotas/", HTTP_HOST="127.0.0.1")
    times = []
    for _ in range(5):
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/quotas/", HTTP_HOST="127.0.0.1")
        times.append(time.perf_counter() - started)
        assert response.status_code == 200
    print(f"tree page, {groups:,} groups: best {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms "
          f"server time (goal ≤500 ms), {len(queries)} queries, {len(response.content) / 1024:.0f} KiB")


def bench_webhook(seconds: float, callers: int, groups: int, workers: int = 1) -> None:
    from django.conf import settings

    from fleet.models import Cluster
    from fleet.tokens import issue_token
    from quotas import services
    from core.context import acting_as

    cluster = Cluster.objects.get(name="c1")
    _, token = issue_token(cluster, "webhook")
    with acting_as("system:bench"):
        for g in range(groups):
            services.create_group(name=f"hook-{g}", parent=None, hard={"limits.cpu": "100000000", "pods": "100000000"})
    env = dict(os.environ, REDIS_URL=settings.REDIS_URL)

    def requests(prefix: str, group_of) -> list[bytes]:
        out = []
        for i in range(60_000):
            body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": f"{prefix}-{i}", "operation": "CREATE",
                "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                "name": f"{prefix}-{i}", "namespace": "bench",
                "object": {"apiVersion": "apps/v1", "kind": "Deployment",
                           "metadata": {"name": f"{prefix}-{i}", "namespace": "bench",
                                        "labels": {"biz.group.resource.quota": group_of(i)}},
                           "spec": {"replicas": 2, "template": {"spec": {"containers": [
                               {"name": "app", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}}}).encode()
            out.append(b"POST /api/admission/v1/quotas/validate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       b"Content-Type: application/json\r\nAuthorization: Bearer " + token.encode() +
                       b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        return out

    results, cpu = {}, {}
    server, port = serve("config.asgi:application", dict(env, WEB_CONCURRENCY=str(workers)), str(ROOT))
    try:
        load(port, requests("warm", lambda i: f"hook-{i % groups}"), 1.0, callers)
        for label, group_of in (("spread over %d groups" % groups, lambda i: f"hook-{i % groups}"), ("one hot group", lambda i: "hook-0")):
            for mode, rate in (("saturated (closed loop)", None), (f"paced at {PACED_RATE}/s (open loop)", PACED_RATE)):
                bodies = requests(("paced" if rate else "") + label.split()[0], group_of)
                shares = CpuShares(server.pid)
                results[f"{mode}, {label}"] = load(port, bodies, seconds, callers, rate=rate)
                cpu[f"{mode}, {label}"] = shares.report()
    finally:
        server.terminate()
        server.wait()
    bare = bare_baseline(env, seconds, callers)
    engine = "PostgreSQL" if "postgres" in os.environ.get("DATABASE_URL", "") else "SQLite"
    for label, result in results.items():
        print(f"webhook, {callers} concurrent callers, {workers} uvicorn worker(s), {engine}, every request admitted and committed, "
              f"{label}: {result.rps:,.0f} decisions/s, p50 {result.p50 * 1000:.1f} ms, p99 {result.p99 * 1000:.1f} ms, "
              f"statuses {result.statuses} (goal ≥500/s, p99 ≤30 ms); ratio to bare ASGI {result.rps / bare.rps:.3f}")
        if cpu.get(label):
            print(f"  {cpu[label]}")
    print("  (closed loop: every caller sends again the moment it is answered, so latency is queueing: callers / rate)")
    print(f"  bare ASGI endpoint, same client: {bare.rps:,.0f} requests/s, p99 {bare.p99 * 1000:.1f} ms")


def main() -> None:
    parser = add_sizes(argparse.ArgumentParser(), groups=5000, workloads=100_000, seconds=5.0, callers=64, webhook_groups=64,
                       webhook_workers=(1, "uvicorn worker processes"))
    parser.add_argument("--webhook-only", action="store_true", help="skip the resync and the tree page")
    args = setup_from_command_line(parser)
    if args.webhook_only:
        from fleet.models import Cluster

        Cluster.objects.create(name="c1", connector="simulated", connector_config={"node_count": 1, "seed": 1})
    else:
        bench_resync(args.groups, args.workloads)
        bench_tree_page(args.groups)
    bench_webhook(args.seconds, args.callers, args.webhook_groups, args.webhook_workers)


if __name__ == "__main__":
    main()
