"""Exclusive/shared CPU co-location on one node: every change, under the node's row lock.

The pure modules decide (``scheduling.cpuset`` picks CPUs, ``scheduling.cpustate`` keeps the
share pool, the sellable rules and machineMaxList, ``scheduling.cpufit`` summarises); this
module makes their decisions durable and safe across processes:

* **One writer per node.** Every change locks the node's ``NodeCPU`` row
  (``select_for_update``; on SQLite the IMMEDIATE transaction serialises writers), builds the
  ``NodeCPUState`` from the committed ``CPUAllocation`` rows, asks the pure allocator, runs the
  safety checks, writes the rows and ``CPUClaim`` rows (unique per node and CPU: a CPU cannot be
  held twice even by a writer that skipped the lock) and bumps ``version`` with a guarded
  ``UPDATE ... WHERE version = <read>``. Redis plays no part in correctness.
* **Audited.** allocate, place_shared, release, release-isolate, IO-queue decisions and the
  reconciler's repairs each write one audit entry in the same transaction.
* **Delivered by a job.** The result reaches the cluster as annotations (pods: ``alloc-status``,
  ``custom-cgroup-info``, ...; node: ``cpu-sharepool``) written through the cluster's connector
  by ``scheduling.cpu_deliver`` (``core.jobs.enqueue``: sent after commit, re-sent until done).
  When the share pool changes, every shared pod on the node is re-annotated.
* **Nothing leaks.** ``reconcile_node`` rebuilds the node's state from its pods' annotations
  (``cpustate.rebuild_state``): rows whose pod is gone are released, rows whose annotation was
  never written are released once ``ANNOTATION_GRACE`` has passed (an allocation may precede
  its pod: the seed allocates before the instance is created), pods annotated behind Meridian's
  back are adopted, conflicts and stale annotations are reported on the node and repaired.

Annotation conventions (besides the seed's, see ``scheduling.cpustate``): node inputs
``scheduling.meridian.io/cpu-topology`` (published by the node or the simulator),
``scheduling.meridian.io/io-queue-cpus`` (``{"queues": {...}}``, accepted only as a valid growth),
``scheduling.meridian.io/reserved-cpus`` and ``scheduling.meridian.io/cpu-overcommit-ratio``.
A shared pod Meridian manages gets ``cpu-isolate-mode: shared`` and
``custom-cgroup-info: {"<container>": {"cpuset": <share pool>, "cpuShares": n, "cfsQuotaUs": q}}``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Max, Q, Sum
from django.utils import timezone

from core import concurrency, jobs
from core.audit import record_change
from core.context import current_actor
from core.errors import Conflict, NotFound, Refused
from core.models import Job
from fleet.models import Cluster, Node

from . import cpufit, cpustate
from .cpuset import (
    IO_QUEUES_ANNOTATION,
    SAME_CORE_FIRST,
    STRATEGIES,
    TOPOLOGY_ANNOTATION,
    AllocationError,
    CPUSetFormatError,
    CPUTopology,
    IOQueueDistribution,
    TopologyError,
    accept_io_queue_update,
    accept_topology_update,
    format_cpuset,
    parse_cpuset,
)
from .cpustate import (
    ALLOC_SPEC,
    ALLOC_STATUS,
    CPU_ISOLATE_MODE,
    CPU_SHAREPOOL,
    CUSTOM_CGROUP_INFO,
    DEFAULT_CONTAINERS,
    EXCLUDE_RESERVE_CPUSET,
    OVERCOMMIT_RATIO_ANNOTATION,
    RELEASE_ISOLATE_MODE,
    RESERVED_CPUS_ANNOTATION,
    ExclusiveAllocation,
    NodeCPUState,
    SharedInstance,
    StateError,
)
from .models import SUMMARY_FIELDS, CPUAllocation, CPUClaim, NodeCPU

logger = logging.getLogger(__name__)

DELIVER_TASK = "scheduling.cpu_deliver"
RECONCILE_TASK = "scheduling.cpu_reconcile_cluster"
#: How long an allocation may wait for its pod and its annotation before the reconciler,
#: which trusts annotations, releases it.
ANNOTATION_GRACE = timedelta(seconds=getattr(settings, "MERIDIAN_CPU_ANNOTATION_GRACE_SECONDS", 300))
SHARED = "shared"
#: Every annotation Meridian writes on a pod, removed when the instance is released.
POD_KEYS = (CPU_ISOLATE_MODE, ALLOC_SPEC, ALLOC_STATUS, CUSTOM_CGROUP_INFO, EXCLUDE_RESERVE_CPUSET, RELEASE_ISOLATE_MODE)
MAX_DELIVERY_PASSES = 5
#: ``delivered_share_pool`` of a managed node whose annotations must be written again.
STALE = "stale"
NAME_MAX = 253

Row = CPUAllocation


# ---------------------------------------------------------------------------- building states


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()[:32]


@lru_cache(maxsize=1024)
def _topology(rows_json: str, queues_json: str) -> CPUTopology:
    topology = CPUTopology.from_rows(json.loads(rows_json))
    if queues_json:
        topology = topology.with_io_queues(IOQueueDistribution.from_mapping(json.loads(queues_json)))
    return topology


def topology_of(node: NodeCPU) -> CPUTopology:
    """The node's topology with its accepted IO-queue distribution (cached per content)."""
    return _topology(_canonical(node.topology), _canonical(node.io_queues) if node.io_queues else "")


def reserved_of(node: NodeCPU) -> frozenset[int]:
    return frozenset(parse_cpuset(node.reserved_cpus or ""))


def ratio_of(node: NodeCPU) -> Fraction:
    return Fraction(node.overcommit_ratio or Decimal(1))


def _exclusive_of(row: Row) -> ExclusiveAllocation:
    return ExclusiveAllocation(row.instance, frozenset(row.cpus), row.strategy or SAME_CORE_FIRST, row.app,
                               release_isolate=row.release_isolate, exclude_reserved=row.exclude_reserved,
                               containers=tuple(row.containers or DEFAULT_CONTAINERS))


def state_of(node: NodeCPU, rows: Iterable[Row]) -> NodeCPUState:
    """The node's ``NodeCPUState`` from its active allocation rows."""
    exclusive: dict[str, ExclusiveAllocation] = {}
    shared: dict[str, SharedInstance] = {}
    disputed: dict[str, frozenset[int]] = {}
    for row in rows:
        if not row.active:
            continue
        if row.mode == Row.Mode.SHARED:
            shared[row.instance] = SharedInstance(row.instance, row.request_milli, row.limit_milli, row.app)
        elif row.disputed:
            disputed[row.instance] = frozenset(row.cpus)
        else:
            exclusive[row.instance] = _exclusive_of(row)
    try:
        return NodeCPUState(topology_of(node), reserved_of(node), exclusive, shared, ratio_of(node), disputed=disputed)
    except (StateError, TopologyError, CPUSetFormatError) as exc:  # the claims table makes this unreachable
        raise Conflict("inconsistent_state", f"Node {node.name}'s stored CPU state is inconsistent: {exc}") from exc


def current_state(node: NodeCPU) -> NodeCPUState:
    """The committed state, read without a lock (pages, what-if, the agent API)."""
    return state_of(node, node.allocations.all())


def summary_values(state: NodeCPUState) -> dict[str, int]:
    return dict(zip(SUMMARY_FIELDS, cpufit.summarize(state), strict=True))


def _topology_columns(topology: CPUTopology) -> dict[str, Any]:
    return {"topology": [list(row) for row in topology.rows], "topology_digest": _digest([list(r) for r in topology.rows]),
            "cpus": len(topology), "sockets": len(topology.sockets), "numa_nodes": len(topology.numa_nodes),
            "cores": topology.num_cores, "threads_per_core": topology.threads_per_core}


# ---------------------------------------------------------------------------- locking and bookkeeping


def _lock(node: NodeCPU | int) -> NodeCPU:
    """The node's row, locked until the transaction ends (the per-node lock across processes)."""
    pk = node.pk if isinstance(node, NodeCPU) else node
    locked = NodeCPU.objects.select_for_update(no_key=True).select_related("cluster", "node").filter(pk=pk).first()
    if locked is None:
        raise NotFound("not_found", "This node's CPU state no longer exists.")
    return locked


def _bump(locked: NodeCPU, state: NodeCPUState, **extra: Any) -> None:
    """Store the summary and bump the version; guarded by the version read under the lock."""
    values = summary_values(state) | extra
    updated = NodeCPU.objects.filter(pk=locked.pk, version=locked.version).update(
        version=F("version") + 1, touched=F("touched") + 1, updated=timezone.now(), **values)
    if updated != 1:  # only possible without the row lock: refuse rather than overwrite
        raise Conflict("concurrent_change", f"Node {locked.name}'s CPU state changed meanwhile; try again.")
    locked.version += 1
    locked.touched += 1
    for key, value in values.items():
        setattr(locked, key, value)


def _claim(locked: NodeCPU, row: Row) -> None:
    """Hold the row's CPUs in the claims table; a CPU held already is a refusal, never a double booking."""
    try:
        with transaction.atomic():
            CPUClaim.objects.bulk_create([CPUClaim(node_cpu=locked, cpu=cpu, allocation=row) for cpu in row.cpus])
    except IntegrityError as exc:
        raise Conflict("cpu_taken", f"A CPU of {format_cpuset(row.cpus)} is already held on node {locked.name}.") from exc


def _reclaim(locked: NodeCPU, rows: Iterable[Row]) -> None:
    """Rewrite the node's claims from its active exclusive rows (after a reconcile changed them)."""
    CPUClaim.objects.filter(node_cpu=locked).delete()
    CPUClaim.objects.bulk_create([CPUClaim(node_cpu=locked, cpu=cpu, allocation=row) for row in rows
                                  if row.active and row.mode == Row.Mode.EXCLUSIVE for cpu in row.cpus])


def request_delivery(locked: NodeCPU) -> Job | None:
    """Ask for the node's annotations to be written, unless a delivery that has not started yet
    is queued already (it reads the rows when it runs). Call under the node's row lock: a
    running delivery re-checks the version under the same lock before it ends."""
    queued = Job.objects.filter(task_name=DELIVER_TASK, status__in=Job.QUEUED, object_id=str(locked.pk),
                                object_type=ContentType.objects.get_for_model(NodeCPU)).exists()
    if queued:
        return None
    return jobs.enqueue(DELIVER_TASK, locked.pk, obj=locked)


def _row_snapshot(row: Row) -> dict[str, Any]:
    data = {"node": row.node_cpu.name if row.node_cpu_id else "", "instance": row.instance, "uid": row.pod_uid,
            "app": row.app, "mode": row.mode}
    if row.mode == Row.Mode.EXCLUSIVE:
        data |= {"strategy": row.strategy, "request": row.request, "cpuset": row.cpuset,
                 "release_isolate": row.release_isolate, "exclude_reserved": row.exclude_reserved}
    else:
        data |= {"request_milli": row.request_milli, "limit_milli": row.limit_milli}
    return data


# ---------------------------------------------------------------------------- validation


def _instance(namespace: str, name: str, uid: str = "") -> tuple[str, str, str]:
    errors = {}
    for key, value in (("namespace", namespace), ("name", name)):
        if not isinstance(value, str) or not value.strip():
            errors[key] = "Required."
        elif len(value) > NAME_MAX or "/" in value:
            errors[key] = f"At most {NAME_MAX} characters, without '/'."
    if errors:
        raise Refused.from_errors(errors)
    return namespace.strip(), name.strip(), (uid or "").strip()[:64]


def _refusal(reason: str) -> Conflict:
    """A pure refusal reason as the API's one error body (409: the node cannot take it now)."""
    if "machineMaxList" in reason:
        code = "machine_max"
    elif "of sellable CPUs" in reason:
        code = "instance_cap"
    elif "already on the node" in reason:
        code = "exists"
    elif reason.startswith(("invalid", "unknown")):
        return Refused("invalid", reason, field="request")  # type: ignore[return-value]
    else:
        code = "insufficient_cpu"
    return Conflict(code, reason, field="request")


def _containers(containers: Sequence[str] | None) -> list[str]:
    names = [str(c).strip() for c in (containers or DEFAULT_CONTAINERS) if str(c).strip()]
    if not names:
        raise Refused("invalid", "Name at least one container.", field="containers")
    return names


def parse_machine_max(value: Any) -> dict[str, int] | None:
    """``machineMaxList`` as the seed writes it (``[{"key": app, "value": n}]``) or a mapping."""
    if value in (None, "", [], {}):
        return None
    items = value.items() if isinstance(value, Mapping) else (
        (item.get("key"), item.get("value")) for item in value if isinstance(item, Mapping)) if isinstance(value, list) else None
    if items is None:
        raise Refused("invalid", 'machineMaxList is [{"key": <app>, "value": <max per node>}].', field="machine_max")
    result = {}
    for key, limit in items:
        if not isinstance(key, str) or not key or isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise Refused("invalid", f"machineMaxList entry {key!r}: {limit!r} is not a positive integer.", field="machine_max")
        result[key] = limit
    return result


# ---------------------------------------------------------------------------- allocator


def allocate_exclusive(
    node: NodeCPU, *, namespace: str, name: str, request: int, strategy: str = SAME_CORE_FIRST, app: str = "",
    uid: str = "", machine_max: Mapping[str, int] | None = None, exclude_reserved: bool = True,
    containers: Sequence[str] | None = None, release_isolate: bool = False, reason: str = "",
) -> Row:
    """Give an instance dedicated CPUs on the node (refused with the first reason when a rule says no)."""
    namespace, name, uid = _instance(namespace, name, uid)
    if strategy not in STRATEGIES:
        raise Refused("invalid", f"Unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)}).", field="strategy")
    names = _containers(containers)
    instance = f"{namespace}/{name}"
    with transaction.atomic():
        locked = _lock(node)
        concurrency.check(locked)
        rows = list(locked.allocations.all())
        existing = next((r for r in rows if r.instance == instance), None)
        if existing is not None and existing.active:
            raise Conflict("exists", f"{instance} already holds CPUs on node {locked.name} ({existing.mode}).", field="name")
        state = state_of(locked, rows)
        try:
            new_state, allocation = state.allocate_exclusive(
                instance, request, strategy, app, machine_max=machine_max, release_isolate=release_isolate,
                exclude_reserved=exclude_reserved, containers=names)
        except AllocationError as exc:
            raise _refusal(str(exc)) from exc
        problems = cpustate.check_exclusive(new_state, allocation, strategy=strategy)
        if problems:
            raise Conflict("unsafe_cpuset", problems[0], field="request")
        if existing is not None:  # a released row still removing its annotations: this one replaces them
            existing.delete()
        cpus = sorted(allocation.cpus)
        row = Row.objects.create(
            node_cpu=locked, namespace=namespace, pod_name=name, pod_uid=uid, app=app, mode=Row.Mode.EXCLUSIVE,
            strategy=strategy, request=len(cpus), cpus=cpus, cpuset=format_cpuset(cpus), exclude_reserved=exclude_reserved,
            release_isolate=release_isolate, containers=names, created_by=current_actor().name[:150])
        _claim(locked, row)
        _bump(locked, new_state)
        record_change(row, "create", verb="allocate", after=_row_snapshot(row), reason=reason)
        request_delivery(locked)
    return row


def place_shared(
    node: NodeCPU, *, namespace: str, name: str, request_milli: int, limit_milli: int = 0, app: str = "", uid: str = "",
    machine_max: Mapping[str, int] | None = None, containers: Sequence[str] | None = None, reason: str = "",
) -> Row:
    """Put a shared instance on the node's share pool, within the sellable rules."""
    namespace, name, uid = _instance(namespace, name, uid)
    names = _containers(containers)
    instance = f"{namespace}/{name}"
    if limit_milli and limit_milli < request_milli:
        raise Refused("invalid", "The CPU limit must not be below the request.", field="limit_milli")
    with transaction.atomic():
        locked = _lock(node)
        concurrency.check(locked)
        rows = list(locked.allocations.all())
        existing = next((r for r in rows if r.instance == instance), None)
        if existing is not None and existing.active:
            raise Conflict("exists", f"{instance} is already on node {locked.name} ({existing.mode}).", field="name")
        try:
            new_state = state_of(locked, rows).place_shared(SharedInstance(instance, request_milli, limit_milli, app), machine_max)
        except AllocationError as exc:
            raise _refusal(str(exc)) from exc
        if existing is not None:
            existing.delete()
        row = Row.objects.create(node_cpu=locked, namespace=namespace, pod_name=name, pod_uid=uid, app=app,
                                 mode=Row.Mode.SHARED, request_milli=request_milli, limit_milli=limit_milli, containers=names,
                                 created_by=current_actor().name[:150])
        _bump(locked, new_state)
        record_change(row, "create", verb="place_shared", after=_row_snapshot(row), reason=reason)
        request_delivery(locked)
    return row


def _active_row(locked: NodeCPU, instance: str) -> Row:
    namespace, _, name = instance.partition("/")
    row = locked.allocations.filter(namespace=namespace, pod_name=name).exclude(delivery=Row.Delivery.RELEASING).first()
    if row is None:
        raise NotFound("not_found", f"{instance} holds nothing on node {locked.name}.", field="instance")
    return row


def release(node: NodeCPU, instance: str, *, reason: str = "") -> Row:
    """Give the instance's CPUs back to the share pool; its annotations are removed by delivery."""
    with transaction.atomic():
        locked = _lock(node)
        concurrency.check(locked)
        row = _active_row(locked, instance)
        before = _row_snapshot(row)
        row.claims.all().delete()
        row.delivery = Row.Delivery.RELEASING
        row.save(update_fields=["delivery", "updated"])
        _bump(locked, state_of(locked, locked.allocations.all()))
        record_change(row, "delete", verb="release", before=before, reason=reason)
        request_delivery(locked)
    return row


def set_release_isolate(node: NodeCPU, instance: str, on: bool, *, reason: str = "") -> Row:
    """Big-sale emergency: let an exclusive instance run on every CPU but the reserved ones (reversible).

    The allocation, the share pool and the sellable figures do not change; only the cpuset its
    containers are bound to (``custom-cgroup-info``) does.
    """
    with transaction.atomic():
        locked = _lock(node)
        concurrency.check(locked)
        row = _active_row(locked, instance)
        if row.mode != Row.Mode.EXCLUSIVE or row.disputed:
            raise Refused("not_exclusive", f"{instance} is not an exclusive instance; release-isolate applies to "
                                           "exclusive instances only.", field="instance")
        if row.release_isolate == on:
            return row
        row.release_isolate = on
        row.delivery = Row.Delivery.PENDING
        row.save(update_fields=["release_isolate", "delivery", "updated"])
        _bump(locked, state_of(locked, locked.allocations.all()))
        record_change(row, "action", verb="release_isolate_on" if on else "release_isolate_off",
                      before={"release_isolate": not on}, after={"release_isolate": on}, reason=reason)
        request_delivery(locked)
    return row


def refresh_share_pool(node: NodeCPU, *, reason: str = "") -> Job | None:
    """Write the node's share pool and every shared pod's cpuset again (after a manual cgroup change)."""
    with transaction.atomic():
        locked = _lock(node)
        NodeCPU.objects.filter(pk=locked.pk).update(delivered_share_pool=STALE)
        locked.allocations.filter(mode=Row.Mode.SHARED).update(delivered_digest="")
        record_change(locked, "action", verb="refresh_share_pool", reason=reason)
        return request_delivery(locked)


# ---------------------------------------------------------------------------- node settings


def configure(node: NodeCPU, *, reserved_cpus: str | None = None, overcommit_ratio: Any = None, reason: str = "") -> NodeCPU:
    """Change the node's reserved CPUs and/or overcommit ratio (written back to its annotations).

    Reserved CPUs must exist and must not be held by an exclusive instance; the ratio must be
    positive; and the shared instances already sold must still fit the sellable rules.
    """
    errors: dict[str, str] = {}
    with transaction.atomic():
        locked = _lock(node)
        concurrency.check(locked)
        rows = list(locked.allocations.all())
        before = {"reserved_cpus": locked.reserved_cpus, "overcommit_ratio": str(locked.overcommit_ratio)}
        if reserved_cpus is not None:
            try:
                wanted = parse_cpuset(reserved_cpus)
            except CPUSetFormatError as exc:
                errors["reserved_cpus"] = str(exc)
            else:
                held = {cpu for r in rows if r.active and r.mode == Row.Mode.EXCLUSIVE for cpu in r.cpus}
                unknown = set(wanted) - {row[0] for row in locked.topology}
                if unknown:
                    errors["reserved_cpus"] = f"The node has no CPU(s) {format_cpuset(unknown)}."
                elif set(wanted) & held:
                    errors["reserved_cpus"] = (f"CPU(s) {format_cpuset(set(wanted) & held)} are held by exclusive instances; "
                                               "release them first.")
                else:
                    locked.reserved_cpus = format_cpuset(wanted)
        if overcommit_ratio is not None:
            try:
                ratio = Decimal(str(overcommit_ratio)).quantize(Decimal("0.001"))
                if ratio <= 0 or ratio > 1000:
                    raise InvalidOperation
            except (InvalidOperation, ValueError):
                errors["overcommit_ratio"] = "A positive number (at most 1000), e.g. 1, 1.5 or 2."
            else:
                locked.overcommit_ratio = ratio
        if errors:
            raise Refused.from_errors(errors)
        state = state_of(locked, rows)
        if state.sellable.sold > state.sellable.capacity:
            raise Conflict("oversold", f"With these settings the node would sell {state.sellable.sold} exclusive CPUs but "
                                       f"only {max(0, state.sellable.capacity)} are sellable.", field="reserved_cpus")
        after = {"reserved_cpus": locked.reserved_cpus, "overcommit_ratio": str(locked.overcommit_ratio)}
        if after == before:
            return locked
        locked.save(update_fields=["reserved_cpus", "overcommit_ratio", "updated"])
        _bump(locked, state)
        record_change(locked, "update", verb="configure", before=before, after=after, reason=reason)
        request_delivery(locked)
    return locked


# ---------------------------------------------------------------------------- node inputs


def ensure_node_cpu(node: Node, topology: CPUTopology | None = None) -> NodeCPU | None:
    """The node's ``NodeCPU``, created from ``topology`` (default: the inventory's) if missing."""
    existing = NodeCPU.objects.filter(node=node).first()
    if existing is not None:
        return existing
    if topology is None:
        if not node.cpu_topology:
            return None
        try:
            topology = CPUTopology.from_rows(node.cpu_topology)
        except TopologyError:
            return None
    state = NodeCPUState(topology)
    try:
        with transaction.atomic():
            return NodeCPU.objects.create(node=node, cluster_id=node.cluster_id, name=node.name, **_topology_columns(topology),
                                          **summary_values(state))
    except IntegrityError:
        return NodeCPU.objects.get(node=node)


@dataclass
class InputReport:
    changed: bool = False
    notes: list[str] = field(default_factory=list)


def _record_decision(locked: NodeCPU, verb: str, message: str, *, before: Any = None, after: Any = None) -> None:
    record_change(locked, "action", verb=verb, before=before, after=after, reason=message[:2000])


def apply_node_inputs(locked: NodeCPU, annotations: Mapping[str, str], rows: Sequence[Row]) -> InputReport:
    """Take the node's published topology, IO queues, reserved CPUs and overcommit ratio.

    A topology is taken only as a growth (``accept_topology_update``), an IO-queue
    distribution only as a valid growth (``accept_io_queue_update``); a refusal leaves the
    accepted one in place, is shown on the node (status fields) and audited once per change.
    Reserved CPUs that an exclusive instance holds are refused the same way.
    """
    report = InputReport()
    held = {cpu for row in rows if row.active and row.mode == Row.Mode.EXCLUSIVE for cpu in row.cpus}
    text = annotations.get(TOPOLOGY_ANNOTATION)
    if text:
        try:
            published = CPUTopology.from_annotation(text)
            columns = _topology_columns(published)
            if columns["topology_digest"] != locked.topology_digest:
                decision = accept_topology_update(CPUTopology.from_rows(locked.topology), published)
                if decision.accepted:
                    for key, value in columns.items():
                        setattr(locked, key, value)
                    locked.topology_message = ""
                    report.changed = True
                    _record_decision(locked, "topology_accepted", decision.reason, after={"cpus": columns["cpus"]})
                elif locked.topology_message != decision.reason:
                    locked.topology_message = decision.reason
                    report.changed = True
                    _record_decision(locked, "topology_refused", decision.reason)
        except TopologyError as exc:
            if locked.topology_message != str(exc):
                locked.topology_message = str(exc)
                report.changed = True
                _record_decision(locked, "topology_refused", str(exc))
    text = annotations.get(IO_QUEUES_ANNOTATION)
    if text:
        try:
            offered = IOQueueDistribution.from_annotation(text)
        except TopologyError as exc:
            report.changed |= _refuse_io_queues(locked, None, str(exc))
        else:
            report.changed |= _offer_io_queues(locked, offered)
    text = annotations.get(RESERVED_CPUS_ANNOTATION)
    if text is not None:
        report.changed |= _offer_reserved(locked, text, held, report)
    text = annotations.get(OVERCOMMIT_RATIO_ANNOTATION)
    if text:
        try:
            ratio = Decimal(text).quantize(Decimal("0.001"))
            if ratio <= 0:
                raise InvalidOperation
        except (InvalidOperation, ValueError):
            report.notes.append(f"node annotation {OVERCOMMIT_RATIO_ANNOTATION} {text!r} is not a positive number; kept "
                                f"{locked.overcommit_ratio}")
        else:
            if ratio != locked.overcommit_ratio:
                _record_decision(locked, "overcommit_ratio", f"overcommit ratio {locked.overcommit_ratio} → {ratio}",
                                 before={"overcommit_ratio": str(locked.overcommit_ratio)}, after={"overcommit_ratio": str(ratio)})
                locked.overcommit_ratio = ratio
                report.changed = True
    return report


def _offer_io_queues(locked: NodeCPU, offered: IOQueueDistribution) -> bool:
    """Accept ``offered`` if it is a valid growth of the accepted distribution; True when anything changed."""
    previous = IOQueueDistribution.from_mapping(locked.io_queues) if locked.io_queues else None
    if previous == offered:
        if locked.io_queue_state != NodeCPU.IOQueueState.ACCEPTED:
            locked.io_queue_state, locked.refused_io_queues = NodeCPU.IOQueueState.ACCEPTED, None
            return True
        return False
    decision = accept_io_queue_update(previous, offered, CPUTopology.from_rows(locked.topology))
    if not decision.accepted:
        return _refuse_io_queues(locked, offered, decision.reason)
    locked.io_queues = {name: list(cpus) for name, cpus in offered.queues}
    locked.io_queue_state, locked.io_queue_message, locked.refused_io_queues = NodeCPU.IOQueueState.ACCEPTED, decision.reason, None
    _record_decision(locked, "io_queues_accepted", decision.reason, before={"io_queues": previous.as_dict() if previous else None},
                     after={"io_queues": locked.io_queues})
    return True


def _refuse_io_queues(locked: NodeCPU, offered: IOQueueDistribution | None, reason: str) -> bool:
    refused = {name: list(cpus) for name, cpus in offered.queues} if offered is not None else None
    if locked.io_queue_state == NodeCPU.IOQueueState.REFUSED and locked.io_queue_message == reason:
        return False
    locked.io_queue_state, locked.io_queue_message, locked.refused_io_queues = NodeCPU.IOQueueState.REFUSED, reason, refused
    _record_decision(locked, "io_queues_refused", reason, after={"offered": refused, "kept": locked.io_queues})
    return True


def _offer_reserved(locked: NodeCPU, text: str, held: set[int], report: InputReport) -> bool:
    try:
        wanted = parse_cpuset(text)
    except CPUSetFormatError as exc:
        report.notes.append(f"node annotation {RESERVED_CPUS_ANNOTATION}: {exc}")
        return False
    formatted = format_cpuset(wanted)
    if formatted == locked.reserved_cpus:
        return False
    unknown = set(wanted) - {row[0] for row in locked.topology}
    taken = set(wanted) & held
    if unknown or taken:
        why = (f"CPU(s) {format_cpuset(unknown)} do not exist" if unknown else
               f"CPU(s) {format_cpuset(taken)} are held by exclusive instances")
        report.notes.append(f"reserved CPUs {formatted} refused: {why}; kept {locked.reserved_cpus or 'none'}")
        return False
    _record_decision(locked, "reserved_cpus", f"reserved CPUs {locked.reserved_cpus or 'none'} → {formatted or 'none'}",
                     before={"reserved_cpus": locked.reserved_cpus}, after={"reserved_cpus": formatted})
    locked.reserved_cpus = formatted
    return True


INPUT_FIELDS = ("topology", "topology_digest", "cpus", "sockets", "numa_nodes", "cores", "threads_per_core", "io_queues",
                "io_queue_state", "io_queue_message", "refused_io_queues", "topology_message", "reserved_cpus", "overcommit_ratio")


def propose_io_queues(node: NodeCPU, queues: Mapping[str, Iterable[int]], *, reason: str = "") -> NodeCPU:
    """An operator (or agent) offers an IO-queue distribution; accepted only as a valid growth.

    The decision is recorded on the node and audited whatever it is; a refusal then raises
    ``Conflict`` (code ``io_queues_refused``) with the reason.
    """
    try:
        offered = IOQueueDistribution.from_mapping(queues)
    except TopologyError as exc:
        raise Refused("invalid", str(exc), field="queues") from exc
    with transaction.atomic():
        locked = _lock(node)
        concurrency.check(locked)
        changed = _offer_io_queues(locked, offered)
        if changed:
            locked.save(update_fields=[*INPUT_FIELDS, "updated"])
            if locked.io_queue_state == NodeCPU.IOQueueState.ACCEPTED:
                _bump(locked, state_of(locked, locked.allocations.all()))
                request_delivery(locked)
    if locked.io_queue_state == NodeCPU.IOQueueState.REFUSED:
        raise Conflict("io_queues_refused", locked.io_queue_message, field="queues")
    return locked


# ---------------------------------------------------------------------------- what-if and fleet


def what_if(node: NodeCPU, request: int, strategy: str = SAME_CORE_FIRST, app: str = "",
            machine_max: Mapping[str, int] | None = None) -> cpufit.WhatIf:
    """Could the node take an exclusive instance of ``request`` CPUs now? (changes nothing)"""
    if strategy not in STRATEGIES:
        raise Refused("invalid", f"Unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)}).", field="strategy")
    return cpufit.what_if_exclusive(current_state(node), request, strategy, app, machine_max)


def _sums() -> dict[str, Any]:
    """The fleet view's aggregates, named like the columns they add up."""
    return {"nodes": Count("pk"), "cpus": Sum("cpus"), "sellable": Sum("sellable"), "exclusive_used": Sum("exclusive_used"),
            "exclusive_left": Sum("exclusive_left"), "stranded": Sum("stranded"), "largest": Max("largest_exclusive"),
            "largest_sum": Sum("largest_exclusive")}


def _fits(queryset, request: int) -> dict[int, dict[str, int]]:
    """Per cluster: nodes that take ``request`` CPUs (and within one NUMA node), and how many such
    instances the nodes could still sell; two range scans over covering indexes, not the fleet."""
    out: dict[int, dict[str, int]] = {}
    for row in queryset.filter(largest_exclusive__gte=request).order_by().values("cluster_id").annotate(
            fit_nodes=Count("pk"), fit_numa_nodes=Count("pk", filter=Q(largest_numa__gte=request))):
        out.setdefault(row["cluster_id"], {}).update(fit_nodes=row["fit_nodes"], fit_numa_nodes=row["fit_numa_nodes"])
    for row in queryset.filter(exclusive_left__gte=request).order_by().values("cluster_id").annotate(
            fit_instances=Sum(F("exclusive_left") / request)):
        out.setdefault(row["cluster_id"], {})["fit_instances"] = row["fit_instances"] or 0
    return out


def summary_sums(queryset, request: int | None = None) -> dict[str, Any]:
    """The stored integers of ``queryset`` added up in SQL (never a state)."""
    return fleet_view(queryset, request)["total"]


def with_ratios(values: Mapping[str, Any]) -> dict[str, Any]:
    """Zero for missing sums, and the derived percentages the pages and the API show.

    fragmentation: the share of the sellable exclusive CPUs left that no single instance can
    take now (left over several nodes, or cut by the per-instance cap); stranded: share-pool
    CPUs whose sibling thread is held (only single-thread requests can use them).
    """
    out = {key: (value or 0) for key, value in values.items()}
    sellable, left = out.get("sellable", 0), out.get("exclusive_left", 0)
    out["exclusive_used_pct"] = round(100 * out.get("exclusive_used", 0) / sellable, 1) if sellable else 0.0
    out["stranded_pct"] = round(100 * out.get("stranded", 0) / sellable, 1) if sellable else 0.0
    out["fragmentation_pct"] = round(100 * (1 - out.get("largest_sum", 0) / left), 1) if left else 0.0
    return out


FIT_KEYS = ("fit_nodes", "fit_numa_nodes", "fit_instances")


def fleet_view(queryset, request: int | None = None) -> dict[str, Any]:
    """Totals of ``queryset`` (NodeCPU rows) per cluster — one GROUP BY over the summary columns
    (a covering index answers it), never a state — and fleet-wide (the per-cluster rows added
    up: no second scan). With ``request``, where an exclusive instance of that size fits
    (range scans over their own covering indexes). Cluster names are looked up afterwards."""
    rows = list(queryset.order_by().values("cluster_id").annotate(**_sums()))
    fits = _fits(queryset, request) if request else {}
    names = dict(Cluster.objects.filter(pk__in=[r["cluster_id"] for r in rows]).values_list("pk", "name"))
    keys = [*_sums(), *(FIT_KEYS if request else ())]
    total: dict[str, Any] = {key: 0 for key in keys}
    for row in rows:
        row["cluster__name"] = names.get(row["cluster_id"], "")
        if request:
            found = fits.get(row["cluster_id"], {})
            row.update({key: found.get(key, 0) for key in FIT_KEYS})
        for key in keys:
            value = row.get(key) or 0
            total[key] = max(total[key], value) if key == "largest" else total[key] + value
    rows.sort(key=lambda r: r["cluster__name"])
    return {"total": with_ratios(total), "clusters": [with_ratios(row) for row in rows], "request": request}


def candidates(queryset, request: int, strategy: str = SAME_CORE_FIRST, app: str = "",
               machine_max: Mapping[str, int] | None = None, limit: int = 20) -> dict[str, Any]:
    """Which nodes can take an exclusive instance of ``request`` CPUs: the count from the
    summary columns (exact for the sellable rules), best fit first, each confirmed on its state."""
    if strategy not in STRATEGIES:
        raise Refused("invalid", f"Unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)}).", field="strategy")
    fitting = queryset.filter(largest_exclusive__gte=request)
    count = fitting.count()
    rows = []
    scanned = 0
    for node in fitting.select_related("cluster").order_by("largest_exclusive", "exclusive_left", "pk")[: limit * 3]:
        scanned += 1
        answer = what_if(node, request, strategy, app, machine_max)
        rows.append({"node": node, "what_if": answer})
        if sum(1 for r in rows if r["what_if"].ok) >= limit:
            break
    return {"count": count, "nodes": rows, "request": request, "strategy": strategy, "scanned": scanned}


# ---------------------------------------------------------------------------- delivery (annotations)


def node_annotations(node: NodeCPU, state: NodeCPUState) -> dict[str, str]:
    """The node annotations Meridian keeps: the share pool, and the settings it was computed with."""
    return {CPU_SHAREPOOL: cpustate.share_pool_annotation(state.share_pool), RESERVED_CPUS_ANNOTATION: node.reserved_cpus,
            OVERCOMMIT_RATIO_ANNOTATION: _ratio_text(node.overcommit_ratio)}


def _ratio_text(ratio: Any) -> str:
    text = format(Decimal(ratio or 1).normalize(), "f")
    return text


def shared_annotations(state: NodeCPUState, row: Row) -> dict[str, str]:
    """A shared pod's binding: the share pool, its CPU shares (request) and CFS quota (limit)."""
    instance = SharedInstance(row.instance, row.request_milli, row.limit_milli, row.app)
    pool = format_cpuset(state.share_pool)
    info = {name: {"cpuset": pool, "cpuShares": instance.cpu_shares, "cfsQuotaUs": instance.cfs_quota_us}
            for name in (row.containers or DEFAULT_CONTAINERS)}
    return {CPU_ISOLATE_MODE: SHARED, CUSTOM_CGROUP_INFO: _canonical(info)}


def desired_pod_annotations(state: NodeCPUState, row: Row) -> dict[str, str | None] | None:
    """The annotation patch that puts the pod in line with its row (None: nothing to write)."""
    if row.delivery == Row.Delivery.RELEASING:
        return {key: None for key in POD_KEYS}
    if row.mode == Row.Mode.SHARED:
        return {**shared_annotations(state, row), ALLOC_STATUS: None, ALLOC_SPEC: None, RELEASE_ISOLATE_MODE: None}
    if row.disputed or row.instance not in state.exclusive:
        return None
    wanted: dict[str, str | None] = dict(cpustate.pod_annotations(state, row.instance))
    wanted.setdefault(RELEASE_ISOLATE_MODE, None)
    return wanted


def _writes_shared(state: NodeCPUState, row: Row) -> bool:
    """Meridian binds the shared pods it placed, and every shared pod of a co-located node."""
    return row.source == Row.Source.ALLOCATED or bool(state.exclusive) or bool(row.delivered_digest)


def _colocated(node: NodeCPU, state: NodeCPUState, rows: Sequence[Row]) -> bool:
    """Whether Meridian manages the node's annotations: it holds exclusive instances, shared ones
    Meridian placed, or Meridian wrote them before. A node of plain pods is left alone."""
    return bool(state.exclusive or state.disputed or node.delivered_share_pool) or any(
        r.active and r.source == Row.Source.ALLOCATED for r in rows)


def _node_work(node: NodeCPU, state: NodeCPUState, rows: Sequence[Row]) -> tuple[dict[str, str] | None, str]:
    """The node annotations to write (None: nothing) and their canonical text ("" when unmanaged)."""
    if not _colocated(node, state, rows):
        return None, ""
    wanted = node_annotations(node, state)
    text = _canonical(wanted)
    return (wanted if node.delivered_share_pool != text else None), text


def _pod_work(state: NodeCPUState, rows: Sequence[Row]) -> list[tuple[Row, dict[str, str | None], str]]:
    """(row, annotation patch, digest) of every pod whose annotations are not what its row says."""
    work = []
    for row in rows:
        patch = desired_pod_annotations(state, row)
        if patch is None or (row.mode == Row.Mode.SHARED and row.active and not _writes_shared(state, row)):
            continue
        digest = _digest(patch)
        if digest == row.delivered_digest and row.delivery == Row.Delivery.DELIVERED:
            continue
        work.append((row, patch, digest))
    return work


def delivery_needed(node: NodeCPU, state: NodeCPUState, rows: Sequence[Row]) -> bool:
    return _node_work(node, state, rows)[0] is not None or bool(_pod_work(state, rows))


@dataclass
class DeliveryReport:
    node: str
    version: int = 0
    pods: int = 0
    waiting: list[str] = field(default_factory=list)
    removed: int = 0
    errors: list[str] = field(default_factory=list)
    passes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "version": self.version, "pods": self.pods, "waiting": self.waiting[:50],
                "removed": self.removed, "errors": self.errors[:50], "passes": self.passes}


def deliver(node_id: int, connector: Any = None) -> DeliveryReport | None:
    """Write the node's annotations from the committed rows until they match its latest version.

    Idempotent and incremental (each row remembers the digest of what was last written). A
    transient connector fault raises (the task retries it); a pod that does not exist yet is
    marked ``waiting`` (the reconciler delivers when it appears); other refusals are noted on
    the row and the node keeps going.
    """
    from fleet.connectors.base import ConnectorError
    from fleet.services import connector_for

    node = NodeCPU.objects.select_related("cluster").filter(pk=node_id).first()
    if node is None:
        return None
    report = DeliveryReport(node.name)
    own = connector is None
    connector = connector or connector_for(node.cluster)
    try:
        for _ in range(MAX_DELIVERY_PASSES):
            report.passes += 1
            version = node.version
            rows = list(node.allocations.all())
            state = state_of(node, rows)
            wanted_node, pool = _node_work(node, state, rows)
            if wanted_node is not None:
                connector.patch("v1", "Node", node.name, {"metadata": {"annotations": wanted_node}})
            outcomes: dict[int, tuple[str, str, str]] = {}  # row id -> (delivery, digest, error)
            for row, patch, digest in _pod_work(state, rows):
                try:
                    connector.patch("v1", "Pod", row.pod_name, {"metadata": {"annotations": patch}}, namespace=row.namespace)
                except ConnectorError as exc:
                    if exc.reason == "not_found":
                        outcomes[row.pk] = (Row.Delivery.RELEASING if not row.active else Row.Delivery.WAITING, "", "")
                        if row.active:
                            report.waiting.append(row.instance)
                        continue
                    if exc.transient:
                        raise
                    outcomes[row.pk] = (row.delivery, row.delivered_digest, str(exc)[:2000])
                    report.errors.append(f"{row.instance}: {exc}")
                    continue
                report.pods += 1
                outcomes[row.pk] = (Row.Delivery.RELEASING if not row.active else Row.Delivery.DELIVERED, digest, "")
            with transaction.atomic():
                locked = _lock(node)
                now = timezone.now()
                for row in rows:
                    if row.pk not in outcomes:
                        continue
                    delivery, digest, error = outcomes[row.pk]
                    if delivery == Row.Delivery.RELEASING:
                        deleted, _ = Row.objects.filter(pk=row.pk, delivery=Row.Delivery.RELEASING).delete()
                        report.removed += 1 if deleted else 0
                        continue
                    # only the version this pass read: a row changed meanwhile is written again next pass
                    Row.objects.filter(pk=row.pk, updated=row.updated).exclude(delivery=Row.Delivery.RELEASING).update(
                        delivery=delivery, delivered_digest=digest, delivery_error=error,
                        delivered_at=now if delivery == Row.Delivery.DELIVERED else row.delivered_at)
                NodeCPU.objects.filter(pk=locked.pk).update(delivered_version=max(locked.delivered_version, version),
                                                            delivered_share_pool=pool or node.delivered_share_pool,
                                                            touched=F("touched") + 1)
                report.version = version
                if locked.version == version:
                    break
                locked.refresh_from_db(fields=["delivered_share_pool", "delivered_version", "touched"])  # as just written:
                node = locked  # a pass that wrote an older pool after a newer one's writes the newer again
        return report
    finally:
        if own:
            connector.close()


# ---------------------------------------------------------------------------- reconcile


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
    return _digest([{k: annotations.get(k) for k in keys}, sorted(items, key=lambda i: i[0])])


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
    kept, its CPUs given before its bind (``scheduling.cpu_binding``).
    ``touched`` is the node's write counter read before ``node_obj`` and ``pods`` were listed:
    when rows or annotations changed since, the listing may predate them (a delivery that
    just wrote, an allocation that just landed) and the node is left to the next pass.
    """
    now = now or timezone.now()
    annotations = (node_obj.get("metadata") or {}).get("annotations") or {}
    live = [p for p in pods if _live(p)]
    result = NodeReconcile(node_cpu.name)
    with transaction.atomic():
        locked = _lock(node_cpu)
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
        if changed:
            _reclaim(locked, final)
        if changed or inputs.changed:
            _bump(locked, state)
        else:
            NodeCPU.objects.filter(pk=locked.pk).update(**summary_values(state))
        if result.repaired or result.conflicts:
            record_change(locked, "action", verb="reconcile", after={
                "released": result.released, "adopted": result.adopted, "conflicts": result.conflicts},
                reason="; ".join([*(f"released {i}" for i in result.released),
                                  *(f"adopted {i}" for i in result.adopted)])[:2000])
        if changed or inputs.changed or result.redeliver or locked.delivered_version < locked.version:
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
    stale = []
    wanted_node = node_annotations(locked, state)
    if any(annotations.get(key) != value for key, value in wanted_node.items()) and (
            state.exclusive or CPU_SHAREPOOL in annotations or locked.delivered_share_pool):
        NodeCPU.objects.filter(pk=locked.pk).update(delivered_share_pool=STALE)
        stale.append("node cpu-sharepool")
    for row in rows:
        pod = by_key.get(row.instance)
        if pod is None or not row.active or row.delivery != Row.Delivery.DELIVERED:
            continue
        if row.mode == Row.Mode.SHARED and not _writes_shared(state, row):
            continue
        wanted = desired_pod_annotations(state, row)
        if wanted is None:
            continue
        current = (pod.get("metadata") or {}).get("annotations") or {}
        if any(current.get(key) != value for key, value in wanted.items()):
            Row.objects.filter(pk=row.pk).update(delivered_digest="")
            stale.append(row.instance)
    return stale


def _reconcile_rows(locked: NodeCPU, rows: list[Row], rec: cpustate.Reconciliation, by_key: Mapping[str, Mapping[str, Any]],
                    now: datetime, result: NodeReconcile, pending: Mapping[str, Mapping[str, Any]]) -> bool:
    """Apply the release/adopt rules; True when any row changed."""
    changed = False
    kept: dict[str, Row] = {}
    annotated = rec.state
    for row in rows:
        pod = by_key.get(row.instance)
        if pod is not None and row.pod_uid and _pod_uid(pod) and _pod_uid(pod) != row.pod_uid:
            pod = None  # a new pod of the same name: the instance that held the CPUs is gone
        young = now - row.created < ANNOTATION_GRACE
        if row.delivery == Row.Delivery.RELEASING:
            if pod is None:
                row.delete()
                changed = True
            continue
        if pod is None:
            waiting = pending.get(row.instance)
            ahead = young and row.delivery in (Row.Delivery.PENDING, Row.Delivery.WAITING) and row.source == Row.Source.ALLOCATED
            if ahead or (waiting is not None and _pod_uid(waiting) in ("", row.pod_uid)):
                kept[row.instance] = row  # allocated ahead of its pod, or of its bind
                continue
            _release_row(row, "its pod is gone" if row.delivery == Row.Delivery.DELIVERED or row.source == Row.Source.ADOPTED
                         else "its pod never came and its annotations were never written", result)
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
                _release_row(row, "its pod is not a shared instance (any more)", result)
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
            _release_row(row, f"its pod's annotation names CPUs {format_cpuset(claim.cpus)}, not {row.cpuset}", result)
            changed = True
        else:
            _release_row(row, f"its pod carries no {ALLOC_STATUS} annotation (never written)", result)
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
            _release_row(row, f"pods annotated outside Meridian hold CPUs {format_cpuset(adopted_cpus & set(row.cpus))}", result)
            del kept[instance]
            changed = True
    for instance, allocation in annotated.exclusive.items():
        if instance in kept:
            continue
        pod = by_key.get(instance)
        _adopt(locked, instance, pod, Row.Mode.EXCLUSIVE, result, cpus=sorted(allocation.cpus), strategy=allocation.strategy,
               app=allocation.app, release_isolate=allocation.release_isolate, exclude_reserved=allocation.exclude_reserved,
               containers=list(allocation.containers))
        changed = True
    for instance, cpus in annotated.disputed.items():
        if instance in kept:
            continue
        _adopt(locked, instance, by_key.get(instance), Row.Mode.EXCLUSIVE, result, cpus=sorted(cpus), disputed=True)
        changed = True
    for instance, shared in annotated.shared.items():
        if instance in kept:
            continue
        pod = by_key.get(instance)
        _adopt(locked, instance, pod, Row.Mode.SHARED, result, request_milli=shared.request_milli, limit_milli=shared.limit_milli,
               app=shared.app, containers=_pod_containers(pod) if pod else list(DEFAULT_CONTAINERS))
        changed = True
    for instance in rec.unallocated:
        if instance not in kept:
            result.problems.append(f"{instance} is exclusive but has no {ALLOC_STATUS}: not allocated")
    return changed


def _release_row(row: Row, why: str, result: NodeReconcile) -> None:
    result.released.append(f"{row.instance} ({why})")
    row.delete()


def _adopt(locked: NodeCPU, instance: str, pod: Mapping[str, Any] | None, mode: str, result: NodeReconcile, *,
           cpus: Sequence[int] = (), strategy: str = "", app: str = "", release_isolate: bool = False,
           exclude_reserved: bool = True, containers: Sequence[str] = (), disputed: bool = False, request_milli: int = 0,
           limit_milli: int = 0) -> Row:
    namespace, _, name = instance.partition("/")
    row = Row.objects.create(
        node_cpu=locked, namespace=namespace, pod_name=name, pod_uid=_pod_uid(pod) if pod else "", app=app, mode=mode,
        strategy=strategy, request=len(cpus), cpus=list(cpus), cpuset=format_cpuset(cpus), release_isolate=release_isolate,
        exclude_reserved=exclude_reserved, containers=list(containers or DEFAULT_CONTAINERS), disputed=disputed,
        request_milli=request_milli, limit_milli=limit_milli, source=Row.Source.ADOPTED,
        delivery=Row.Delivery.DELIVERED, delivered_at=timezone.now(), created_by="system:cpu-reconciler")
    if mode == Row.Mode.EXCLUSIVE:
        result.adopted.append(instance + (" (disputed)" if disputed else ""))
    return row


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
        return {"cluster": self.cluster, "nodes": self.nodes, "skipped": self.skipped, "released": self.released[:100],
                "adopted": self.adopted[:100], "conflicts": self.conflicts, "errors": self.errors[:50]}


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


# ---------------------------------------------------------------------------- the agent API


#: Agents' cpuset answers, cached in Redis under their ETag (``cpu_agent_views``).
AGENT_BODY_KEY = "meridian:scheduling:cpuset:{etag}"


def forget_agent_bodies(**_: Any) -> int:
    """After the database was restored (``core.backup.database_restored``): versions rewound, so
    the next allocation's ETag can name a body cached for the replaced database's same version."""
    from core.redis import delete_matching

    return delete_matching(AGENT_BODY_KEY.format(etag="*"))


def agent_etag(node: NodeCPU) -> str:
    """Changes whenever the payload can: every allocation change bumps ``version``. The row's
    creation time makes it one row's (bodies are cached in Redis by ETag: a database rebuilt
    from scratch, whose ids and versions start over, must not be served another's)."""
    return '"cpu-' + _digest([node.pk, node.created.isoformat(), node.version, node.reserved_cpus, str(node.overcommit_ratio),
                              node.topology_digest, node.io_queues])[:24] + '"'


def agent_payload(node: NodeCPU, cluster: str) -> dict[str, Any]:
    """What a node agent applies: the share pool and every instance's cpuset (the annotations' content)."""
    rows = list(node.allocations.all())
    state = state_of(node, rows)
    instances = []
    for row in sorted((r for r in rows if r.active), key=lambda r: r.instance):
        item: dict[str, Any] = {"namespace": row.namespace, "name": row.pod_name, "uid": row.pod_uid, "app": row.app,
                                "mode": row.mode}
        if row.mode == Row.Mode.EXCLUSIVE and not row.disputed:
            effective = format_cpuset(state.effective_cpuset(row.instance))
            item |= {"cpus": row.cpus, "cpuset": row.cpuset, "strategy": row.strategy, "releaseIsolate": row.release_isolate,
                     "excludeReserved": row.exclude_reserved,
                     "containers": {name: {"cpuset": effective} for name in row.containers or DEFAULT_CONTAINERS}}
        elif row.mode == Row.Mode.EXCLUSIVE:
            item |= {"cpus": row.cpus, "cpuset": row.cpuset, "disputed": True}
        else:
            shared = SharedInstance(row.instance, row.request_milli, row.limit_milli, row.app)
            pool = format_cpuset(state.share_pool)
            item |= {"cpuShares": shared.cpu_shares, "cfsQuotaUs": shared.cfs_quota_us,
                     "containers": {name: {"cpuset": pool} for name in row.containers or DEFAULT_CONTAINERS}}
        instances.append(item)
    return {"cluster": cluster, "node": node.name, "version": node.version,
            "reserved": node.reserved_cpus, "sharePool": {"cpuIDs": sorted(state.share_pool),
                                                          "cpuset": format_cpuset(state.share_pool)},
            "instances": instances}


__all__ = [
    "ANNOTATION_GRACE", "DELIVER_TASK", "RECONCILE_TASK", "agent_etag", "agent_payload", "allocate_exclusive", "candidates",
    "configure",
    "current_state", "deliver", "ensure_node_cpu", "fleet_view", "place_shared", "propose_io_queues", "reconcile_cluster",
    "reconcile_node", "refresh_share_pool", "release", "set_release_isolate", "state_of",
    "summary_sums", "topology_of",
    "what_if",
]
