"""The optimised planner and water-level weights against frozen copies of the previous code.

``_reference_planner.py`` and ``_reference_weights.py`` are the implementations as they
were before the speed-up (themselves proven against upstream's tables in test_planner.py
and test_weights.py). Every result must be identical, including dict order (the API
and the explanation show dicts in order) and the exceptions raised for bad input.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from federation import planner
from federation.planner import WILDCARD, ClusterPreference, fnv1_32, plan
from federation.weights import GPU_RESOURCE, dynamic_weights

from . import _reference_planner as reference
from . import _reference_weights as reference_weights

#: A small pool, so preferences, capacities and current replicas often name the same clusters.
NAMES = [f"c{i}" for i in range(7)] + ["ß-cluster", "集群", "", "a" * 30]


def _same(got: tuple[dict, dict], want: tuple[dict, dict]) -> None:
    assert got == want
    assert [list(part.items()) for part in got] == [list(part.items()) for part in want]


@st.composite
def _inputs(draw: st.DrawFn, max_clusters: int = len(NAMES)) -> dict:
    """Anything the planner accepts: zero weights, min > max, wildcards, strangers, duplicates."""
    clusters = draw(st.lists(st.sampled_from(NAMES), max_size=max_clusters))
    pool = st.sampled_from(NAMES + [WILDCARD])
    preference = st.builds(
        ClusterPreference,
        weight=st.integers(0, 30),
        min_replicas=st.integers(0, 12),
        max_replicas=st.one_of(st.none(), st.integers(0, 50), st.integers(0, 6)),  # often below the min
    )
    counts = st.dictionaries(st.sampled_from(NAMES), st.integers(0, 60))
    return {
        "preferences": draw(st.dictionaries(pool, preference, max_size=max_clusters)),
        "total": draw(st.integers(0, 400)),
        "clusters": clusters,
        "current": draw(counts),
        "estimated_capacity": draw(counts),
        "limited_capacity": draw(counts),
        "key": draw(st.text(max_size=40)),
        "avoid_migration": draw(st.booleans()),
        "keep_unschedulable": draw(st.booleans()),
    }


@settings(max_examples=500, deadline=None)
@given(inputs=_inputs())
def test_plan_equals_the_previous_implementation(inputs: dict) -> None:
    _same(plan(**inputs), reference.plan(**inputs))


@pytest.mark.parametrize(
    "args",
    [
        # B's minimum exceeds its max and it ranks after A, which takes everything left in the
        # first round: B must still be clamped (freeing replicas for a second round).
        ({"A": ClusterPreference(10), "B": ClusterPreference(1, 5, 2)}, 10, ["A", "B"], {}, {}, {}),
        ({"A": ClusterPreference(10), "B": ClusterPreference(1, 5, 2)}, 10, ["A", "B"], {"B": 7}, {}, {}),
        ({"A": ClusterPreference(3), "B": ClusterPreference(3, 4, 1), "C": ClusterPreference(1, 2, 0)}, 9,
         ["A", "B", "C"], {"A": 1, "C": 5}, {"A": 6}, {"B": 3}),
    ],
)
@pytest.mark.parametrize("avoid", [False, True])
def test_minimums_above_max_are_clamped_even_after_the_rest_is_handed_out(args: tuple, avoid: bool) -> None:
    _same(plan(*args, avoid_migration=avoid), reference.plan(*args, avoid_migration=avoid))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), size=st.integers(12, 200), total=st.integers(0, 5000), key=st.text(max_size=60),
       avoid=st.booleans(), keep=st.booleans())
def test_plan_over_large_fleets_equals_the_previous_implementation(data: st.DataObject, size: int, total: int,
                                                                   key: str, avoid: bool, keep: bool) -> None:
    """Hundreds of clusters, mostly equal weights: the tie-breaks (lane-packed hashes) decide."""
    names = [f"cluster-{i:03d}" for i in range(size)]
    weights = data.draw(st.lists(st.integers(0, 4), min_size=size, max_size=size))
    floors = data.draw(st.lists(st.integers(0, 3), min_size=size, max_size=size))
    ceilings = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 30)), min_size=size, max_size=size))
    preferences = {name: ClusterPreference(w, low, high) for name, w, low, high in zip(names, weights, floors, ceilings)}
    current = {name: data.draw(st.integers(0, 20)) for name in names[: size // 3]}
    capacity = {name: data.draw(st.integers(0, 40)) for name in names[size // 2:]}
    limited = {name: data.draw(st.integers(0, 40)) for name in names[size // 4: size // 4 * 3]}
    args = (preferences, total, names, current, capacity, limited)
    _same(plan(*args, key=key, avoid_migration=avoid, keep_unschedulable=keep),
          reference.plan(*args, key=key, avoid_migration=avoid, keep_unschedulable=keep))


@settings(max_examples=100, deadline=None)
@given(inputs=_inputs(), runs=st.lists(st.tuples(st.integers(0, 400), st.dictionaries(st.sampled_from(NAMES),
                                                                                    st.integers(0, 60)),
                                                 st.text(max_size=40), st.booleans()), min_size=1, max_size=6))
def test_preferences_resolved_once_plan_every_workload_alike(inputs: dict, runs: list) -> None:
    """The batch scheduler resolves a policy's preferences once and plans many workloads with them."""
    try:
        resolved = planner.resolve(inputs["preferences"], inputs["clusters"])
    except ValueError:
        return
    for total, current, key, avoid in runs:
        args = (total, current, inputs["estimated_capacity"], inputs["limited_capacity"])
        _same(planner.plan_resolved(resolved, *args, key=key, avoid_migration=avoid),
              reference.plan(inputs["preferences"], total, inputs["clusters"], *args[1:], key=key,
                             avoid_migration=avoid))


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.text(max_size=20), max_size=60), key=st.text(max_size=50))
def test_tiebreaks_are_fnv1_of_cluster_then_key(names: list[str], key: str) -> None:
    want = [fnv1_32(name.encode("utf-8") + key.encode("utf-8")) for name in names]
    assert planner._tiebreaks(names, key) == want
    assert want == [reference.fnv1_32(name.encode("utf-8") + key.encode("utf-8")) for name in names]


def test_lane_packed_hashes_match_one_by_one_even_for_extreme_states() -> None:
    states = [0, 1, 0xFFFFFFFF, 0x811C9DC5, 0x01000193, 0xDEADBEEF] * 5
    data = bytes(range(256))
    assert planner._fnv1_continue_lanes(states, data) == [planner._fnv1_continue(s, data) for s in states]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"total": -1},
        {"preferences": {"A": ClusterPreference(-1)}},
        {"preferences": {"A": ClusterPreference(1, -2)}},
        {"preferences": {"A": ClusterPreference(1, 0, -3)}},
        {"preferences": {"A": ClusterPreference(1), "B": ClusterPreference(-1, -1)}},
        {"current": {"A": -1}},
        {"current": {"A": 2, "B": -1}, "estimated_capacity": {"A": -1}},
        {"estimated_capacity": {"A": -1}},
        {"limited_capacity": {"A": -1}},
        {"current": {"A": None}},
        {"preferences": {"A": ClusterPreference(1, 0, -1.5)}, "current": {"A": float("nan")}},
        {"current": {"A": float("nan"), "B": -1}},
    ],
)
def test_bad_input_raises_what_it_raised_before(kwargs: dict) -> None:
    args = {"preferences": {"A": ClusterPreference(1)}, "total": 3, "clusters": ["A", "B"], "current": {},
            "estimated_capacity": {}, "limited_capacity": {}} | kwargs
    with pytest.raises(Exception) as want:
        reference.plan(**args)
    with pytest.raises(want.type) as got:
        plan(**args)
    assert str(got.value) == str(want.value)


@st.composite
def _capacities(draw: st.DrawFn) -> list[tuple[str, dict | None, dict | None]]:
    names = draw(st.lists(st.sampled_from(NAMES), max_size=len(NAMES), unique=True))
    amount = st.one_of(st.integers(-50_000, 200_000), st.floats(-50.5, 500.5, allow_nan=False))
    resources = st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(["cpu", "memory", GPU_RESOURCE, "example.com/x"]), amount, max_size=4),
    )
    return [(name, draw(resources), draw(resources)) for name in names]


@settings(max_examples=400, deadline=None)
@given(rows=_capacities(), resource=st.sampled_from(["cpu", GPU_RESOURCE, "memory"]),
       ratio=st.sampled_from([1.0, 1.4, 2.5]))
def test_dynamic_weights_equal_the_previous_implementation(rows: list, resource: str, ratio: float) -> None:
    try:
        want = reference_weights.dynamic_weights(rows, resource=resource, supply_limit_ratio=ratio)
    except (ValueError, ZeroDivisionError) as exc:
        with pytest.raises(type(exc)) as got:
            dynamic_weights(rows, resource=resource, supply_limit_ratio=ratio)
        assert str(got.value) == str(exc)
        return
    got = dynamic_weights(rows, resource=resource, supply_limit_ratio=ratio)
    assert list(got.items()) == list(want.items())


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.one_of(st.integers(0, 4), st.sampled_from([0.5, 2.0])), st.integers(0, 3)),
                     max_size=80),
       data=st.data())
def test_rank_order_is_weight_then_tiebreak_then_name(rows: list[tuple[float, int]], data: st.DataObject) -> None:
    """Packed sort keys (lists, or one numpy sort from 32 rows) order exactly like the tuples, ties on both
    included (names decide)."""
    names = data.draw(st.permutations([f"n{i:02d}" for i in range(len(rows))]))
    weights = [weight for weight, _ in rows]
    tiebreaks = [tiebreak for _, tiebreak in rows]
    want = sorted(range(len(rows)), key=lambda i: (-weights[i], tiebreaks[i], names[i]))
    assert planner._rank_order(names, weights, tiebreaks) == want
    ints = [int(weight * 2) for weight in weights]
    unique = [i * 7 + 1 for i in range(len(rows))]
    assert planner._rank_order(names, ints, unique) == sorted(range(len(rows)), key=lambda i: (-ints[i], unique[i]))
    wide = [weight << 21 for weight in ints]  # a span of 2**20 or more: big-int keys instead of exact floats
    assert planner._rank_order(names, wide, tiebreaks) == sorted(range(len(rows)),
                                                                 key=lambda i: (-wide[i], tiebreaks[i], names[i]))
