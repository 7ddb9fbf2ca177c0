"""Read-side queries over the inventory: fleet totals and per-cluster water levels.

Each is a fixed number of SQL statements whatever the fleet's size.
"""

from __future__ import annotations

from django.db.models import Count, Q, Sum

from .models import Cluster, Node

WATER_LEVEL_RESOURCES = (
    ("cpu", "cpu_allocatable_milli", "cpu_requested_milli", 1000),
    ("memory", "memory_allocatable_bytes", "memory_requested_bytes", 1024**3),
    ("nvidia.com/gpu", "gpu_allocatable", "gpu_requested", 1),
    ("pods", "pods_allocatable", "pod_count", 1),
)


def percent(part: int | None, whole: int | None) -> float:
    return round(100.0 * (part or 0) / whole, 1) if whole else 0.0


def cluster_water_levels(queryset=None) -> list[dict]:
    """Per cluster and resource: allocatable, requested, available (display units) and the level in %."""
    rows = []
    shown = ("name", "ready", "node_count", "ready_node_count", "last_sync", "status_message", "cordoned", "drain")
    fields = list(shown)
    for _, alloc, req, _ in WATER_LEVEL_RESOURCES:
        fields += [alloc, req]
    for cluster in (queryset if queryset is not None else Cluster.objects.all()).values(*fields):
        resources = []
        for resource, alloc, req, unit in WATER_LEVEL_RESOURCES:
            allocatable, requested = cluster[alloc], cluster[req]
            resources.append({
                "resource": resource,
                "allocatable": allocatable / unit,
                "requested": requested / unit,
                "available": max(allocatable - requested, 0) / unit,
                "level": percent(requested, allocatable),
            })
        rows.append({k: cluster[k] for k in shown} | {"resources": resources})
    return rows


def fleet_summary() -> dict:
    totals = Cluster.objects.aggregate(
        clusters=Count("pk"), ready_clusters=Count("pk", filter=Q(ready=True)), nodes=Sum("node_count"),
        ready_nodes=Sum("ready_node_count"), workloads=Sum("workload_count"), pods=Sum("pod_count"),
        cpu_allocatable_milli=Sum("cpu_allocatable_milli"), cpu_requested_milli=Sum("cpu_requested_milli"),
        memory_allocatable_bytes=Sum("memory_allocatable_bytes"), memory_requested_bytes=Sum("memory_requested_bytes"),
        gpu_allocatable=Sum("gpu_allocatable"), gpu_requested=Sum("gpu_requested"),
    )
    totals = {k: v or 0 for k, v in totals.items()}
    totals["cores"] = totals["cpu_allocatable_milli"] // 1000
    totals["cpu_level"] = percent(totals["cpu_requested_milli"], totals["cpu_allocatable_milli"])
    totals["memory_level"] = percent(totals["memory_requested_bytes"], totals["memory_allocatable_bytes"])
    totals["gpu_level"] = percent(totals["gpu_requested"], totals["gpu_allocatable"])
    return totals


def aggregate_from_nodes() -> list[dict]:
    """Water levels recomputed from the node rows (one GROUP BY), the baseline the benchmark compares."""
    return list(
        Node.objects.values("cluster_id").annotate(
            cpu_allocatable=Sum("cpu_allocatable_milli"), cpu_requested=Sum("cpu_requested_milli"),
            memory_allocatable=Sum("memory_allocatable_bytes"), memory_requested=Sum("memory_requested_bytes"),
            nodes=Count("pk"),
        )
    )
