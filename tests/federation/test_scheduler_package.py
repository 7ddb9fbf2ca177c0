"""The scheduler as a package: the public names import from ``federation.scheduler`` as they
did from the one module, and the batch path never hides an exception.

``ClusterSnapshot`` once wrapped the preparation of every unit in ``except Exception`` and
fell back to plain ``schedule()`` on anything, so a bug in the cached path (a typo, a wrong
key) could only show as slowness. Now only named cases take the plain path (an unknown
profile name, plugins the caches do not know, inputs outside the shapes the keys cover),
and whatever else raises while preparing a unit surfaces.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from federation import scheduler
from federation.scheduler import ClusterInfo, ClusterSnapshot, SchedulingUnit, batch, schedule

from .conftest import assert_plain_path_like_schedule

GiB = 2**30


def _fleet(count: int = 8) -> list[ClusterInfo]:
    return [ClusterInfo(f"c{i}", labels={"region": f"r{i % 3}", "zone": str(i % 2)}, cordoned=i == 5,
                        taints=[{"key": "gpu", "effect": "NoSchedule"}] if i % 4 == 0 else [],
                        allocatable={"cpu": 8000, "memory": 32 * GiB}, requested={"cpu": 1000 * i, "memory": GiB * i})
            for i in range(count)]


def test_every_public_name_is_importable_from_the_package() -> None:
    for name in scheduler.__all__:
        assert getattr(scheduler, name) is not None, name
    from federation.scheduler.filters import FILTER_PLUGINS
    from federation.scheduler.profiles import REGISTRIES

    assert scheduler.FILTER_PLUGINS is FILTER_PLUGINS is REGISTRIES["filters"], "one registry, shared by reference"
    assert scheduler.schedule.__module__ == "federation.scheduler.framework"
    assert scheduler.ClusterSnapshot.__module__ == "federation.scheduler.batch"


def test_an_error_while_preparing_a_unit_surfaces_instead_of_falling_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the cached path must fail loudly, not be served silently by the plain path."""
    def broken(*args: Any, **kwargs: Any) -> None:
        raise KeyError("a bug in the cached path")

    monkeypatch.setattr(batch, "score_resources", broken)
    snapshot = ClusterSnapshot(_fleet())
    with pytest.raises(KeyError, match="a bug in the cached path"):
        snapshot.schedule(SchedulingUnit("w", desired_replicas=3, resource_request={"cpu": 100}))
    assert snapshot.stats == {"cached": 0, "plain": 0}


@pytest.mark.parametrize("changes", [
    {"cluster_affinity": {"required": 5}},
    {"cluster_affinity": {"required": [{"matchExpressions": 5}]}},
    {"cluster_affinity": {"required": [{"matchExpressions": [{"key": "a", "operator": ["In"], "values": ["x"]}]}]}},
    {"cluster_affinity": {"required": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": 3}]}]}},
    {"cluster_affinity": {"required": ["a string term"]}},
    {"cluster_affinity": {"preferred": [{"weight": "heavy", "preference": {}}]}},
    {"cluster_affinity": {"preferred": [{"weight": 3, "preference": ["not", "an", "object"]}]}},
    {"cluster_affinity": ["not", "an", "object"]},
    {"cluster_affinity": scheduler.ClusterAffinity(required=[{"matchExpressions": [{"key": "a", "operator": "Exists",
                                                                                     "values": 7}]}])},
    {"tolerations": ({"key": "gpu", "value": 1},)},
    {"tolerations": "gpu"},
    {"placements": {"c1": {"weight": "1"}}},
    {"placements": [("c1", 1)]},
    {"max_clusters": "2"},
    {"resource_request": [("cpu", 1)]},
    {"current_clusters": [("c1", 2)]},
])
def test_inputs_outside_the_cached_shapes_take_the_plain_path_with_the_same_outcome(changes: dict[str, Any]) -> None:
    clusters = _fleet()
    unit = SchedulingUnit(**({"name": "w", "desired_replicas": 5, "resource_request": {"cpu": 500}} | changes))
    assert assert_plain_path_like_schedule(unit, clusters) == {"cached": 0, "plain": 1}


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "In", "NotIn", "Exists",
                                                                                        "Gt", "region", "r1", "5"]))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["key", "operator", "values", "weight", "preference",
                                                                   "matchExpressions", "matchFields", "required",
                                                                   "preferred", "value", "effect"]), inner, max_size=3)),
    max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(affinity=json_values, tolerations=json_values, placements=json_values, max_clusters=json_scalars)
def test_any_json_unit_gets_what_schedule_gives(affinity: Any, tolerations: Any, placements: Any, max_clusters: Any) -> None:
    """Whatever JSON a caller passes, the snapshot answers (or raises) as schedule() does."""
    clusters = _fleet(6)
    fields = {"cluster_affinity": affinity, "tolerations": tolerations, "placements": placements,
              "max_clusters": max_clusters}
    unit = SchedulingUnit("w", desired_replicas=4, resource_request={"cpu": 250}, **copy.deepcopy(fields))
    snapshot = ClusterSnapshot(clusters)
    try:
        want: Any = schedule(SchedulingUnit("w", desired_replicas=4, resource_request={"cpu": 250},
                                            **copy.deepcopy(fields)), clusters).to_dict()
    except Exception as exc:  # noqa: BLE001
        with pytest.raises(type(exc)):
            snapshot.schedule(unit)
    else:
        assert snapshot.schedule(unit).to_dict() == want
        assert snapshot.schedule(unit).to_dict() == want, "and again from warm caches"
    assert sum(snapshot.stats.values()) in (1, 2)


def test_policy_shaped_units_are_all_served_from_the_caches() -> None:
    """What policies produce (``federation.policy.scheduling_unit``) is never sent down the plain path."""
    from federation.policy import scheduling_unit

    from .conftest import deployment

    spec = {"schedulingMode": "Divide", "clusterSelector": {"zone": "1"}, "maxClusters": 3,
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
            "placement": [{"cluster": "c1", "preferences": {"weight": 2, "minReplicas": 1}}, {"cluster": "c3"}],
            "clusterAffinity": [{"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["r2"]}]}]}
    snapshot = ClusterSnapshot(_fleet())
    for replicas in (1, 7, 30):
        unit = scheduling_unit(deployment(replicas=replicas, cpu="250m"), spec, current={"c1": 1}, key="shop/web")
        assert snapshot.schedule(unit).to_dict() == schedule(unit, _fleet()).to_dict()
    assert snapshot.stats == {"cached": 3, "plain": 0}
