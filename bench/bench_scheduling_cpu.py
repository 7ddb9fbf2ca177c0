"""The fleet's sellable exclusive CPUs over 200,000 nodes, through the real query and view path.

Seeds 500 clusters and 200,000 nodes (bulk inserts) each with a ``NodeCPU`` row: its real
topology (one of the simulator's machine models) and the eight summary integers of a real
state (``cpu.fit.summarize`` of a node filled by the allocator at a random level: exclusive
instances of 2-32 CPUs, shared instances, some released again), then times, on the database:

1. ``cpu.capacity.fleet_view`` — the SQL aggregate per cluster and the fleet totals
   (plain, with "how many nodes can take 32 CPUs", and for one cluster);
2. the page of nodes the fleet page shows (best fit order, 50 rows);
3. the pages and API answers themselves through Django's test client (middleware, view,
   template; server time, no network): ``/scheduling/cpu/`` (and with all 500 clusters shown),
   ``/scheduling/cpu/?request=32``,
   ``/api/v1/scheduling/cpu/fleet/?request=32`` and the what-if page for 32 CPUs.

Goal: ≤ 300 ms server time for the fleet view over 200k nodes. Prints figures (best of N) and
the query plan of the aggregate.

    python bench/bench_scheduling_cpu.py [--clusters 500] [--nodes 200000] [--repeat 5]

Runs on a fresh SQLite database in a temporary directory, or on ``BENCH_DATABASE_URL``
(a PostgreSQL database it may fill and empty). Uses ``REDIS_URL`` or an embedded Redis.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from django_setup import setup_django, timed  # noqa: E402


def setup(database_url: str | None, var_dir: str | None = None) -> object | None:
    """Django with an embedded Redis unless ``REDIS_URL`` is set (returned, to stop it)."""
    var_dir = var_dir or tempfile.mkdtemp(prefix="meridian-bench-")
    Path(var_dir).mkdir(parents=True, exist_ok=True)
    redis = None
    if not os.environ.get("REDIS_URL"):
        from core.embedded_redis import EmbeddedRedis

        redis = EmbeddedRedis(Path(var_dir) / "redis.sock").start()
        os.environ["REDIS_URL"] = redis.url
    setup_django(database_url, var_dir=var_dir, redis_url=None)
    return redis


def summaries(rng: random.Random, per_model: int) -> dict[str, list[tuple]]:
    """Real summaries: each machine model's nodes filled by the allocator to random levels."""
    from fleet.simulator import MACHINE_MODELS, cpu_topology
    from scheduling.cpu.cpuset import AllocationError, CPUTopology, reserve_cpus
    from scheduling.cpu.fit import summarize
    from scheduling.cpu.state import NodeCPUState, SharedInstance

    pool: dict[str, list[tuple]] = {}
    for model in MACHINE_MODELS:
        text = cpu_topology(model)
        topology = CPUTopology.from_annotation(text)
        out = []
        for _ in range(per_model):
            state = NodeCPUState(topology, reserve_cpus(topology, 2 if len(topology) <= 48 else 4),
                                 overcommit_ratio=rng.choice((1, 1, 2)))
            for i in range(rng.randint(0, 3)):
                size = rng.choice((1000, 2000, 4000, 8000))
                try:
                    state = state.place_shared(SharedInstance(f"s/{i}", size, size))
                except AllocationError:
                    break
            target = rng.random() * 0.95 * state.sellable.capacity
            n = 0
            while state.sellable.sold < target:
                n += 1
                try:
                    state, _ = state.allocate_exclusive(f"e/{n}", rng.choice((2, 2, 4, 4, 8, 16, 32)),
                                                        rng.choice(("SameCoreFirst", "Spread")))
                except AllocationError:
                    break
                if rng.random() < 0.2 and state.exclusive:
                    state = state.without(rng.choice(sorted(state.exclusive)))
            out.append(tuple(summarize(state)))
        pool[model.name] = [text, topology, out]  # type: ignore[list-item]
    return pool


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--var-dir", help="keep the SQLite database here and reuse it when it holds the fleet already")
    args = parser.parse_args()
    redis = setup(os.environ.get("BENCH_DATABASE_URL"), args.var_dir)
    try:
        run(args)
    finally:
        if redis is not None:
            redis.stop()
        if not args.var_dir:  # a throwaway database: leave nothing behind
            import shutil

            shutil.rmtree(os.environ["MERIDIAN_VAR_DIR"], ignore_errors=True)


def run(args) -> None:
    from django.db import connection

    from fleet.models import Cluster
    from scheduling.models import NodeCPU

    rng = random.Random(42)
    print(f"database: {connection.vendor}; {args.clusters} clusters, {args.nodes:,} nodes")
    started = time.perf_counter()
    pool = summaries(rng, 120)
    print(f"real node summaries (allocator fills, 4 machine models x 120): {time.perf_counter() - started:6.1f} s")

    if NodeCPU.objects.count() == args.nodes and Cluster.objects.count() == args.clusters:
        print("reusing the seeded fleet")
    else:
        seed(args, rng, pool)
    measure(args)


def seed(args, rng, pool) -> None:
    import json

    from django.db import connection, transaction
    from django.utils import timezone

    from fleet.models import Cluster, Node
    from fleet.simulator import MACHINE_MODELS
    from fleet.sync import insert_rows
    from scheduling.cpu import store
    from scheduling.models import SUMMARY_FIELDS, NodeCPU

    started = time.perf_counter()
    with transaction.atomic():
        Cluster.objects.all().delete()
        Cluster.objects.bulk_create(Cluster(name=f"c-{i:03d}", connector="simulated") for i in range(args.clusters))
    cluster_ids = list(Cluster.objects.order_by("pk").values_list("pk", flat=True))
    node_defaults = {f.attname: f.get_default() for f in Node._meta.concrete_fields if not f.primary_key}
    now = timezone.now()
    models = [m.name for m in MACHINE_MODELS]
    weights = [m.weight for m in MACHINE_MODELS]
    assignments = []
    batch = 20_000
    for start in range(0, args.nodes, batch):
        rows = []
        for i in range(start, min(start + batch, args.nodes)):
            model = rng.choices(models, weights)[0]
            assignments.append(model)
            rows.append(dict(node_defaults, cluster_id=cluster_ids[i % len(cluster_ids)], name=f"n-{i:06d}", ready=True))
        with transaction.atomic():
            insert_rows(Node, rows, now)
    node_ids = list(Node.objects.order_by("pk").values_list("pk", "cluster_id", "name"))
    columns = {}
    for name, (text, topology, _) in pool.items():
        columns[name] = store.topology_columns(topology)
    cpu_defaults = {f.attname: f.get_default() for f in NodeCPU._meta.concrete_fields if not f.primary_key}
    for start in range(0, len(node_ids), batch):
        rows = []
        for (pk, cluster_id, name), model in zip(node_ids[start : start + batch], assignments[start : start + batch]):
            summary = rng.choice(pool[model][2])
            rows.append(dict(cpu_defaults, node_id=pk, cluster_id=cluster_id, name=name, **columns[model],
                             reserved_cpus="0-1" if columns[model]["cpus"] <= 48 else "0-3",
                             **dict(zip(SUMMARY_FIELDS, summary))))
        with transaction.atomic():
            insert_rows(NodeCPU, rows, now)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    else:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE scheduling_nodecpu")
    elapsed = time.perf_counter() - started
    size = NodeCPU.objects.count()
    print(f"seed 200k nodes + NodeCPU rows (bulk inserts): {elapsed:6.1f} s ({size:,} NodeCPU rows, "
          f"topology JSON {len(json.dumps(columns['A4']['topology'])):,} bytes each for A4)")


def measure(args) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from scheduling.cpu import capacity
    from scheduling.models import NodeCPU

    queryset = NodeCPU.objects.all()
    plain, view = timed(lambda: capacity.fleet_view(queryset), args.repeat)
    sized, view32 = timed(lambda: capacity.fleet_view(queryset, 32), args.repeat)
    one, _ = timed(lambda: capacity.fleet_view(queryset.filter(cluster__name="c-007"), 32), args.repeat)
    total = view32["total"]
    print(f"fleet_view SQL, {len(view['clusters'])} clusters:             {plain * 1000:7.1f} ms")
    print(f"fleet_view SQL with 'takes 32C':            {sized * 1000:7.1f} ms   ({total['fit_nodes']:,} nodes take 32C, "
          f"{total['fit_instances']:,} such instances sellable, {total['exclusive_left']:,} exclusive CPUs left, "
          f"{total['fragmentation_pct']}% fragmented)")
    print(f"fleet_view SQL, one cluster:                {one * 1000:7.1f} ms")
    page_q = queryset.filter(largest_exclusive__gte=32).select_related("cluster").order_by("-largest_exclusive", "-pk")
    page, _ = timed(lambda: list(page_q[:50]), args.repeat)
    print(f"node page (50 best, largest exclusive):     {page * 1000:7.1f} ms")
    explain = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    from django.db.models import Count

    for label, query in (
            ("aggregate per cluster", queryset.order_by().values("cluster_id").annotate(**capacity.aggregates())),
            ("nodes taking 32C", queryset.filter(largest_exclusive__gte=32).order_by().values("cluster_id").annotate(n=Count("pk")))):
        sql, params = query.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(explain + sql, params)
            plan = " | ".join(str(row[-1]) for row in cursor.fetchall())
        print(f"plan, {label}: {plan[:200]}")

    user = User.objects.filter(username="bench").first() or User.objects.create_superuser("bench", password="bench-pass-123")
    client = Client()
    client.force_login(user)
    for path in ("/scheduling/cpu/", "/scheduling/cpu/?clusters-per_page=500", "/scheduling/cpu/?request=32",
                 "/scheduling/cpu/?request=32&cluster=c-007", "/scheduling/cpu/?sort=-exclusive_left&page=100",
                 "/scheduling/cpu/?sort=cluster&cluster=c-007",
                 "/api/v1/scheduling/cpu/fleet/?request=32", "/scheduling/cpu/what-if/?request=32"):
        client.get(path, HTTP_HOST="127.0.0.1")  # warm
        best = float("inf")
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as ctx:
                started = time.perf_counter()
                status = client.get(path, HTTP_HOST="127.0.0.1").status_code
                best = min(best, time.perf_counter() - started)
        goal = "" if "what-if" in path else f"   goal ≤300 ms: {'met' if best <= 0.3 else 'MISSED'}"
        print(f"server time {path:<46} HTTP {status}  {len(ctx):3d} queries  {best * 1000:7.1f} ms{goal}")


if __name__ == "__main__":
    main()
