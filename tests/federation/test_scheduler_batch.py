"""The batch API (ClusterSnapshot, schedule_many) against schedule().

Units are drawn from a few shared "policies" (selector, affinity, tolerations, placements,
maxClusters, request shapes) with per-unit replicas, modes, current placements and keys, so
one snapshot serves many units and its caches are hit, missed and keyed apart. Every field of
every result must equal what ``schedule(unit, clusters, profile)`` gives (the explanation too,
unless ``explain=False``, where it is empty).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from federation import scheduler
from federation.scheduler import (
    CLUSTER_AFFINITY,
    CLUSTER_CAPACITY_WEIGHT,
    CLUSTER_READY,
    CLUSTER_RESOURCES_MOST_ALLOCATED,
    DEFAULT_PROFILE,
    DUPLICATE,
    FILTER_PLUGINS,
    MAX_CLUSTER,
    PLACEMENT_FILTER,
    PROFILES,
    TAINT_TOLERATION,
    ClusterInfo,
    ClusterSnapshot,
    Profile,
    SchedulingUnit,
    schedule,
    schedule_many,
)
from federation.weights import GPU_RESOURCE

from .conftest import assert_plain_path_like_schedule

GiB = 2**30
NAMES = [f"m{i}" for i in range(9)]
TAINTS = [
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "effect": "PreferNoSchedule"},
    {"key": "maint", "value": "yes", "effect": "NoExecute"},
    {"key": "team", "value": "web", "effect": "NoSchedule"},
]
TOLERATIONS = [
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "operator": "Exists"},
    {"operator": "Exists", "effect": "NoExecute"},
    {"key": "team", "value": "web"},
]
REQUESTS = [
    {},
    {"cpu": 500, "memory": GiB},
    {"cpu": 4000, "memory": 8 * GiB},
    {"cpu": 250, "memory": GiB // 2, GPU_RESOURCE: 1},
    {"cpu": 1000, "memory": 0, "example.com/fpga": 2},
]
AFFINITIES = [
    None,
    {"required": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "us"]}]}]},
    {"required": [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["m0"]}]},
                  {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]},
    {"preferred": [{"weight": 30, "preference": {"matchExpressions": [{"key": "zone", "operator": "In",
                                                                       "values": ["1"]}]}}]},
    {"requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [
        {"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}]},
     "preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["us"]}]}}]},
    {"required": []},
    {"required": [{"matchExpressions": [{"key": "region", "operator": "Near", "values": ["eu"]}]}]},
    {"preferred": [{"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "Bogus"}]}}]},
]

PROFILE_SPECS: dict[str, dict[str, Any]] = {
    "default": {},
    "binpack": {"disabled": {"scores": ["ClusterResourcesLeastAllocated"]},
                "enabled": {"scores": [CLUSTER_RESOURCES_MOST_ALLOCATED]},
                "weights": {CLUSTER_RESOURCES_MOST_ALLOCATED: 3, TAINT_TOLERATION: 2}},
    "static": {"dynamic_weights": False, "estimate_capacity": False},
    "bare": {"disabled": {"filters": ["*"], "select": ["*"], "replicas": ["*"]}},
    "few": {"disabled": {"filters": [CLUSTER_READY, PLACEMENT_FILTER], "scores": ["*"]},
            "enabled": {"scores": [CLUSTER_AFFINITY]}},
}


def _profile(module: Any, name: str) -> Any:
    spec = PROFILE_SPECS[name]
    changes = {k: v for k, v in spec.items() if k not in ("enabled", "disabled")}
    return module.DEFAULT_PROFILE.derive(name, spec.get("enabled"), spec.get("disabled"), **changes)


@st.composite
def _cluster_specs(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=len(NAMES), unique=True))
    specs = []
    for name in names:
        cores = draw(st.sampled_from([0, 2, 8, 32]))
        used = draw(st.sampled_from([0.0, 0.3, 0.9, 1.2]))
        gpus = draw(st.sampled_from([None, 0, 4]))
        allocatable = {"cpu": cores * 1000, "memory": cores * 4 * GiB}
        requested = {"cpu": int(cores * 1000 * used), "memory": int(cores * 4 * GiB * used)}
        if gpus is not None:
            allocatable[GPU_RESOURCE] = gpus
            requested[GPU_RESOURCE] = draw(st.integers(0, gpus))
        specs.append({
            "name": name,
            "labels": draw(st.fixed_dictionaries({}, optional={
                "region": st.sampled_from(["eu", "us", "ap"]), "zone": st.sampled_from(["1", "2"]),
                "tier": st.sampled_from(["0", "1", "2", "x"])})),
            "taints": draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: t["key"])),
            "ready": draw(st.sampled_from([True, True, False])),
            "cordoned": draw(st.sampled_from([False, False, True])),
            "api_resources": draw(st.sampled_from([None, frozenset({"apps/v1/Deployment", "v1/ConfigMap"}),
                                                   frozenset({"v1/ConfigMap"}), frozenset()])),
            "allocatable": allocatable,
            "requested": requested,
            "current_replicas": draw(st.sampled_from([0, 0, 0, 2])),
        })
    return specs


@st.composite
def _placements(draw: st.DrawFn) -> dict[str, Any]:
    placements: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=4, unique=True)):
        placements[name] = draw(st.fixed_dictionaries({}, optional={
            "weight": st.integers(0, 5), "min_replicas": st.integers(0, 3), "max_replicas": st.integers(0, 8)}))
    return placements


#: Per-policy fields and their possible values: each scenario keeps one or two values per
#: field and every unit picks each field on its own, so units often differ in exactly one
#: input, which is what tells a sound cache key from one that forgot an input.
SHARED = {
    "gvk": st.sampled_from(["apps/v1/Deployment", "v1/ConfigMap", "batch/v1/Job", "nope"]),
    "cluster_selector": st.sampled_from([{}, {"region": "eu"}, {"zone": "1", "region": "us"}]),
    "cluster_affinity": st.sampled_from(AFFINITIES),
    "tolerations": st.lists(st.sampled_from(TOLERATIONS), max_size=2),
    "max_clusters": st.sampled_from([None, 0, 1, 2, 5, -1]),
    "placements": st.one_of(st.just({}), _placements()),
    "resource_request": st.sampled_from(REQUESTS),
}


@st.composite
def _units(draw: st.DrawFn) -> list[dict[str, Any]]:
    pools = {field: draw(st.lists(values, min_size=2, max_size=2)) for field, values in SHARED.items()}
    units = []
    for i in range(draw(st.integers(2, 10))):
        current: dict[str, int | None] = {}
        for name in draw(st.lists(st.sampled_from(NAMES + ["gone"]), max_size=3, unique=True)):
            current[name] = draw(st.sampled_from([0, 1, 3, 9, None]))
        shared = {field: copy.deepcopy(draw(st.sampled_from(pool))) for field, pool in pools.items()}
        units.append(shared | {
            "name": f"w{i % 4}",
            "namespace": draw(st.sampled_from(["", "shop", "ns-ü"])),
            "desired_replicas": draw(st.sampled_from([None, 0, 1, 4, 17, 60])),
            "scheduling_mode": draw(st.sampled_from(["Divide", "Divide", DUPLICATE])),
            "sticky_cluster": draw(st.sampled_from([False, False, False, True])),
            "avoid_migration": draw(st.booleans()),
            "current_clusters": current,
        })
    return units


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    return draw(_cluster_specs()), draw(_units()), draw(st.sampled_from(sorted(PROFILE_SPECS)))


def _build(module: Any, specs: list[dict[str, Any]], units: list[dict[str, Any]]) -> tuple[list, list]:
    clusters = [module.ClusterInfo(**copy.deepcopy(spec)) for spec in specs]
    return clusters, [module.SchedulingUnit(**copy.deepcopy(unit)) for unit in units]


def _without_explanation(result: dict[str, Any]) -> dict[str, Any]:
    return result | {"explanation": []}


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=_scenarios())
def test_batch_results_equal_schedule_field_by_field(scenario: tuple) -> None:
    specs, unit_specs, profile_name = scenario
    clusters, units = _build(scheduler, specs, unit_specs)
    profile = _profile(scheduler, profile_name)
    want = [schedule(unit, clusters, profile).to_dict() for unit in units]

    snapshot = ClusterSnapshot(clusters, profile)
    twice = units + units  # the second round is served from warm caches
    assert [r.to_dict() for r in snapshot.schedule_many(twice)] == want + want
    quiet = ClusterSnapshot(clusters, profile, explain=False)
    assert [r.to_dict() for r in quiet.schedule_many(twice)] == [_without_explanation(r) for r in want + want]
    assert [r.to_dict() for r in schedule_many(units, clusters, profile, explain=True)] == want
    assert snapshot.stats == {"cached": len(twice), "plain": 0}


BASE = {"name": "w", "namespace": "shop", "desired_replicas": 12, "resource_request": {"cpu": 500, "memory": GiB},
        "current_clusters": {"c00": 2, "c05": 1, "c07": 3}}
ONE_FIELD_APART = [
    {"tolerations": [TOLERATIONS[0]]},
    {"tolerations": [{"key": "dedicated", "operator": "Exists"}]},
    {"tolerations": [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]},
    {"placements": {"c00": {"weight": 1}, "c07": {"weight": 3}, "c14": {"weight": 2}}},
    {"placements": {"c00": {"weight": 2, "max_replicas": 1}, "c07": {"weight": 1}, "c14": {"weight": 2}}},
    {"placements": {"c00": {"min_replicas": 4}, "c07": {}, "c14": {"max_replicas": 2}}},
    {"max_clusters": 2},
    {"max_clusters": 3},
    {"max_clusters": 0},
    {"resource_request": {"cpu": 2500, "memory": GiB}},
    {"resource_request": {"cpu": 500, "memory": GiB, GPU_RESOURCE: 1}},
    {"cluster_selector": {"region": "r1"}},
    {"cluster_affinity": AFFINITIES[1] | {"required": [{"matchExpressions": [
        {"key": "region", "operator": "In", "values": ["r0", "r2"]}]}]}},
    {"cluster_affinity": {"preferred": [{"weight": 50, "preference": {"matchExpressions": [
        {"key": "region", "operator": "In", "values": ["r2"]}]}}]}},
    {"gvk": "v1/ConfigMap"},
    # Not scored and not checked by the fit filter, but no cluster has room for it.
    {"resource_request": {"cpu": 500, "memory": GiB, "ephemeral-storage": GiB}},
    {"avoid_migration": False},
    {"current_clusters": {"c05": 4, "c08": 2}},
    {"current_clusters": {}},
    {"desired_replicas": 40},
    {"scheduling_mode": DUPLICATE},
    {"namespace": "other"},
]


_ON_TAINTED = {"cluster_selector": {"region": "r0"}, "current_clusters": {"c00": 2, "c21": 1}}
PAIRS = [({}, changes) for changes in ONE_FIELD_APART] + [
    # Same feasible set and selection, so only the replicas key tells them apart.
    (_ON_TAINTED, _ON_TAINTED | {"tolerations": [TOLERATIONS[0]]}),
    (ONE_FIELD_APART[3], ONE_FIELD_APART[4]),
    (ONE_FIELD_APART[3], ONE_FIELD_APART[5]),
    (ONE_FIELD_APART[4], ONE_FIELD_APART[5]),
]


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=lambda c: ",".join(c) or "base")
def test_units_one_input_apart_never_share_a_wrong_result(first: dict[str, Any], second: dict[str, Any]) -> None:
    """Each input a phase reads must be in its cache key: units one input apart share a snapshot."""
    clusters = _fleet()
    fleet_view = [copy.copy(c) for c in clusters]
    base, variant = SchedulingUnit(**copy.deepcopy(BASE | first)), SchedulingUnit(**copy.deepcopy(BASE | second))
    for order in ((base, variant), (variant, base)):
        snapshot = ClusterSnapshot(clusters)
        for unit in order + order:
            assert snapshot.schedule(unit).to_dict() == schedule(unit, fleet_view).to_dict()


def _fleet(count: int = 40) -> list[ClusterInfo]:
    return [
        ClusterInfo(f"c{i:02d}", labels={"region": f"r{i % 3}"}, ready=i % 11 != 0, cordoned=i % 13 == 5,
                    taints=[TAINTS[0]] if i % 7 == 0 else [TAINTS[1]] if i % 5 == 1 else [],
                    api_resources=frozenset({"v1/ConfigMap"}) if i % 8 == 3 else None,
                    allocatable={"cpu": 8000, "memory": 32 * GiB},
                    requested={"cpu": 1000 * (i % 9), "memory": 4 * GiB * (i % 9)})
        for i in range(count)
    ]


def test_units_running_on_infeasible_clusters_change_the_feasible_set_per_unit() -> None:
    """Full clusters (resource fit), tainted ones and cordoned ones pass where the unit runs."""
    clusters = _fleet()
    units = [
        SchedulingUnit(f"w{i}", namespace="shop", desired_replicas=12, resource_request={"cpu": 1500, "memory": GiB},
                       max_clusters=m, avoid_migration=avoid, current_clusters=current)
        for i, (m, avoid, current) in enumerate([
            (None, True, {}), (3, True, {"c08": 4}), (3, False, {"c08": 4}), (None, True, {"c07": 2, "c05": 1}),
            (None, False, {"c05": 3}), (5, True, {"c00": 1, "c17": 2, "c26": 1}), (3, True, {"c08": 4}),
        ])
    ]
    snapshot = ClusterSnapshot(clusters)
    for unit in units + units:
        assert snapshot.schedule(unit).to_dict() == schedule(unit, clusters).to_dict()


def test_results_share_no_mutable_state() -> None:
    clusters = _fleet()
    unit = SchedulingUnit("w", desired_replicas=9, resource_request={"cpu": 100}, max_clusters=4)
    snapshot = ClusterSnapshot(clusters)
    first = snapshot.schedule(unit)
    for name in first.filtered:
        first.filtered[name].append("scribbled")
    for scores in first.scores.values():
        scores.clear()
    first.feasible.clear()
    first.selected.clear()
    first.weights.clear()
    first.total_scores.clear()
    first.estimated_capacity.clear()
    assert snapshot.schedule(unit).to_dict() == schedule(unit, clusters).to_dict()


def test_a_batch_result_copies_its_scores_only_when_they_are_read() -> None:
    """Results share the snapshot's cached scores until read; then each has its own, equal to schedule()'s."""
    clusters = _fleet()
    unit = SchedulingUnit("w", desired_replicas=9, resource_request={"cpu": 100})
    snapshot = ClusterSnapshot(clusters, explain=False)
    unread, first, second = (snapshot.schedule(unit) for _ in range(3))
    assert "scores" not in vars(unread)  # nothing copied for a result whose scores nobody reads
    want = schedule(unit, clusters)
    want.explanation.clear()
    assert first == want  # the dataclass's equality reads the field like any other
    assert "scores" in vars(first) and "_shared_scores" not in vars(first)
    for scores in first.scores.values():
        scores["scribbled"] = 1
    first.scores.clear()
    assert second.scores == want.scores and unread == want
    assert copy.deepcopy(second) == want and snapshot.schedule(unit) == want


def test_profile_names_and_unknown_profiles_behave_like_schedule() -> None:
    clusters = _fleet(5)
    unit = SchedulingUnit("w", desired_replicas=3)
    snapshot = ClusterSnapshot(clusters, "default")
    assert snapshot.schedule(unit).to_dict() == schedule(unit, clusters, "default").to_dict()
    assert snapshot.schedule(unit, "no-such-profile").to_dict() == schedule(unit, clusters, "no-such-profile").to_dict()
    assert snapshot.schedule(unit, "no-such-profile", explain=False).error == "unknown scheduling profile 'no-such-profile'"
    assert snapshot.stats == {"cached": 1, "plain": 2}
    assert PROFILES["default"] is DEFAULT_PROFILE


@pytest.mark.parametrize(
    "changes",
    [
        {"tolerations": [{"key": "x", "value": ["not", "hashable"]}]},
        {"resource_request": {"cpu": 1.5}},
        {"cluster_selector": {"region": 1}},
        {"cluster_affinity": {"required": [{"matchExpressions": ({"key": "region", "operator": "Exists"},)},
                                           {1: "odd key"}]}},
        {"tolerations": ["not a mapping"]},
        {"placements": {"c01": object()}},
        {"gvk": None},
    ],
)
def test_unusual_inputs_take_the_plain_path_with_the_same_outcome(changes: dict[str, Any]) -> None:
    clusters = _fleet(8)
    unit = SchedulingUnit("w", desired_replicas=5, **changes)
    assert assert_plain_path_like_schedule(unit, clusters)["plain"] == 1


def test_a_replaced_plugin_is_not_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin swapped into a registry may read anything, so its profile is never cached."""
    clusters = _fleet(6)
    calls: list[str] = []

    def only_even(ctx: Any, cluster: ClusterInfo) -> str | None:
        calls.append(ctx.unit.name)
        return None if int(cluster.name[1:]) % 2 == 0 else "odd"

    monkeypatch.setitem(FILTER_PLUGINS, PLACEMENT_FILTER, only_even)
    snapshot = ClusterSnapshot(clusters)
    for name in ("a", "b"):
        unit = SchedulingUnit(name, desired_replicas=4)
        assert snapshot.schedule(unit).to_dict() == schedule(unit, clusters).to_dict()
    assert snapshot.stats == {"cached": 0, "plain": 2}


def test_duplicate_cluster_names_raise_like_schedule() -> None:
    clusters = [ClusterInfo("a"), ClusterInfo("a")]
    with pytest.raises(ValueError, match="unique"):
        ClusterSnapshot(clusters)
    for units in ([SchedulingUnit("w")], []):
        with pytest.raises(ValueError, match="unique"):
            list(schedule_many(units, clusters))


def test_the_snapshot_caches_are_bounded() -> None:
    clusters = _fleet(6)
    snapshot = ClusterSnapshot(clusters, cache_size=3)
    for cpu in range(1, 20):
        unit = SchedulingUnit("w", desired_replicas=3, resource_request={"cpu": cpu})
        assert snapshot.schedule(unit).to_dict() == schedule(unit, clusters).to_dict()
    caches = snapshot._caches(DEFAULT_PROFILE)
    assert len(caches.filters) <= 3 and len(caches.phases) <= 3 and len(caches.replicas) <= 12


def test_duplicate_and_sticky_units_in_a_batch() -> None:
    clusters = _fleet(10)
    units = [
        SchedulingUnit("cm", gvk="v1/ConfigMap", max_clusters=3),
        SchedulingUnit("dup", desired_replicas=4, scheduling_mode=DUPLICATE, current_clusters={"c01": 4}),
        SchedulingUnit("stuck", desired_replicas=4, sticky_cluster=True, current_clusters={"c02": 4, "zz": 1}),
        SchedulingUnit("new-sticky", desired_replicas=4, sticky_cluster=True),
    ]
    got = [r.to_dict() for r in schedule_many(units, clusters)]
    assert got == [schedule(unit, clusters).to_dict() for unit in units]


def test_profile_with_every_phase_from_the_registries_is_cached() -> None:
    profile = Profile("all", filters=tuple(FILTER_PLUGINS), scores=tuple(scheduler.SCORE_PLUGINS),
                      select=(MAX_CLUSTER,), replicas=(CLUSTER_CAPACITY_WEIGHT,))
    clusters = _fleet(12)
    unit = SchedulingUnit("w", desired_replicas=7, max_clusters=4, resource_request={"cpu": 300})
    snapshot = ClusterSnapshot(clusters, profile)
    assert snapshot.schedule(unit).to_dict() == schedule(unit, clusters, profile).to_dict()
    assert snapshot.stats == {"cached": 1, "plain": 0}
