"""Filter, score, what-if and fleet summaries over :class:`~scheduling.cpu.state.NodeCPUState`.

These are the pieces a scheduler plugin (owned by the plugin framework) calls per node, and
what the console's fleet CPU view reads.  Pure Python, no Django.

Filter
    :func:`fits_exclusive` / :func:`fits_shared` return ``Fit(ok, reason)`` with
    kube-scheduler-style reasons: ``"Insufficient exclusive cpu"``, ``"Insufficient shared
    cpu"``, ``"app X already has N instance(s) on this node (machineMaxList)"``,
    ``"request exceeds 2/3 of sellable CPUs (64)"``.  The first failing rule is the reason;
    :func:`scheduling.cpu.state.exclusive_problems` lists them all.

Score (0-100, higher is better)
    ``50 * fill + 30 * locality + 20 * (1 - stranded share)`` where *fill* is the node's
    exclusive CPUs after placement over its sellable exclusive CPUs (best fit: fill the most
    allocated node, keep big holes elsewhere), *locality* is 1 when the instance lands in one
    NUMA node, 0.5 in one socket, 0 across sockets, and *stranded share* is the fraction of the
    node's sellable CPUs left as lone threads (free CPUs whose core is partly held, which only
    single-thread requests can use).  A node that does not fit scores 0.

Per-node summary (what the fleet view stores; eight integers, see :class:`NodeSummary`)
    recomputed whenever a node's state changes, so the fleet view over 200k nodes only adds
    and counts integers (:func:`fleet_view`, :class:`SummaryColumns`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from scheduling.cpu.cpuset import BIND_ALL_CPUS, SAME_CORE_FIRST, AllocationError, CPUTopology, format_cpuset, plan_allocation
from scheduling.cpu.state import (
    ExclusiveAllocation,
    NodeCPUState,
    SharedInstance,
    exclusive_problems,
    sellable_figures,
    shared_problems,
)

__all__ = [
    "Fit",
    "FleetCPUView",
    "NodeSummary",
    "SummaryColumns",
    "WhatIf",
    "fits_exclusive",
    "fits_shared",
    "fleet_view",
    "score_exclusive",
    "summarize",
    "summarize_masks",
    "what_if_exclusive",
]


class Fit(NamedTuple):
    """A filter verdict: ``ok`` and, when not, the first reason (kube-scheduler wording)."""

    ok: bool
    reason: str = ""


def fits_exclusive(
    state: NodeCPUState, request: int, strategy: str = SAME_CORE_FIRST, app: str = "",
    machine_max: Mapping[str, int] | None = None,
) -> Fit:
    """Can this node take an exclusive instance of ``request`` CPUs (of ``app``)?"""
    reasons = exclusive_problems(state, request, strategy, app, machine_max)
    return Fit(False, reasons[0]) if reasons else Fit(True)


def fits_shared(state: NodeCPUState, instance: SharedInstance, machine_max: Mapping[str, int] | None = None) -> Fit:
    """Can this node take the shared instance without overselling its exclusive CPUs?"""
    reasons = shared_problems(state, instance, machine_max)
    return Fit(False, reasons[0]) if reasons else Fit(True)


# --------------------------------------------------------------------------- summaries


class NodeSummary(NamedTuple):
    """The eight integers the fleet view keeps per node (all in CPUs unless noted).

    * ``sellable``: physical CPUs for sale, all - reserved (``P``).
    * ``exclusive_used``: CPUs held exclusively (disputed included).
    * ``exclusive_left``: sellable exclusive CPUs still for sale, ``max(0, min(a, b) - used)``.
    * ``largest_exclusive``: the largest exclusive instance the node takes now (also capped by
      the 2/3 rule and the free CPUs); "can it take 32C?" is ``largest_exclusive >= 32``.
    * ``largest_numa``: the largest exclusive instance that fits inside one NUMA node.
    * ``free_whole_cores``: share-pool cores with every thread free.
    * ``stranded``: share-pool CPUs whose core is partly held (lone threads).
    * ``shared_sold_milli``: millicores sold to shared instances.
    """

    sellable: int
    exclusive_used: int
    exclusive_left: int
    largest_exclusive: int
    largest_numa: int
    free_whole_cores: int
    stranded: int
    shared_sold_milli: int


def summarize_masks(
    topology: CPUTopology,
    reserved_mask: int,
    held_mask: int,
    shared_sold_milli: int = 0,
    max_shared_milli: int = 0,
    overcommit_ratio: Fraction | int = 1,
    max_instance_fraction: Fraction = Fraction(2, 3),
) -> NodeSummary:
    """The summary from bit masks (bit ``c`` = CPU ``c``), as a fleet store would keep a node.

    Same figures as :func:`summarize` of the equivalent state, without building the state.
    """
    free = topology.all_mask & ~reserved_mask & ~held_mask
    physical = len(topology) - reserved_mask.bit_count()
    used = held_mask.bit_count()
    a, b, max_instance = sellable_figures(physical, shared_sold_milli, max_shared_milli, Fraction(overcommit_ratio),
                                          max_instance_fraction)
    left = max(0, min(a, b) - used)
    free_count = free.bit_count()
    largest = min(left, max_instance, free_count)
    best_numa = whole = in_whole = 0
    for _, numa_free, numa_whole, numa_whole_cpus in topology.numa_counts(free):
        best_numa = max(best_numa, numa_free)
        whole += numa_whole
        in_whole += numa_whole_cpus
    return NodeSummary(physical, used, left, largest, min(largest, best_numa), whole, free_count - in_whole,
                       shared_sold_milli)


def summarize(state: NodeCPUState) -> NodeSummary:
    """The node's :class:`NodeSummary`."""
    sizes = [s.size_milli for s in state.shared.values()]
    topology = state.topology
    return summarize_masks(topology, topology.mask_of(state.reserved), topology.mask_of(state.held), sum(sizes),
                           max(sizes, default=0), state.overcommit_ratio, state.max_instance_fraction)


class SummaryColumns:
    """Node summaries stored column-wise (one ``array('q')`` per field), as the fleet view reads them.

    Sums over a column run in C, so the fleet view over 200k nodes stays in milliseconds.
    """

    __slots__ = ("names", *NodeSummary._fields)

    def __init__(self) -> None:
        self.names: list[str] = []
        for name in NodeSummary._fields:
            setattr(self, name, array("q"))

    @classmethod
    def of(cls, summaries: Iterable[tuple[str, NodeSummary]]) -> SummaryColumns:
        columns = cls()
        for name, summary in summaries:
            columns.append(name, summary)
        return columns

    def append(self, name: str, summary: NodeSummary) -> None:
        self.names.append(name)
        for field_name, value in zip(NodeSummary._fields, summary):
            getattr(self, field_name).append(value)

    def __len__(self) -> int:
        return len(self.names)

    def column(self, name: str) -> Sequence[int]:
        return getattr(self, name)


@dataclass(frozen=True)
class FleetCPUView:
    """Fleet totals for the console (CPUs unless noted); ``fit_*`` answer one request size."""

    nodes: int
    sellable: int
    exclusive_used: int
    exclusive_left: int
    free_whole_cores: int
    stranded: int
    shared_sold_milli: int
    largest_exclusive: int
    request: int | None = None
    fit_nodes: int = 0  # nodes that can take ``request`` exclusive CPUs now
    fit_numa_nodes: int = 0  # ... inside one NUMA node
    fit_instances: int = 0  # instances of ``request`` CPUs the fleet can still sell (per node, by sellable left)


def fleet_view(columns: SummaryColumns, request: int | None = None) -> FleetCPUView:
    """Add up the stored per-node integers; with ``request``, count where such an instance fits."""
    fit_nodes = fit_numa = fit_instances = 0
    if request is not None and request > 0:
        fit_nodes = sum(1 for value in columns.largest_exclusive if value >= request)
        fit_numa = sum(1 for value in columns.largest_numa if value >= request)
        fit_instances = sum(value // request for value in columns.exclusive_left if value >= request)
    return FleetCPUView(
        nodes=len(columns),
        sellable=sum(columns.sellable),
        exclusive_used=sum(columns.exclusive_used),
        exclusive_left=sum(columns.exclusive_left),
        free_whole_cores=sum(columns.free_whole_cores),
        stranded=sum(columns.stranded),
        shared_sold_milli=sum(columns.shared_sold_milli),
        largest_exclusive=max(columns.largest_exclusive, default=0),
        request=request,
        fit_nodes=fit_nodes,
        fit_numa_nodes=fit_numa,
        fit_instances=fit_instances,
    )


# --------------------------------------------------------------------------- score and what-if


def _placed(state: NodeCPUState, request: int, strategy: str) -> tuple[list[int], str]:
    size = len(state.share_pool) if strategy == BIND_ALL_CPUS else request
    placement = plan_allocation(state.topology, state.share_pool, size, strategy)
    return placement.cpus, placement.scope


def score_exclusive(state: NodeCPUState, request: int, strategy: str = SAME_CORE_FIRST) -> int:
    """0-100: best fit, locality and little stranding after placing the instance (see module doc)."""
    if exclusive_problems(state, request, strategy):
        return 0
    cpus, scope = _placed(state, request, strategy)
    topology = state.topology
    after = summarize_masks(topology, topology.mask_of(state.reserved), topology.mask_of(state.held | set(cpus)),
                            0, 0, 1, state.max_instance_fraction)
    capacity = max(1, state.sellable.capacity)
    fill = min(1.0, after.exclusive_used / capacity)
    locality = {"numa": 1.0, "socket": 0.5}.get(scope, 0.0)
    stranded = after.stranded / max(1, after.sellable)
    return round(50 * fill + 30 * locality + 20 * (1 - stranded))


@dataclass(frozen=True)
class WhatIf:
    """The answer to "can this node take an N-CPU exclusive instance?"."""

    ok: bool
    reason: str  # kube-style reason when not ok, "" when ok
    detail: str  # one sentence with the figures behind the answer
    cpus: tuple[int, ...] = ()
    cpuset: str = ""
    scope: str = "none"  # numa | socket | machine
    before: NodeSummary | None = None
    after: NodeSummary | None = None


def what_if_exclusive(
    state: NodeCPUState, request: int, strategy: str = SAME_CORE_FIRST, app: str = "",
    machine_max: Mapping[str, int] | None = None,
) -> WhatIf:
    """Try the placement without changing anything; say where it lands or why it cannot."""
    before = summarize(state)
    sellable = state.sellable
    reasons = exclusive_problems(state, request, strategy, app, machine_max)
    if reasons:
        figures = (f"{request if strategy != BIND_ALL_CPUS else len(state.share_pool)} requested; "
                   f"{sellable.left} of {max(0, sellable.capacity)} sellable exclusive CPU(s) left "
                   f"(a={sellable.a}, b={sellable.b}, {sellable.sold} already exclusive); "
                   f"at most {sellable.max_instance} per instance; {len(state.share_pool)} CPU(s) in the share pool")
        return WhatIf(False, reasons[0], "; ".join(reasons) + f" — {figures}", before=before)
    try:
        cpus, scope = _placed(state, request, strategy)
    except AllocationError as exc:  # the rules passed, so this is a topology-level refusal
        return WhatIf(False, str(exc), str(exc), before=before)
    allocation = ExclusiveAllocation("what-if", frozenset(cpus), strategy, app)
    after = summarize(state.with_exclusive(allocation))
    where = {"numa": f"NUMA node {state.topology.numa_of(cpus[0])}" if cpus else "nowhere",
             "socket": f"socket {state.topology.socket_of(cpus[0])}" if cpus else "nowhere"}.get(scope, "several sockets")
    detail = (f"fits: CPU(s) {format_cpuset(cpus)} in {where}; {after.exclusive_left} sellable exclusive CPU(s) "
              f"left after, largest next instance {after.largest_exclusive}")
    return WhatIf(True, "", detail, tuple(cpus), format_cpuset(cpus), scope, before, after)
