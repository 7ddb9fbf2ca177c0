"""Inventory sync of one large cluster through the Kubernetes connector, over HTTP.

A 10,000-node cluster (nodes and one pod per node) served by ``tests.kubeapi``'s API server
emulator; the cluster is synced as the sync task does it, through this process's informers.
Prints: the first sync (a paged list of every kind), how soon a label change is in the
inventory (the sync after it), and the API load at steady state — requests and bytes a
sync costs, and per minute at the periodic cadence (15 s) — against the full lists every sync
did before (``fleet.sync.read_cluster``, measured in the same run). Goal: requests per minute
independent of the node count.

    python bench/bench_kube_sync.py [--nodes 10000]

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from django_setup import setup_django  # noqa: E402

CADENCE_SECONDS = 15


def node(i: int, pool: str = "a") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i:05d}", "labels": {"pool": pool, "zone": f"z{i % 3}"}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}, "capacity": {"cpu": "32", "memory": "128Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i:05d}", "namespace": "shop"},
            "spec": {"nodeName": f"n{i:05d}", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}}


def quiet_sync_requests(nodes: int) -> int:
    """Requests of one steady-state sync (after the first) of a cluster of ``nodes`` nodes."""
    from fleet.informer import ClusterInformers
    from fleet.models import Cluster
    from fleet.services import connector_for
    from fleet.sync import sync_cluster
    from tests.kubeapi import ApiServer, kubeconfig, serve

    api = ApiServer(token="bench")
    for i in range(nodes):
        api.put("v1/nodes", node(i))
    with serve(api) as url:
        cluster = Cluster.objects.create(name=f"bench-{nodes}", connector="kubernetes", credentials=kubeconfig(url, "bench"))
        informers = ClusterInformers()
        for _ in range(2):
            before = len(api.requests)
            with connector_for(cluster) as connector:
                assert sync_cluster(cluster, connector, informers=informers).ok
        return len(api.requests) - before


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10_000)
    args = parser.parse_args()
    setup_django(os.environ.get("BENCH_DATABASE_URL"))

    from django.db import connection

    from core.context import acting_as
    from fleet.informer import ClusterInformers
    from fleet.models import Cluster, Node
    from fleet.services import connector_for
    from fleet.sync import sync_cluster
    from tests.kubeapi import ApiServer, kubeconfig, serve

    api = ApiServer(token="bench")
    for i in range(args.nodes):
        api.put("v1/nodes", node(i))
        api.put("v1/pods", pod(i))
    with serve(api) as url, acting_as("system:bench"):
        Cluster.objects.filter(name="bench").delete()
        cluster = Cluster.objects.create(name="bench", connector="kubernetes", credentials=kubeconfig(url, "bench"))
        informers = ClusterInformers()

        def synced(**kwargs) -> tuple[float, int, object]:
            before = len(api.requests)
            started = time.perf_counter()
            with connector_for(cluster) as connector:
                report = sync_cluster(cluster, connector, **kwargs)
            assert report.ok, report.message
            return time.perf_counter() - started, len(api.requests) - before, report

        first, first_requests, _ = synced(informers=informers)
        print(f"cluster: {args.nodes:,} nodes, {args.nodes:,} pods; database: {connection.vendor}")
        print(f"first sync (lists):                 {first:7.2f} s   {first_requests} requests")

        api.put("v1/nodes", node(7, pool="b"))
        changed_at = time.perf_counter()
        synced(informers=informers)
        visible = time.perf_counter() - changed_at
        assert Node.objects.get(cluster=cluster, name="n00007").labels["pool"] == "b"
        print(f"label change visible after:         {visible:7.2f} s   (the next sync; it runs every {CADENCE_SECONDS} s)")

        quiet, quiet_requests, _ = synced(informers=informers)
        full, full_requests, _ = synced()
        per_minute = 60 / CADENCE_SECONDS
        print(f"steady-state sync, informers:       {quiet:7.2f} s   {quiet_requests} requests "
              f"({quiet_requests * per_minute:.0f}/min, whatever the node count)")
        print(f"steady-state sync, full lists:      {full:7.2f} s   {full_requests} requests "
              f"({full_requests * per_minute:.0f}/min, {args.nodes * 2 * per_minute:,.0f} objects/min read)")
    with acting_as("system:bench"):
        small = quiet_sync_requests(max(1, args.nodes // 10))
    print(f"steady-state sync of a cluster a tenth the size: {small} requests "
          f"(goal: independent of node count: {'met' if small == quiet_requests else 'MISSED'})")


if __name__ == "__main__":
    main()
