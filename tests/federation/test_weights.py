"""Water-level dynamic weights against KubeAdmiral's rsp plugin tests.

Cases come from ``kubewharf/kubeadmiral``
``pkg/controllers/scheduler/framework/plugins/rsp/rsp_test.go``:
TestCalcWeightLimit, TestAvailableToPercentage and the dynamic case of
TestClusterWeights. Upstream's ``makeClusterWithCPU(name, allocatable,
available)`` leaves the status empty when either number is negative; ``_cpu``
and ``_gpu`` below build the same thing as our ``(name, allocatable,
available)`` tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation.planner import ClusterPreference, plan
from federation.weights import (
    GPU_RESOURCE,
    TOTAL_WEIGHT,
    available_to_weights,
    dynamic_weights,
    go_round,
    reported_resources,
    weight_limits,
)

Cluster = tuple[str, Mapping[str, int] | None, Mapping[str, int] | None]


def _cpu(name: str, allocatable: int, available: int) -> Cluster:
    if allocatable < 0 or available < 0:
        return (name, None, None)
    return (name, {"cpu": allocatable}, {"cpu": available})


def _gpu(name: str, allocatable: int, available: int) -> Cluster:
    if allocatable < 0 or available < 0:
        return (name, None, None)
    return (name, {GPU_RESOURCE: allocatable}, {GPU_RESOURCE: available})


def _allocatables(clusters: list[Cluster]) -> dict[str, dict[str, int]]:
    return {name: reported_resources(allocatable) for name, allocatable, _ in clusters}


def _gpu_split(test: str) -> list[Any]:
    """The two GPU cases TestCalcWeightLimit and TestAvailableToPercentage share word for word, as ``test``'s."""
    return [
        pytest.param(GPU_RESOURCE,
                     [_cpu("cluster1", 3000, 3000), _cpu("cluster2", 7000, 7000), _gpu("cluster3", 3000, 3000)],
                     {"cluster1": 0, "cluster2": 0, "cluster3": 1000},
                     id=f"{test}/two cluster nodes have no gpu and one has"),
        pytest.param(GPU_RESOURCE,
                     [_cpu("cluster1", 3000, 3000), _gpu("cluster2", 7000, 7000), _gpu("cluster3", 3000, 3000)],
                     {"cluster1": 0, "cluster2": 700, "cluster3": 300},
                     id=f"{test}/two cluster nodes have gpu and one does not"),
    ]


@pytest.mark.parametrize(
    ("resource", "clusters", "want"),
    [
        pytest.param("cpu", [_cpu("cluster1", 100, 0), _cpu("cluster2", 100, 0)],
                     {"cluster1": 500, "cluster2": 500},
                     id="TestCalcWeightLimit/two clusters have the same resource"),
        pytest.param("cpu", [_cpu("cluster1", 3000, 0), _cpu("cluster2", 4000, 0), _cpu("cluster3", 3000, 0)],
                     {"cluster1": 300, "cluster2": 400, "cluster3": 300},
                     id="TestCalcWeightLimit/3 clusters have different resource amount"),
        pytest.param("cpu", [_cpu("cluster1", 3000, -1), _cpu("cluster2", 7000, 0), _cpu("cluster3", 3000, 0)],
                     {"cluster1": 0, "cluster2": 700, "cluster3": 300},
                     id="TestCalcWeightLimit/1 cluster node level info missing"),
        pytest.param("cpu", [_cpu("cluster1", 3000, -1), _cpu("cluster2", 7000, -1), _cpu("cluster3", 3000, -1)],
                     {"cluster1": 333, "cluster2": 333, "cluster3": 333},
                     id="TestCalcWeightLimit/all clusters node level info missing"),
        pytest.param(GPU_RESOURCE,
                     [_cpu("cluster1", 3000, 3000), _cpu("cluster2", 7000, 7000), _cpu("cluster3", 3000, 3000)],
                     {"cluster1": 333, "cluster2": 333, "cluster3": 333},
                     id="TestCalcWeightLimit/all cluster nodes have no gpu"),
        *_gpu_split("TestCalcWeightLimit"),
    ],
)
def test_upstream_calc_weight_limit(resource: str, clusters: list[Cluster], want: dict[str, int]) -> None:
    assert weight_limits(_allocatables(clusters), resource, 1.0) == want


AVAILABLE_TO_PERCENTAGE = [
    pytest.param("cpu", [_cpu("cluster1", 100, 50), _cpu("cluster2", 100, 50)],
                 {"cluster1": 500, "cluster2": 500}, id="TestAvailableToPercentage/test#1"),
    pytest.param("cpu", [_cpu("cluster1", 100, 40), _cpu("cluster2", 100, 10)],
                 {"cluster1": 714, "cluster2": 286}, id="TestAvailableToPercentage/test#2"),
    pytest.param("cpu", [_cpu("cluster1", -1, -1)], {"cluster1": 1000},
                 id="TestAvailableToPercentage/empty node level info"),
    pytest.param("cpu", [_cpu("cluster1", -1, -1), _cpu("cluster2", 400, 100), _cpu("cluster3", 200, 100)],
                 {"cluster1": 0, "cluster2": 600, "cluster3": 400},
                 id="TestAvailableToPercentage/1 cluster node level info missing"),
    pytest.param("cpu", [_cpu("cluster1", -1, -1), _cpu("cluster2", -1, 100), _cpu("cluster3", -1, 100)],
                 {"cluster1": 333, "cluster2": 333, "cluster3": 333},
                 id="TestAvailableToPercentage/all clusters node level info missing"),
    pytest.param(GPU_RESOURCE, [_cpu("cluster1", -1, -1), _cpu("cluster2", -1, 100), _cpu("cluster3", -1, 100)],
                 {"cluster1": 333, "cluster2": 333, "cluster3": 333},
                 id="TestAvailableToPercentage/all cluster nodes have no gpu"),
    *_gpu_split("TestAvailableToPercentage"),
]


@pytest.mark.parametrize(("resource", "clusters", "want"), AVAILABLE_TO_PERCENTAGE)
def test_upstream_available_to_percentage(resource: str, clusters: list[Cluster], want: dict[str, int]) -> None:
    limits = weight_limits(_allocatables(clusters), resource, 1.0)
    availables = {name: reported_resources(available) for name, _, available in clusters}
    assert available_to_weights(availables, resource, limits) == want


@pytest.mark.parametrize(("resource", "clusters", "want"), AVAILABLE_TO_PERCENTAGE)
def test_upstream_available_to_percentage_through_dynamic_weights(resource: str, clusters: list[Cluster],
                                                                  want: dict[str, int]) -> None:
    assert dynamic_weights(clusters, resource, supply_limit_ratio=1.0) == want


def test_upstream_available_to_percentage_missing_resource_is_an_error() -> None:
    """TestAvailableToPercentage/no nvidia.com/gpu resource (raw lists, no defaults)."""
    availables = {"cluster1": {"cpu": 1000}, "cluster2": {GPU_RESOURCE: 1000}}
    with pytest.raises(ValueError, match="nvidia.com/gpu"):
        available_to_weights(availables, GPU_RESOURCE, {})


def test_upstream_dynamic_scheduling_with_no_weights_specified() -> None:
    """TestClusterWeights/Dynamic scheduling with no weights specified: weights feed the planner."""
    clusters = [_cpu("cluster1", 200, 200), _cpu("cluster2", 300, 300), _cpu("cluster3", 500, 500)]
    weights = dynamic_weights(clusters)
    assert weights == {"cluster1": 200, "cluster2": 300, "cluster3": 500}
    names = [name for name, _, _ in clusters]
    placed, overflow = plan({n: ClusterPreference(w) for n, w in weights.items()}, 10, names, {}, {}, {})
    assert placed == {"cluster1": 2, "cluster2": 3, "cluster3": 5} and overflow == {}


# --- our own cases ------------------------------------------------------------------------


def test_supply_limit_caps_an_empty_small_cluster() -> None:
    """A mostly idle small cluster is held to 1.4x its size share before renormalising.

    limits: small 100/400*1000*1.4 = 350, big 1050; free shares 900 vs 100;
    capped 350 vs 100, renormalised 778 vs 222 (instead of 900 vs 100).
    """
    weights = dynamic_weights([("small", {"cpu": 100}, {"cpu": 90}), ("big", {"cpu": 300}, {"cpu": 10})])
    assert weights == {"small": 778, "big": 222}


def test_overcommitted_cluster_counts_as_full() -> None:
    weights = dynamic_weights([("a", {"cpu": 100}, {"cpu": -20}), ("b", {"cpu": 100}, {"cpu": 50})])
    assert weights == {"a": 0, "b": 1000}


def test_rounding_remainder_goes_to_heaviest_cluster() -> None:
    weights = dynamic_weights([("a", {"cpu": 100}, {"cpu": 10}), ("b", {"cpu": 100}, {"cpu": 10}),
                               ("c", {"cpu": 100}, {"cpu": 10})])
    assert weights == {"a": 334, "b": 333, "c": 333}


def test_fractional_quantities_round_up_like_kubernetes() -> None:
    assert dynamic_weights([("a", {"cpu": 1.2}, {"cpu": 0.5}), ("b", {"cpu": 2}, {"cpu": 1})]) == {"a": 500, "b": 500}


def test_caps_zero_out_all_free_capacity_falls_back_to_equal_split() -> None:
    """Upstream would divide 0 by 0 here; we give everyone the same weight instead."""
    weights = dynamic_weights([("a", {"cpu": 0}, {"cpu": 5}), ("b", {"cpu": 100}, {"cpu": 0})])
    assert weights == {"a": 500, "b": 500}


def test_empty_fleet_and_duplicates() -> None:
    assert dynamic_weights([]) == {}
    with pytest.raises(ValueError):
        dynamic_weights([("a", {"cpu": 1}, {"cpu": 1}), ("a", {"cpu": 1}, {"cpu": 1})])


@pytest.mark.parametrize(("value", "expected"), [(0.5, 1), (1.5, 2), (2.5, 3), (-0.5, -1), (-2.5, -3),
                                                 (0.49999999999999994, 0), (714.2857142857143, 714), (3.0, 3)])
def test_go_round_is_half_away_from_zero(value: float, expected: int) -> None:
    assert go_round(value) == expected


# --- properties ---------------------------------------------------------------------------


@st.composite
def _realistic_fleets(draw: st.DrawFn) -> list[Cluster]:
    """Up to 10 clusters of comparable size with available = allocatable - requests."""
    count = draw(st.integers(1, 10))
    fleet: list[Cluster] = []
    for i in range(count):
        allocatable = draw(st.integers(100, 1000))
        requested = draw(st.integers(0, allocatable + 50))
        fleet.append((f"c{i}", {"cpu": allocatable}, {"cpu": allocatable - requested}))
    return fleet


@settings(max_examples=300, deadline=None)
@given(fleet=_realistic_fleets(), ratio=st.sampled_from([1.0, 1.2, 1.4, 2.0]))
def test_property_weights_sum_to_1000_when_anything_is_free(fleet: list[Cluster], ratio: float) -> None:
    weights = dynamic_weights(fleet, supply_limit_ratio=ratio)
    assert set(weights) == {name for name, _, _ in fleet}
    if any(available["cpu"] > 0 for _, _, available in fleet):
        assert sum(weights.values()) == TOTAL_WEIGHT
        assert all(w >= 0 for w in weights.values())
        for name, _, available in fleet:
            if available["cpu"] <= 0:
                assert weights[name] == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 10_000)), st.integers(-100, 10_000)),
                min_size=1, max_size=8))
def test_property_sum_is_1000_or_upstreams_equal_split(rows: list[tuple[int | None, int]]) -> None:
    fleet: list[Cluster] = []
    for i, (allocatable, available) in enumerate(rows):
        fleet.append((f"c{i}", None, None) if allocatable is None else (f"c{i}", {"cpu": allocatable}, {"cpu": available}))
    weights = dynamic_weights(fleet)
    equal = go_round(TOTAL_WEIGHT / len(fleet))
    assert sum(weights.values()) == TOTAL_WEIGHT or set(weights.values()) == {equal}
