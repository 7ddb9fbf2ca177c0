"""The placement simulator: placements, usage, unschedulable reasons, fragmentation, allocation."""

from __future__ import annotations

import copy
from typing import Any

from scheduling.engine import PluginSpec, Policy, Snapshot
from scheduling.whatif import compare, simulate
from tests.scheduling.wrappers import make_node, make_pod

GI = 2**30


def node(name: str, cpu: str, mem: str, pods: str = "110") -> dict[str, Any]:
    return make_node().name(name).capacity({"cpu": cpu, "memory": mem, "pods": pods}).obj()


def fit_policy(kind: str) -> Policy:
    args = {"scoringStrategy": {"type": kind}}
    return Policy(
        filters=(PluginSpec("NodeResourcesFit", args=args),),
        scores=(PluginSpec("NodeResourcesFit", 1, args),),
        percentage_of_nodes_to_score=100,
        name=kind,
    )


def test_replicas_placements_usage_and_reasons() -> None:
    snapshot = Snapshot(nodes=[node("a", "4", "8Gi"), node("b", "2", "8Gi")], pods=[make_pod().node("a").req({"cpu": "1"}).obj()])
    before = copy.deepcopy(snapshot)
    pod = make_pod().name("web").req({"cpu": "1", "memory": "1Gi"}).obj()
    result = simulate(fit_policy("LeastAllocated"), snapshot, pod, 6)
    assert snapshot == before  # pure: the snapshot is untouched
    assert result.placements.count(None) == 1 and result.placed == 5
    assert result.first_unschedulable == 5
    assert result.reasons == "0/2 nodes are available: 2 Insufficient cpu."
    assert result.failure_messages == {result.reasons: 1}
    assert result.node_usage["a"] == {"cpu": 4000, "memory": 3 * GI, "pods": 4}
    assert result.node_usage["b"] == {"cpu": 2000, "memory": 2 * GI, "pods": 2}
    assert result.allocation_rate == {"cpu": 1.0, "memory": 5 / 16}
    assert result.largest_shape == {"cpu": 1000, "memory": GI}
    assert result.largest_shape_fits == 0
    # both nodes are full on cpu: all their free memory is stranded
    assert result.fragmentation["memory"].stranded == 11 * GI
    assert result.fragmentation["cpu"].stranded == 0


def test_fragmentation_against_a_larger_shape() -> None:
    snapshot = Snapshot(nodes=[node("a", "8", "32Gi"), node("b", "8", "32Gi")])
    small = make_pod().req({"cpu": "3", "memory": "4Gi"}).obj()
    result = simulate(fit_policy("LeastAllocated"), snapshot, small, 2, shape={"cpu": 6000, "memory": 8 * GI})
    # spread: 5 cores free on each node, a 6-core shape fits nowhere: 10 cores stranded
    assert result.placements == ("a", "b")
    assert result.largest_shape_fits == 0
    assert result.fragmentation["cpu"].stranded == 10_000
    assert result.fragmentation["cpu"].stranded_ratio == 10 / 16
    stacked = simulate(fit_policy("MostAllocated"), snapshot, small, 2, shape={"cpu": 6000, "memory": 8 * GI})
    # stacked on one node: the other still takes the large shape
    assert sorted(stacked.placements) == ["a", "a"] or sorted(stacked.placements) == ["b", "b"]
    assert stacked.largest_shape_fits == 1
    assert stacked.fragmentation["cpu"].stranded == 2_000


def test_compare_reports_both_policies() -> None:
    snapshot = Snapshot(nodes=[node(f"n{i}", "8", "32Gi") for i in range(4)])
    pod = make_pod().req({"cpu": "3", "memory": "4Gi"}).obj()
    result = compare(fit_policy("LeastAllocated"), fit_policy("MostAllocated"), snapshot, pod, 10, shape={"cpu": 8000, "memory": 4 * GI})
    summary = result.summary()
    assert set(summary) == {"LeastAllocated", "MostAllocated"}
    assert summary["MostAllocated"]["largest_shape_fits"] >= summary["LeastAllocated"]["largest_shape_fits"]
    assert result.a.allocation_rate == result.b.allocation_rate  # same pods placed, same totals


def test_water_level_stacking_beats_spreading_on_a_nearly_full_cluster() -> None:
    nodes = [node(f"n{i}", "16", "64Gi") for i in range(8)]
    pods = [make_pod().node(f"n{i}").req({"cpu": "12", "memory": "48Gi"}).obj() for i in range(8)]
    snapshot = Snapshot(nodes=nodes, pods=pods)
    small = make_pod().req({"cpu": "1", "memory": "4Gi"}).obj()
    big = make_pod().req({"cpu": "4", "memory": "16Gi"}).obj()
    water = Policy(filters=(PluginSpec("NodeResourcesFit"),), scores=(PluginSpec("WaterLevelStackSpread", 1, {"threshold": 0.6}),), percentage_of_nodes_to_score=100, name="water")
    spread = fit_policy("LeastAllocated")
    results = {p.name: simulate(p, snapshot, small, 8, shape=big) for p in (water, spread)}
    # 75% full: spreading puts one small pod on every node and leaves 3 free cores each, so the
    # big shape fits nowhere; stacking fills two nodes and keeps six whole 4-core holes
    assert results["LeastAllocated"].largest_shape_fits == 0
    assert results["water"].largest_shape_fits == 6
    assert results["water"].fragmentation["cpu"].stranded == 0
