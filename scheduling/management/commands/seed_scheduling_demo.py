"""Seed the CPU co-location demo: every demo node's CPU topology, and the seed's example host.

Nodes get a ``NodeCPU`` from the topology the simulator publishes (bulk, from the inventory);
one node of the first cluster is re-annotated as the seed's host (104 logical CPUs, 8
reserved, overcommit 2, two NVMe queues) and runs the seed's customer: two exclusive
database instances (32 CPUs SameCoreFirst, 16 CPUs Spread) and two shared ones, as bare pods
whose annotations are written at once, so its CPU map shows the example.
"""

from __future__ import annotations

import json
import time

from django.db import transaction

from core.management.demo import DemoSeedCommand
from fleet.models import Cluster, Node
from fleet.services import connector_for
from scheduling.cpu import allocation, delivery, reconcile, store
from scheduling.cpu.cpuset import (
    IO_QUEUES_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    CPUTopology,
    format_cpuset,
    generate_topology,
    reserve_cpus,
)
from scheduling.cpu.state import OVERCOMMIT_RATIO_ANNOTATION, RESERVED_CPUS_ANNOTATION, NodeCPUState
from scheduling.models import NodeCPU

SEED_HOST = generate_topology(sockets=2, numa_per_socket=1, cores_per_numa=26, threads_per_core=2)
INSTANCES = (
    ("exclusive", "mysql-core-a", {"request": 32, "strategy": "SameCoreFirst"}),
    ("exclusive", "mysql-core-b", {"request": 16, "strategy": "Spread"}),
    ("shared", "mysql-edge-a", {"request_milli": 8000, "limit_milli": 8000}),
    ("shared", "mysql-edge-b", {"request_milli": 4000, "limit_milli": 8000}),
)


class Command(DemoSeedCommand):
    help = "Seed CPU topologies for the demo fleet's nodes and the seed's exclusive/shared example host."

    demo, seeded = "CPU co-location demo", "node CPU states"

    def already_seeded(self) -> bool:
        return NodeCPU.objects.exists()

    def seed(self, **options) -> None:
        if not Cluster.objects.exists():
            self.stdout.write("CPU co-location demo: no clusters; run seed_demo first")
            return
        started = time.perf_counter()
        created = self._topologies()
        host = self._example()
        self.stdout.write(f"CPU co-location demo: {created} node topologies, example host {host} "
                          f"in {time.perf_counter() - started:.1f}s")

    def _topologies(self) -> int:
        """A NodeCPU per inventory node that has a topology (bulk; the reconciler adds pods later)."""
        have = set(NodeCPU.objects.values_list("node_id", flat=True))
        cache: dict[str, tuple[dict, dict]] = {}
        batch = []
        for node in Node.objects.exclude(cpu_topology__isnull=True).only("pk", "name", "cluster_id", "cpu_topology").iterator():
            if node.pk in have:
                continue
            key = json.dumps(node.cpu_topology, separators=(",", ":"))
            if key not in cache:
                topology = CPUTopology.from_rows(node.cpu_topology)
                cache[key] = (store.topology_columns(topology), store.summary_values(NodeCPUState(topology)))
            columns, summary = cache[key]
            batch.append(NodeCPU(node_id=node.pk, cluster_id=node.cluster_id, name=node.name, **columns, **summary))
        NodeCPU.objects.bulk_create(batch, batch_size=2000)
        return len(batch)

    def _example(self) -> str:
        cluster = Cluster.objects.order_by("name").first()
        with connector_for(cluster) as connector:
            pods = connector.list_pods().items
            busy = {p["spec"].get("nodeName") for p in pods if p.get("spec", {}).get("nodeName")}
            names = sorted(cluster.nodes.values_list("name", flat=True))
            name = next((n for n in names if n not in busy), names[0])
            annotations = {
                TOPOLOGY_ANNOTATION: SEED_HOST.to_annotation(),
                RESERVED_CPUS_ANNOTATION: format_cpuset(reserve_cpus(SEED_HOST, 8)),
                OVERCOMMIT_RATIO_ANNOTATION: "2",
                IO_QUEUES_ANNOTATION: json.dumps({"queues": {"nvme0q0": [4, 56, 30, 82], "nvme0q1": [5, 57, 31, 83]}}),
            }
            connector.patch("v1", "Node", name, {"metadata": {"annotations": annotations}})
            with transaction.atomic():
                NodeCPU.objects.filter(cluster=cluster, name=name).delete()  # the demo host is new hardware
            reconcile.reconcile_cluster(cluster, connector, node_names=[name])
            node = NodeCPU.objects.get(cluster=cluster, name=name)
            for mode, pod_name, spec in INSTANCES:
                if node.allocations.filter(pod_name=pod_name).exists():
                    continue
                if mode == "exclusive":
                    allocation.allocate_exclusive(node, namespace="db", name=pod_name, app=pod_name, reason="demo: seed example",
                                           **spec)
                    cpu = str(spec["request"])
                    notes = {"cpu-isolate-mode": "exclusive"}
                else:
                    allocation.place_shared(node, namespace="db", name=pod_name, app=pod_name, reason="demo: seed example", **spec)
                    cpu, notes = f"{spec['request_milli']}m", {}
                connector.apply(_pod(pod_name, name, cpu, spec.get("limit_milli"), notes))
            delivery.deliver(node.pk, connector)
            reconcile.reconcile_cluster(cluster, connector, node_names=[name])
        return f"{cluster.name}/{name}"


def _pod(name: str, node: str, cpu: str, limit_milli: int | None, annotations: dict) -> dict:
    limit = f"{limit_milli}m" if limit_milli else cpu
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "db", "labels": {"app": name}, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "engine", "image": "mysql:8.0",
                                                       "resources": {"requests": {"cpu": cpu, "memory": "8Gi"},
                                                                     "limits": {"cpu": limit, "memory": "8Gi"}}}]}}
