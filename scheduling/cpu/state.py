"""One node's CPU state under exclusive/shared co-location (Alibaba's scheme), as plain data.

Pure Python (no Django): the scheduler's filter, the controller writing annotations, the
node agent and the what-if page share it.  A :class:`NodeCPUState` is immutable; every change
(``with_exclusive``, ``allocate_exclusive``, ``without``, ``with_release_isolate``, ...) returns
a new state, so a failed step never leaves a half-applied state behind.

Model
-----
* ``reserved``: CPUs kept for the system (a 104-CPU host reserving 8 sells 96).
* Exclusive instances (pod annotation ``cpu-isolate-mode: exclusive``) own a cpuset
  (:class:`ExclusiveAllocation`); no CPU is ever owned twice.
* Shared instances (:class:`SharedInstance`) run on the **share pool** and are limited by CPU
  shares (from the request) and CFS quota (from the limit), oversold at the node's
  ``overcommit_ratio``.
* share pool = all CPUs - reserved - exclusive, always (``disputed`` CPUs, see
  reconciliation, count as exclusive: somebody believes they own them).

Sellable rules (seed 004, our reading)
--------------------------------------
``P`` = sellable physical CPUs = all - reserved; ``r`` = overcommit ratio; a shared instance's
*size* is its CPU spec, i.e. its limit (its request when it has no limit); CPUs *sold* to
shared instances are the sum of those sizes.

* One exclusive instance may take at most ``floor(P * 2/3)`` CPUs (96 -> 64); the fraction is
  ``max_instance_fraction``.  The seed's sentence ("单个ECS独享实例可售最大CPU比例为2/3")
  could also be read as a cap on all exclusive CPUs of the machine; the spec reads it per
  instance and so do we.  The min(a, b) rule below keeps room for the shared instances.
* Sellable exclusive CPUs = ``min(a, b)`` with
  ``a = P - 2 * max(shared size)`` (the share pool keeps at least twice the largest shared
  instance, so none of them can take more than half of the pool it bursts into) and
  ``b = (P * r - sum(shared sizes)) / r`` (the seed's "单机可售CPU" is sellable CPU in sold
  units, ``P * r``; dividing by ``r`` turns what shared instances have not bought back into
  physical CPUs).  Both are floored to whole CPUs.  Whether ``P`` counts the exclusive CPUs
  already sold or not does not matter: ``min(a, b) - E`` is the same either way, which is
  ``exclusive_left``.
* A shared instance fits while the exclusive CPUs already sold stay within the new
  ``min(a, b)`` (the same rule seen from the other side).
* ``machineMaxList`` (app -> max instances per node, usually 1) counts exclusive and shared
  instances alike: a single machine failure costs an app at most 1/N.

Release-isolate mode and exclude-reserve-cpuset
-----------------------------------------------
``release-isolate-mode: "true"`` is the big-sale emergency: the instance's container may run
on every CPU but the reserved ones (every CPU when ``exclude-reserve-cpuset: "false"``).  Its
*allocation* does not change: ``alloc-status`` keeps its own CPUs, the share pool and the
sellable figures are unchanged, and turning the mode off restores ``custom-cgroup-info`` to
the allocation.  Only the cpuset shown to the container (:meth:`NodeCPUState.effective_cpuset`)
changes.

Safety checks (:func:`check_exclusive`) run before a cpuset is applied and return reasons:
CPUs unknown, reserved or owned by another instance; the 2/3 cap; the node's sellable
exclusive CPUs exceeded; and, given the strategy, the cpuset must be the one the allocator
picks following the node's CPU priority order (which is derived from the IO-queue
distribution): a controller whose view of the IO queues differs from the scheduler's refuses.

Annotations
-----------
Pod: ``cpu-isolate-mode: exclusive``, ``alloc-spec: {"cpu":"Spread"}``,
``alloc-status: {"cpu":[0,1]}``, ``custom-cgroup-info: {"engine":{"cpuset":"2-3"}}`` (one
entry per container, Linux cpuset list), ``exclude-reserve-cpuset: "true"|"false"``,
``release-isolate-mode: "true"`` (absent when off).  Node: ``cpu-sharepool:
{"cpuIDs":[...]}``; inputs ``scheduling.meridian.io/reserved-cpus: "0-3,52-55"`` and
``scheduling.meridian.io/cpu-overcommit-ratio: "2"``.

:func:`rebuild_state` is the inverse: the node's state rebuilt from its pods' annotations
alone, so an allocation lost in a crash before its annotation was written leaks nothing.  Two
pods claiming one CPU are a conflict: the earlier pod (creation time, then name) keeps the
CPU, the later one's claim becomes *disputed* (held back from everybody, reported), never
handed out again until the pods are fixed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from types import MappingProxyType
from typing import Any

from kube.resources import pod_limits, pod_requests
from scheduling.cpu.cpuset import (
    BIND_ALL_CPUS,
    SAME_CORE_FIRST,
    STRATEGIES,
    AllocationError,
    CPUSetFormatError,
    CPUTopology,
    format_cpuset,
    parse_cpuset,
    plan_allocation,
)

__all__ = [
    "ALLOC_SPEC",
    "ALLOC_STATUS",
    "CPU_ISOLATE_MODE",
    "CPU_SHAREPOOL",
    "CUSTOM_CGROUP_INFO",
    "EXCLUDE_RESERVE_CPUSET",
    "INSUFFICIENT_EXCLUSIVE",
    "INSUFFICIENT_SHARED",
    "OVERCOMMIT_RATIO_ANNOTATION",
    "RELEASE_ISOLATE_MODE",
    "RESERVED_CPUS_ANNOTATION",
    "CPUCell",
    "CPUConflict",
    "ExclusiveAllocation",
    "NodeCPUState",
    "Reconciliation",
    "Sellable",
    "SharedInstance",
    "StateError",
    "alloc_status",
    "check_exclusive",
    "cpu_map",
    "custom_cgroup_info",
    "exclusive_problems",
    "node_annotations",
    "parse_alloc_spec",
    "parse_alloc_status",
    "parse_custom_cgroup_info",
    "parse_share_pool",
    "pod_annotations",
    "rebuild_state",
    "sellable_figures",
    "shared_problems",
    "share_pool_annotation",
]

CPU_ISOLATE_MODE = "cpu-isolate-mode"
EXCLUSIVE = "exclusive"
ALLOC_SPEC = "alloc-spec"
ALLOC_STATUS = "alloc-status"
CUSTOM_CGROUP_INFO = "custom-cgroup-info"
EXCLUDE_RESERVE_CPUSET = "exclude-reserve-cpuset"
RELEASE_ISOLATE_MODE = "release-isolate-mode"
CPU_SHAREPOOL = "cpu-sharepool"
RESERVED_CPUS_ANNOTATION = "scheduling.meridian.io/reserved-cpus"
OVERCOMMIT_RATIO_ANNOTATION = "scheduling.meridian.io/cpu-overcommit-ratio"
DEFAULT_CONTAINERS = ("engine",)

INSUFFICIENT_EXCLUSIVE = "Insufficient exclusive cpu"
INSUFFICIENT_SHARED = "Insufficient shared cpu"
CFS_PERIOD_US = 100_000


class StateError(ValueError):
    """A state that breaks the model: a CPU owned twice, a reserved or unknown CPU owned."""


@dataclass(frozen=True)
class ExclusiveAllocation:
    """An exclusive instance's cpuset and how it is shown to its containers."""

    instance: str
    cpus: frozenset[int]
    strategy: str = SAME_CORE_FIRST
    app: str = ""
    release_isolate: bool = False
    exclude_reserved: bool = True
    containers: tuple[str, ...] = DEFAULT_CONTAINERS

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpus", frozenset(self.cpus))
        object.__setattr__(self, "containers", tuple(self.containers))
        if self.strategy not in STRATEGIES:
            raise StateError(f"{self.instance}: unknown CPU allocation strategy {self.strategy!r}")


@dataclass(frozen=True)
class SharedInstance:
    """A shared instance: millicores requested (CPU shares) and limited (CFS quota)."""

    instance: str
    request_milli: int
    limit_milli: int = 0
    app: str = ""

    @property
    def size_milli(self) -> int:
        """The instance's CPU spec: its limit, or its request when it has no limit."""
        return self.limit_milli or self.request_milli

    @property
    def cpu_shares(self) -> int:
        """cgroup ``cpu.shares`` as the kubelet derives it from the request (MilliCPUToShares)."""
        return max(2, self.request_milli * 1024 // 1000)

    @property
    def cfs_quota_us(self) -> int:
        """cgroup CFS quota per 100 ms period from the limit (-1: unlimited), as the kubelet does."""
        if not self.limit_milli:
            return -1
        return max(1000, self.limit_milli * CFS_PERIOD_US // 1000)


@dataclass(frozen=True)
class Sellable:
    """The sellable-capacity figures of a node, in whole CPUs (``a`` and ``b`` as in the seed)."""

    physical: int  # P = all - reserved
    a: int
    b: int
    capacity: int  # min(a, b), may be negative when shared instances oversubscribe
    sold: int  # CPUs held exclusively (disputed included)
    left: int  # max(0, capacity - sold)
    max_instance: int  # floor(P * max_instance_fraction)


def sellable_figures(physical: int, shared_sum_milli: int, shared_max_milli: int, overcommit_ratio: Fraction,
                     max_instance_fraction: Fraction) -> tuple[int, int, int]:
    """``(a, b, max_instance)`` in whole CPUs, exactly (integer arithmetic, floors).

    a = P - 2 * max(shared), b = (P * r - sum(shared)) / r = P - sum(shared) * q / p for r = p/q,
    max_instance = P * fraction.
    """
    a = (physical * 1000 - 2 * shared_max_milli) // 1000
    p, q = overcommit_ratio.numerator, overcommit_ratio.denominator
    b = (physical * 1000 * p - shared_sum_milli * q) // (1000 * p)
    return a, b, physical * max_instance_fraction.numerator // max_instance_fraction.denominator


def _frozen_map(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class NodeCPUState:
    """An immutable node: topology, reserved CPUs, exclusive and shared instances, disputes."""

    topology: CPUTopology
    reserved: frozenset[int] = frozenset()
    exclusive: Mapping[str, ExclusiveAllocation] = field(default_factory=dict)
    shared: Mapping[str, SharedInstance] = field(default_factory=dict)
    overcommit_ratio: Fraction = Fraction(1)
    max_instance_fraction: Fraction = Fraction(2, 3)
    disputed: Mapping[str, frozenset[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reserved", frozenset(self.reserved))
        object.__setattr__(self, "exclusive", _frozen_map(self.exclusive))
        object.__setattr__(self, "shared", _frozen_map(self.shared))
        object.__setattr__(self, "disputed", _frozen_map({k: frozenset(v) for k, v in (self.disputed or {}).items()}))
        object.__setattr__(self, "overcommit_ratio", Fraction(self.overcommit_ratio))
        object.__setattr__(self, "max_instance_fraction", Fraction(self.max_instance_fraction))
        if self.overcommit_ratio <= 0:
            raise StateError(f"overcommit ratio must be positive, not {self.overcommit_ratio}")
        if not 0 < self.max_instance_fraction <= 1:
            raise StateError(f"max instance fraction must be in (0, 1], not {self.max_instance_fraction}")
        self._validate()

    def _validate(self) -> None:
        known = self.topology.cpu_set
        if not self.reserved <= known:
            raise StateError(f"reserved CPU(s) {format_cpuset(self.reserved - known)} are not in the topology")
        owner: dict[int, str] = {}
        holders = [(a.instance, a.cpus) for a in self.exclusive.values()] + list(self.disputed.items())
        for instance, cpus in holders:
            for problem, bad in (("are not in the topology", cpus - known), ("are reserved", cpus & self.reserved)):
                if bad:
                    raise StateError(f"{instance}: CPU(s) {format_cpuset(bad)} {problem}")
            for cpu in cpus:
                if cpu in owner:
                    raise StateError(f"CPU {cpu} is owned by both {owner[cpu]} and {instance}")
                owner[cpu] = instance
        for key, allocation in self.exclusive.items():
            if key != allocation.instance:
                raise StateError(f"exclusive allocation of {allocation.instance} is filed under {key}")
        for key, instance in self.shared.items():
            if key != instance.instance:
                raise StateError(f"shared instance {instance.instance} is filed under {key}")
            if key in self.exclusive:
                raise StateError(f"{key} is both exclusive and shared")

    # -- derived sets

    @cached_property
    def held(self) -> frozenset[int]:
        """CPUs owned exclusively (disputed CPUs included)."""
        cpus: set[int] = set()
        for allocation in self.exclusive.values():
            cpus |= allocation.cpus
        for disputed in self.disputed.values():
            cpus |= disputed
        return frozenset(cpus)

    @cached_property
    def share_pool(self) -> frozenset[int]:
        """all - reserved - exclusive: where shared instances run and exclusive ones are cut from."""
        return self.topology.cpu_set - self.reserved - self.held

    @cached_property
    def free_mask(self) -> int:
        """The share pool as a bit mask (fleet summaries count with it)."""
        return self.topology.mask_of(self.share_pool)

    def effective_cpuset(self, instance: str) -> frozenset[int]:
        """The cpuset the instance's containers run on (release-isolate mode widens it)."""
        allocation = self.exclusive[instance]
        if not allocation.release_isolate:
            return allocation.cpus
        everything = self.topology.cpu_set
        return everything - self.reserved if allocation.exclude_reserved else everything

    # -- sellable figures

    @cached_property
    def sellable(self) -> Sellable:
        physical = len(self.topology.cpu_set) - len(self.reserved)
        sizes = [s.size_milli for s in self.shared.values()]
        a, b, max_instance = sellable_figures(physical, sum(sizes), max(sizes, default=0), self.overcommit_ratio,
                                              self.max_instance_fraction)
        capacity = min(a, b)
        sold = len(self.held)
        return Sellable(physical=physical, a=a, b=b, capacity=capacity, sold=sold, left=max(0, capacity - sold),
                        max_instance=max_instance)

    @property
    def largest_exclusive(self) -> int:
        """The largest exclusive request that passes every rule now."""
        s = self.sellable
        return min(s.left, s.max_instance, len(self.share_pool))

    def app_count(self, app: str) -> int:
        """Instances of ``app`` on the node, exclusive and shared (machineMaxList counts both)."""
        return sum(1 for a in self.exclusive.values() if a.app == app) + sum(1 for s in self.shared.values() if s.app == app)

    # -- changes (each returns a new state)

    def with_exclusive(self, allocation: ExclusiveAllocation) -> NodeCPUState:
        """Record an allocation as it is (annotations, tests); raises :class:`StateError` on overlap."""
        if allocation.instance in self.exclusive or allocation.instance in self.shared:
            raise StateError(f"{allocation.instance} is already on the node")
        disputed = {k: v for k, v in self.disputed.items() if k != allocation.instance}
        return replace(self, exclusive={**self.exclusive, allocation.instance: allocation}, disputed=disputed)

    def with_shared(self, instance: SharedInstance) -> NodeCPUState:
        """Record a shared instance as it is (no capacity check; see :meth:`place_shared`)."""
        if instance.instance in self.exclusive or instance.instance in self.shared:
            raise StateError(f"{instance.instance} is already on the node")
        return replace(self, shared={**self.shared, instance.instance: instance})

    def without(self, instance: str) -> NodeCPUState:
        """Release on delete: the instance's CPUs go back to the share pool.  Unknown: unchanged."""
        if instance not in self.exclusive and instance not in self.shared and instance not in self.disputed:
            return self
        return replace(
            self,
            exclusive={k: v for k, v in self.exclusive.items() if k != instance},
            shared={k: v for k, v in self.shared.items() if k != instance},
            disputed={k: v for k, v in self.disputed.items() if k != instance},
        )

    def with_release_isolate(self, instance: str, on: bool = True) -> NodeCPUState:
        """Switch the emergency mode of an exclusive instance; the allocation is unchanged."""
        allocation = self.exclusive.get(instance)
        if allocation is None:
            raise StateError(f"{instance} is not an exclusive instance on this node")
        return replace(self, exclusive={**self.exclusive, instance: replace(allocation, release_isolate=on)})

    def allocate_exclusive(
        self,
        instance: str,
        request: int,
        strategy: str = SAME_CORE_FIRST,
        app: str = "",
        *,
        machine_max: Mapping[str, int] | None = None,
        release_isolate: bool = False,
        exclude_reserved: bool = True,
        containers: Iterable[str] = DEFAULT_CONTAINERS,
    ) -> tuple[NodeCPUState, ExclusiveAllocation]:
        """Filter, pick CPUs from the share pool, safety-check, and return the new state.

        Raises :class:`AllocationError` with the first reason when any rule refuses.
        """
        if instance in self.exclusive or instance in self.shared:
            raise AllocationError(f"{instance} is already on the node")
        reasons = exclusive_problems(self, request, strategy, app, machine_max)
        if reasons:
            raise AllocationError(reasons[0])
        size = len(self.share_pool) if strategy == BIND_ALL_CPUS else request
        cpus = plan_allocation(self.topology, self.share_pool, size, strategy).cpus
        allocation = ExclusiveAllocation(instance, frozenset(cpus), strategy, app, release_isolate,
                                         exclude_reserved, tuple(containers))
        problems = check_exclusive(self, allocation)
        if problems:
            raise AllocationError(problems[0])
        return self.with_exclusive(allocation), allocation

    def place_shared(self, instance: SharedInstance, machine_max: Mapping[str, int] | None = None) -> NodeCPUState:
        """Add a shared instance after checking the sellable rules and machineMaxList."""
        if instance.instance in self.exclusive or instance.instance in self.shared:
            raise AllocationError(f"{instance.instance} is already on the node")
        reasons = shared_problems(self, instance, machine_max)
        if reasons:
            raise AllocationError(reasons[0])
        return self.with_shared(instance)


@dataclass(frozen=True)
class CPUCell:
    """One logical CPU of the node CPU map: where it sits, who holds it, which IO queues it serves.

    ``role`` is ``"reserved"``, ``"exclusive"``, ``"disputed"`` or ``"share"`` (the share pool);
    ``owner`` is the instance for the exclusive and disputed roles, else ``""``.
    """

    cpu: int
    socket: int
    numa: int
    core: int
    role: str
    owner: str
    queues: tuple[str, ...]


def cpu_map(state: NodeCPUState) -> list[CPUCell]:
    """The node's CPUs in topology map order, coloured by owner (the console's per-node grid)."""
    owners: dict[int, tuple[str, str]] = {cpu: ("reserved", "") for cpu in state.reserved}
    for allocation in state.exclusive.values():
        owners.update((cpu, ("exclusive", allocation.instance)) for cpu in allocation.cpus)
    for instance, cpus in state.disputed.items():
        owners.update((cpu, ("disputed", instance)) for cpu in cpus)
    topology = state.topology
    return [
        CPUCell(cpu, topology.socket_of(cpu), topology.numa_of(cpu), core, *owners.get(cpu, ("share", "")),
                topology.queues_of(cpu))
        for core, threads in enumerate(topology.core_threads)
        for cpu in threads
    ]


# --------------------------------------------------------------------------- rules


def _fraction_text(fraction: Fraction) -> str:
    return f"{fraction.numerator}/{fraction.denominator}"


def machine_max_problem(state: NodeCPUState, app: str, machine_max: Mapping[str, int] | None) -> str | None:
    """The machineMaxList reason, when ``app`` already has its maximum of instances here."""
    if not app or not machine_max or app not in machine_max:
        return None
    count = state.app_count(app)
    if count >= machine_max[app]:
        return f"app {app} already has {count} instance(s) on this node (machineMaxList)"
    return None


def exclusive_problems(
    state: NodeCPUState, request: int, strategy: str = SAME_CORE_FIRST, app: str = "",
    machine_max: Mapping[str, int] | None = None,
) -> list[str]:
    """Every reason an exclusive request is refused (empty: it fits), kube-scheduler style."""
    if strategy not in STRATEGIES:
        return [f"unknown CPU allocation strategy {strategy!r}"]
    reasons = []
    problem = machine_max_problem(state, app, machine_max)
    if problem:
        reasons.append(problem)
    size = len(state.share_pool) if strategy == BIND_ALL_CPUS else request
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        return reasons + ([INSUFFICIENT_EXCLUSIVE] if strategy == BIND_ALL_CPUS else [f"invalid exclusive cpu request {request!r}"])
    sellable = state.sellable
    if size > sellable.max_instance:
        reasons.append(f"request exceeds {_fraction_text(state.max_instance_fraction)} of sellable CPUs ({sellable.max_instance})")
    if size > sellable.left or size > len(state.share_pool):
        reasons.append(INSUFFICIENT_EXCLUSIVE)
    return reasons


def shared_problems(state: NodeCPUState, instance: SharedInstance, machine_max: Mapping[str, int] | None = None) -> list[str]:
    """Every reason a shared instance is refused: machineMaxList, or exclusive CPUs sold would
    exceed the node's sellable exclusive CPUs once this instance is counted."""
    reasons = []
    problem = machine_max_problem(state, instance.app, machine_max)
    if problem:
        reasons.append(problem)
    if instance.size_milli <= 0:
        return reasons + [f"invalid shared cpu request {instance.size_milli}m"]
    after = replace(state, shared={**state.shared, instance.instance: instance}).sellable
    if after.sold > after.capacity:
        reasons.append(INSUFFICIENT_SHARED)
    return reasons


def check_exclusive(state: NodeCPUState, allocation: ExclusiveAllocation, *, strategy: str | None = None) -> list[str]:
    """Safety checks before a cpuset is applied; empty when safe.

    ``state`` may or may not contain the allocation already (it is left out for the check).
    With ``strategy`` the cpuset must also be exactly what the allocator picks on this node,
    i.e. it follows the node's CPU priority order from the IO-queue distribution.
    """
    base = state.without(allocation.instance)
    cpus = allocation.cpus
    reasons = []
    if not cpus:
        reasons.append(f"{allocation.instance}: empty cpuset")
    unknown = cpus - base.topology.cpu_set
    if unknown:
        reasons.append(f"cpuset includes CPU(s) {format_cpuset(unknown)} the node does not have")
    if cpus & base.reserved:
        reasons.append(f"cpuset includes reserved CPU(s) {format_cpuset(cpus & base.reserved)}")
    for other in base.exclusive.values():
        if cpus & other.cpus:
            reasons.append(f"cpuset overlaps CPU(s) {format_cpuset(cpus & other.cpus)} of {other.instance}")
    for other_name, other_cpus in base.disputed.items():
        if cpus & other_cpus:
            reasons.append(f"cpuset overlaps CPU(s) {format_cpuset(cpus & other_cpus)} disputed by {other_name}")
    sellable = base.sellable
    if len(cpus) > sellable.max_instance:
        reasons.append(f"request exceeds {_fraction_text(base.max_instance_fraction)} of sellable CPUs ({sellable.max_instance})")
    if sellable.sold + len(cpus) > sellable.capacity:
        reasons.append(f"exclusive CPUs would exceed the node's sellable exclusive CPUs "
                       f"({sellable.sold + len(cpus)} > {sellable.capacity})")
    if strategy is not None and not reasons:
        size = len(base.share_pool) if strategy == BIND_ALL_CPUS else len(cpus)
        try:
            expected = frozenset(plan_allocation(base.topology, base.share_pool, size, strategy).cpus)
        except AllocationError as exc:
            reasons.append(f"cpuset cannot be re-derived on this node: {exc}")
        else:
            if expected != cpus:
                reasons.append(f"cpuset {format_cpuset(cpus)} does not follow the node's IO-queue CPU priority order "
                               f"(expected {format_cpuset(expected)})")
    return reasons


# --------------------------------------------------------------------------- annotations


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def alloc_status(cpus: Iterable[int]) -> str:
    """``{"cpu":[0,1]}``: the pod's allocation, sorted."""
    return _json({"cpu": sorted(cpus)})


def custom_cgroup_info(cpus: Iterable[int], containers: Iterable[str] = DEFAULT_CONTAINERS) -> str:
    """``{"engine":{"cpuset":"2-3"}}``: the cpuset each container is bound to."""
    cpuset = format_cpuset(cpus)
    return _json({name: {"cpuset": cpuset} for name in containers})


def share_pool_annotation(cpus: Iterable[int]) -> str:
    """``{"cpuIDs":[...]}``: the node's share pool, sorted."""
    return _json({"cpuIDs": sorted(cpus)})


def pod_annotations(state: NodeCPUState, instance: str) -> dict[str, str]:
    """Every annotation the controller writes on an exclusive instance's pod."""
    allocation = state.exclusive[instance]
    annotations = {
        CPU_ISOLATE_MODE: EXCLUSIVE,
        ALLOC_SPEC: _json({"cpu": allocation.strategy}),
        ALLOC_STATUS: alloc_status(allocation.cpus),
        CUSTOM_CGROUP_INFO: custom_cgroup_info(state.effective_cpuset(instance), allocation.containers),
        EXCLUDE_RESERVE_CPUSET: "true" if allocation.exclude_reserved else "false",
    }
    if allocation.release_isolate:
        annotations[RELEASE_ISOLATE_MODE] = "true"
    return annotations


def node_annotations(state: NodeCPUState) -> dict[str, str]:
    """The node annotations the controller keeps current: the share pool."""
    return {CPU_SHAREPOOL: share_pool_annotation(state.share_pool)}


def _load(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None


def parse_alloc_spec(text: str) -> str:
    """``{"cpu": "Spread"}`` -> ``"Spread"``; raises ValueError otherwise."""
    data = _load(text, ALLOC_SPEC)
    strategy = data.get("cpu") if isinstance(data, dict) else None
    if strategy not in STRATEGIES:
        raise ValueError(f"{ALLOC_SPEC} {text!r} does not name a strategy ({', '.join(STRATEGIES)})")
    return strategy


def _cpu_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in value):
        raise ValueError(f"{what} is not a list of CPU ids")
    if len(set(value)) != len(value):
        raise ValueError(f"{what} lists a CPU twice")
    return sorted(value)


def parse_alloc_status(text: str) -> list[int]:
    """``{"cpu":[0,1]}`` -> ``[0, 1]``; raises ValueError otherwise."""
    data = _load(text, ALLOC_STATUS)
    if not isinstance(data, dict) or "cpu" not in data:
        raise ValueError(f'{ALLOC_STATUS} {text!r} is not {{"cpu":[...]}}')
    return _cpu_list(data["cpu"], ALLOC_STATUS)


def parse_custom_cgroup_info(text: str) -> dict[str, list[int]]:
    """``{"engine":{"cpuset":"2-3"}}`` -> ``{"engine": [2, 3]}``; raises ValueError otherwise."""
    data = _load(text, CUSTOM_CGROUP_INFO)
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{CUSTOM_CGROUP_INFO} {text!r} is not {{<container>: {{\"cpuset\": ...}}}}")
    out = {}
    for container, info in data.items():
        if not isinstance(info, dict) or not isinstance(info.get("cpuset"), str):
            raise ValueError(f"{CUSTOM_CGROUP_INFO}: container {container!r} has no cpuset string")
        try:
            out[container] = parse_cpuset(info["cpuset"])
        except CPUSetFormatError as exc:
            raise ValueError(f"{CUSTOM_CGROUP_INFO}: container {container!r}: {exc}") from None
    return out


def parse_share_pool(text: str) -> list[int]:
    """``{"cpuIDs":[...]}`` -> sorted CPU ids; raises ValueError otherwise."""
    data = _load(text, CPU_SHAREPOOL)
    if not isinstance(data, dict) or "cpuIDs" not in data:
        raise ValueError(f'{CPU_SHAREPOOL} {text!r} is not {{"cpuIDs":[...]}}')
    return _cpu_list(data["cpuIDs"], CPU_SHAREPOOL)


# --------------------------------------------------------------------------- reconciliation


@dataclass(frozen=True)
class CPUConflict:
    """One CPU claimed by more than one owner: ``kept`` holds it, ``claimants`` are refused."""

    cpu: int
    kept: str
    claimants: tuple[str, ...]

    def __str__(self) -> str:
        return f"CPU {self.cpu} is claimed by {self.kept} (kept) and {', '.join(self.claimants)} (disputed)"


@dataclass(frozen=True)
class Reconciliation:
    """A node's state rebuilt from annotations, with what did not add up."""

    state: NodeCPUState
    conflicts: tuple[CPUConflict, ...] = ()
    problems: tuple[str, ...] = ()
    unallocated: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.conflicts and not self.problems

    def report(self) -> str:
        """A plain-text report, one finding a line, for the console and the event log."""
        lines = [str(conflict) for conflict in self.conflicts] + list(self.problems)
        lines += [f"{pod} is exclusive but has no {ALLOC_STATUS} yet (to be allocated)" for pod in self.unallocated]
        return "\n".join(lines) if lines else "consistent"


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = _meta(pod)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _str_map(value: Any) -> Mapping[str, str]:
    return value if isinstance(value, Mapping) else {}


def _shared_from_pod(pod: Mapping[str, Any], key: str, app: str) -> SharedInstance | None:
    """A running non-exclusive pod with a CPU request or limit, as a shared instance."""
    request = pod_requests(pod).get("cpu")
    limit = pod_limits(pod).get("cpu")
    request_milli = request.milli_value() if request is not None else 0
    limit_milli = limit.milli_value() if limit is not None else 0
    if not request_milli and not limit_milli:
        return None
    return SharedInstance(key, request_milli, limit_milli, app)


def rebuild_state(
    topology: CPUTopology,
    pods: Iterable[Mapping[str, Any]],
    *,
    reserved: Iterable[int] | None = None,
    overcommit_ratio: Fraction | int | str | None = None,
    max_instance_fraction: Fraction = Fraction(2, 3),
    node_annotations: Mapping[str, str] | None = None,
    app_label: str = "app",
) -> Reconciliation:
    """Rebuild a node's state from its pods' annotations (v1 Pod dicts) alone.

    ``reserved`` and ``overcommit_ratio`` default to the node annotations
    ``scheduling.meridian.io/reserved-cpus`` and ``.../cpu-overcommit-ratio`` (else none and 1).
    Finished pods (Succeeded/Failed) hold nothing.  Exclusive pods claim ``alloc-status``;
    the earlier pod wins a CPU claimed twice, the later claim is disputed (reported, held back).
    A container bound to something else than its allocation, and a stale ``cpu-sharepool``
    node annotation, are reported for the node agent / controller to re-apply.
    """
    node_annotations = node_annotations or {}
    problems: list[str] = []
    reserved_set = frozenset(reserved) if reserved is not None else _reserved_from(node_annotations, topology, problems)
    ratio = Fraction(overcommit_ratio) if overcommit_ratio is not None else _ratio_from(node_annotations, problems)
    state = NodeCPUState(topology, reserved_set, overcommit_ratio=ratio, max_instance_fraction=max_instance_fraction)
    owner: dict[int, str] = {cpu: "reserved" for cpu in reserved_set}
    conflicts: dict[int, list[str]] = {}
    exclusive: dict[str, ExclusiveAllocation] = {}
    disputed: dict[str, frozenset[int]] = {}
    shared: dict[str, SharedInstance] = {}
    unallocated: list[str] = []
    live = [p for p in pods if str(_str_map(p.get("status")).get("phase", "")) not in ("Succeeded", "Failed")]
    live.sort(key=lambda p: (str(_meta(p).get("creationTimestamp") or ""), _pod_key(p)))
    for pod in live:
        key, annotations = _pod_key(pod), _str_map(_meta(pod).get("annotations"))
        app = str(_str_map(_meta(pod).get("labels")).get(app_label, ""))
        if annotations.get(CPU_ISOLATE_MODE) != EXCLUSIVE:
            instance = _shared_from_pod(pod, key, app)
            if instance is not None:
                shared[key] = instance
            continue
        claim = _claim(key, annotations, problems)
        if claim is None:
            unallocated.append(key)
            continue
        unknown = claim - topology.cpu_set
        if unknown:
            problems.append(f"{key} claims CPU(s) {format_cpuset(unknown)} the node does not have")
        taken = sorted(cpu for cpu in claim if cpu in owner)
        for cpu in taken:
            conflicts.setdefault(cpu, [owner[cpu]]).append(key)
        mine = frozenset(cpu for cpu in claim - unknown if cpu not in owner)
        for cpu in mine:
            owner[cpu] = key
        if unknown or taken:
            disputed[key] = mine
            continue
        allocation = _allocation_from(key, app, claim, annotations, problems)
        exclusive[key] = allocation
        _check_cgroup(state, reserved_set, allocation, annotations, problems)
    state = replace(state, exclusive=exclusive, shared=shared, disputed=disputed)
    if CPU_SHAREPOOL in node_annotations:
        _check_share_pool(state, node_annotations[CPU_SHAREPOOL], problems)
    return Reconciliation(
        state,
        tuple(CPUConflict(cpu, holders[0], tuple(holders[1:])) for cpu, holders in sorted(conflicts.items())),
        tuple(problems),
        tuple(unallocated),
    )


def _reserved_from(annotations: Mapping[str, str], topology: CPUTopology, problems: list[str]) -> frozenset[int]:
    text = annotations.get(RESERVED_CPUS_ANNOTATION)
    if not text:
        return frozenset()
    try:
        cpus = frozenset(parse_cpuset(text))
    except CPUSetFormatError as exc:
        problems.append(f"node annotation {RESERVED_CPUS_ANNOTATION}: {exc}")
        return frozenset()
    if not cpus <= topology.cpu_set:
        problems.append(f"node reserves CPU(s) {format_cpuset(cpus - topology.cpu_set)} it does not have")
    return cpus & topology.cpu_set


def _ratio_from(annotations: Mapping[str, str], problems: list[str]) -> Fraction:
    text = annotations.get(OVERCOMMIT_RATIO_ANNOTATION)
    if not text:
        return Fraction(1)
    try:
        ratio = Fraction(text)
    except (ValueError, ZeroDivisionError):
        ratio = Fraction(0)
    if ratio <= 0:
        problems.append(f"node annotation {OVERCOMMIT_RATIO_ANNOTATION} {text!r} is not a positive number; using 1")
        return Fraction(1)
    return ratio


def _claim(key: str, annotations: Mapping[str, str], problems: list[str]) -> frozenset[int] | None:
    """The CPUs an exclusive pod claims: alloc-status, else (unreadable) its bound cpuset."""
    text = annotations.get(ALLOC_STATUS)
    if text is None:
        return None
    try:
        return frozenset(parse_alloc_status(text))
    except ValueError as exc:
        problems.append(f"{key}: {exc}")
    cgroup = annotations.get(CUSTOM_CGROUP_INFO)
    if cgroup and annotations.get(RELEASE_ISOLATE_MODE) != "true":
        try:
            bound = frozenset(cpu for cpus in parse_custom_cgroup_info(cgroup).values() for cpu in cpus)
        except ValueError:
            return None
        problems.append(f"{key}: holding its bound cpuset {format_cpuset(bound)} until {ALLOC_STATUS} is fixed")
        return bound or None
    return None


def _allocation_from(key: str, app: str, claim: frozenset[int], annotations: Mapping[str, str],
                     problems: list[str]) -> ExclusiveAllocation:
    strategy = SAME_CORE_FIRST
    if ALLOC_SPEC in annotations:
        try:
            strategy = parse_alloc_spec(annotations[ALLOC_SPEC])
        except ValueError as exc:
            problems.append(f"{key}: {exc}")
    containers = DEFAULT_CONTAINERS
    if CUSTOM_CGROUP_INFO in annotations:
        try:
            containers = tuple(parse_custom_cgroup_info(annotations[CUSTOM_CGROUP_INFO]))
        except ValueError:
            pass
    return ExclusiveAllocation(
        key, claim, strategy, app,
        release_isolate=annotations.get(RELEASE_ISOLATE_MODE) == "true",
        exclude_reserved=annotations.get(EXCLUDE_RESERVE_CPUSET, "true") != "false",
        containers=containers,
    )


def _check_cgroup(state: NodeCPUState, reserved: frozenset[int], allocation: ExclusiveAllocation,
                  annotations: Mapping[str, str], problems: list[str]) -> None:
    text = annotations.get(CUSTOM_CGROUP_INFO)
    if text is None:
        problems.append(f"{allocation.instance} has no {CUSTOM_CGROUP_INFO} (cpuset not written yet)")
        return
    try:
        bound = parse_custom_cgroup_info(text)
    except ValueError as exc:
        problems.append(f"{allocation.instance}: {exc}")
        return
    if allocation.release_isolate:
        everything = state.topology.cpu_set
        expected = everything - reserved if allocation.exclude_reserved else everything
    else:
        expected = allocation.cpus
    for container, cpus in bound.items():
        if frozenset(cpus) != expected:
            problems.append(f"{allocation.instance} container {container} is bound to {format_cpuset(cpus)} "
                            f"but should be bound to {format_cpuset(expected)}")


def _check_share_pool(state: NodeCPUState, text: str, problems: list[str]) -> None:
    try:
        annotated = frozenset(parse_share_pool(text))
    except ValueError as exc:
        problems.append(f"node: {exc}")
        return
    if annotated != state.share_pool:
        problems.append(f"node {CPU_SHAREPOOL} is stale: {format_cpuset(annotated)} annotated, "
                        f"{format_cpuset(state.share_pool)} expected")
