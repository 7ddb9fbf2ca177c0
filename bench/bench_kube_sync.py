"""Inventory sync of one large cluster through the Kubernetes connector, over HTTP.

A 10,000-node cluster (nodes and one pod per node) served by ``tests.kubeapi``'s API server
emulator; the cluster is synced as the sync task does it, through this process's informers.
Prints: the first sync (a paged list of every kind), how soon a label change is in the
inventory (the sync after it), and the API load at steady state — requests a sync costs, and
per minute at the periodic cadence (15 s) — against the full lists every sync did before
(``fleet.sync.read_cluster``, measured in the same run). Goal: requests per minute
independent of the node count. Then the deployed path, a cluster watched between syncs
(``fleet.informer.Watcher``): a label change from the API server to the inventory (goal
≤2 s) and the requests of a quiet minute.

    python bench/bench_kube_sync.py [--nodes 10000]

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from django_setup import add_sizes, setup_from_command_line  # noqa: E402

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
    args = setup_from_command_line(add_sizes(argparse.ArgumentParser(), nodes=10_000,
                                             quiet_seconds=(60.0, "how long the watched cluster's API load is counted")))

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

        changed = min(7, args.nodes - 1)
        api.put("v1/nodes", node(changed, pool="b"))
        changed_at = time.perf_counter()
        synced(informers=informers)
        visible = time.perf_counter() - changed_at
        assert Node.objects.get(cluster=cluster, name=f"n{changed:05d}").labels["pool"] == "b"
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
    watched(args.nodes, args.quiet_seconds)


def watched(nodes: int, quiet_seconds: float) -> None:
    """The deployed path: the periodic sync task lists the cluster and starts its watcher; a
    label change is then timed from the API server's write to the inventory row, and the API
    requests of a quiet period are counted (watch renewals and the writer's 15 s writes)."""
    from statistics import median

    from core.context import acting_as
    from fleet import informer
    from fleet.models import Cluster, Node
    from fleet.tasks import sync_cluster_task
    from tests.kubeapi import ApiServer, kubeconfig, serve

    api = ApiServer(token="bench")
    for i in range(nodes):
        api.put("v1/nodes", node(i))
        api.put("v1/pods", pod(i))
    with serve(api) as url, acting_as("system:bench"):
        Cluster.objects.filter(name="watched").delete()
        cluster = Cluster.objects.create(name="watched", connector="kubernetes", credentials=kubeconfig(url, "bench"))
        assert sync_cluster_task("watched")["ok"], "the periodic sync lists and starts the watcher"
        latencies = []
        for round_ in range(5):
            index, pool = round_ * 101 % nodes, f"w{round_}"  # nodes spread over the cluster, any size
            name = f"n{index:05d}"
            api.put("v1/nodes", node(index, pool=pool))
            changed_at = time.perf_counter()
            while Node.objects.get(cluster=cluster, name=name).labels["pool"] != pool:
                time.sleep(0.01)
            latencies.append(time.perf_counter() - changed_at)
        print(f"watched: label change visible after {median(latencies):.2f} s median, {max(latencies):.2f} s worst of 5 "
              f"(goal ≤2 s: {'met' if max(latencies) <= 2 else 'MISSED'})")
        before = len(api.requests)
        time.sleep(quiet_seconds)
        quiet = len(api.requests) - before
        print(f"watched: {quiet} requests in {quiet_seconds:.0f} quiet seconds ({quiet * 60 / quiet_seconds:.0f}/min, "
              "watch renewals and the writer's 15 s writes)")
        informer.forget()


if __name__ == "__main__":
    main()
