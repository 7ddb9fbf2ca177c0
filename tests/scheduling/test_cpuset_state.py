"""scheduling.cpu.state: the seed's worked example, the sellable rules, release-isolate mode,
safety checks, annotation payloads and the rebuild of a node's state from annotations."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import pytest

from scheduling.cpu.cpuset import (
    SAME_CORE_FIRST,
    SPREAD,
    AllocationError,
    IOQueueDistribution,
    format_cpuset,
    generate_topology,
    reserve_cpus,
)
from scheduling.cpu.fit import fits_exclusive, fits_shared
from scheduling.cpu.state import (
    ALLOC_STATUS,
    CPU_SHAREPOOL,
    CUSTOM_CGROUP_INFO,
    OVERCOMMIT_RATIO_ANNOTATION,
    RELEASE_ISOLATE_MODE,
    RESERVED_CPUS_ANNOTATION,
    ExclusiveAllocation,
    NodeCPUState,
    SharedInstance,
    StateError,
    check_exclusive,
    cpu_map,
    node_annotations,
    parse_alloc_spec,
    parse_alloc_status,
    parse_custom_cgroup_info,
    parse_share_pool,
    pod_annotations,
    rebuild_state,
)

HOST_104 = generate_topology(2, 1, 26, 2)  # 2 sockets x 26 cores x 2 threads


def seed_host(ratio: int = 2) -> NodeCPUState:
    """The seed's unallocated 104C host reserving 8C."""
    return NodeCPUState(HOST_104, reserve_cpus(HOST_104, 8), overcommit_ratio=ratio)


def shared(name: str, cpus: int, app: str = "") -> SharedInstance:
    """A shared instance of spec ``cpus`` (limit), oversold 2:1 (request = half)."""
    return SharedInstance(name, cpus * 500, cpus * 1000, app)


# ------------------------------------------------------------------ the seed's example


def test_seed_host_sells_96_and_one_exclusive_instance_at_most_64() -> None:
    host = seed_host()
    assert host.sellable.physical == 96 and len(host.share_pool) == 96
    assert host.sellable.max_instance == 64
    assert fits_exclusive(host, 64) == (True, "")
    assert fits_exclusive(host, 65) == (False, "request exceeds 2/3 of sellable CPUs (64)")
    with pytest.raises(AllocationError, match="2/3"):
        host.allocate_exclusive("db/big", 65)


def test_seed_two_32c_shared_instances_then_one_migrated_away() -> None:
    """"调度两个32C的共享实例, 再迁移一个32C的共享实例": a = 96 - 2x32, b = (96x2 - 64) / 2."""
    host = seed_host().place_shared(shared("db/s1", 32)).place_shared(shared("db/s2", 32))
    assert (host.sellable.a, host.sellable.b, host.sellable.capacity) == (32, 64, 32)
    assert fits_exclusive(host, 32).ok and fits_exclusive(host, 33) == (False, "Insufficient exclusive cpu")
    migrated = host.without("db/s2")
    assert (migrated.sellable.a, migrated.sellable.b, migrated.sellable.capacity) == (32, 80, 32)


def test_seed_customer_with_two_exclusive_and_two_shared_instances_needs_one_machine() -> None:
    host = seed_host().place_shared(shared("db/s1", 16, "s1")).place_shared(shared("db/s2", 16, "s2"))
    assert (host.sellable.a, host.sellable.b) == (64, 80)
    host, first = host.allocate_exclusive("db/e1", 32, SAME_CORE_FIRST, "e1")
    host, second = host.allocate_exclusive("db/e2", 32, SPREAD, "e2")
    assert not first.cpus & second.cpus
    assert host.sellable.left == 0 and len(host.share_pool) == 32
    assert host.share_pool == HOST_104.cpu_set - host.reserved - first.cpus - second.cpus
    assert fits_exclusive(host, 1) == (False, "Insufficient exclusive cpu")
    # the share pool (32 CPUs at 2:1) still sells shared instances while the exclusive 64 stay sellable
    assert fits_shared(host, shared("db/s3", 16, "s3")).ok
    assert fits_shared(host, shared("db/s4", 17, "s4")) == (False, "Insufficient shared cpu")  # a = 96 - 34 < 64


def test_exclusive_first_then_shared_meets_the_same_limit() -> None:
    host = seed_host()
    host, _ = host.allocate_exclusive("db/e1", 64)
    assert fits_shared(host, shared("db/s1", 16)).ok
    assert not fits_shared(host, shared("db/s1", 17)).ok


def test_overcommit_ratio_bounds_what_shared_instances_leave_for_exclusive() -> None:
    host = seed_host(ratio=1).place_shared(shared("db/s1", 20)).place_shared(shared("db/s2", 20))
    assert (host.sellable.a, host.sellable.b) == (56, 56)
    host = NodeCPUState(HOST_104, reserve_cpus(HOST_104, 8), overcommit_ratio=Fraction(3, 2))
    host = host.with_shared(SharedInstance("db/s", 1000, 45_000))
    assert (host.sellable.a, host.sellable.b) == (6, 66)  # b = 96 - 45/1.5


# ------------------------------------------------------------------ machineMaxList


def test_machine_max_list_counts_exclusive_and_shared_instances_of_an_app() -> None:
    host = seed_host().place_shared(shared("db/inve-0", 4, "inve"))
    limits = {"inve": 1}
    assert fits_exclusive(host, 4, SAME_CORE_FIRST, "inve", limits) == (
        False, "app inve already has 1 instance(s) on this node (machineMaxList)")
    assert fits_exclusive(host, 4, SAME_CORE_FIRST, "other", limits).ok
    assert fits_exclusive(host, 4, SAME_CORE_FIRST, "inve", {"inve": 2}).ok
    assert not fits_shared(host, shared("db/inve-1", 4, "inve"), limits).ok
    with pytest.raises(AllocationError, match="machineMaxList"):
        host.allocate_exclusive("db/inve-1", 4, SAME_CORE_FIRST, "inve", machine_max=limits)


# ------------------------------------------------------------------ share pool and release


def test_release_on_delete_returns_cpus_to_the_share_pool() -> None:
    host = seed_host()
    after, allocation = host.allocate_exclusive("db/e1", 8)
    assert len(after.share_pool) == 88
    assert after.without("db/e1").share_pool == host.share_pool
    assert after.without("db/unknown") is after


def test_state_refuses_a_cpu_owned_twice_or_reserved() -> None:
    host = seed_host()
    host = host.with_exclusive(ExclusiveAllocation("db/a", frozenset({10, 11})))
    with pytest.raises(StateError, match="owned by both"):
        host.with_exclusive(ExclusiveAllocation("db/b", frozenset({11, 12})))
    with pytest.raises(StateError, match="reserved"):
        host.with_exclusive(ExclusiveAllocation("db/c", frozenset({0})))
    with pytest.raises(StateError, match="not in the topology"):
        host.with_exclusive(ExclusiveAllocation("db/d", frozenset({500})))


def test_release_isolate_mode_widens_the_cpuset_and_is_reversible() -> None:
    host, allocation = seed_host().allocate_exclusive("db/e1", 16)
    before = pod_annotations(host, "db/e1")
    released = host.with_release_isolate("db/e1")
    during = pod_annotations(released, "db/e1")
    assert during[RELEASE_ISOLATE_MODE] == "true"
    assert during[ALLOC_STATUS] == before[ALLOC_STATUS]  # the allocation does not change
    assert parse_custom_cgroup_info(during[CUSTOM_CGROUP_INFO]) == {"engine": sorted(HOST_104.cpu_set - host.reserved)}
    assert released.share_pool == host.share_pool and released.sellable == host.sellable
    restored = released.with_release_isolate("db/e1", False)
    assert pod_annotations(restored, "db/e1") == before
    assert restored == host


def test_release_isolate_mode_without_exclude_reserve_cpuset_binds_every_cpu() -> None:
    host, _ = seed_host().allocate_exclusive("db/e1", 16, exclude_reserved=False)
    annotations = pod_annotations(host.with_release_isolate("db/e1"), "db/e1")
    assert json.loads(annotations[CUSTOM_CGROUP_INFO]) == {"engine": {"cpuset": "0-103"}}
    assert annotations["exclude-reserve-cpuset"] == "false"


# ------------------------------------------------------------------ safety checks


def test_safety_checks_name_every_problem() -> None:
    host, allocation = seed_host().allocate_exclusive("db/e1", 8)
    assert check_exclusive(host, allocation) == []
    clash = ExclusiveAllocation("db/e2", frozenset({0, *list(allocation.cpus)[:1], 200}))
    reasons = check_exclusive(host, clash)
    assert any("the node does not have" in r for r in reasons)
    assert any("reserved CPU(s) 0" in r for r in reasons)
    assert any("of db/e1" in r for r in reasons)
    too_big = ExclusiveAllocation("db/e3", frozenset(sorted(host.share_pool)[:65]))
    assert "request exceeds 2/3 of sellable CPUs (64)" in check_exclusive(host, too_big)


def test_safety_check_refuses_more_than_the_sellable_exclusive_cpus() -> None:
    host = seed_host().place_shared(shared("db/s1", 32)).place_shared(shared("db/s2", 32))
    allocation = ExclusiveAllocation("db/e1", frozenset(sorted(host.share_pool)[:40]))
    assert "exclusive CPUs would exceed the node's sellable exclusive CPUs (40 > 32)" in check_exclusive(host, allocation)


def test_safety_check_replays_the_io_queue_priority_order() -> None:
    topology = generate_topology(1, 1, 8, 2).with_io_queues(IOQueueDistribution.from_mapping({"q0": [4, 5], "q1": [6, 7]}))
    host = NodeCPUState(topology, frozenset({0, 8}))
    host, allocation = host.allocate_exclusive("db/e1", 2, SAME_CORE_FIRST)
    assert sorted(allocation.cpus) == [4, 12]  # the first IO-queue CPU's core
    assert check_exclusive(host, allocation, strategy=SAME_CORE_FIRST) == []
    elsewhere = ExclusiveAllocation("db/e1", frozenset({1, 9}))
    reasons = check_exclusive(host, elsewhere, strategy=SAME_CORE_FIRST)
    assert reasons == ["cpuset 1,9 does not follow the node's IO-queue CPU priority order (expected 4,12)"]


# ------------------------------------------------------------------ annotation payloads


def test_annotation_payloads_match_the_seed_formats() -> None:
    topology = generate_topology(1, 1, 4, 2)
    host = NodeCPUState(topology, frozenset({0, 4})).with_exclusive(
        ExclusiveAllocation("db/e1", frozenset({2, 3}), SPREAD, containers=("engine",)))
    annotations = pod_annotations(host, "db/e1")
    assert annotations == {
        "cpu-isolate-mode": "exclusive",
        "alloc-spec": '{"cpu":"Spread"}',
        "alloc-status": '{"cpu":[2,3]}',
        "custom-cgroup-info": '{"engine":{"cpuset":"2-3"}}',
        "exclude-reserve-cpuset": "true",
    }
    assert node_annotations(host) == {"cpu-sharepool": '{"cpuIDs":[1,5,6,7]}'}
    assert parse_alloc_status(annotations["alloc-status"]) == [2, 3]
    assert parse_alloc_spec(annotations["alloc-spec"]) == SPREAD
    assert parse_share_pool(node_annotations(host)[CPU_SHAREPOOL]) == [1, 5, 6, 7]


@pytest.mark.parametrize(("parser", "text"), [
    (parse_alloc_status, "x"), (parse_alloc_status, '{"cpus":[1]}'), (parse_alloc_status, '{"cpu":[1,1]}'),
    (parse_alloc_status, '{"cpu":["1"]}'), (parse_alloc_spec, '{"cpu":"spread"}'),
    (parse_custom_cgroup_info, '{"engine":{"cpuset":"3-1"}}'), (parse_custom_cgroup_info, "{}"),
    (parse_share_pool, '{"cpuIDs":"1-3"}'),
])
def test_annotation_parsers_refuse_malformed_text(parser: Any, text: str) -> None:
    with pytest.raises(ValueError):
        parser(text)


def test_shared_instance_shares_and_quota_follow_the_kubelet() -> None:
    instance = SharedInstance("db/s", 2000, 4000)
    assert instance.cpu_shares == 2048 and instance.cfs_quota_us == 400_000 and instance.size_milli == 4000
    assert SharedInstance("db/t", 1, 0).cpu_shares == 2 and SharedInstance("db/t", 500, 0).cfs_quota_us == -1


# ------------------------------------------------------------------ rebuild from annotations


def pod(name: str, annotations: dict[str, str] | None = None, *, created: str = "2024-05-01T00:00:00Z",
        app: str = "", cpu: str | None = None, limit: str | None = None, phase: str = "Running") -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu:
        resources["requests"] = {"cpu": cpu}
    if limit:
        resources["limits"] = {"cpu": limit}
    return {
        "metadata": {"namespace": "db", "name": name, "creationTimestamp": created,
                     "annotations": annotations or {}, "labels": {"app": app} if app else {}},
        "spec": {"containers": [{"name": "engine", "resources": resources}]},
        "status": {"phase": phase},
    }


def node_meta(host: NodeCPUState) -> dict[str, str]:
    return {RESERVED_CPUS_ANNOTATION: format_cpuset(host.reserved),
            OVERCOMMIT_RATIO_ANNOTATION: str(host.overcommit_ratio), **node_annotations(host)}


def test_rebuild_round_trips_a_node() -> None:
    host = seed_host().place_shared(SharedInstance("db/s1", 8000, 16000, "s1"))
    host, _ = host.allocate_exclusive("db/e1", 24, SAME_CORE_FIRST, "e1")
    host, _ = host.allocate_exclusive("db/e2", 9, SPREAD, "e2", release_isolate=True)
    pods = [
        pod("s1", app="s1", cpu="8", limit="16"),
        pod("e1", pod_annotations(host, "db/e1"), app="e1"),
        pod("e2", pod_annotations(host, "db/e2"), app="e2"),
        pod("done", {ALLOC_STATUS: '{"cpu":[20]}', "cpu-isolate-mode": "exclusive"}, phase="Succeeded"),
        pod("sidecar-free"),
    ]
    rebuilt = rebuild_state(HOST_104, pods, node_annotations=node_meta(host))
    assert rebuilt.ok, rebuilt.report()
    assert rebuilt.report() == "consistent"
    assert rebuilt.state == host


def test_a_crash_before_the_annotation_is_written_leaks_nothing() -> None:
    host, _ = seed_host().allocate_exclusive("db/e1", 16)
    crashed, _ = host.allocate_exclusive("db/e2", 16)  # allocated in memory, annotation never written
    pods = [pod("e1", pod_annotations(host, "db/e1")), pod("e2", {"cpu-isolate-mode": "exclusive"})]
    rebuilt = rebuild_state(HOST_104, pods, reserved=host.reserved, overcommit_ratio=2)
    assert rebuilt.state.share_pool == host.share_pool
    assert len(rebuilt.state.share_pool) == len(crashed.share_pool) + 16
    assert rebuilt.unallocated == ("db/e2",)
    assert "db/e2 is exclusive but has no alloc-status yet" in rebuilt.report()


def test_two_pods_claiming_one_cpu_are_reported_and_the_cpu_is_never_handed_out() -> None:
    early = pod("early", {"cpu-isolate-mode": "exclusive", ALLOC_STATUS: '{"cpu":[10,11]}',
                          CUSTOM_CGROUP_INFO: '{"engine":{"cpuset":"10-11"}}'}, created="2024-05-01T00:00:00Z")
    late = pod("late", {"cpu-isolate-mode": "exclusive", ALLOC_STATUS: '{"cpu":[11,12]}'}, created="2024-05-02T00:00:00Z")
    rebuilt = rebuild_state(HOST_104, [late, early], reserved=reserve_cpus(HOST_104, 8))
    assert not rebuilt.ok
    assert [str(c) for c in rebuilt.conflicts] == ["CPU 11 is claimed by db/early (kept) and db/late (disputed)"]
    state = rebuilt.state
    assert set(state.exclusive) == {"db/early"} and state.disputed == {"db/late": frozenset({12})}
    assert not {10, 11, 12} & state.share_pool
    with pytest.raises(AllocationError):
        state.allocate_exclusive("db/new", len(state.share_pool) + 1)
    assert state.without("db/late").share_pool == state.share_pool | {12}


def test_a_claim_on_reserved_cpus_is_a_conflict_with_the_reservation() -> None:
    bad = pod("bad", {"cpu-isolate-mode": "exclusive", ALLOC_STATUS: '{"cpu":[0,30]}'})
    rebuilt = rebuild_state(HOST_104, [bad], reserved=reserve_cpus(HOST_104, 8))
    assert [str(c) for c in rebuilt.conflicts] == ["CPU 0 is claimed by reserved (kept) and db/bad (disputed)"]
    assert rebuilt.state.disputed == {"db/bad": frozenset({30})}


def test_rebuild_reports_bound_cpusets_and_stale_share_pool() -> None:
    host, _ = seed_host().allocate_exclusive("db/e1", 4)
    annotations = pod_annotations(host, "db/e1") | {CUSTOM_CGROUP_INFO: '{"engine":{"cpuset":"4-9"}}'}
    node = node_meta(host) | {CPU_SHAREPOOL: '{"cpuIDs":[1,2]}'}
    rebuilt = rebuild_state(HOST_104, [pod("e1", annotations)], node_annotations=node)
    report = rebuilt.report()
    assert "db/e1 container engine is bound to 4-9 but should be bound to 4-5,56-57" in report
    assert "node cpu-sharepool is stale: 1-2 annotated" in report


def test_rebuild_holds_the_bound_cpuset_when_alloc_status_is_unreadable() -> None:
    broken = pod("e1", {"cpu-isolate-mode": "exclusive", ALLOC_STATUS: "{oops", CUSTOM_CGROUP_INFO: '{"engine":{"cpuset":"20-21"}}'})
    rebuilt = rebuild_state(HOST_104, [broken])
    assert rebuilt.state.held == {20, 21}
    assert "holding its bound cpuset 20-21" in rebuilt.report()


def test_rebuild_counts_shared_pods_from_their_resources() -> None:
    rebuilt = rebuild_state(HOST_104, [pod("s1", cpu="2", limit="4", app="x"), pod("s2", cpu="500m")],
                            node_annotations={OVERCOMMIT_RATIO_ANNOTATION: "2", RESERVED_CPUS_ANNOTATION: "0-3,52-55"})
    assert rebuilt.state.shared["db/s1"] == SharedInstance("db/s1", 2000, 4000, "x")
    assert rebuilt.state.shared["db/s2"].size_milli == 500
    assert rebuilt.state.overcommit_ratio == 2 and len(rebuilt.state.reserved) == 8


def test_cpu_map_colours_every_cpu_by_owner() -> None:
    topology = generate_topology(1, 1, 2, 2).with_io_queues(IOQueueDistribution.from_mapping({"eth0/rx-0": [1]}))
    node = NodeCPUState(topology, frozenset({0}), disputed={"db/b": frozenset({2})}).with_exclusive(
        ExclusiveAllocation("db/a", frozenset({1})))
    cells = [(c.cpu, c.core, c.role, c.owner, c.queues) for c in cpu_map(node)]
    assert cells == [(0, 0, "reserved", "", ()), (2, 0, "disputed", "db/b", ()),
                     (1, 1, "exclusive", "db/a", ("eth0/rx-0",)), (3, 1, "share", "", ())]
