"""Property tests for the CPU allocator and node state on random topologies.

Random machines: 1-2 sockets, 1-4 NUMA nodes per socket, 1-6 cores per NUMA node, SMT 1-2,
Linux or packed numbering, sometimes an IO-queue distribution; random reserved and allocated
CPUs.  Oracles are brute-force recomputations over plain sets.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.cpu.cpuset import (
    BIND_ALL_CPUS,
    SAME_CORE_FIRST,
    SPREAD,
    AllocationError,
    CPUTopology,
    IOQueueDistribution,
    accept_io_queue_update,
    allocate,
    format_cpuset,
    generate_topology,
    parse_cpuset,
)
from scheduling.cpu.fit import summarize, summarize_masks
from scheduling.cpu.state import (
    ExclusiveAllocation,
    NodeCPUState,
    SharedInstance,
    node_annotations,
    pod_annotations,
    rebuild_state,
)

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def topologies(draw: Any, min_cores: int = 1) -> CPUTopology:
    topology = generate_topology(
        draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(min_cores, 6)), draw(st.integers(1, 2)),
        numbering=draw(st.sampled_from(["linux", "packed"])),
    )
    if draw(st.booleans()):
        cpus = list(topology.cpus)
        queues = {f"q{i}": draw(st.lists(st.sampled_from(cpus), min_size=1, max_size=4)) for i in range(draw(st.integers(1, 4)))}
        topology = topology.with_io_queues(IOQueueDistribution.from_mapping(queues))
    return topology


@st.composite
def free_sets(draw: Any) -> tuple[CPUTopology, frozenset[int]]:
    topology = draw(topologies())
    free = frozenset(cpu for cpu in topology.cpus if draw(st.booleans()) or draw(st.booleans()))
    return topology, free


@st.composite
def requests(draw: Any) -> tuple[CPUTopology, frozenset[int], int]:
    """A topology, its free CPUs (at least one) and a request for 1 up to all of them."""
    topology, free = draw(free_sets().filter(lambda case: case[1]))
    return topology, free, draw(st.integers(1, len(free)))


def numa_free(topology: CPUTopology, free: frozenset[int]) -> dict[int, int]:
    return {n: len(free & set(topology.cpus_in_numa(n))) for n in topology.numa_nodes}


def whole_cpus(topology: CPUTopology, free: frozenset[int], numa: int | None = None) -> int:
    return sum(len(threads) for c, threads in enumerate(topology.core_threads)
               if set(threads) <= free and (numa is None or topology.core_numa[c] == numa))


@SETTINGS
@given(case=free_sets(), data=st.data(), strategy=st.sampled_from([SAME_CORE_FIRST, SPREAD, BIND_ALL_CPUS]))
def test_allocate_takes_exactly_the_request_from_available(case: Any, data: Any, strategy: str) -> None:
    topology, free = case
    request = data.draw(st.integers(0, len(free) + 2))
    try:
        cpus = allocate(topology, free, request, strategy)
    except AllocationError:
        assert strategy != BIND_ALL_CPUS and request > len(free)
        return
    assert cpus == sorted(set(cpus)) and set(cpus) <= free
    assert len(cpus) == (len(free) if strategy == BIND_ALL_CPUS else request)
    assert allocate(topology, sorted(free, reverse=True), request, strategy) == cpus  # order of input is irrelevant


@SETTINGS
@given(case=requests())
def test_spread_uses_one_numa_node_or_socket_when_one_holds_the_request(case: Any) -> None:
    topology, free, request = case
    cpus = allocate(topology, free, request, SPREAD)
    numas = {topology.numa_of(cpu) for cpu in cpus}
    if max(numa_free(topology, free).values()) >= request:
        assert len(numas) == 1
    elif any(len(free & set(topology.cpus_in_socket(s))) >= request for s in topology.sockets):
        assert len({topology.numa_socket[n] for n in numas}) == 1


@SETTINGS
@given(case=requests())
def test_spread_takes_one_thread_per_core_while_possible(case: Any) -> None:
    """A core gives two threads only when every free core of the NUMA nodes used gives one."""
    topology, free, request = case
    cpus = allocate(topology, free, request, SPREAD)
    per_core = Counter(topology.core_of(cpu) for cpu in cpus)
    if max(per_core.values()) > 1:
        numas = {topology.numa_of(cpu) for cpu in cpus}
        free_cores = {topology.core_of(cpu) for cpu in free if topology.numa_of(cpu) in numas}
        assert free_cores <= set(per_core)


@SETTINGS
@given(case=requests())
def test_same_core_first_takes_whole_cores_and_stays_local(case: Any) -> None:
    topology, free, request = case
    cpus = allocate(topology, free, request, SAME_CORE_FIRST)
    taken = set(cpus)
    remainder = request % topology.threads_per_core
    machine_whole = whole_cpus(topology, free)
    in_whole_cores = sum(len(t) for t in topology.core_threads if set(t) <= taken)
    if machine_whole >= request - remainder:
        assert in_whole_cores >= request - remainder  # only the sub-core remainder is single threads
        if remainder == 0:
            assert in_whole_cores == request
    numas = {topology.numa_of(cpu) for cpu in cpus}
    fits_numa = [n for n in topology.numa_nodes
                 if whole_cpus(topology, free, n) >= request - remainder and numa_free(topology, free)[n] >= request]
    if fits_numa:
        assert len(numas) == 1
        chosen = numas.pop()
        best = min((whole_cpus(topology, free, n), numa_free(topology, free)[n]) for n in fits_numa)
        assert (whole_cpus(topology, free, chosen), numa_free(topology, free)[chosen]) == best  # best fit
    elif machine_whole < request - remainder and max(numa_free(topology, free).values()) >= request:
        assert len(numas) == 1


@SETTINGS
@given(cpus=st.sets(st.integers(0, 300), max_size=40))
def test_cpuset_list_round_trips(cpus: set[int]) -> None:
    assert parse_cpuset(format_cpuset(cpus)) == sorted(cpus)


@SETTINGS
@given(topology=topologies(), data=st.data())
def test_io_queue_growth_is_accepted_and_any_move_refused(topology: CPUTopology, data: Any) -> None:
    cpus = st.lists(st.sampled_from(topology.cpus), min_size=1, max_size=3)
    old = IOQueueDistribution.from_mapping({f"q{i}": data.draw(cpus) for i in range(data.draw(st.integers(1, 3)))})
    extra = {f"x{i}": data.draw(cpus) for i in range(data.draw(st.integers(0, 2)))}
    assert accept_io_queue_update(old, IOQueueDistribution.from_mapping(old.as_dict() | extra), topology).accepted
    changed = dict(old.as_dict())
    victim = data.draw(st.sampled_from(sorted(changed)))
    new_cpus = tuple(sorted(set(data.draw(cpus))))
    if new_cpus == changed[victim]:
        return
    changed[victim] = new_cpus
    assert not accept_io_queue_update(old, IOQueueDistribution.from_mapping(changed), topology).accepted


# ------------------------------------------------------------------ node state over sequences

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("exclusive"), st.integers(1, 10), st.sampled_from([SAME_CORE_FIRST, SPREAD]), st.booleans()),
        st.tuples(st.just("exclusive"), st.integers(1, 40), st.sampled_from([SAME_CORE_FIRST, SPREAD, BIND_ALL_CPUS]),
                  st.booleans()),
        st.tuples(st.just("shared"), st.integers(1, 6)),
        st.tuples(st.just("release"), st.integers(0, 30)),
        st.tuples(st.just("toggle"), st.integers(0, 30)),
    ),
    min_size=4,
    max_size=30,
)


def brute_summary(state: NodeCPUState) -> tuple[int, int]:
    """(whole free cores, stranded CPUs) counted core by core."""
    pool = state.share_pool
    whole = sum(1 for t in state.topology.core_threads if set(t) <= pool)
    stranded = sum(len(set(t) & pool) for t in state.topology.core_threads if not set(t) <= pool)
    return whole, stranded


def check_invariants(state: NodeCPUState) -> None:
    topology = state.topology
    owners: Counter[int] = Counter()
    for allocation in state.exclusive.values():
        owners.update(allocation.cpus)
        assert not allocation.cpus & state.reserved
        assert len(allocation.cpus) <= state.sellable.max_instance
    assert all(count == 1 for count in owners.values()), "a CPU handed out twice"
    assert state.share_pool == topology.cpu_set - state.reserved - set(owners)
    assert state.sellable.sold <= max(0, state.sellable.capacity)
    summary = summarize(state)
    assert (summary.free_whole_cores, summary.stranded) == brute_summary(state)
    assert summary.largest_exclusive == state.largest_exclusive
    assert summary.largest_numa <= summary.largest_exclusive


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology=topologies(min_cores=3), reserved_count=st.integers(0, 6), ratio=st.sampled_from([1, 2, 3]), ops=OPS)
def test_state_invariants_hold_over_any_sequence(topology: CPUTopology, reserved_count: int, ratio: int,
                                                 ops: list[tuple[Any, ...]]) -> None:
    reserved = frozenset(topology.cpus[: min(reserved_count, len(topology) - 1)])
    state = NodeCPUState(topology, reserved, overcommit_ratio=ratio)
    names: list[str] = []
    for step, op in enumerate(ops):
        name = f"db/i{step}"
        if op[0] == "exclusive":
            try:
                state, _ = state.allocate_exclusive(name, op[1], op[2], release_isolate=op[3])
                names.append(name)
            except AllocationError:
                pass
        elif op[0] == "shared":
            try:
                state = state.place_shared(SharedInstance(name, op[1] * 250, op[1] * 500))
                names.append(name)
            except AllocationError:
                pass
        elif names and op[0] == "release":
            state = state.without(names.pop(op[1] % len(names)))
        elif names and op[0] == "toggle":
            target = names[op[1] % len(names)]
            if target in state.exclusive:
                state = state.with_release_isolate(target, not state.exclusive[target].release_isolate)
        check_invariants(state)
    # the annotations written for this state rebuild exactly this state
    pods = [{"metadata": {"namespace": "db", "name": key.split("/")[1], "creationTimestamp": f"{i:04d}",
                          "annotations": pod_annotations(state, key)}}
            for i, key in enumerate(state.exclusive)]
    pods += [{"metadata": {"namespace": "db", "name": key.split("/")[1]},
              "spec": {"containers": [{"name": "engine", "resources": {
                  "requests": {"cpu": f"{s.request_milli}m"}, "limits": {"cpu": f"{s.limit_milli}m"}}}]}}
             for key, s in state.shared.items()]
    rebuilt = rebuild_state(topology, pods, reserved=reserved, overcommit_ratio=ratio,
                            node_annotations=node_annotations(state))
    assert rebuilt.ok, rebuilt.report()
    assert rebuilt.state == state


@SETTINGS
@given(case=free_sets(), shared_milli=st.integers(0, 20_000))
def test_mask_summary_matches_the_state_summary(case: Any, shared_milli: int) -> None:
    topology, free = case
    state = NodeCPUState(topology, frozenset(), overcommit_ratio=2)
    held = topology.cpu_set - free
    if held:
        state = state.with_exclusive(ExclusiveAllocation("db/x", frozenset(held)))
    if shared_milli:
        state = state.with_shared(SharedInstance("db/s", shared_milli // 2, shared_milli))
    direct = summarize_masks(topology, 0, topology.mask_of(held), shared_milli, shared_milli, 2)
    assert summarize(state) == direct
