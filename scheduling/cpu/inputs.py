"""What a node publishes about its CPUs, taken in: ``ensure_node_cpu`` (its ``NodeCPU`` the first
time), and ``apply_node_inputs`` for the node annotations ``scheduling.meridian.io/cpu-topology``
(published by the node or the simulator), ``scheduling.meridian.io/io-queue-cpus``
(``{"queues": {...}}``), ``scheduling.meridian.io/reserved-cpus`` and
``scheduling.meridian.io/cpu-overcommit-ratio``. A topology and an IO-queue distribution are
taken only as a valid growth; what is refused stays visible on the node and is audited once.
``propose_io_queues`` is the same rule for a distribution offered through the API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction

from core import concurrency
from core.audit import record_change
from core.errors import Conflict, Refused
from fleet.models import Node

from ..models import NodeCPU
from .cpuset import (
    IO_QUEUES_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    CPUSetFormatError,
    CPUTopology,
    IOQueueDistribution,
    TopologyError,
    accept_io_queue_update,
    accept_topology_update,
    format_cpuset,
    parse_cpuset,
)
from .state import OVERCOMMIT_RATIO_ANNOTATION, RESERVED_CPUS_ANNOTATION, NodeCPUState
from .store import Row, lock_node, request_delivery, save_state, state_of, summary_values, topology_columns


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
            return NodeCPU.objects.create(node=node, cluster_id=node.cluster_id, name=node.name, **topology_columns(topology),
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
            columns = topology_columns(published)
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
                                 before={"overcommit_ratio": str(locked.overcommit_ratio)},
                                 after={"overcommit_ratio": str(ratio)})
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
    locked.io_queue_state, locked.io_queue_message, locked.refused_io_queues = (
        NodeCPU.IOQueueState.ACCEPTED, decision.reason, None)
    _record_decision(locked, "io_queues_accepted", decision.reason,
                     before={"io_queues": previous.as_dict() if previous else None}, after={"io_queues": locked.io_queues})
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
                "io_queue_state", "io_queue_message", "refused_io_queues", "topology_message", "reserved_cpus",
                "overcommit_ratio")


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
        locked = lock_node(node)
        concurrency.check(locked)
        changed = _offer_io_queues(locked, offered)
        if changed:
            locked.save(update_fields=[*INPUT_FIELDS, "updated"])
            if locked.io_queue_state == NodeCPU.IOQueueState.ACCEPTED:
                save_state(locked, state_of(locked, locked.allocations.all()))
                request_delivery(locked)
    if locked.io_queue_state == NodeCPU.IOQueueState.REFUSED:
        raise Conflict("io_queues_refused", locked.io_queue_message, field="queues")
    return locked
