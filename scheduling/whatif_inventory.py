"""What-if placement over a cluster's stored inventory, the placement simulator's Django side: the
inventory as an engine ``Snapshot``, runs of ``whatif.simulate``/``whatif.compare`` under stored
policies, and their results as JSON for the page and the API. (It was ``placement.py``: the
name said neither that it only simulates nor what it simulates on.)

The snapshot is built in two bulk queries (the cluster's nodes, its running pods), never a
query per node. Fleet rows become v1 objects the plugins read: a node's labels, taints and
allocatable; a cordoned node carries upstream's ``node.kubernetes.io/unschedulable`` taint
and a NotReady one ``node.kubernetes.io/not-ready`` (what the node lifecycle controller
puts on them), so the engine refuses them with kube-scheduler's own reason; a pod is its
namespace, name, labels, node and summed requests. Nothing is written: a simulation only
reads the inventory and the policies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext as _

from core.errors import NotFound, Refused
from fleet.models import Cluster, Node, Pod

from . import services
from .cluster import amount_of
from .engine import Policy, Snapshot
from .livecache import with_condition_taints
from .whatif import SimulationResult, compare, simulate

TOP_NODES = 60


def cluster_snapshot(cluster: Cluster) -> Snapshot:
    """The cluster's nodes and running pods as the engine reads them (two queries)."""
    nodes = []
    for name, labels, taints, allocatable, unschedulable, ready in (
            Node.objects.filter(cluster=cluster).order_by("name")
            .values_list("name", "labels", "taints", "allocatable", "unschedulable", "ready").iterator(chunk_size=5000)):
        taints = with_condition_taints(taints or (), unschedulable=unschedulable, ready=ready)
        nodes.append({"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints},
                      "status": {"allocatable": allocatable or {}}})
    pods = [{"metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
             "spec": {"nodeName": node_name, "containers": [{"name": "main", "resources": {"requests": requests or {}}}]}}
            for namespace, name, labels, node_name, requests in (
                Pod.objects.filter(cluster=cluster, finished_at__isnull=True).exclude(node_name="")
                .exclude(phase__in=("Succeeded", "Failed"))
                .values_list("namespace", "name", "labels", "node_name", "requests").iterator(chunk_size=5000))]
    return Snapshot(nodes, pods)


def find_cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        raise NotFound("unknown_cluster", _("No cluster named %(name)s.") % {"name": name}, field="cluster")
    return cluster


def _policy(name: str, pod: Mapping[str, Any]) -> Policy:
    return services.policy_for(pod, override=name or None)


def run(cluster_name: str, pod: Mapping[str, Any], replicas: int, *, policy: str = "", compare_with: str = "") -> dict[str, Any]:
    """Simulate ``replicas`` copies of ``pod`` on the cluster's snapshot under ``policy`` (empty:
    the pod's annotation, else the default), and under ``compare_with`` too when given."""
    if not isinstance(pod, Mapping):
        raise Refused("invalid_pod", _("The pod must be an object."), field="pod")
    cluster = find_cluster(cluster_name)
    first = _policy(policy, pod)
    snapshot = cluster_snapshot(cluster)
    try:
        if compare_with:
            second = services.policy_for(pod, override=compare_with)
            comparison = compare(first, second, snapshot, pod, replicas)
            results = [comparison.a, comparison.b]
        else:
            results = [simulate(first, snapshot, pod, replicas)]
    except (ValueError, TypeError) as exc:
        raise Refused("invalid_pod", str(exc), field="pod") from exc
    allocatable = {node["metadata"]["name"]: node["status"]["allocatable"] for node in snapshot.nodes}
    return {"cluster": cluster.name, "nodes": len(snapshot.nodes), "existing_pods": len(snapshot.pods),
            "replicas": replicas, "results": [result_body(r, allocatable) for r in results]}


def result_body(result: SimulationResult, allocatable: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One run as JSON: placements, per-node usage of the nodes that got replicas, reasons, metrics."""
    per_node = Counter(node for node in result.placements if node is not None)
    touched = sorted(per_node, key=lambda n: (-per_node[n], n))
    usage = {name: {"replicas": per_node[name], "requested": result.node_usage.get(name, {}),
                    "allocatable": _alloc_ints(allocatable.get(name, {}))} for name in touched}
    return {
        "policy": result.policy,
        "placed": result.placed,
        "unschedulable": result.unschedulable,
        "placements": list(result.placements),
        "reasons": result.reasons,
        "failure_messages": [{"message": m, "count": c} for m, c in sorted(result.failure_messages.items(), key=lambda i: -i[1])],
        "first_unschedulable": result.first_unschedulable,
        "node_usage": usage,
        "allocation_rate": result.allocation_rate,
        "fragmentation": {k: {"stranded": f.stranded, "stranded_ratio": f.stranded_ratio} for k, f in result.fragmentation.items()},
        "largest_shape": result.largest_shape,
        "largest_shape_fits": result.largest_shape_fits,
        "chart": {"nodes": touched[:TOP_NODES], "replicas": [per_node[n] for n in touched[:TOP_NODES]],
                  "cpu": [_ratio(usage[n]["requested"].get("cpu", 0), usage[n]["allocatable"].get("cpu", 0)) for n in touched[:TOP_NODES]],
                  "memory": [_ratio(usage[n]["requested"].get("memory", 0), usage[n]["allocatable"].get("memory", 0))
                             for n in touched[:TOP_NODES]]},
    }


def _alloc_ints(allocatable: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for name, value in allocatable.items():
        try:
            out[name] = amount_of(name, value)
        except ValueError:
            continue
    return out


def _ratio(used: int, total: int) -> float:
    return round(used / total, 4) if total else 0.0
