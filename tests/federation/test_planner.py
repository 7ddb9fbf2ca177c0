"""The Spread replica planner against KubeAdmiral's own test tables.

Cases come from ``kubewharf/kubeadmiral``
``pkg/controllers/scheduler/planner/planner_test.go`` (TestWithoutExisting,
TestWithExisting, TestWithExistingAndCapacity) and
``pkg/controllers/scheduler/framework/plugins/rsp/rsp_test.go`` (the static
weight / min / max cases). Upstream checks every case by re-planning until the
result is stable (at most three rounds, with the previous plan + overflow as
the new "current" and capacities only visible once exceeded); ``_converge``
does the same so expected values carry over unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from federation.planner import ClusterPreference, fnv1_32, plan

P = ClusterPreference
EQUAL = {"*": P(weight=1)}
MODES = [(False, False), (False, True), (True, False), (True, True)]  # (avoid_migration, keep_unschedulable)


@dataclass(frozen=True)
class Case:
    preferences: Mapping[str, ClusterPreference]
    replicas: int
    clusters: Sequence[str]
    existing: Mapping[str, int] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    limited: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Want:
    plan: Mapping[str, int]
    overflow: Mapping[str, int] = field(default_factory=dict)


def _estimate(existing: Mapping[str, int], capacity: Mapping[str, int]) -> dict[str, int]:
    """A capacity is only known once a cluster has been asked for more than it holds."""
    return {cluster: cap for cluster, cap in capacity.items() if existing.get(cluster, 0) > cap}


def _same(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """Upstream treats a nil and an empty map as equal."""
    return (not a and not b) or a == b


def _converge(case: Case, avoid: bool, keep: bool) -> tuple[dict[str, int], dict[str, int]]:
    existing: dict[str, int] = dict(case.existing)
    last_plan: dict[str, int] = {}
    last_overflow: dict[str, int] = {}
    for _ in range(3):
        placed, overflow = plan(case.preferences, case.replicas, case.clusters, existing,
                                _estimate(existing, case.capacity), case.limited, "", avoid, keep)
        if _same(placed, last_plan) and _same(overflow, last_overflow):
            return placed, overflow
        existing = {c: placed.get(c, 0) + overflow.get(c, 0) for c in {*placed, *overflow}}
        last_plan, last_overflow = placed, overflow
    pytest.fail(f"plan did not converge within 3 rounds: {case}")


# --- TestWithoutExisting: the same answer in all four modes ---------------------------

WITHOUT_EXISTING: list[tuple[Case, Want]] = [
    (Case(EQUAL, 50, ["A", "B", "C"]), Want({"A": 16, "B": 17, "C": 17})),
    (Case(EQUAL, 50, ["A", "B"]), Want({"A": 25, "B": 25})),
    (Case(EQUAL, 1, ["A", "B"]), Want({"A": 0, "B": 1})),
    (Case(EQUAL, 1, ["A", "B", "C", "D"]), Want({"A": 0, "B": 0, "C": 0, "D": 1})),
    (Case(EQUAL, 1, ["A"]), Want({"A": 1})),
    (Case(EQUAL, 1, []), Want({})),
    (Case({"*": P(0, min_replicas=2)}, 50, ["A", "B", "C"]), Want({"A": 2, "B": 2, "C": 2})),
    (Case({"*": P(0, min_replicas=20)}, 50, ["A", "B", "C"]), Want({"A": 10, "B": 20, "C": 20})),
    (Case({"*": P(0, min_replicas=20), "A": P(1, min_replicas=100)}, 50, ["A", "B", "C"]),
     Want({"A": 50, "B": 0, "C": 0})),
    (Case({"A": P(1, min_replicas=10), "B": P(1)}, 50, ["A", "B"]), Want({"A": 30, "B": 20})),
    (Case({"A": P(2, min_replicas=3), "B": P(3, min_replicas=3), "C": P(5, min_replicas=3)}, 10, ["A", "B", "C"]),
     Want({"A": 3, "B": 3, "C": 4})),
    (Case({"*": P(1, min_replicas=10, max_replicas=12)}, 50, ["A", "B", "C"]), Want({"A": 12, "B": 12, "C": 12})),
    (Case({"*": P(1, max_replicas=2)}, 50, ["A", "B", "C"]), Want({"A": 2, "B": 2, "C": 2})),
    (Case({"*": P(0, max_replicas=2)}, 50, ["A", "B", "C"]), Want({"A": 0, "B": 0, "C": 0})),
    (Case({"A": P(1), "B": P(2)}, 60, ["A", "B", "C"]), Want({"A": 20, "B": 40})),
    (Case({"A": P(10000), "B": P(1)}, 50, ["A", "B", "C"]), Want({"A": 50, "B": 0})),
    (Case({"A": P(10000), "B": P(1)}, 50, ["B", "C"]), Want({"B": 50})),
    (Case({"A": P(10000, max_replicas=10), "B": P(1), "C": P(1)}, 50, ["A", "B", "C"]),
     Want({"A": 10, "B": 20, "C": 20})),
    (Case({"A": P(10000, max_replicas=10), "B": P(1), "C": P(1, max_replicas=10)}, 50, ["A", "B", "C"]),
     Want({"A": 10, "B": 30, "C": 10})),
    (Case({"A": P(10000, max_replicas=10), "B": P(1), "C": P(1, max_replicas=21), "D": P(1, max_replicas=10)},
          71, ["A", "B", "C", "D"]),
     Want({"A": 10, "B": 30, "C": 21, "D": 10})),
    (Case({"A": P(10000, max_replicas=10), "B": P(1), "C": P(1, max_replicas=21), "D": P(1, max_replicas=10),
           "E": P(1)}, 91, ["A", "B", "C", "D", "E"]),
     Want({"A": 10, "B": 25, "C": 21, "D": 10, "E": 25})),
]

# --- TestWithExisting: (without avoid_migration, with avoid_migration) -----------------

WITH_EXISTING: list[tuple[Case, Want, Want]] = [
    (Case(EQUAL, 50, ["A", "B", "C"], {"C": 30}), Want({"A": 16, "B": 17, "C": 17}), Want({"A": 9, "B": 11, "C": 30})),
    (Case(EQUAL, 50, ["A", "B"], {"A": 30}), Want({"A": 25, "B": 25}), Want({"A": 30, "B": 20})),
    (Case(EQUAL, 50, ["A", "B"], {"A": 30}, limited={"A": 0}), Want({"A": 0, "B": 50}), Want({"A": 0, "B": 50})),
    (Case(EQUAL, 50, ["A", "B"], {"A": 30}, limited={"A": 10}), Want({"A": 10, "B": 40}), Want({"A": 10, "B": 40})),
    (Case(EQUAL, 15, ["A", "B"], {"A": 0, "B": 8}), Want({"A": 7, "B": 8}), Want({"A": 7, "B": 8})),
    (Case(EQUAL, 15, ["A", "B"], {"A": 1, "B": 8}), Want({"A": 7, "B": 8}), Want({"A": 7, "B": 8})),
    (Case(EQUAL, 15, ["A", "B"], {"A": 4, "B": 8}), Want({"A": 7, "B": 8}), Want({"A": 7, "B": 8})),
    (Case(EQUAL, 15, ["A", "B"], {"A": 7, "B": 8}), Want({"A": 7, "B": 8}), Want({"A": 7, "B": 8})),
    (Case(EQUAL, 15, ["A", "B"], {"A": 15, "B": 0}), Want({"A": 7, "B": 8}), Want({"A": 15, "B": 0})),
    (Case(EQUAL, 15, ["A", "B"], {"A": 5, "B": 10}), Want({"A": 7, "B": 8}), Want({"A": 5, "B": 10})),
    (Case(EQUAL, 50, ["A", "B"], {"A": 30}), Want({"A": 25, "B": 25}), Want({"A": 30, "B": 20})),
    (Case(EQUAL, 50, ["A", "B"], {"A": 10}), Want({"A": 25, "B": 25}), Want({"A": 25, "B": 25})),
    (Case(EQUAL, 50, ["A", "B"], {"A": 10, "B": 20}), Want({"A": 25, "B": 25}), Want({"A": 25, "B": 25})),
    (Case(EQUAL, 50, ["A", "B"], {"A": 10, "B": 70}), Want({"A": 25, "B": 25}), Want({"A": 10, "B": 40})),
    (Case(EQUAL, 1, ["A", "B"], {"A": 30}), Want({"A": 0, "B": 1}), Want({"A": 1, "B": 0})),
    (Case(EQUAL, 10, ["A", "B"], {"A": 50, "B": 30}), Want({"A": 5, "B": 5}), Want({"A": 5, "B": 5})),
    (Case({"A": P(499), "B": P(499), "C": P(1)}, 15, ["A", "B", "C"], {"A": 15, "B": 15, "C": 0}),
     Want({"A": 7, "B": 8, "C": 0}), Want({"A": 7, "B": 8, "C": 0})),
    (Case(EQUAL, 18, ["A", "B", "C"], {"A": 10, "B": 1, "C": 1}),
     Want({"A": 6, "B": 6, "C": 6}), Want({"A": 10, "B": 4, "C": 4})),
    (Case({"A": P(0), "B": P(1), "C": P(1)}, 18, ["A", "B", "C"], {"A": 10, "B": 1, "C": 7}),
     Want({"A": 0, "B": 9, "C": 9}), Want({"A": 10, "B": 1, "C": 7})),
]

# --- TestWithExistingAndCapacity: one expectation per mode (see MODES) -----------------

WITH_CAPACITY: list[tuple[Case, tuple[Want, Want, Want, Want]]] = [
    (Case(EQUAL, 50, ["A", "B", "C"], {"A": 30, "B": 20}, {"C": 10}),
     (Want({"A": 20, "B": 20, "C": 10}, {"C": 7}), Want({"A": 20, "B": 20, "C": 10}, {"C": 7}),
      Want({"A": 30, "B": 20, "C": 0}), Want({"A": 30, "B": 20, "C": 0}))),
    (Case(EQUAL, 50, ["A", "B", "C"], {"A": 30, "C": 20}, {"C": 10}),
     (Want({"A": 20, "B": 20, "C": 10}, {"C": 7}), Want({"A": 20, "B": 20, "C": 10}, {"C": 7}),
      Want({"A": 30, "B": 10, "C": 10}), Want({"A": 30, "B": 10, "C": 10}, {"C": 7}))),
    (Case({"A": P(10000), "B": P(1)}, 50, ["B", "C"], {"B": 50}, {"B": 10}),
     (Want({"B": 10}, {"B": 40}),) * 4),
    (Case({"A": P(1), "B": P(5)}, 60, ["A", "B", "C"], {"A": 20, "B": 40}, {"B": 10}),
     (Want({"A": 50, "B": 10}, {"B": 40}), Want({"A": 50, "B": 10}, {"B": 40}),
      Want({"A": 50, "B": 10}), Want({"A": 50, "B": 10}, {"B": 40}))),
    (Case({"A": P(1), "B": P(2)}, 60, ["A", "B", "C"], {"A": 60}, {"B": 10}),
     (Want({"A": 50, "B": 10}, {"B": 30}), Want({"A": 50, "B": 10}, {"B": 30}),
      Want({"A": 60, "B": 0}), Want({"A": 60, "B": 0}))),
    (Case({"A": P(1), "B": P(1)}, 60, ["A", "B", "C"], {"A": 30, "B": 30}, {"A": 10, "B": 10}),
     (Want({"A": 10, "B": 10}, {"A": 20, "B": 20}),) * 4),
    (Case({"A": P(1), "B": P(2)}, 60, ["A", "B"], {"A": 30, "B": 40}, {"A": 25, "B": 10}),
     (Want({"A": 25, "B": 10}, {"A": 25, "B": 30}), Want({"A": 25, "B": 10}, {"A": 25, "B": 30}),
      Want({"A": 25, "B": 10}, {"A": 25, "B": 25}), Want({"A": 25, "B": 10}, {"A": 25, "B": 30}))),
    (Case({"A": P(10000, max_replicas=10), "B": P(1), "C": P(1, max_replicas=21), "D": P(1, max_replicas=10)},
          71, ["A", "B", "C", "D"], {"A": 20}, {"C": 10}),
     (Want({"A": 10, "B": 41, "C": 10, "D": 10}, {"C": 11}), Want({"A": 10, "B": 41, "C": 10, "D": 10}, {"C": 11}),
      Want({"A": 20, "B": 33, "C": 10, "D": 8}), Want({"A": 20, "B": 33, "C": 10, "D": 8}, {"C": 11}))),
    (Case({"*": P(0, min_replicas=20)}, 50, ["A", "B", "C"], {"A": 24}, {"B": 10}),
     (Want({"A": 20, "B": 10, "C": 20}, {"B": 10}), Want({"A": 20, "B": 10, "C": 20}, {"B": 10}),
      Want({"A": 24, "B": 10, "C": 16}), Want({"A": 24, "B": 10, "C": 16}, {"B": 10}))),
    (Case({"*": P(1, min_replicas=20)}, 60, ["A", "B"], {}, {"B": 10}),
     (Want({"A": 50, "B": 10}, {"B": 25}), Want({"A": 50, "B": 10}, {"B": 25}),
      Want({"A": 50, "B": 10}), Want({"A": 50, "B": 10}, {"B": 25}))),
]


def _mode_id(avoid: bool, keep: bool) -> str:
    return f"avoid={'T' if avoid else 'F'}-keep={'T' if keep else 'F'}"


def _params() -> list:
    params = []
    for i, (case, want) in enumerate(WITHOUT_EXISTING):
        for avoid, keep in MODES:
            params.append(pytest.param(case, avoid, keep, want, id=f"TestWithoutExisting#{i}-{_mode_id(avoid, keep)}"))
    for i, (case, plain, avoiding) in enumerate(WITH_EXISTING):
        for avoid, keep in MODES:
            want = avoiding if avoid else plain
            params.append(pytest.param(case, avoid, keep, want, id=f"TestWithExisting#{i}-{_mode_id(avoid, keep)}"))
    for i, (case, wants) in enumerate(WITH_CAPACITY):
        for mode, (avoid, keep) in enumerate(MODES):
            params.append(pytest.param(case, avoid, keep, wants[mode],
                                       id=f"TestWithExistingAndCapacity#{i}-{_mode_id(avoid, keep)}"))
    return params


@pytest.mark.parametrize(("case", "avoid", "keep", "want"), _params())
def test_upstream_planner_tables(case: Case, avoid: bool, keep: bool, want: Want) -> None:
    placed, overflow = _converge(case, avoid, keep)
    assert placed == dict(want.plan)
    assert overflow == dict(want.overflow)


# --- rsp_test.go: TestClusterWeights (static), TestMinReplicas, TestMaxReplicas --------

THREE = ["cluster1", "cluster2", "cluster3"]


def _plugin_replicas(placed: Mapping[str, int], overflow: Mapping[str, int], clusters: Sequence[str]) -> dict[str, int]:
    """What the rsp plugin reports: plan plus overflow, clusters with 0 left out."""
    merged = {c: placed.get(c, 0) + overflow.get(c, 0) for c in clusters}
    return {c: n for c, n in merged.items() if n}


@pytest.mark.parametrize(
    ("preferences", "want"),
    [
        pytest.param({"cluster1": P(2), "cluster2": P(3), "cluster3": P(5)},
                     {"cluster1": 2, "cluster2": 3, "cluster3": 5},
                     id="TestClusterWeights/Static scheduling with weights specified"),
        pytest.param({"cluster1": P(2), "cluster2": P(3), "cluster3": P(0)},
                     {"cluster1": 4, "cluster2": 6},
                     id="TestClusterWeights/Static scheduling with some weights specified"),
        pytest.param({"cluster1": P(2, min_replicas=3), "cluster2": P(3, min_replicas=3),
                      "cluster3": P(5, min_replicas=3)},
                     {"cluster1": 3, "cluster2": 3, "cluster3": 4},
                     id="TestMinReplicas/MinReplicas should be respected"),
        pytest.param({"cluster1": P(2, max_replicas=1), "cluster2": P(3, max_replicas=1),
                      "cluster3": P(5, max_replicas=1)},
                     {"cluster1": 1, "cluster2": 1, "cluster3": 1},
                     id="TestMaxReplicas/MaxReplicas is hard constraint"),
    ],
)
def test_upstream_rsp_static_weights(preferences: Mapping[str, ClusterPreference], want: dict[str, int]) -> None:
    placed, overflow = plan(preferences, 10, THREE, {}, {}, {})
    assert _plugin_replicas(placed, overflow, THREE) == want


# --- the product talk's scaling examples (spec: federation.md) -------------------------

ABC = ["A", "B", "C"]


@pytest.mark.parametrize("preferences", [EQUAL, {"A": P(1), "B": P(1), "C": P(1)}], ids=["wildcard", "explicit"])
def test_talk_scale_down_30_to_15_only_stops(preferences: Mapping[str, ClusterPreference]) -> None:
    current = {"A": 15, "B": 15, "C": 0}
    assert plan(preferences, 15, ABC, current, {}, {})[0] == {"A": 5, "B": 5, "C": 5}
    assert plan(preferences, 15, ABC, current, {}, {}, avoid_migration=True) == ({"A": 8, "B": 7, "C": 0}, {})


@pytest.mark.parametrize("preferences", [EQUAL, {"A": P(1), "B": P(1), "C": P(1)}], ids=["wildcard", "explicit"])
def test_talk_scale_up_30_to_36_only_starts(preferences: Mapping[str, ClusterPreference]) -> None:
    current = {"A": 15, "B": 15, "C": 0}
    assert plan(preferences, 36, ABC, current, {}, {})[0] == {"A": 12, "B": 12, "C": 12}
    assert plan(preferences, 36, ABC, current, {}, {}, avoid_migration=True) == ({"A": 15, "B": 15, "C": 6}, {})


# --- tie-break hash ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"", 0x811C9DC5), (b"a", 0x050C5D7E), (b"ab", 0x70772D38), (b"abc", 0x439C2F4B)],
)
def test_fnv1_32_matches_go_hash_fnv_new32(data: bytes, expected: int) -> None:
    assert fnv1_32(data) == expected


def test_key_seeds_the_tie_break() -> None:
    """A single replica goes to the cluster whose hash of name followed by key is smallest."""
    winners = set()
    for key in ("default/web", "default/api", "prod/db", "x", "ns/app1"):
        placed, _ = plan(EQUAL, 1, ["east", "west"], {}, {}, {}, key=key)
        expected = min(["east", "west"], key=lambda c: fnv1_32(f"{c}{key}".encode()))
        assert placed == {"east": 0, "west": 0} | {expected: 1}
        winners.add(expected)
    assert winners == {"east", "west"}


def test_clusters_without_preference_get_nothing() -> None:
    placed, overflow = plan({"A": P(1)}, 5, ["A", "B"], {"B": 3}, {}, {}, avoid_migration=True)
    assert placed == {"A": 5} and overflow == {}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"total": -1},
        {"preferences": {"A": P(-1)}},
        {"preferences": {"A": P(1, min_replicas=-1)}},
        {"current": {"A": -2}},
        {"estimated_capacity": {"A": -1}},
        {"limited_capacity": {"A": -1}},
    ],
)
def test_negative_inputs_are_rejected(kwargs: dict) -> None:
    args = {"preferences": {"A": P(1)}, "total": 3, "clusters": ["A"], "current": {},
            "estimated_capacity": {}, "limited_capacity": {}} | kwargs
    with pytest.raises(ValueError):
        plan(**args)


# --- properties ----------------------------------------------------------------------------

NAMES = ["c0", "c1", "c2", "c3", "c4", "c5"]


@st.composite
def _fleets(draw: st.DrawFn) -> tuple[dict[str, ClusterPreference], list[str], dict[str, int]]:
    """Clusters with positive weights, consistent min <= max, optional hard caps."""
    clusters = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=len(NAMES), unique=True))
    preferences: dict[str, ClusterPreference] = {}
    limited: dict[str, int] = {}
    for name in clusters:
        low = draw(st.integers(0, 10))
        high = draw(st.one_of(st.none(), st.integers(low, 40)))
        preferences[name] = P(draw(st.integers(1, 20)), low, high)
        if draw(st.booleans()):
            limited[name] = draw(st.integers(0, 40))
    return preferences, clusters, limited


def _room(preferences: Mapping[str, ClusterPreference], limited: Mapping[str, int]) -> float:
    room = 0.0
    for name, pref in preferences.items():
        caps = [c for c in (pref.max_replicas, limited.get(name)) if c is not None]
        room += min(caps) if caps else float("inf")
    return room


@settings(max_examples=300, deadline=None)
@given(fleet=_fleets(), total=st.integers(0, 120), key=st.text(max_size=6))
def test_property_sum_and_bounds(fleet, total: int, key: str) -> None:
    preferences, clusters, limited = fleet
    placed, overflow = plan(preferences, total, clusters, {}, {}, limited, key=key)
    assert overflow == {}
    assert set(placed) == set(clusters)
    if _room(preferences, limited) >= total:
        assert sum(placed.values()) == total
    else:
        assert sum(placed.values()) <= total
    if sum(p.min_replicas for p in preferences.values()) <= total:
        for name, pref in preferences.items():
            assert placed[name] >= min(pref.min_replicas, limited.get(name, pref.min_replicas))
    for name, pref in preferences.items():
        if pref.max_replicas is not None:
            assert placed[name] <= pref.max_replicas
        if name in limited:
            assert placed[name] <= limited[name]


@settings(max_examples=200, deadline=None)
@given(fleet=_fleets(), total=st.integers(0, 120), key=st.text(max_size=6), data=st.data())
def test_property_order_of_clusters_does_not_matter(fleet, total: int, key: str, data: st.DataObject) -> None:
    preferences, clusters, limited = fleet
    shuffled = data.draw(st.permutations(clusters))
    assert plan(preferences, total, clusters, {}, {}, limited, key=key) == \
        plan(preferences, total, shuffled, {}, {}, limited, key=key)


@settings(max_examples=300, deadline=None)
@given(
    weights=st.lists(st.integers(1, 10), min_size=1, max_size=6),
    current=st.lists(st.integers(0, 30), min_size=6, max_size=6),
    total=st.integers(0, 150),
    key=st.text(max_size=6),
)
def test_property_avoid_migration_never_moves_replicas(weights: list[int], current: list[int], total: int,
                                                       key: str) -> None:
    clusters = NAMES[: len(weights)]
    preferences = {name: P(w) for name, w in zip(clusters, weights)}
    now = dict(zip(clusters, current))
    placed, overflow = plan(preferences, total, clusters, now, {}, {}, key=key, avoid_migration=True)
    assert overflow == {}
    assert sum(placed.values()) == total
    before = sum(now.values())
    for name in clusters:
        if total >= before:
            assert placed[name] >= now[name]
        else:
            assert placed[name] <= now[name]


@settings(max_examples=200, deadline=None)
@given(fleet=_fleets(), total=st.integers(0, 120), avoid=st.booleans(), keep=st.booleans(),
       current=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 40)),
       estimated=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 40)))
def test_property_capacities_are_never_exceeded(fleet, total: int, avoid: bool, keep: bool,
                                                current: dict[str, int], estimated: dict[str, int]) -> None:
    preferences, clusters, limited = fleet
    assume(all(p.max_replicas is None or p.max_replicas >= p.min_replicas for p in preferences.values()))
    placed, overflow = plan(preferences, total, clusters, current, estimated, limited,
                            avoid_migration=avoid, keep_unschedulable=keep)
    for name, replicas in placed.items():
        assert replicas >= 0
        for caps in (limited, estimated):
            if name in caps:
                assert replicas <= caps[name]
    assert all(value > 0 for value in overflow.values())
