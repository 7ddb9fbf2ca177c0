"""Node CPU topology and the exclusive-CPU allocator of the exclusive/shared co-location scheme.

Pure Python over plain data (no Django, no ORM): the scheduler, the what-if page, the fleet
simulator and the node agent all run the same functions, so the CPUs they pick agree.  The
node-level bookkeeping (share pool, sellable rules, annotations) is in
:mod:`scheduling.cpu.state`; filters, scores and fleet summaries in :mod:`scheduling.cpu.fit`.

Topology
--------
:meth:`CPUTopology.from_rows` takes rows ``(cpu, socket, numa, core)``, the format the fleet
simulator publishes in the node annotation ``scheduling.meridian.io/cpu-topology``
(``{"cpus": [[cpu, socket, numa, core], ...]}``).  A physical core is identified by the pair
``(socket, core)``, so both global core ids (the simulator's) and Linux's per-socket
``core_id`` work.  The hierarchy must nest (a core lies in one NUMA node, a NUMA node in one
socket); anything else is a :class:`TopologyError`.  Threads of one core are ordered by CPU id.

Priority order and IO queues
----------------------------
Every topology carries a CPU *priority order* used to break ties between otherwise equally
good CPUs.  Without an IO-queue distribution it is the topology map order (socket, NUMA node,
core id, thread), never the raw CPU id order.  With one (:class:`IOQueueDistribution`: queue
name -> CPUs serving its interrupts) the CPUs serving queues come first, visited round-robin
over the queues (natural order of queue names; inside a queue, topology map order), then the
CPUs serving no queue in topology map order.  Consecutive picks therefore land on different
queues, so instances placed one after the other do not crowd one IO queue.
:func:`accept_io_queue_update` accepts a new distribution only as a *valid growth* of the
previous one: every previous queue is still there with exactly the same CPU set, new queues
may be added, and every CPU named exists in the topology.  Anything else is refused with a
reason (allocations made against the old distribution must stay valid).

Allocation (``allocate``)
-------------------------
``allocate(topology, available, request, strategy)`` returns sorted CPU ids taken from
``available``, or raises :class:`AllocationError` (a ``ValueError``) when the request cannot be
met (negative, more than available, a CPU outside the topology, an unknown strategy).
A request of 0 returns ``[]``.  Vocabulary: a *whole* core has all its threads available, a
*partial* core some of them; a *place* is a NUMA node, a socket or the machine; *best fit*
among places that can hold the request means the most allocated one: least of the tier's
measure, then fewest available CPUs, then fewest available CPUs in its socket, then priority.

``SameCoreFirst`` (Koordinator's FullPCPUs with NUMA MostAllocated): with ``t`` threads per
core the request is ``w`` whole cores' worth plus a remainder ``r < t``.

1. Find the best-fit NUMA node, else socket, else the machine, whose whole cores hold the
   whole part and whose available CPUs hold the request.  Inside it take whole cores; when
   they span several sub-places, take the largest sub-place first until the rest fits in one,
   then the best fit for the rest.  The remainder takes single threads of that place,
   preferring (Koordinator's order) the socket already used, the most allocated socket, the
   most allocated NUMA node, partial cores (filling holes), priority.
2. Only when the whole machine lacks the whole cores: the best-fit NUMA node, else socket,
   else machine holding the request by available CPUs; take all its whole cores, then single
   threads in the order above.

``Spread`` (Koordinator's SpreadByPCPUs, preferring cores whose sibling is free, as its
PCPULevel exclusive policy does, because "the sibling thread stays for light workloads"):
one thread per physical core while possible, locality first.  Tiers, first match wins:
best-fit NUMA node with enough whole cores, with enough distinct cores, with enough available
CPUs; then the same three for a socket (spilling over its NUMA nodes largest first); then
the machine (spilling over sockets).  Inside the chosen NUMA nodes (in spill order) the CPUs
are taken in three passes: the first thread of each whole core, then one thread of each
partial core, then the remaining threads; cores in priority order.

``BindAllCPUs``: every available CPU, whatever the request.

Where Koordinator's ``cpu_accumulator.go`` and the kubelet's ``cpu_assignment.go`` disagree,
the locality rules above (Koordinator's behaviour) decide; the kubelet test tables that agree
with them are ported in ``tests/scheduling/test_cpuset.py``.

CPU set strings use the Linux cpuset list format (``"0-3,8,10-11"``), see
:func:`format_cpuset` and :func:`parse_cpuset`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "BIND_ALL_CPUS",
    "IO_QUEUES_ANNOTATION",
    "SAME_CORE_FIRST",
    "SPREAD",
    "STRATEGIES",
    "TOPOLOGY_ANNOTATION",
    "AllocationError",
    "CPUSetFormatError",
    "CPUTopology",
    "Decision",
    "IOQueueDistribution",
    "Placement",
    "TopologyError",
    "accept_io_queue_update",
    "accept_topology_update",
    "allocate",
    "format_cpuset",
    "generate_topology",
    "parse_cpuset",
    "plan_allocation",
    "reserve_cpus",
]

SAME_CORE_FIRST = "SameCoreFirst"
SPREAD = "Spread"
BIND_ALL_CPUS = "BindAllCPUs"
STRATEGIES = (SAME_CORE_FIRST, SPREAD, BIND_ALL_CPUS)

TOPOLOGY_ANNOTATION = "scheduling.meridian.io/cpu-topology"
IO_QUEUES_ANNOTATION = "scheduling.meridian.io/io-queue-cpus"


class AllocationError(ValueError):
    """The request cannot be met on this topology with these available CPUs."""


class TopologyError(ValueError):
    """Rows, an annotation or an IO-queue distribution that do not describe a real machine."""


class CPUSetFormatError(ValueError):
    """Text that is not a Linux cpuset list (``"0-3,8"``)."""


# --------------------------------------------------------------------------- cpuset lists


def format_cpuset(cpus: Iterable[int]) -> str:
    """Linux cpuset list format: sorted, deduplicated, runs of 2+ consecutive ids as ``a-b``.

    This is what cgroup ``cpuset.cpus`` prints and what ``custom-cgroup-info`` carries.
    """
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


_RANGE_RE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


def parse_cpuset(text: str) -> list[int]:
    """Parse a Linux cpuset list (``""``, ``"3"``, ``"0-3,8"``) into sorted unique CPU ids.

    Raises :class:`CPUSetFormatError` for anything else (reversed ranges, empty elements,
    signs), because a cpuset the node agent would write must never be guessed at.
    """
    if not text.strip():
        return []
    cpus: set[int] = set()
    for element in text.split(","):
        match = _RANGE_RE.fullmatch(element)
        if match is None:
            raise CPUSetFormatError(f"invalid cpuset {text!r}: element {element!r} is not N or N-M")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise CPUSetFormatError(f"invalid cpuset {text!r}: range {element.strip()!r} is reversed")
        cpus.update(range(low, high + 1))
    return sorted(cpus)


# --------------------------------------------------------------------------- IO queues


def _annotation(text: str, what: str, key: str, kind: type, shape: str) -> Any:
    """``key`` of a node's JSON annotation, or a ``TopologyError`` saying what the text should be."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TopologyError(f"{what} annotation is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), kind):
        raise TopologyError(f"{what} annotation is not {shape}")
    return data[key]


def _natural_key(name: str) -> tuple[Any, ...]:
    """``nvme0q2`` before ``nvme0q10``: devices and queue numbers sort as people read them."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


@dataclass(frozen=True)
class IOQueueDistribution:
    """Which CPUs serve which disk/NIC queue (the node publishes it when it comes online).

    ``queues`` maps a queue name (e.g. ``"nvme0n1/q3"``, ``"eth0/rx-1"``) to the sorted,
    deduplicated CPU ids that handle its interrupts.  Queue order is the natural order of the
    names, so the derived priority order does not depend on how the JSON object was written.
    """

    queues: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def from_mapping(cls, queues: Mapping[str, Iterable[int]]) -> IOQueueDistribution:
        items = []
        for name, cpus in queues.items():
            if not isinstance(name, str) or not name:
                raise TopologyError(f"IO queue name {name!r} is not a non-empty string")
            ids = sorted(set(_cpu_ids(cpus, f"IO queue {name!r}")))
            if not ids:
                raise TopologyError(f"IO queue {name!r} is served by no CPU")
            items.append((name, tuple(ids)))
        return cls(tuple(sorted(items, key=lambda item: _natural_key(item[0]))))

    @classmethod
    def from_annotation(cls, text: str) -> IOQueueDistribution:
        """Parse ``{"queues": {"<queue>": [cpu, ...], ...}}``."""
        return cls.from_mapping(_annotation(text, "IO-queue", "queues", dict, '{"queues": {"<queue>": [cpu, ...]}}'))

    def to_annotation(self) -> str:
        return json.dumps({"queues": {name: list(cpus) for name, cpus in self.queues}}, separators=(",", ":"))

    def as_dict(self) -> dict[str, tuple[int, ...]]:
        return dict(self.queues)

    def queue_cpus(self) -> frozenset[int]:
        return frozenset(cpu for _, cpus in self.queues for cpu in cpus)

    def problems(self, topology: CPUTopology) -> list[str]:
        """CPUs named by a queue that the topology does not have."""
        known = topology.cpu_set
        return [
            f"IO queue {name!r} names CPU(s) {format_cpuset(set(cpus) - known)} the node does not have"
            for name, cpus in self.queues
            if not known.issuperset(cpus)
        ]


class Decision(NamedTuple):
    """Whether an update is accepted, and why (a refusal always says what is wrong)."""

    accepted: bool
    reason: str


def accept_io_queue_update(
    previous: IOQueueDistribution | None, new: IOQueueDistribution, topology: CPUTopology | None = None
) -> Decision:
    """Accept ``new`` only as a valid growth of ``previous``.

    Valid growth: every queue of ``previous`` is in ``new`` with exactly the same CPUs (its
    queue -> CPU assignment is unchanged), ``new`` may add queues, and (when ``topology`` is
    given) every CPU named exists.  The first distribution is accepted when it is valid for the
    topology.  Exclusive cpusets were spread over the old assignment; moving a queue would
    silently make them crowd it, so such an update is refused and left to an operator.
    """
    if topology is not None:
        problems = new.problems(topology)
        if problems:
            return Decision(False, "; ".join(problems))
    if previous is None:
        return Decision(True, f"first IO-queue distribution ({len(new.queues)} queue(s))")
    old, grown = previous.as_dict(), new.as_dict()
    for name, cpus in old.items():
        if name not in grown:
            return Decision(False, f"IO queue {name!r} disappeared (only additions are accepted)")
        if grown[name] != cpus:
            return Decision(
                False,
                f"IO queue {name!r} moved from CPUs {format_cpuset(cpus)} to {format_cpuset(grown[name])} "
                "(existing queue -> CPU assignments must stay unchanged)",
            )
    added = [name for name in grown if name not in old]
    if not added:
        return Decision(True, "unchanged")
    return Decision(True, f"grew by {len(added)} queue(s): {', '.join(added)}")


def accept_topology_update(previous: CPUTopology, new: CPUTopology) -> Decision:
    """Accept a new node topology only when CPUs were added ("CPU 弹升") and none moved.

    Every previous CPU must still exist with the same socket, NUMA node and siblings, because
    existing cpusets were computed against them.
    """
    for cpu in previous.cpus:
        if cpu not in new.cpu_set:
            return Decision(False, f"CPU {cpu} disappeared (only additions are accepted)")
        if (previous.socket_of(cpu), previous.numa_of(cpu)) != (new.socket_of(cpu), new.numa_of(cpu)):
            return Decision(False, f"CPU {cpu} moved to another socket or NUMA node")
        if set(previous.siblings(cpu)) - set(new.siblings(cpu)):
            return Decision(False, f"CPU {cpu} changed physical core")
    added = len(new.cpus) - len(previous.cpus)
    return Decision(True, "unchanged" if added == 0 else f"grew by {added} CPU(s)")


# --------------------------------------------------------------------------- topology


def _cpu_ids(values: Iterable[Any], where: str) -> list[int]:
    ids = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TopologyError(f"{where}: {value!r} is not a CPU id (a non-negative integer)")
        ids.append(value)
    return ids


class CPUTopology:
    """An immutable map of one machine's logical CPUs: sockets > NUMA nodes > cores > threads.

    Build it with :meth:`from_rows`, :meth:`from_annotation` or :func:`generate_topology`.
    Cores are numbered internally (``core index``) in topology map order; the allocator
    works on that map and on the priority order, never on CPU id arithmetic.
    """

    __slots__ = (
        "_rows", "cpus", "cpu_set", "sockets", "numa_nodes", "threads_per_core", "io_queues",
        "_socket", "_numa", "_core", "core_threads", "core_numa", "core_size", "numa_socket", "socket_numas",
        "numa_cores", "rank", "core_rank", "numa_rank", "socket_rank", "priority",
        "all_mask", "numa_mask", "socket_mask", "_numa_groups", "_hash",
    )

    def __init__(self, rows: Sequence[tuple[int, int, int, int]], io_queues: IOQueueDistribution | None = None) -> None:
        """Internal: use :meth:`from_rows`.  ``rows`` are validated, sorted by CPU id."""
        self._rows = tuple(rows)
        self.cpus = tuple(row[0] for row in self._rows)
        self.cpu_set = frozenset(self.cpus)
        self._socket = {cpu: socket for cpu, socket, _, _ in self._rows}
        self._numa = {cpu: numa for cpu, _, numa, _ in self._rows}
        self.sockets = tuple(sorted(set(self._socket.values())))
        self.numa_nodes = tuple(sorted(set(self._numa.values())))
        threads: dict[tuple[int, int], list[int]] = {}
        core_numa_of: dict[tuple[int, int], int] = {}
        numa_socket: dict[int, int] = {}
        for cpu, socket, numa, core in self._rows:
            key = (socket, core)
            threads.setdefault(key, []).append(cpu)
            if core_numa_of.setdefault(key, numa) != numa:
                raise TopologyError(f"core {core} of socket {socket} spans NUMA nodes {core_numa_of[key]} and {numa}")
            if numa_socket.setdefault(numa, socket) != socket:
                raise TopologyError(f"NUMA node {numa} spans sockets {numa_socket[numa]} and {socket}")
        order = sorted(threads, key=lambda key: (key[0], core_numa_of[key], key[1]))
        self.core_threads = tuple(tuple(sorted(threads[key])) for key in order)
        self.core_numa = tuple(core_numa_of[key] for key in order)
        self.core_size = tuple(len(cpus) for cpus in self.core_threads)
        self._core = {cpu: index for index, cpus in enumerate(self.core_threads) for cpu in cpus}
        self.threads_per_core = max(len(cpus) for cpus in self.core_threads)
        self.numa_socket = numa_socket
        self.socket_numas = {s: tuple(n for n in self.numa_nodes if numa_socket[n] == s) for s in self.sockets}
        if io_queues is not None:
            problems = io_queues.problems(self)
            if problems:
                raise TopologyError("; ".join(problems))
        self.io_queues = io_queues
        self.priority = self._priority_order()
        self.rank = {cpu: position for position, cpu in enumerate(self.priority)}
        self.core_rank = tuple(min(self.rank[cpu] for cpu in cpus) for cpus in self.core_threads)
        by_numa: dict[int, list[int]] = {n: [] for n in self.numa_nodes}
        for index, numa in enumerate(self.core_numa):
            by_numa[numa].append(index)
        self.numa_cores = {n: tuple(sorted(cores, key=self.core_rank.__getitem__)) for n, cores in by_numa.items()}
        self.numa_rank = {n: min(self.core_rank[c] for c in cores) for n, cores in self.numa_cores.items()}
        self.socket_rank = {s: min(self.numa_rank[n] for n in numas) for s, numas in self.socket_numas.items()}
        self.all_mask = _mask(self.cpus)
        self.numa_mask = {n: _mask(cpu for c in self.numa_cores[n] for cpu in self.core_threads[c]) for n in self.numa_nodes}
        self.socket_mask = {s: _mask(c for c in self.cpus if self._socket[c] == s) for s in self.sockets}
        self._numa_groups = {n: self._sibling_groups(self.numa_cores[n]) for n in self.numa_nodes}
        self._hash = hash((self._rows, io_queues))

    # -- construction

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[int]]) -> CPUTopology:
        """Rows ``(cpu, socket, numa, core)``; lists (from JSON) are accepted as well as tuples."""
        checked: dict[int, tuple[int, int, int, int]] = {}
        for row in rows:
            if isinstance(row, (str, bytes)) or len(row) != 4:
                raise TopologyError(f"topology row {row!r} is not (cpu, socket, numa, core)")
            cpu, socket, numa, core = _cpu_ids(row, f"topology row {list(row)!r}")
            if cpu in checked:
                raise TopologyError(f"CPU {cpu} appears twice in the topology")
            checked[cpu] = (cpu, socket, numa, core)
        if not checked:
            raise TopologyError("the topology has no CPU")
        return cls([checked[cpu] for cpu in sorted(checked)])

    @classmethod
    def from_annotation(cls, text: str) -> CPUTopology:
        """Parse the node annotation ``{"cpus": [[cpu, socket, numa, core], ...]}``."""
        return cls.from_rows(_annotation(text, "CPU topology", "cpus", list, '{"cpus": [[cpu, socket, numa, core], ...]}'))

    def to_annotation(self) -> str:
        """The annotation text, rows in CPU id order (compact, like the simulator writes it)."""
        return json.dumps({"cpus": [list(row) for row in self._rows]}, separators=(",", ":"))

    def with_io_queues(self, io_queues: IOQueueDistribution | None) -> CPUTopology:
        """The same machine with the priority order derived from ``io_queues``."""
        return CPUTopology(self._rows, io_queues)

    @property
    def rows(self) -> tuple[tuple[int, int, int, int], ...]:
        return self._rows

    def _priority_order(self) -> tuple[int, ...]:
        """Topology map order, or IO-queue CPUs round-robin over the queues and then the rest.

        Round-robin (first CPU of every queue, then the second of every queue, ...) is what
        makes consecutive picks, hence consecutive instances, land on different queues.
        """
        map_order = [cpu for cpus in self.core_threads for cpu in cpus]
        if self.io_queues is None:
            return tuple(map_order)
        position = {cpu: i for i, cpu in enumerate(map_order)}
        lists = [sorted(cpus, key=position.__getitem__) for _, cpus in self.io_queues.queues]
        order: list[int] = []
        seen: set[int] = set()
        for turn in range(max((len(cpus) for cpus in lists), default=0)):
            for cpus in lists:
                if turn < len(cpus) and cpus[turn] not in seen:
                    seen.add(cpus[turn])
                    order.append(cpus[turn])
        order.extend(cpu for cpu in map_order if cpu not in seen)
        return tuple(order)

    def queues_of(self, cpu: int) -> tuple[str, ...]:
        """The IO queues ``cpu`` serves (none without a distribution)."""
        if self.io_queues is None:
            return ()
        return tuple(name for name, cpus in self.io_queues.queues if cpu in cpus)

    # -- queries

    def socket_of(self, cpu: int) -> int:
        return self._socket[cpu]

    def numa_of(self, cpu: int) -> int:
        return self._numa[cpu]

    def core_of(self, cpu: int) -> int:
        """The internal core index of ``cpu`` (topology map order)."""
        return self._core[cpu]

    def siblings(self, cpu: int) -> tuple[int, ...]:
        """All threads of ``cpu``'s physical core, ``cpu`` included."""
        return self.core_threads[self._core[cpu]]

    def cpus_in_numa(self, numa: int) -> list[int]:
        return sorted(cpu for c in self.numa_cores[numa] for cpu in self.core_threads[c])

    def cpus_in_socket(self, socket: int) -> list[int]:
        return sorted(cpu for cpu in self.cpus if self._socket[cpu] == socket)

    @property
    def num_cores(self) -> int:
        return len(self.core_threads)

    def mask_of(self, cpus: Iterable[int]) -> int:
        return _mask(cpus)

    def __len__(self) -> int:
        return len(self.cpus)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CPUTopology) and (self._rows, self.io_queues) == (other._rows, other.io_queues)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return (f"CPUTopology({len(self.cpus)} CPUs, {len(self.sockets)} socket(s), {len(self.numa_nodes)} NUMA node(s), "
                f"{self.num_cores} cores, SMT {self.threads_per_core})")

    # -- fast counting over bit masks (fleet summaries)

    def _sibling_groups(self, cores: Iterable[int]) -> tuple[tuple[tuple[int, ...], int], ...]:
        """Cores grouped by their threads' offsets from the first thread, with the first threads' mask.

        With Linux numbering every core has offset ``(N/2,)``; with packed numbering ``(1,)``.
        ``free & mask & (free >> d)`` then marks the whole free cores of a group in one step.
        """
        groups: dict[tuple[int, ...], int] = {}
        for c in cores:
            first, *rest = self.core_threads[c]
            offsets = tuple(cpu - first for cpu in rest)
            groups[offsets] = groups.get(offsets, 0) | (1 << first)
        return tuple(groups.items())

    def numa_counts(self, free_mask: int) -> list[tuple[int, int, int, int]]:
        """Per NUMA node ``(numa, free CPUs, whole free cores, CPUs in whole free cores)`` of a free mask."""
        out = []
        for numa in self.numa_nodes:
            free = free_mask & self.numa_mask[numa]
            whole = whole_cpus = 0
            for offsets, firsts in self._numa_groups[numa]:
                marks = free & firsts
                for d in offsets:
                    marks &= free >> d
                count = marks.bit_count()
                whole += count
                whole_cpus += count * (len(offsets) + 1)
            out.append((numa, free.bit_count(), whole, whole_cpus))
        return out


def _mask(cpus: Iterable[int]) -> int:
    mask = 0
    for cpu in cpus:
        mask |= 1 << cpu
    return mask


def generate_topology(
    sockets: int = 2,
    numa_per_socket: int = 1,
    cores_per_numa: int = 4,
    threads_per_core: int = 2,
    numbering: str = "linux",
) -> CPUTopology:
    """A regular machine for tests and benchmarks.

    ``numbering="linux"`` gives thread ``t`` of core ``c`` the id ``t * cores + c`` (thread 0 of
    every core first, then the siblings; what the fleet simulator and most x86 servers show);
    ``"packed"`` gives ``c * threads_per_core + t`` (siblings adjacent; Koordinator's test
    topologies).  Core ids are global, NUMA ids count across sockets.
    """
    if min(sockets, numa_per_socket, cores_per_numa, threads_per_core) < 1:
        raise TopologyError("every dimension of a generated topology must be at least 1")
    if numbering not in ("linux", "packed"):
        raise TopologyError(f"unknown numbering {numbering!r} (linux or packed)")
    cores = sockets * numa_per_socket * cores_per_numa
    rows = []
    for core in range(cores):
        numa = core // cores_per_numa
        socket = numa // numa_per_socket
        for thread in range(threads_per_core):
            cpu = thread * cores + core if numbering == "linux" else core * threads_per_core + thread
            rows.append((cpu, socket, numa, core))
    return CPUTopology.from_rows(rows)


def reserve_cpus(topology: CPUTopology, count: int) -> frozenset[int]:
    """The ``count`` CPUs a node reserves for the system: whole cores in topology map order.

    As the kubelet takes ``--kube-reserved`` CPUs (whole physical cores, ascending core id), so
    reservation strands no sibling thread.  ``count`` may be odd; the last core is then split.
    """
    if count < 0 or count > len(topology):
        raise TopologyError(f"cannot reserve {count} of {len(topology)} CPUs")
    taken: list[int] = []
    for numa in topology.numa_nodes:
        for core in sorted(topology.numa_cores[numa]):
            for cpu in topology.core_threads[core]:
                if len(taken) < count:
                    taken.append(cpu)
    return frozenset(taken)


# --------------------------------------------------------------------------- allocation

WHOLE, DISTINCT, FREE = 0, 1, 2  # measures: CPUs in whole cores / cores with a free thread / free CPUs


class Placement(NamedTuple):
    """The CPUs picked and where: ``scope`` is ``"numa"``, ``"socket"``, ``"machine"`` or ``"none"``.

    ``numa_nodes`` lists the NUMA nodes the CPUs lie in.  ``whole_cores`` says whether the
    SameCoreFirst whole part found whole cores (``False`` in the degraded case).
    """

    cpus: list[int]
    scope: str
    numa_nodes: tuple[int, ...]
    whole_cores: bool


class _View:
    """The available CPUs seen through the topology: free threads per core, counts per place."""

    __slots__ = ("topo", "free_threads", "numa", "socket")

    def __init__(self, topo: CPUTopology, available: frozenset[int]) -> None:
        self.topo = topo
        # One pass over the CPUs in id order groups the free threads by core (thread order kept).
        free_threads: dict[int, list[int]] = {}
        core_of = topo._core
        for cpu in sorted(available):
            core = core_of[cpu]
            threads = free_threads.get(core)
            if threads is None:
                free_threads[core] = [cpu]
            else:
                threads.append(cpu)
        self.free_threads = free_threads
        # per place: [free CPUs, CPUs in whole cores, whole cores, distinct cores]
        self.numa = {numa: [0, 0, 0, 0] for numa in topo.numa_nodes}
        core_numa, core_size = topo.core_numa, topo.core_size
        for core, threads in free_threads.items():
            counts = self.numa[core_numa[core]]
            size = len(threads)
            counts[0] += size
            counts[3] += 1
            if size == core_size[core]:
                counts[1] += size
                counts[2] += 1
        self.socket = {
            s: [sum(self.numa[n][i] for n in numas) for i in range(4)] for s, numas in topo.socket_numas.items()
        }

    def measure(self, counts: list[int], measure: int, spread: bool) -> int:
        """The tier measure of a place: for Spread WHOLE counts cores (one thread each)."""
        if measure == FREE:
            return counts[0]
        if measure == DISTINCT:
            return counts[3]
        return counts[2] if spread else counts[1]


def allocate(topology: CPUTopology, available: Iterable[int], request: int, strategy: str) -> list[int]:
    """Pick ``request`` CPUs from ``available`` with ``strategy``; sorted CPU ids.

    Raises :class:`AllocationError` when the request cannot be met.  ``BindAllCPUs`` returns
    every available CPU whatever the request.  See the module docstring for the rules.
    """
    return plan_allocation(topology, available, request, strategy).cpus


def plan_allocation(topology: CPUTopology, available: Iterable[int], request: int, strategy: str) -> Placement:
    """:func:`allocate` with the placement's scope, for what-if explanations and scores."""
    if strategy not in STRATEGIES:
        raise AllocationError(f"unknown CPU allocation strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
    free = frozenset(available)
    unknown = free - topology.cpu_set
    if unknown:
        listed = ", ".join(sorted(map(repr, unknown)))
        raise AllocationError(f"CPU(s) {listed} are not in the node's topology")
    if strategy == BIND_ALL_CPUS:
        return _placement(topology, sorted(free), True)
    if isinstance(request, bool) or not isinstance(request, int):
        raise AllocationError(f"CPU request {request!r} is not an integer")
    if request < 0:
        raise AllocationError(f"CPU request {request} is negative")
    if request == 0:
        return Placement([], "none", (), True)
    if request > len(free):
        raise AllocationError(f"not enough cpus available to satisfy request: {request} requested, {len(free)} available")
    view = _View(topology, free)
    if strategy == SPREAD:
        cpus, whole = _spread(view, request), True
    else:
        cpus, whole = _same_core_first(view, request)
    if len(cpus) != request:  # cannot happen: every tier checks its capacity first; never hand out less
        raise AllocationError(f"failed to allocate cpus: {len(cpus)} of {request} picked")
    return _placement(topology, cpus, whole)


def _placement(topo: CPUTopology, cpus: list[int], whole: bool) -> Placement:
    numas = tuple(sorted({topo.numa_of(cpu) for cpu in cpus}))
    sockets = {topo.numa_socket[n] for n in numas}
    scope = "none" if not numas else "numa" if len(numas) == 1 else "socket" if len(sockets) == 1 else "machine"
    return Placement(sorted(cpus), scope, numas, whole)


# -- places and spilling


def _best_fit_key(view: _View, kind: str, place: int, measure: int, spread: bool) -> tuple[int, int, int, int]:
    """Most allocated first: least measure, fewest free CPUs, fewest free in its socket, priority."""
    topo = view.topo
    if kind == "numa":
        counts, socket, rank = view.numa[place], topo.numa_socket[place], topo.numa_rank[place]
    else:
        counts, socket, rank = view.socket[place], place, topo.socket_rank[place]
    return (view.measure(counts, measure, spread), counts[0], view.socket[socket][0], rank)


def _pick_place(view: _View, kind: str, need: int, measure: int, spread: bool, need_free: int = 0) -> int | None:
    """The best-fit NUMA node or socket whose measure holds ``need`` (and ``need_free`` free CPUs)."""
    places = view.numa if kind == "numa" else view.socket
    fitting = [
        place for place, counts in places.items()
        if view.measure(counts, measure, spread) >= need and counts[0] >= need_free
    ]
    if not fitting:
        return None
    return min(fitting, key=lambda place: _best_fit_key(view, kind, place, measure, spread))


def _spill(view: _View, kind: str, places: Sequence[int], need: int, measure: int, spread: bool) -> list[tuple[int, int]]:
    """Choose sub-places for ``need``: the largest first until the rest fits one, then the best fit.

    Returns ``(place, share)`` pairs in take order.  Taking the largest first touches the
    fewest places; the best fit for the rest keeps the big holes of other places intact.
    """
    counts = view.numa if kind == "numa" else view.socket
    rank = view.topo.numa_rank if kind == "numa" else view.topo.socket_rank
    left = [p for p in places if view.measure(counts[p], measure, spread) > 0]
    chosen: list[tuple[int, int]] = []
    while need > 0 and left:
        fitting = [p for p in left if view.measure(counts[p], measure, spread) >= need]
        if fitting:
            best = min(fitting, key=lambda p: _best_fit_key(view, kind, p, measure, spread))
            chosen.append((best, need))
            break
        largest = min(left, key=lambda p: (-view.measure(counts[p], measure, spread), -counts[p][0], rank[p]))
        size = view.measure(counts[largest], measure, spread)
        chosen.append((largest, size))
        need -= size
        left.remove(largest)
    return chosen


def _socket_region(view: _View, socket: int, need: int, measure: int, spread: bool) -> list[int]:
    """NUMA nodes of ``socket`` to take ``need`` from, in take order."""
    numas = view.topo.socket_numas[socket]
    single = [n for n in numas if view.measure(view.numa[n], measure, spread) >= need]
    if single:
        return [min(single, key=lambda n: _best_fit_key(view, "numa", n, measure, spread))]
    return [numa for numa, _ in _spill(view, "numa", numas, need, measure, spread)]


def _machine_region(view: _View, need: int, measure: int, spread: bool) -> list[int]:
    """NUMA nodes of the whole machine to take ``need`` from, in take order."""
    region: list[int] = []
    for socket, share in _spill(view, "socket", view.topo.sockets, need, measure, spread):
        region.extend(_socket_region(view, socket, share, measure, spread))
    return region


def _region(view: _View, kind: str, place: int | None, need: int, measure: int, spread: bool) -> list[int]:
    if kind == "numa":
        assert place is not None
        return [place]
    if kind == "socket":
        assert place is not None
        return _socket_region(view, place, need, measure, spread)
    return _machine_region(view, need, measure, spread)


# -- Spread


def _spread(view: _View, request: int) -> list[int]:
    for kind in ("numa", "socket"):
        for measure in (WHOLE, DISTINCT, FREE):
            place = _pick_place(view, kind, request, measure, True)
            if place is not None:
                return _take_spread(view, _region(view, kind, place, request, measure, True), request)
    total = view.socket
    for measure in (WHOLE, DISTINCT, FREE):
        if sum(view.measure(c, measure, True) for c in total.values()) >= request:
            return _take_spread(view, _machine_region(view, request, measure, True), request)
    raise AllocationError("failed to allocate cpus")  # unreachable: FREE always holds a checked request


def _take_spread(view: _View, region: list[int], request: int) -> list[int]:
    """First threads of whole cores, then one thread of partial cores, then the rest; region order."""
    topo, free_threads = view.topo, view.free_threads
    whole: list[int] = []
    partial: list[int] = []
    rest: list[int] = []
    for numa in region:
        for core in topo.numa_cores[numa]:
            threads = free_threads.get(core)
            if not threads:
                continue
            (whole if len(threads) == len(topo.core_threads[core]) else partial).append(threads[0])
            rest.extend(threads[1:])
        if len(whole) >= request:
            break
    return (whole + partial + rest)[:request]


# -- SameCoreFirst


def _same_core_first(view: _View, request: int) -> tuple[list[int], bool]:
    topo = view.topo
    remainder = request % topo.threads_per_core
    whole_need = request - remainder
    for kind in ("numa", "socket", "machine"):
        if kind == "machine":
            place: int | None = None
            fits = sum(c[1] for c in view.socket.values()) >= whole_need
        else:
            place = _pick_place(view, kind, whole_need, WHOLE, False, need_free=request)
            fits = place is not None
        if fits:
            region = _region(view, kind, place, whole_need, WHOLE, False) if whole_need else _scope_numas(view, kind, place)
            taken = _take_whole(view, region, whole_need)
            taken += _take_singles(view, _scope_numas(view, kind, place), taken, request - len(taken))
            return taken, True
    # Degraded: not enough whole cores anywhere; stay local by free CPUs, whole cores first.
    for kind in ("numa", "socket"):
        place = _pick_place(view, kind, request, FREE, False)
        if place is not None:
            break
    else:
        kind, place = "machine", None
    numas = _scope_numas(view, kind, place)
    taken = _take_whole(view, sorted(numas, key=lambda n: -view.numa[n][1]), request)
    taken += _take_singles(view, numas, taken, request - len(taken))
    return taken, False


def _scope_numas(view: _View, kind: str, place: int | None) -> list[int]:
    topo = view.topo
    if kind == "numa":
        assert place is not None
        return [place]
    if kind == "socket":
        assert place is not None
        return list(topo.socket_numas[place])
    return list(topo.numa_nodes)


def _take_whole(view: _View, region: list[int], need: int) -> list[int]:
    """Whole cores from the region, in region then priority order, while a whole core still fits."""
    topo, taken = view.topo, []
    for numa in region:
        for core in topo.numa_cores[numa]:
            threads = view.free_threads.get(core)
            if threads and len(threads) == len(topo.core_threads[core]) and len(threads) <= need - len(taken):
                taken.extend(threads)
        if len(taken) >= need:
            break
    return taken


def _take_singles(view: _View, numas: list[int], taken: list[int], count: int) -> list[int]:
    """``count`` single threads of ``numas`` outside ``taken``, in Koordinator's order.

    Sockets holding more of the result first, then the most allocated socket, NUMA node and
    core (partial cores before splitting whole ones), then priority.
    """
    if count <= 0:
        return []
    topo = view.topo
    used = set(taken)
    socket_coloc: dict[int, int] = {}
    socket_free: dict[int, int] = {}
    numa_free: dict[int, int] = {}
    for cpu in taken:
        socket_coloc[topo.socket_of(cpu)] = socket_coloc.get(topo.socket_of(cpu), 0) + 1
    candidates: list[tuple[int, int]] = []  # (core, cpu)
    for numa in numas:
        for core in topo.numa_cores[numa]:
            for cpu in view.free_threads.get(core, ()):
                if cpu not in used:
                    candidates.append((core, cpu))
    core_free: dict[int, int] = {}
    for core, cpu in candidates:
        core_free[core] = core_free.get(core, 0) + 1
        numa = topo.core_numa[core]
        numa_free[numa] = numa_free.get(numa, 0) + 1
        socket = topo.numa_socket[numa]
        socket_free[socket] = socket_free.get(socket, 0) + 1

    def key(item: tuple[int, int]) -> tuple[int, ...]:
        core, cpu = item
        numa = topo.core_numa[core]
        socket = topo.numa_socket[numa]
        return (-socket_coloc.get(socket, 0), socket_free[socket], numa_free[numa], core_free[core],
                topo.core_rank[core], topo.rank[cpu])

    return [cpu for _, cpu in sorted(candidates, key=key)[:count]]
