"""Nothing leaks: a node's rows rebuilt from its pods' annotations, the evidence
(``cpu.state.rebuild_state``; the ``scheduling.cpu_reconcile_cluster`` job, after inventory
syncs that changed nodes or workloads and periodically).

Rows whose pod is gone are released; rows whose annotation was never written are released
once ``ANNOTATION_GRACE`` has passed (an allocation may precede its pod: the seed allocates
before the instance is created, Meridian's scheduler before the bind); pods annotated behind
Meridian's back are adopted; conflicts and stale annotations are reported on the node and
repaired by the next delivery. These are routine corrections, not changes anyone made: they
go to the job's log and its result (counted), not to the audit log (on the demo fleet they
were ~1,700 audit rows a minute, and "Recent changes" showed nothing else).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.errors import Refused
from fleet.models import Cluster, Node

from ..models import NodeCPU
from . import state as cpustate
from .cpuset import IO_QUEUES_ANNOTATION, TOPOLOGY_ANNOTATION, CPUTopology, TopologyError, format_cpuset
from .delivery import POD_KEYS, STALE, delivery_needed, desired_pod_annotations, node_annotations, writes_shared
from .inputs import INPUT_FIELDS, apply_node_inputs, ensure_node_cpu
from .state import (
    ALLOC_STATUS,
    CPU_SHAREPOOL,
    CUSTOM_CGROUP_INFO,
    DEFAULT_CONTAINERS,
    OVERCOMMIT_RATIO_ANNOTATION,
    RESERVED_CPUS_ANNOTATION,
    NodeCPUState,
    StateError,
)
from .store import (
    Row,
    content_digest,
    lock_node,
    ratio_of,
    reclaim_cpus,
    request_delivery,
    reserved_of,
    save_state,
    state_of,
    summary_values,
    topology_of,
)

logger = logging.getLogger(__name__)
#: How long an allocation may wait for its pod and its annotation before the reconciler,
#: which trusts annotations, releases it.
ANNOTATION_GRACE = timedelta(seconds=getattr(settings, "MERIDIAN_CPU_ANNOTATION_GRACE_SECONDS", 300))


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _pod_uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _live(pod: Mapping[str, Any]) -> bool:
    return str((pod.get("status") or {}).get("phase") or "") not in ("Succeeded", "Failed")


def _pod_containers(pod: Mapping[str, Any]) -> list[str]:
    return [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping)] or \
        list(DEFAULT_CONTAINERS)


def source_digest(node_obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
    """What a reconcile of the node reads: its input annotations and its pods' identity,
    phase, CPU resources and CPU annotations. Unchanged + nothing pending = nothing to do."""
    annotations = (node_obj.get("metadata") or {}).get("annotations") or {}
    keys = (TOPOLOGY_ANNOTATION, IO_QUEUES_ANNOTATION, RESERVED_CPUS_ANNOTATION, OVERCOMMIT_RATIO_ANNOTATION, CPU_SHAREPOOL)
    items = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        pod_annotations = meta.get("annotations") or {}
        resources = [c.get("resources") for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping)]
        items.append((_pod_key(pod), _pod_uid(pod), (pod.get("status") or {}).get("phase"), (meta.get("labels") or {}).get("app"),
                      {k: pod_annotations.get(k) for k in POD_KEYS if k in pod_annotations}, resources))
    return content_digest([{k: annotations.get(k) for k in keys}, sorted(items, key=lambda i: i[0])])


@dataclass
class NodeReconcile:
    node: str
    released: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    redeliver: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped: bool = False

    @property
    def repaired(self) -> bool:
        return bool(self.released or self.adopted)


def reconcile_node(node_cpu: NodeCPU, node_obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *,
                   now: datetime | None = None, touched: int | None = None, app_label: str = "app",
                   pending: Mapping[str, Mapping[str, Any]] | None = None) -> NodeReconcile:
    """Bring the node's rows in line with its pods' annotations (the evidence), and say what was done.

    ``pending`` (instance -> pod) are the cluster's pods not bound yet: a row of one of them is
    kept, its CPUs given before its bind (``scheduling.cpu.binding``).
    ``touched`` is the node's write counter read before ``node_obj`` and ``pods`` were listed:
    when rows or annotations changed since, the listing may predate them (a delivery that
    just wrote, an allocation that just landed) and the node is left to the next pass.
    """
    now = now or timezone.now()
    annotations = (node_obj.get("metadata") or {}).get("annotations") or {}
    live = [p for p in pods if _live(p)]
    result = NodeReconcile(node_cpu.name)
    with transaction.atomic():
        locked = lock_node(node_cpu)
        if touched is not None and locked.touched != touched:
            result.skipped = True
            return result
        rows = list(locked.allocations.all())
        inputs = apply_node_inputs(locked, annotations, rows)
        result.problems.extend(inputs.notes)
        try:
            rec = cpustate.rebuild_state(topology_of(locked), live, reserved=reserved_of(locked),
                                         overcommit_ratio=ratio_of(locked), node_annotations=annotations, app_label=app_label)
        except (StateError, TopologyError, ValueError) as exc:
            result.problems.append(f"cannot rebuild the node's CPU state from its pods: {exc}")
            locked.problems, locked.reconciled_at = result.problems, now
            locked.save(update_fields=[*INPUT_FIELDS, "problems", "reconciled_at", "updated"])
            return result
        result.conflicts = [str(c) for c in rec.conflicts]
        by_key = {_pod_key(p): p for p in live}
        changed = _reconcile_rows(locked, rows, rec, by_key, now, result, pending or {})
        final = list(locked.allocations.all())
        state = state_of(locked, final)
        result.redeliver += _stale_annotations(locked, state, final, by_key, annotations)
        result.problems.extend(p for p in rec.problems if not _repaired_by_delivery(p))
        locked.conflicts, locked.problems, locked.reconciled_at = result.conflicts, result.problems, now
        locked.source_digest = source_digest(node_obj, pods)
        locked.save(update_fields=[*INPUT_FIELDS, "conflicts", "problems", "reconciled_at", "source_digest", "updated"])
        if changed and any(row.mode == Row.Mode.EXCLUSIVE for row in (*rows, *final)):
            reclaim_cpus(locked, final)  # claims are held by exclusive rows only: shared churn leaves them
        if changed or inputs.changed:
            save_state(locked, state)
        else:
            NodeCPU.objects.filter(pk=locked.pk).update(**summary_values(state))
        if result.repaired or result.conflicts:  # a routine correction: the job's log, not the audit log
            logger.info("node %s: released %s; adopted %s; %d conflicts", locked.name, ", ".join(result.released) or "none",
                        ", ".join(result.adopted) or "none", len(result.conflicts))
        if changed or inputs.changed or result.redeliver or locked.delivered_version < locked.version:
            if result.redeliver:  # _stale_annotations cleared digests since ``final`` was read
                final = list(locked.allocations.all())
            if delivery_needed(NodeCPU.objects.get(pk=locked.pk), state, final):
                request_delivery(locked)
            else:  # nothing to write (a node of plain pods): its annotations are as current as its rows
                NodeCPU.objects.filter(pk=locked.pk).update(delivered_version=F("version"))
    return result


def _repaired_by_delivery(problem: str) -> bool:
    """Findings the next delivery fixes by itself (a stale share pool, a container bound wrongly)."""
    return "is stale" in problem or "should be bound" in problem or f"has no {CUSTOM_CGROUP_INFO}" in problem


def _stale_annotations(locked: NodeCPU, state: NodeCPUState, rows: Sequence[Row], by_key: Mapping[str, Mapping[str, Any]],
                       annotations: Mapping[str, str]) -> list[str]:
    """Annotations that differ from what the rows say: forget their digests so delivery rewrites them."""
    stale, stale_rows = [], []
    wanted_node = node_annotations(locked, state)
    if any(annotations.get(key) != value for key, value in wanted_node.items()) and (
            state.exclusive or CPU_SHAREPOOL in annotations or locked.delivered_share_pool):
        NodeCPU.objects.filter(pk=locked.pk).update(delivered_share_pool=STALE)
        stale.append("node cpu-sharepool")
    for row in rows:
        pod = by_key.get(row.instance)
        if pod is None or not row.active or row.delivery != Row.Delivery.DELIVERED:
            continue
        if row.mode == Row.Mode.SHARED and not writes_shared(state, row):
            continue
        wanted = desired_pod_annotations(state, row)
        if wanted is None:
            continue
        current = (pod.get("metadata") or {}).get("annotations") or {}
        if any(current.get(key) != value for key, value in wanted.items()):
            stale_rows.append(row.pk)
            stale.append(row.instance)
    if stale_rows:
        Row.objects.filter(pk__in=stale_rows).update(delivered_digest="")
    return stale


def _reconcile_rows(locked: NodeCPU, rows: list[Row], rec: cpustate.Reconciliation, by_key: Mapping[str, Mapping[str, Any]],
                    now: datetime, result: NodeReconcile, pending: Mapping[str, Mapping[str, Any]]) -> bool:
    """Apply the release/adopt rules; True when any row changed.

    Releases and adoptions are written together at the end (one delete, one insert a node):
    a simulated or busy cluster replaces thousands of pods between passes, and a query per row
    was most of a 10,000-node fleet's reconcile."""
    changed = False
    kept: dict[str, Row] = {}
    changes = _RowChanges(locked)
    annotated = rec.state
    for row in rows:
        pod = by_key.get(row.instance)
        if pod is not None and row.pod_uid and _pod_uid(pod) and _pod_uid(pod) != row.pod_uid:
            pod = None  # a new pod of the same name: the instance that held the CPUs is gone
        young = now - row.created < ANNOTATION_GRACE
        if row.delivery == Row.Delivery.RELEASING:
            if pod is None:
                changes.gone.append(row.pk)
                changed = True
            continue
        if pod is None:
            waiting = pending.get(row.instance)
            ahead = young and row.delivery in (Row.Delivery.PENDING, Row.Delivery.WAITING) and row.source == Row.Source.ALLOCATED
            if ahead or (waiting is not None and _pod_uid(waiting) in ("", row.pod_uid)):
                kept[row.instance] = row  # allocated ahead of its pod, or of its bind
                continue
            _release_row(row, "its pod is gone" if row.delivery == Row.Delivery.DELIVERED or row.source == Row.Source.ADOPTED
                         else "its pod never came and its annotations were never written", result, changes)
            changed = True
            continue
        uid = _pod_uid(pod)
        if uid and row.pod_uid != uid:
            row.pod_uid = uid
            row.save(update_fields=["pod_uid", "updated"])
            changed = True
        if row.mode == Row.Mode.SHARED:
            if row.instance in annotated.shared:
                observed = annotated.shared[row.instance]
                if (observed.request_milli, observed.limit_milli) != (row.request_milli, row.limit_milli) and \
                        row.source == Row.Source.ADOPTED:
                    row.request_milli, row.limit_milli = observed.request_milli, observed.limit_milli
                    row.save(update_fields=["request_milli", "limit_milli", "updated"])
                    changed = True
                kept[row.instance] = row
            elif young and row.delivery != Row.Delivery.DELIVERED:
                kept[row.instance] = row
                result.redeliver.append(row.instance)
            else:
                _release_row(row, "its pod is not a shared instance (any more)", result, changes)
                changed = True
            continue
        claim = annotated.exclusive.get(row.instance)
        disputed = annotated.disputed.get(row.instance)
        if claim is not None and set(claim.cpus) == set(row.cpus) and not row.disputed:
            if row.delivery == Row.Delivery.DELIVERED and row.release_isolate != claim.release_isolate:
                # switched on the pod itself (kubectl annotate): the annotation is the evidence
                row.release_isolate = claim.release_isolate
                row.save(update_fields=["release_isolate", "updated"])
                changed = True
            elif row.delivery == Row.Delivery.WAITING:
                result.redeliver.append(row.instance)  # its pod came: write the rest of its annotations
            kept[row.instance] = row
        elif young and row.delivery != Row.Delivery.DELIVERED and disputed is None:
            kept[row.instance] = row  # its annotation is on its way
            result.redeliver.append(row.instance)
        elif disputed is not None:
            if not row.disputed or set(row.cpus) != set(disputed):
                row.disputed, row.cpus, row.cpuset = True, sorted(disputed), format_cpuset(disputed)
                row.save(update_fields=["disputed", "cpus", "cpuset", "updated"])
                changed = True
            kept[row.instance] = row
        elif claim is not None:  # the pod's annotation names other CPUs: the annotation is the truth
            _release_row(row, f"its pod's annotation names CPUs {format_cpuset(claim.cpus)}, not {row.cpuset}", result, changes)
            changed = True
        else:
            _release_row(row, f"its pod carries no {ALLOC_STATUS} annotation (never written)", result, changes)
            changed = True
    # adopt what the annotations show and the rows do not; pending rows they overlap give way
    adopted_cpus: set[int] = set()
    for instance, allocation in annotated.exclusive.items():
        if instance not in kept:
            adopted_cpus |= allocation.cpus
    for cpus in annotated.disputed.values():
        adopted_cpus |= cpus
    for instance, row in list(kept.items()):
        if row.mode == Row.Mode.EXCLUSIVE and instance not in annotated.exclusive and instance not in annotated.disputed \
                and adopted_cpus & set(row.cpus):
            held = format_cpuset(adopted_cpus & set(row.cpus))
            _release_row(row, f"pods annotated outside Meridian hold CPUs {held}", result, changes)
            del kept[instance]
            changed = True
    for instance, allocation in annotated.exclusive.items():
        if instance in kept:
            continue
        pod = by_key.get(instance)
        _adopt(changes, instance, pod, Row.Mode.EXCLUSIVE, result, cpus=sorted(allocation.cpus), strategy=allocation.strategy,
               app=allocation.app, release_isolate=allocation.release_isolate, exclude_reserved=allocation.exclude_reserved,
               containers=list(allocation.containers))
        changed = True
    for instance, cpus in annotated.disputed.items():
        if instance in kept:
            continue
        _adopt(changes, instance, by_key.get(instance), Row.Mode.EXCLUSIVE, result, cpus=sorted(cpus), disputed=True)
        changed = True
    for instance, shared in annotated.shared.items():
        if instance in kept:
            continue
        pod = by_key.get(instance)
        _adopt(changes, instance, pod, Row.Mode.SHARED, result, request_milli=shared.request_milli,
               limit_milli=shared.limit_milli, app=shared.app,
               containers=_pod_containers(pod) if pod else list(DEFAULT_CONTAINERS))
        changed = True
    for instance in rec.unallocated:
        if instance not in kept:
            result.problems.append(f"{instance} is exclusive but has no {ALLOC_STATUS}: not allocated")
    changes.write()
    return changed


@dataclass
class _RowChanges:
    """A node's released rows (by primary key) and adopted rows (unsaved), written at once."""

    node_cpu: NodeCPU
    gone: list[int] = field(default_factory=list)
    new: list[Row] = field(default_factory=list)

    def write(self) -> None:
        if self.gone:  # first: an instance released and adopted again keeps its unique name
            Row.objects.filter(pk__in=self.gone).delete()
        if self.new:
            Row.objects.bulk_create(self.new)


def _release_row(row: Row, why: str, result: NodeReconcile, changes: _RowChanges) -> None:
    result.released.append(f"{row.instance} ({why})")
    changes.gone.append(row.pk)


def _adopt(changes: _RowChanges, instance: str, pod: Mapping[str, Any] | None, mode: str, result: NodeReconcile, *,
           cpus: Sequence[int] = (), strategy: str = "", app: str = "", release_isolate: bool = False,
           exclude_reserved: bool = True, containers: Sequence[str] = (), disputed: bool = False, request_milli: int = 0,
           limit_milli: int = 0) -> None:
    namespace, _, name = instance.partition("/")
    changes.new.append(Row(
        node_cpu=changes.node_cpu, namespace=namespace, pod_name=name, pod_uid=_pod_uid(pod) if pod else "", app=app, mode=mode,
        strategy=strategy, request=len(cpus), cpus=list(cpus), cpuset=format_cpuset(cpus), release_isolate=release_isolate,
        exclude_reserved=exclude_reserved, containers=list(containers or DEFAULT_CONTAINERS), disputed=disputed,
        request_milli=request_milli, limit_milli=limit_milli, source=Row.Source.ADOPTED,
        delivery=Row.Delivery.DELIVERED, delivered_at=timezone.now(), created_by="system:cpu-reconciler"))
    if mode == Row.Mode.EXCLUSIVE:
        result.adopted.append(instance + (" (disputed)" if disputed else ""))


@dataclass
class ClusterReconcile:
    cluster: str
    nodes: int = 0
    skipped: int = 0
    released: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The job's result: the corrections counted, the first hundred named (the log has them all)."""
        return {"cluster": self.cluster, "nodes": self.nodes, "skipped": self.skipped, "released": self.released[:100],
                "adopted": self.adopted[:100], "released_count": len(self.released), "adopted_count": len(self.adopted),
                "conflicts": self.conflicts, "errors": self.errors[:50]}


def reconcile_cluster(cluster: Cluster, connector: Any = None, *, now: datetime | None = None,
                      node_names: Iterable[str] | None = None) -> ClusterReconcile:
    """Read the cluster's nodes and pods (live annotations) and reconcile every node with a CPU topology."""
    from fleet.services import connector_for

    now = now or timezone.now()
    report = ClusterReconcile(cluster.name)
    marks = dict(NodeCPU.objects.filter(cluster=cluster).values_list("pk", "touched"))
    own = connector is None
    connector = connector or connector_for(cluster)
    try:
        nodes = connector.list_nodes().items
        pods = connector.list_pods().items
    finally:
        if own:
            connector.close()
    wanted = set(node_names) if node_names is not None else None
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            by_node.setdefault(node_name, []).append(pod)
    pending = {_pod_key(p): p for p in pods if not (p.get("spec") or {}).get("nodeName") and _live(p)}
    inventory = {n.name: n for n in Node.objects.filter(cluster=cluster).only("pk", "name", "cluster_id", "cpu_topology")}
    existing = {n.name: n for n in NodeCPU.objects.filter(cluster=cluster)}
    unsettled = set(Row.objects.filter(node_cpu__cluster=cluster).exclude(delivery=Row.Delivery.DELIVERED)
                    .values_list("node_cpu_id", flat=True).distinct())
    for obj in nodes:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if wanted is not None and name not in wanted:
            continue
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        node_cpu = existing.get(name)
        if node_cpu is None:
            row = inventory.get(name)
            if row is None or not annotations.get(TOPOLOGY_ANNOTATION):
                continue
            try:
                node_cpu = ensure_node_cpu(row, CPUTopology.from_annotation(annotations[TOPOLOGY_ANNOTATION]))
            except TopologyError as exc:
                report.errors.append(f"{name}: {exc}")
                continue
            if node_cpu is None:
                continue
        node_pods = by_node.get(name, [])
        if (node_cpu.source_digest == source_digest(obj, node_pods) and node_cpu.pk not in unsettled
                and node_cpu.delivered_version >= node_cpu.version):
            report.skipped += 1
            continue
        try:
            outcome = reconcile_node(node_cpu, obj, node_pods, now=now, touched=marks.get(node_cpu.pk, node_cpu.touched),
                                     pending=pending)
        except Refused as exc:
            report.errors.append(f"{name}: {exc.detail}")
            continue
        if outcome.skipped:
            report.skipped += 1
            continue
        report.nodes += 1
        report.released += [f"{name}: {r}" for r in outcome.released]
        report.adopted += [f"{name}: {a}" for a in outcome.adopted]
        report.conflicts += len(outcome.conflicts)
    return report
