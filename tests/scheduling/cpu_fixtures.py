"""Shared helpers of the CPU co-location tests (``test_cpu_*.py``): nodes with a CPU topology.

The seed's host: 104 logical CPUs (2 sockets x 26 cores x 2 threads, Linux numbering), 8
reserved (whole cores, as the kubelet reserves them) -> 96 sellable.
"""

from __future__ import annotations

import json
from decimal import Decimal

from fleet.models import Cluster, Node
from fleet.simstore import config_for
from fleet.simulator import ClusterSpec
from scheduling.cpu.allocation import configure
from scheduling.cpu.cpuset import TOPOLOGY_ANNOTATION, format_cpuset, generate_topology, reserve_cpus
from scheduling.cpu.inputs import ensure_node_cpu
from scheduling.cpu.state import OVERCOMMIT_RATIO_ANNOTATION, RESERVED_CPUS_ANNOTATION

SEED_TOPOLOGY = generate_topology(sockets=2, numa_per_socket=1, cores_per_numa=26, threads_per_core=2)
SEED_RESERVED = format_cpuset(reserve_cpus(SEED_TOPOLOGY, 8))


def seed_node(cluster: Cluster, name: str = "db-host-1", *, ratio: str = "1", reserved: str = SEED_RESERVED):
    """A Node row and its NodeCPU as the seed describes the host (no connector involved)."""
    node = Node.objects.create(cluster=cluster, name=name, ready=True, cpu_topology=[list(r) for r in SEED_TOPOLOGY.rows])
    return configure(ensure_node_cpu(node), reserved_cpus=reserved, overcommit_ratio=Decimal(ratio))


def simulated_cluster(name: str = "sim-1", nodes: int = 4, seed: int = 13) -> Cluster:
    spec = ClusterSpec(name=name, region="bj", node_count=nodes, seed=seed, churn_rate=0.0, not_ready_rate=0.0,
                       label_change_rate=0.0, gpu_fraction=0.0, workloads_per_100_nodes=0)
    return Cluster.objects.create(name=name, connector=Cluster.ConnectorKind.SIMULATED, connector_config=config_for(spec))


def seed_host_annotations(ratio: str = "1") -> dict[str, str]:
    """What a node publishes to become the seed's host (the simulator's node, re-annotated)."""
    return {TOPOLOGY_ANNOTATION: SEED_TOPOLOGY.to_annotation(), RESERVED_CPUS_ANNOTATION: SEED_RESERVED,
            OVERCOMMIT_RATIO_ANNOTATION: ratio}


def instance_pod(namespace: str, name: str, node: str, *, cpu: str, limit: str | None = None, app: str = "",
                 annotations: dict | None = None) -> dict:
    """A bare pod bound to ``node`` (a database instance created after its CPUs were allocated)."""
    resources = {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": limit or cpu, "memory": "1Gi"}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": app or name},
                         "annotations": dict(annotations or {})},
            "spec": {"nodeName": node, "containers": [{"name": "engine", "image": "mysql:8", "resources": resources}]}}


def annotations_of(connector, namespace: str, name: str) -> dict:
    pod = connector.get("v1", "Pod", name, namespace=namespace)
    return dict((pod or {}).get("metadata", {}).get("annotations") or {})


def cpus_of(annotations: dict) -> list[int]:
    return json.loads(annotations["alloc-status"])["cpu"] if "alloc-status" in annotations else []


def synced_host(ratio: str = "1"):
    """A simulated cluster synced once, its first node re-annotated as the seed's host and
    reconciled: (cluster, node name, NodeCPU). No generated pod runs there (seed 13)."""
    from fleet.services import connector_for
    from fleet.sync import sync_cluster
    from scheduling.cpu.reconcile import reconcile_cluster
    from scheduling.models import NodeCPU

    cluster = simulated_cluster()
    with connector_for(cluster) as connector:
        sync_cluster(cluster, connector)
        name = sorted(n.name for n in cluster.nodes.all())[0]
        connector.patch("v1", "Node", name, {"metadata": {"annotations": seed_host_annotations(ratio)}})
        reconcile_cluster(cluster, connector)
    return cluster, name, NodeCPU.objects.get(cluster=cluster, name=name)
