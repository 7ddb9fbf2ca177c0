"""A node's CPU state as stored, and what every write to it shares.

The pure modules decide (``cpu.cpuset`` picks CPUs, ``cpu.state`` keeps the share pool, the
sellable rules and machineMaxList, ``cpu.fit`` summarises); the writers (``allocation``,
``inputs``, ``delivery``, ``reconcile``) make their decisions durable and safe across processes
with what is here:

* **One writer per node.** Every change locks the node's ``NodeCPU`` row (``lock_node``:
  ``select_for_update``; on SQLite the IMMEDIATE transaction serialises writers), builds the
  ``NodeCPUState`` from the committed ``CPUAllocation`` rows (``state_of``), asks the pure
  allocator, runs the safety checks, writes the rows and ``CPUClaim`` rows (``claim_cpus``:
  unique per node and CPU, so a CPU cannot be held twice even by a writer that skipped the
  lock) and stores the summary with a guarded ``UPDATE ... WHERE version = <read>``
  (``save_state``). Redis plays no part in correctness.
* **Delivered by a job.** ``request_delivery`` enqueues ``scheduling.cpu_deliver``
  (``core.jobs.enqueue``: sent after commit, re-sent until done).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from core import jobs
from core.errors import Conflict, NotFound
from core.models import Job

from ..models import SUMMARY_FIELDS, CPUAllocation, CPUClaim, NodeCPU
from . import fit
from .cpuset import (
    SAME_CORE_FIRST,
    CPUSetFormatError,
    CPUTopology,
    IOQueueDistribution,
    TopologyError,
    format_cpuset,
    parse_cpuset,
)
from .state import DEFAULT_CONTAINERS, ExclusiveAllocation, NodeCPUState, SharedInstance, StateError

#: Celery task names (registered by ``cpu.tasks``; queued messages and beat carry them).
DELIVER_TASK = "scheduling.cpu_deliver"
RECONCILE_TASK = "scheduling.cpu_reconcile_cluster"


Row = CPUAllocation


# -------------------------------------------------------------------------- building states


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def content_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:32]


@lru_cache(maxsize=1024)
def _topology(rows_json: str, queues_json: str) -> CPUTopology:
    topology = CPUTopology.from_rows(json.loads(rows_json))
    if queues_json:
        topology = topology.with_io_queues(IOQueueDistribution.from_mapping(json.loads(queues_json)))
    return topology


def topology_of(node: NodeCPU) -> CPUTopology:
    """The node's topology with its accepted IO-queue distribution (cached per content)."""
    return _topology(canonical_json(node.topology), canonical_json(node.io_queues) if node.io_queues else "")


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
        raise Conflict("inconsistent_state", _("Node %(node)s's stored CPU state is inconsistent: %(error)s") % {
            "node": node.name, "error": exc}) from exc


def current_state(node: NodeCPU) -> NodeCPUState:
    """The committed state, read without a lock (pages, what-if, the agent API)."""
    return state_of(node, node.allocations.all())


def summary_values(state: NodeCPUState) -> dict[str, int]:
    return dict(zip(SUMMARY_FIELDS, fit.summarize(state), strict=True))


def topology_columns(topology: CPUTopology) -> dict[str, Any]:
    return {"topology": [list(row) for row in topology.rows], "topology_digest": content_digest([list(r) for r in topology.rows]),
            "cpus": len(topology), "sockets": len(topology.sockets), "numa_nodes": len(topology.numa_nodes),
            "cores": topology.num_cores, "threads_per_core": topology.threads_per_core}


# ------------------------------------------------------------------ locking and bookkeeping


def lock_node(node: NodeCPU | int) -> NodeCPU:
    """The node's row, locked until the transaction ends (the per-node lock across processes)."""
    pk = node.pk if isinstance(node, NodeCPU) else node
    locked = NodeCPU.objects.select_for_update(no_key=True).select_related("cluster", "node").filter(pk=pk).first()
    if locked is None:
        raise NotFound("not_found", _("This node's CPU state no longer exists."))
    return locked


def save_state(locked: NodeCPU, state: NodeCPUState, **extra: Any) -> None:
    """Store the summary and bump the version; guarded by the version read under the lock."""
    values = summary_values(state) | extra
    updated = NodeCPU.objects.filter(pk=locked.pk, version=locked.version).update(
        version=F("version") + 1, touched=F("touched") + 1, updated=timezone.now(), **values)
    if updated != 1:  # only possible without the row lock: refuse rather than overwrite
        raise Conflict("concurrent_change", _("Node %(node)s's CPU state changed meanwhile; try again.") % {"node": locked.name})
    locked.version += 1
    locked.touched += 1
    for key, value in values.items():
        setattr(locked, key, value)


def claim_cpus(locked: NodeCPU, row: Row) -> None:
    """Hold the row's CPUs in the claims table; a CPU held already is a refusal, never a double booking."""
    try:
        with transaction.atomic():
            CPUClaim.objects.bulk_create([CPUClaim(node_cpu=locked, cpu=cpu, allocation=row) for cpu in row.cpus])
    except IntegrityError as exc:
        raise Conflict("cpu_taken", _("A CPU of %(cpus)s is already held on node %(node)s.") % {
            "cpus": format_cpuset(row.cpus), "node": locked.name}) from exc


def reclaim_cpus(locked: NodeCPU, rows: Iterable[Row]) -> None:
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


def row_snapshot(row: Row) -> dict[str, Any]:
    data = {"node": row.node_cpu.name if row.node_cpu_id else "", "instance": row.instance, "uid": row.pod_uid,
            "app": row.app, "mode": row.mode}
    if row.mode == Row.Mode.EXCLUSIVE:
        data |= {"strategy": row.strategy, "request": row.request, "cpuset": row.cpuset,
                 "release_isolate": row.release_isolate, "exclude_reserved": row.exclude_reserved}
    else:
        data |= {"request_milli": row.request_milli, "limit_milli": row.limit_milli}
    return data
