"""Meridian's own score plugins: ExtendedBalancedAllocation, WaterLevelStackSpread, MostAvailable.

Each is pinned to its definition (``scheduling.plugins.meridian``) with worked examples, and to
the upstream plugin it generalises with a property: unit weights reproduce upstream
BalancedAllocation; below/above the water level WaterLevelStackSpread *is* NodeResourcesFit's
LeastAllocated/MostAllocated.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.cluster import PLACED_AT_ANNOTATION, USAGE_ANNOTATION, USAGE_TIME_ANNOTATION, VIRTUAL_REQUEST_ANNOTATION
from scheduling.framework import score_nodes
from tests.scheduling.wrappers import make_node, make_pod

FUZZ = settings(database=None, deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
GPU = "nvidia.com/gpu"


def node(name: str, cpu: str, mem: str, gpu: str | None = None) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": mem, "pods": "110"}
    if gpu is not None:
        resources[GPU] = gpu
    return make_node().name(name).capacity(resources).obj()


def names(nodes: list[dict[str, Any]], scores: dict[str, int]) -> list[int]:
    return [scores[n["metadata"]["name"]] for n in nodes]


# ------------------------------------------------------------------------ ExtendedBalancedAllocation


def test_cpu_only_pod_is_steered_off_idle_gpu_nodes() -> None:
    """The GPU counts (weight 3) even when the pod does not request it, so a CPU pod that would
    leave a GPU node's GPUs idle scores lower there than on a plain node."""
    nodes = [node("cpu-node", "16", "64Gi"), node("gpu-node", "16", "64Gi", "8")]
    pod = make_pod().req({"cpu": "8", "memory": "32Gi"}).obj()
    scores = score_nodes("ExtendedBalancedAllocation", pod, nodes, [])
    # cpu-node: fractions 0.5, 0.5 -> std 0 -> 100
    # gpu-node: 0.5, 0.5, 0.0 weights 1,1,3 -> mean 0.2, var (0.09+0.09+3*0.04)/5 = 0.06 -> std 0.2449 -> 75
    assert names(nodes, scores) == [100, 75]
    # upstream leaves the unrequested GPU out and cannot tell the two apart
    assert names(nodes, score_nodes("NodeResourcesBalancedAllocation", pod, nodes, [], {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]})) == [100, 100]


def test_gpu_weight_makes_gpu_imbalance_cost_more() -> None:
    nodes = [node("n1", "32", "128Gi", "8")]
    pod = make_pod().req({"cpu": "4", "memory": "16Gi", GPU: "4"}).obj()
    light = score_nodes("ExtendedBalancedAllocation", pod, nodes, [], {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU, "weight": 1}]})
    heavy = score_nodes("ExtendedBalancedAllocation", pod, nodes, [])
    assert heavy["n1"] < light["n1"]


def test_best_effort_pods_are_skipped() -> None:
    nodes = [node("n1", "4", "8Gi"), node("n2", "8", "8Gi")]
    assert score_nodes("ExtendedBalancedAllocation", make_pod().obj(), nodes, []) == {"n1": 0, "n2": 0}


@FUZZ
@given(
    cpu=st.integers(0, 20_000), mem=st.integers(0, 2**36), gpu=st.integers(0, 8),
    used=st.lists(st.tuples(st.integers(0, 8000), st.integers(0, 2**34), st.integers(0, 4)), max_size=4),
    caps=st.lists(st.tuples(st.integers(1, 64), st.integers(1, 512), st.integers(1, 8)), min_size=1, max_size=4),
)
def test_unit_weights_reproduce_upstream_balanced_allocation(cpu: int, mem: int, gpu: int, used: list[Any], caps: list[Any]) -> None:
    nodes = [node(f"n{i}", str(c), f"{m}Gi", str(g)) for i, (c, m, g) in enumerate(caps)]
    pods = [make_pod().node(f"n{i % len(nodes)}").req({"cpu": f"{c}m", "memory": str(m), GPU: str(g)}).obj() for i, (c, m, g) in enumerate(used)]
    pod = make_pod().req({"cpu": f"{cpu}m", "memory": str(mem), GPU: str(max(gpu, 1))}).obj()
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": GPU, "weight": 1}]
    ours = score_nodes("ExtendedBalancedAllocation", pod, nodes, pods, {"resources": resources})
    upstream = score_nodes("NodeResourcesBalancedAllocation", pod, nodes, pods, {"resources": resources})
    assert ours == upstream


# ------------------------------------------------------------------------ WaterLevelStackSpread


def test_spreads_below_and_stacks_above_the_water_level() -> None:
    nodes = [node("empty", "10", "10Gi"), node("busy", "10", "10Gi")]
    pod = make_pod().req({"cpu": "1", "memory": "1Gi"}).obj()
    low = [make_pod().node("busy").req({"cpu": "5", "memory": "5Gi"}).obj()]  # cluster 25% full
    high = [make_pod().node("busy").req({"cpu": "9", "memory": "9Gi"}).obj(), make_pod().node("empty").req({"cpu": "8", "memory": "8Gi"}).obj()]  # 85%
    spread = score_nodes("WaterLevelStackSpread", pod, nodes, low, {"threshold": 0.8})
    assert spread["empty"] > spread["busy"]
    stack = score_nodes("WaterLevelStackSpread", pod, nodes, high, {"threshold": 0.8})
    assert stack["busy"] > stack["empty"]


@FUZZ
@given(
    seed=st.integers(0, 2**32 - 1),
    threshold=st.floats(0, 1),
    weights=st.tuples(st.integers(1, 5), st.integers(1, 5)),
)
def test_water_level_is_least_or_most_allocated(seed: int, threshold: float, weights: tuple[int, int]) -> None:
    rnd = random.Random(seed)
    nodes = [node(f"n{i}", str(rnd.randint(1, 32)), f"{rnd.randint(1, 64)}Gi") for i in range(rnd.randint(1, 5))]
    pods = [make_pod().node(f"n{rnd.randrange(len(nodes))}").req({"cpu": f"{rnd.randint(0, 8000)}m", "memory": f"{rnd.randint(0, 8192)}Mi"}).obj() for _ in range(rnd.randint(0, 8))]
    pod = make_pod().req({"cpu": f"{rnd.randint(0, 4000)}m"}).obj()
    resources = [{"name": "cpu", "weight": weights[0]}, {"name": "memory", "weight": weights[1]}]
    alloc = {"cpu": 0, "memory": 0}
    req = {"cpu": 0, "memory": 0}
    for n in nodes:
        alloc["cpu"] += int(n["status"]["allocatable"]["cpu"]) * 1000
        alloc["memory"] += int(n["status"]["allocatable"]["memory"][:-2]) * 2**30
    for p in pods:
        requests = p["spec"]["containers"][0]["resources"]["requests"]
        req["cpu"] += int(requests["cpu"][:-1])
        req["memory"] += int(requests["memory"][:-2]) * 2**20
    water = (weights[0] * req["cpu"] / alloc["cpu"] + weights[1] * req["memory"] / alloc["memory"]) / sum(weights)
    kind = "MostAllocated" if water >= threshold else "LeastAllocated"
    ours = score_nodes("WaterLevelStackSpread", pod, nodes, pods, {"threshold": threshold, "resources": resources})
    assert ours == score_nodes("NodeResourcesFit", pod, nodes, pods, {"scoringStrategy": {"type": kind, "resources": resources}})


# ------------------------------------------------------------------------ MostAvailable


def reported(name: str, cpu: str, mem: str, usage: dict[str, str] | None, at: str = "2025-01-01T00:00:00Z") -> dict[str, Any]:
    w = make_node().name(name).capacity({"cpu": cpu, "memory": mem, "pods": "110"})
    if usage is not None:
        w.annotation(USAGE_ANNOTATION, json.dumps(usage)).annotation(USAGE_TIME_ANNOTATION, at)
    return w.obj()


def test_most_available_prefers_actual_free_capacity() -> None:
    # equal requests, but n1 is really busy: 8 of 10 cores and 6 of 10Gi in use
    nodes = [reported("n1", "10", "10Gi", {"cpu": "8", "memory": "6Gi"}), reported("n2", "10", "10Gi", {"cpu": "2", "memory": "2Gi"})]
    pod = make_pod().req({"cpu": "1", "memory": "1Gi"}).obj()
    scores = score_nodes("MostAvailable", pod, nodes, [])
    # n1: cpu (10-8-1)/10 = 10, mem (10-6-1)/10 = 30 -> 20 ; n2: cpu 70, mem 70 -> 70
    assert scores == {"n1": 20, "n2": 70}


def test_pods_placed_since_the_report_count_with_their_virtual_request() -> None:
    nodes = [reported("n1", "10", "10Gi", {"cpu": "2", "memory": "2Gi"})]
    before = make_pod().node("n1").req({"cpu": "4", "memory": "4Gi"}).annotation(PLACED_AT_ANNOTATION, "2024-12-31T23:00:00Z").obj()
    after = make_pod().node("n1").req({"cpu": "4", "memory": "4Gi"}).annotation(PLACED_AT_ANNOTATION, "2025-01-01T00:05:00Z").obj()
    estimated = make_pod().node("n1").req({"cpu": "4", "memory": "4Gi"}).annotation(PLACED_AT_ANNOTATION, "2025-01-01T00:05:00Z").annotation(
        VIRTUAL_REQUEST_ANNOTATION, json.dumps({"cpu": "1"})).obj()
    pod = make_pod().req({"cpu": "1", "memory": "1Gi"}).obj()
    assert score_nodes("MostAvailable", pod, nodes, [before]) == {"n1": 70}  # already in the usage
    assert score_nodes("MostAvailable", pod, nodes, [after]) == {"n1": 30}  # cpu 10-2-4-1=3, mem 10-2-4-1=3
    assert score_nodes("MostAvailable", pod, nodes, [estimated]) == {"n1": 45}  # cpu 10-2-1-1=6 -> 60, mem 3 -> 30


def test_node_without_report_counts_every_pod() -> None:
    nodes = [reported("n1", "10", "10Gi", None)]
    pods = [make_pod().node("n1").req({"cpu": "5", "memory": "5Gi"}).obj()]
    pod = make_pod().req({"cpu": "1", "memory": "1Gi"}).obj()
    assert score_nodes("MostAvailable", pod, nodes, pods) == {"n1": 40}


@pytest.mark.parametrize("annotation", ["not json", json.dumps({"cpu": "lots"}), json.dumps(["cpu"])])
def test_malformed_virtual_request_falls_back_to_the_request(annotation: str) -> None:
    nodes = [reported("n1", "10", "10Gi", None)]
    pods = [make_pod().node("n1").req({"cpu": "5", "memory": "5Gi"}).annotation(VIRTUAL_REQUEST_ANNOTATION, annotation).obj()]
    pod = make_pod().req({"cpu": "1", "memory": "1Gi"}).obj()
    assert score_nodes("MostAvailable", pod, nodes, pods) == {"n1": 40}
