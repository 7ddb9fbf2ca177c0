"""The unrolled cpu/memory LeastAllocated and MostAllocated scorers (``_fast_allocated``) give
every node the generic resource scorer's value: upstream's ``resourceAllocationScorer.score``
over (requested, allocatable), with nodes lacking cpu or memory, overcommitted nodes and zero
requests among the cases."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduling.args import ResourceSpec
from scheduling.cluster import ClusterState
from scheduling.plugins.noderesources import allocatable_requested, allocation_scorer, least_allocated, most_allocated
from tests.scheduling.wrappers import make_node, make_pod

_QUANTITIES = st.sampled_from(("0", "1", "3", "64", "250m", "1500m", "1Gi", "3Gi", "512Mi", "100Ti"))


@pytest.mark.parametrize("strategy", [least_allocated, most_allocated], ids=["least", "most"])
@settings(database=None, deadline=None, max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(st.tuples(_QUANTITIES, _QUANTITIES), min_size=1, max_size=8),
       placed=st.lists(st.tuples(st.integers(0, 7), _QUANTITIES, _QUANTITIES), max_size=12),
       weights=st.tuples(st.integers(1, 5), st.integers(1, 5)), cpu=st.integers(0, 70_000), memory=st.integers(0, 2**36))
# overcommitted: no free share, all of it used
@example(nodes=[("1", "1Gi")], placed=[(0, "64", "3Gi")], weights=(1, 1), cpu=1000, memory=0)
@example(nodes=[("0", "1Gi")], placed=[], weights=(3, 1), cpu=1000, memory=2**30)  # no cpu: its weight leaves the average
def test_the_unrolled_scorer_equals_the_generic_one(strategy, nodes, placed, weights, cpu, memory) -> None:
    resources = (ResourceSpec("cpu", weights[0]), ResourceSpec("memory", weights[1]))
    objs = [make_node().name(f"n{i}").capacity({"cpu": c, "memory": m, "pods": "110"}).obj() for i, (c, m) in enumerate(nodes)]
    pods = [make_pod().name(f"e{k}").node(f"n{i % len(nodes)}").req({"cpu": c, "memory": m}).obj()
            for k, (i, c, m) in enumerate(placed)]
    infos = ClusterState.build(objs, pods).nodes
    score = strategy(resources)
    unrolled = allocation_scorer(resources, [cpu, memory], score, use_requested=False)
    assert "_fast_allocated" in unrolled.one.__qualname__  # the unrolled path, not the generic loop

    def generic(node) -> int:
        pairs = [allocatable_requested(node, r.name, want, False) for r, want in zip(resources, (cpu, memory), strict=True)]
        return score([requested for _, requested in pairs], [allocatable for allocatable, _ in pairs])

    assert unrolled(infos) == [generic(node) for node in infos]
