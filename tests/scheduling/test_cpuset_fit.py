"""scheduling.cpu.fit: filter verdicts, scores, the what-if and the fleet summaries."""

from __future__ import annotations

from scheduling.cpu.cpuset import BIND_ALL_CPUS, SAME_CORE_FIRST, SPREAD, generate_topology, reserve_cpus
from scheduling.cpu.fit import (
    NodeSummary,
    SummaryColumns,
    fits_exclusive,
    fleet_view,
    score_exclusive,
    summarize,
    what_if_exclusive,
)
from scheduling.cpu.state import ExclusiveAllocation, NodeCPUState, SharedInstance

HOST_104 = generate_topology(2, 1, 26, 2)


def host() -> NodeCPUState:
    return NodeCPUState(HOST_104, reserve_cpus(HOST_104, 8), overcommit_ratio=2)


def test_fit_reasons_use_kube_scheduler_wording() -> None:
    node = host().with_shared(SharedInstance("db/s", 16_000, 32_000, "orders"))
    assert fits_exclusive(node, 65) == (False, "request exceeds 2/3 of sellable CPUs (64)")
    assert fits_exclusive(node, 33) == (False, "Insufficient exclusive cpu")
    assert fits_exclusive(node, 4, app="orders", machine_max={"orders": 1}) == (
        False, "app orders already has 1 instance(s) on this node (machineMaxList)")
    ok, reason = fits_exclusive(node, 32)
    assert ok and reason == ""
    assert fits_exclusive(node, 0) == (False, "invalid exclusive cpu request 0")


def test_bind_all_cpus_fits_only_where_the_rules_allow_the_whole_share_pool() -> None:
    assert fits_exclusive(host(), 1, BIND_ALL_CPUS) == (False, "request exceeds 2/3 of sellable CPUs (64)")
    whole_machine = NodeCPUState(HOST_104, reserve_cpus(HOST_104, 8), max_instance_fraction=1)
    assert fits_exclusive(whole_machine, 1, BIND_ALL_CPUS).ok
    after, allocation = whole_machine.allocate_exclusive("db/all", 1, BIND_ALL_CPUS)
    assert len(allocation.cpus) == 96 and not after.share_pool


def test_what_if_a_32c_exclusive_instance() -> None:
    node = host()
    answer = what_if_exclusive(node, 32)
    assert answer.ok and answer.scope == "numa" and len(answer.cpus) == 32
    assert answer.cpuset == "4-19,56-71"
    assert answer.detail.startswith("fits: CPU(s) 4-19,56-71 in NUMA node 0")
    assert answer.after is not None and answer.after.exclusive_left == 64
    assert node == host()  # nothing changed
    busy = node.with_shared(SharedInstance("db/s1", 16_000, 32_000)).with_shared(SharedInstance("db/s2", 8_000, 16_000))
    refused = what_if_exclusive(busy, 48)
    assert not refused.ok and refused.reason == "Insufficient exclusive cpu"
    assert "32 of 32 sellable exclusive CPU(s) left (a=32, b=72, 0 already exclusive)" in refused.detail


def test_score_prefers_the_fuller_node_and_local_placements() -> None:
    empty = host()
    fuller, _ = host().allocate_exclusive("db/e1", 40)
    assert score_exclusive(fuller, 8) > score_exclusive(empty, 8)
    assert score_exclusive(empty, 65) == 0
    assert 0 <= score_exclusive(empty, 8, SPREAD) <= 100


def test_summary_counts_fragmentation() -> None:
    topology = generate_topology(1, 2, 4, 2)  # NUMA 0: cores 0-3 (cpus 0-3, 8-11), NUMA 1: cores 4-7
    node = NodeCPUState(topology, frozenset({0, 8})).with_exclusive(ExclusiveAllocation("db/e", frozenset({1, 2, 4})))
    summary = summarize(node)
    assert summary == NodeSummary(
        sellable=14, exclusive_used=3, exclusive_left=11, largest_exclusive=9, largest_numa=7,
        free_whole_cores=4, stranded=3, shared_sold_milli=0)


def test_fleet_view_adds_stored_integers_and_answers_a_request_size() -> None:
    nodes = [("a", NodeSummary(96, 32, 32, 32, 26, 10, 2, 0)), ("b", NodeSummary(96, 0, 64, 64, 52, 46, 0, 8000)),
             ("c", NodeSummary(96, 64, 0, 0, 0, 4, 6, 32000))]
    columns = SummaryColumns.of(nodes)
    view = fleet_view(columns, 32)
    assert (view.nodes, view.sellable, view.exclusive_used, view.exclusive_left) == (3, 288, 96, 96)
    assert (view.fit_nodes, view.fit_numa_nodes, view.fit_instances) == (2, 1, 3)
    assert view.largest_exclusive == 64 and view.stranded == 8 and view.shared_sold_milli == 40000
    assert fleet_view(columns).fit_nodes == 0 and len(columns) == 3 and columns.names == ["a", "b", "c"]


def test_same_core_first_is_the_default_strategy() -> None:
    assert what_if_exclusive(host(), 2).cpus == what_if_exclusive(host(), 2, SAME_CORE_FIRST).cpus == (4, 56)
