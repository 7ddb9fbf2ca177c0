"""Exclusive CPUs given at placement: the pod scheduler's side of CPU co-location.

When Meridian's scheduler binds a pod asking for exclusive CPUs (``cpu-isolate-mode:
exclusive``, its ``alloc-spec``), the same step allocates them on the chosen node, through the
one allocator (``allocation.allocate_exclusive``: the node's row lock, the sellable rules, the
claims table that holds each CPU once), and writes the result before the bind
(``delivery.deliver``: the pod's ``alloc-status`` / ``custom-cgroup-info``, the node's
``cpu-sharepool``), so the kubelet's cgroup controller finds them when the pod starts. A bind
that does not happen (the pod was bound or deleted meanwhile) and a pod deleted later give the
CPUs back (``release_for_pod``). The scheduler reads the nodes' stored states as annotations of
its node views (``node_extras``), so its CPU plugins see allocations made through the API too.
A node meets its CPU state (``prepare_node``) in the scheduling thread, before any bind to it;
the reconciler keeps the rows of pods given CPUs but not bound yet.

After a crash between allocation and bind, the pod is pending again with a row holding CPUs:
the retry takes that row where the pod lands on the same node, and releases it elsewhere. A
row of an earlier pod of the same name (another uid) is released first. Nothing here trusts
memory: the rows are the truth, and the reconciler rebuilds them from annotations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.context import acting_as
from core.errors import Conflict
from fleet.models import Node

from ..models import CPUAllocation, NodeCPU
from ..plugins.cpuset import CPU_STATE_ANNOTATION, cpu_state_annotation
from . import allocation, delivery, inputs, reconcile, store
from .cpuset import IO_QUEUES_ANNOTATION, SAME_CORE_FIRST, TOPOLOGY_ANNOTATION, CPUTopology, IOQueueDistribution, TopologyError
from .state import (
    ALLOC_SPEC,
    EXCLUDE_RESERVE_CPUSET,
    OVERCOMMIT_RATIO_ANNOTATION,
    RELEASE_ISOLATE_MODE,
    RESERVED_CPUS_ANNOTATION,
    parse_alloc_spec,
)

ACTOR = "system:scheduler"
REASON = "placed by Meridian's scheduler"


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return _meta(pod).get("annotations") or {}


def exclusive_request(pod: Mapping[str, Any]) -> int:
    """The pod's CPU request in whole CPUs (what ``CPUSetExclusive`` placed it by)."""
    from kube.resources import pod_requests

    cpu = pod_requests(pod).get("cpu")
    milli = cpu.milli_value() if cpu is not None else 0
    if milli <= 0 or milli % 1000:
        raise Conflict("invalid_request", "An exclusive pod's cpu request must be a whole number of CPUs.", field="request")
    return milli // 1000


def _strategy(pod: Mapping[str, Any]) -> str:
    text = _annotations(pod).get(ALLOC_SPEC)
    if not isinstance(text, str) or not text:
        return SAME_CORE_FIRST
    try:
        return parse_alloc_spec(text)
    except ValueError as exc:
        raise Conflict("invalid_alloc_spec", str(exc), field=ALLOC_SPEC) from exc


def prepare_node(cluster_pk: int, node: Mapping[str, Any], node_pods: Sequence[Mapping[str, Any]],
                 pending: Mapping[str, Mapping[str, Any]]) -> bool:
    """Make sure the node has its CPU state before an exclusive pod is bound there: the first
    time, made from what the node publishes (topology, reserved CPUs, IO queues, overcommit
    ratio) and the CPUs its pods already hold, as the reconciler makes it (``pending``: the pods
    not bound yet, whose rows it keeps). False when the node has no CPU topology or is not in
    the inventory yet. The scheduling thread calls it, before any bind to the node is sent."""
    node_name = str((node.get("metadata") or {}).get("name") or "")
    if NodeCPU.objects.filter(cluster_id=cluster_pk, name=node_name).exists():
        return True
    row = Node.objects.filter(cluster_id=cluster_pk, name=node_name).first()
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(TOPOLOGY_ANNOTATION)
    if row is None or not text:
        return False
    try:
        topology = CPUTopology.from_annotation(text)
    except TopologyError:
        return False
    with acting_as(ACTOR):
        created = inputs.ensure_node_cpu(row, topology)
        if created is None:
            return False
        reconcile.reconcile_node(created, node, list(node_pods), pending=pending)
    return True


def _node_cpu(cluster_pk: int, node_name: str) -> NodeCPU:
    found = NodeCPU.objects.filter(cluster_id=cluster_pk, name=node_name).first()
    if found is None:
        raise Conflict("no_topology", f"Node {node_name} has no CPU state (no CPU topology, or not in the inventory yet).")
    return found


def allocate_for_pod(cluster_pk: int, node_name: str, pod: Mapping[str, Any], connector: Any, *,
                     machine_max: Mapping[str, int] | None = None, app_label: str = "app") -> dict[str, str]:
    """Give the pod its exclusive CPUs on ``node_name`` (``prepare_node`` first) and write them to
    the pod and the node; the pod's CPU annotations as written. Refused (``Conflict``) when the
    node cannot."""
    meta = _meta(pod)
    namespace, name, uid = str(meta.get("namespace") or "default"), str(meta.get("name") or ""), str(meta.get("uid") or "")
    annotations = _annotations(pod)
    request, strategy = exclusive_request(pod), _strategy(pod)
    containers = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or ()
                  if isinstance(c, Mapping) and c.get("name")]
    with acting_as(ACTOR):
        node_cpu = _node_cpu(cluster_pk, node_name)
        row = None
        for other in CPUAllocation.objects.filter(node_cpu__cluster_id=cluster_pk, namespace=namespace, pod_name=name) \
                .exclude(delivery=CPUAllocation.Delivery.RELEASING).select_related("node_cpu"):
            if other.node_cpu_id == node_cpu.pk and other.pod_uid == uid and other.mode == CPUAllocation.Mode.EXCLUSIVE \
                    and len(other.cpus) == request and not other.disputed:
                row = other  # allocated before a crash, for this very pod and node
            else:
                allocation.release(other.node_cpu, other.instance, reason=f"{REASON}: the pod is placed anew")
                delivery.deliver(other.node_cpu_id, connector)
        if row is None:
            row = allocation.allocate_exclusive(
                node_cpu, namespace=namespace, name=name, request=request, strategy=strategy,
                app=str((meta.get("labels") or {}).get(app_label, "")), uid=uid, machine_max=machine_max,
                exclude_reserved=str(annotations.get(EXCLUDE_RESERVE_CPUSET, "true")).lower() != "false",
                containers=containers or None, release_isolate=str(annotations.get(RELEASE_ISOLATE_MODE, "")).lower() == "true",
                reason=REASON)
        delivery.deliver(node_cpu.pk, connector)
    node_cpu.refresh_from_db()
    state = store.current_state(node_cpu)
    written = delivery.desired_pod_annotations(state, row) or {}
    return {key: value for key, value in written.items() if value is not None}


def release_for_pod(cluster_pk: int, pod: Mapping[str, Any], connector: Any) -> list[str]:
    """The pod is gone or was not bound: its exclusive CPUs go back to the share pool (only rows
    made for this pod, by uid). The nodes whose state changed."""
    meta = _meta(pod)
    rows = CPUAllocation.objects.filter(node_cpu__cluster_id=cluster_pk, namespace=str(meta.get("namespace") or "default"),
                                        pod_name=str(meta.get("name") or ""), pod_uid=str(meta.get("uid") or "")) \
        .exclude(delivery=CPUAllocation.Delivery.RELEASING).select_related("node_cpu")
    nodes = []
    with acting_as(ACTOR):
        for row in rows:
            allocation.release(row.node_cpu, row.instance, reason=f"{REASON}: the pod is gone or was not bound")
            delivery.deliver(row.node_cpu_id, connector)
            nodes.append(row.node_cpu.name)
    return nodes


def node_extras(cluster_pk: int, names: Iterable[str] | None = None) -> dict[str, dict[str, str]]:
    """The stored CPU state of the cluster's nodes (or of ``names``) as the annotations the
    scheduler's CPU plugins read (``scheduler_annotations``), in two queries."""
    rows = NodeCPU.objects.filter(cluster_id=cluster_pk).prefetch_related("allocations")
    if names is not None:
        rows = rows.filter(name__in=list(names))
    return {row.name: scheduler_annotations(row) for row in rows}


def scheduler_annotations(node: NodeCPU) -> dict[str, str]:
    """Node annotations that carry this node's stored CPU state into node objects the scheduling
    engine reads (the pod scheduler's node views, placement snapshots built from the database),
    as ``scheduling.plugins.cpuset`` reads them."""
    state = store.current_state(node)
    annotations = {TOPOLOGY_ANNOTATION: store.topology_of(node).to_annotation(),
                   RESERVED_CPUS_ANNOTATION: node.reserved_cpus,
                   OVERCOMMIT_RATIO_ANNOTATION: delivery.node_annotations(node, state)[OVERCOMMIT_RATIO_ANNOTATION],
                   CPU_STATE_ANNOTATION: cpu_state_annotation(state)}
    if node.io_queues:
        annotations[IO_QUEUES_ANNOTATION] = IOQueueDistribution.from_mapping(node.io_queues).to_annotation()
    return annotations


def has_cpu_nodes(cluster_pk: int) -> bool:
    return NodeCPU.objects.filter(cluster_id=cluster_pk).exists()
