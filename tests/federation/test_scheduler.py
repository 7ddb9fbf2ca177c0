"""The global scheduler framework against KubeAdmiral's plugin tests, plus end-to-end cases.

Plugin tables are ported from ``kubewharf/kubeadmiral``
``pkg/controllers/scheduler/framework/plugins/*/..._test.go``; each case id
names the upstream test function and case. Upstream calls one plugin at a
time; here a one-plugin :class:`Profile` runs it through :func:`schedule`,
so the public entry point is what is tested. Upstream's ``makeCluster(name,
allocatableMilliCPU, allocatableMemory, availableMilliCPU, availableMemory)``
and ``makeSchedulingUnit(name, milliCPU, memory)`` map onto ``_cluster`` and
``_unit`` with the same units (millicores, bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from federation.planner import ClusterPreference
from federation.scheduler import (
    API_RESOURCES,
    CLUSTER_AFFINITY,
    CLUSTER_READY,
    CLUSTER_RESOURCES_BALANCED_ALLOCATION,
    CLUSTER_RESOURCES_FIT,
    CLUSTER_RESOURCES_LEAST_ALLOCATED,
    CLUSTER_RESOURCES_MOST_ALLOCATED,
    DEFAULT_PROFILE,
    MAX_CLUSTER,
    PLACEMENT_FILTER,
    TAINT_TOLERATION,
    ClusterAffinity,
    ClusterInfo,
    Placement,
    Profile,
    SchedulingUnit,
    default_normalize_score,
    parse_resources,
    schedule,
    select_max_cluster,
    tolerates,
    validate_unit,
)
from federation.weights import GPU_RESOURCE

GiB = 2**30
EXAMPLE = "example.com/aaa"


def _cluster(
    name: str,
    alloc_cpu: int = 0,
    alloc_mem: int = 0,
    avail_cpu: int = 0,
    avail_mem: int = 0,
    **kwargs: Any,
) -> ClusterInfo:
    allocatable = {"cpu": alloc_cpu, "memory": alloc_mem} | kwargs.pop("extra_allocatable", {})
    available = {"cpu": avail_cpu, "memory": avail_mem} | kwargs.pop("extra_available", {})
    return ClusterInfo(name, allocatable=allocatable, available=available, **kwargs)


def _unit(cpu: int = 0, memory: int = 0, **kwargs: Any) -> SchedulingUnit:
    request = {"cpu": cpu, "memory": memory} | kwargs.pop("extra_request", {})
    return SchedulingUnit("su", resource_request=request, **kwargs)


def _filter(plugin: str, unit: SchedulingUnit, cluster: ClusterInfo) -> list[str]:
    """Reasons ``plugin`` gives for filtering ``cluster`` out (empty = it passes)."""
    result = schedule(unit, [cluster], Profile("test", filters=(plugin,)))
    assert result.error is None
    return result.filtered.get(cluster.name, [])


def _scores(plugin: str, unit: SchedulingUnit, clusters: list[ClusterInfo]) -> list[int]:
    result = schedule(unit, clusters, Profile("test", scores=(plugin,)))
    assert result.error is None
    return [result.scores[c.name][plugin] for c in clusters]


# --------------------------------------------------------------------------- APIResources


@pytest.mark.parametrize(
    ("gvk", "served", "passes"),
    [
        pytest.param("apps/v1/DaemonSet", {"apps/v1/DaemonSet"}, True,
                     id="TestAPIResourcesFilter/the cluster has the resources for schedulingUnit"),
        pytest.param("apps/v1/DaemonSet", {"apps/v1/Deployment"}, False,
                     id="TestAPIResourcesFilter/the cluster does not have the resources for schedulingUnit"),
        pytest.param("v1/ConfigMap", {"/v1/ConfigMap"}, True, id="core group with leading slash"),
        pytest.param("/v1/ConfigMap", {"v1/ConfigMap"}, True, id="core group without leading slash"),
        pytest.param("apps/v1/Deployment", None, True, id="not reported: not filtered"),
        pytest.param("apps/v1/Deployment", set(), False, id="serves nothing"),
    ],
)
def test_api_resources_filter(gvk: str, served: set[str] | None, passes: bool) -> None:
    cluster = ClusterInfo("clusterA", api_resources=None if served is None else frozenset(served))
    reasons = _filter(API_RESOURCES, SchedulingUnit("su1", gvk=gvk), cluster)
    assert reasons == ([] if passes else [f"APIResources: cluster does not serve {gvk}"])


def test_api_resources_invalid_gvk_is_a_reason() -> None:
    reasons = _filter(API_RESOURCES, SchedulingUnit("su1", gvk="Deployment"), ClusterInfo("c"))
    assert reasons and reasons[0].startswith("APIResources: invalid GVK 'Deployment'")


# --------------------------------------------------------------------------- TaintToleration

_NS, _PNS = "NoSchedule", "PreferNoSchedule"


@pytest.mark.parametrize(
    ("tolerations", "taints", "untolerated"),
    [
        pytest.param([], [{"key": "dedicated", "value": "user1", "effect": _NS}], "dedicated=user1:NoSchedule",
                     id="TestTaintTolerationFilter/no tolerations can't be scheduled onto a cluster with nonempty taints"),
        pytest.param([{"key": "dedicated", "value": "user1", "effect": _NS}],
                     [{"key": "dedicated", "value": "user1", "effect": _NS}], None,
                     id="TestTaintTolerationFilter/can be scheduled on a dedicated cluster assigned to user1"),
        pytest.param([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": _NS}],
                     [{"key": "dedicated", "value": "user1", "effect": _NS}], "dedicated=user1:NoSchedule",
                     id="TestTaintTolerationFilter/can't be scheduled on a dedicated cluster assigned to user2"),
        pytest.param([{"key": "foo", "operator": "Exists", "effect": _NS}],
                     [{"key": "foo", "value": "bar", "effect": _NS}], None,
                     id="TestTaintTolerationFilter/toleration uses operator Exists"),
        pytest.param([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": _NS},
                      {"key": "foo", "operator": "Exists", "effect": _NS}],
                     [{"key": "dedicated", "value": "user2", "effect": _NS}, {"key": "foo", "value": "bar", "effect": _NS}],
                     None, id="TestTaintTolerationFilter/multiple tolerations, all the taints are tolerated"),
        pytest.param([{"key": "foo", "operator": "Equal", "value": "bar", "effect": _PNS}],
                     [{"key": "foo", "value": "bar", "effect": _NS}], "foo=bar:NoSchedule",
                     id="TestTaintTolerationFilter/keys and values match, but (non-empty) effect doesn't match"),
        pytest.param([{"key": "foo", "operator": "Equal", "value": "bar"}],
                     [{"key": "foo", "value": "bar", "effect": _NS}], None,
                     id="TestTaintTolerationFilter/effect of toleration is empty, effect of taint is NoSchedule"),
        pytest.param([{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": _NS}],
                     [{"key": "dedicated", "value": "user1", "effect": _PNS}], None,
                     id="TestTaintTolerationFilter/key and value don't match, but taint is PreferNoSchedule"),
        pytest.param([], [{"key": "dedicated", "value": "user1", "effect": _PNS}], None,
                     id="TestTaintTolerationFilter/no toleration, but taint is PreferNoSchedule"),
        pytest.param([], [{"key": "evict", "effect": "NoExecute"}], "evict:NoExecute", id="NoExecute without value"),
    ],
)
def test_taint_toleration_filter(tolerations: list[dict], taints: list[dict], untolerated: str | None) -> None:
    reasons = _filter(TAINT_TOLERATION, SchedulingUnit("su1", tolerations=tolerations), ClusterInfo("clusterA", taints=taints))
    assert reasons == ([] if untolerated is None else [f"TaintToleration: untolerated taint {untolerated}"])


def test_taint_toleration_filter_ignores_no_schedule_where_already_running() -> None:
    """Upstream: an already scheduled cluster only has to tolerate NoExecute taints."""
    cluster = ClusterInfo("clusterA", taints=[{"key": "dedicated", "value": "user1", "effect": _NS}])
    assert _filter(TAINT_TOLERATION, SchedulingUnit("su1", current_clusters={"clusterA": 2}), cluster) == []
    cluster.taints.append({"key": "gone", "effect": "NoExecute"})
    assert _filter(TAINT_TOLERATION, SchedulingUnit("su1", current_clusters={"clusterA": 2}), cluster) == [
        "TaintToleration: untolerated taint gone:NoExecute"
    ]


_CPU_ARM = {"key": "cpu-type", "value": "arm64", "effect": _PNS}
_DISK_SSD = {"key": "disk-type", "value": "ssd", "effect": _PNS}


@pytest.mark.parametrize(
    ("tolerations", "taints", "want"),
    [
        pytest.param([{"key": "foo", "operator": "Equal", "value": "bar", "effect": _PNS}],
                     [[{"key": "foo", "value": "bar", "effect": _PNS}], [{"key": "foo", "value": "blah", "effect": _PNS}]],
                     [100, 0], id="TestTaintTolerationScore/tolerated taints score higher than intolerable ones"),
        pytest.param([{"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": _PNS},
                      {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": _PNS}],
                     [[], [_CPU_ARM], [_CPU_ARM, _DISK_SSD]], [100, 100, 100],
                     id="TestTaintTolerationScore/the count of tolerated taints does not matter"),
        pytest.param([{"key": "foo", "operator": "Equal", "value": "bar", "effect": _PNS}],
                     [[], [_CPU_ARM], [_CPU_ARM, _DISK_SSD]], [100, 50, 0],
                     id="TestTaintTolerationScore/the more intolerable taints, the lower the score"),
        pytest.param([{"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": _NS},
                      {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": _NS}],
                     [[], [{"key": "cpu-type", "value": "arm64", "effect": _NS}], [_CPU_ARM, _DISK_SSD]], [100, 100, 0],
                     id="TestTaintTolerationScore/only PreferNoSchedule taints and tolerations are checked"),
        pytest.param([], [[], [_CPU_ARM]], [100, 0],
                     id="TestTaintTolerationScore/no taints and tolerations, lands on cluster with no taints"),
    ],
)
def test_taint_toleration_score(tolerations: list[dict], taints: list[list[dict]], want: list[int]) -> None:
    clusters = [ClusterInfo(f"cluster{i}", taints=t) for i, t in enumerate(taints)]
    assert _scores(TAINT_TOLERATION, SchedulingUnit("su1", tolerations=tolerations), clusters) == want


@pytest.mark.parametrize(
    ("toleration", "taint", "want"),
    [
        ({"operator": "Exists"}, {"key": "any", "value": "x", "effect": _NS}, True),
        ({"key": "a", "operator": "Exists"}, {"key": "b", "effect": _NS}, False),
        ({"key": "a", "value": ""}, {"key": "a", "effect": _NS}, True),
        ({"key": "a", "operator": "Bogus", "value": "x"}, {"key": "a", "value": "x", "effect": _NS}, False),
    ],
)
def test_tolerates(toleration: dict, taint: dict, want: bool) -> None:
    assert tolerates(toleration, taint) is want


# --------------------------------------------------------------------------- ClusterResourcesFit


def _scalar_cluster(name: str, amount: int) -> ClusterInfo:
    return ClusterInfo(name, allocatable={EXAMPLE: amount}, available={EXAMPLE: amount})


def _scalar_unit(amount: int) -> SchedulingUnit:
    return SchedulingUnit("su", resource_request={EXAMPLE: amount})


@pytest.mark.parametrize(
    ("unit", "cluster", "insufficient"),
    [
        pytest.param(_unit(0, 0), _cluster("cluster1", 10, 20, 0, 0), [],
                     id="TestEnoughRequests/no resources requested always fits"),
        pytest.param(_unit(10, 20), _cluster("cluster1", 10, 20, 10, 20), [],
                     id="TestEnoughRequests/equal edge case requested fits"),
        pytest.param(_unit(1, 1), _cluster("cluster", 10, 20, 0, 0), ["cpu", "memory"],
                     id="TestEnoughRequests/too many resources fails"),
        pytest.param(_unit(4, 2), _cluster("cluster", 10, 20, 3, 3), ["cpu"],
                     id="TestEnoughRequests/cpu predicate resources fails"),
        pytest.param(_unit(4, 2), _cluster("cluster", 10, 20, 5, 1), ["memory"],
                     id="TestEnoughRequests/memory predicate resources fails"),
        pytest.param(_scalar_unit(1), _scalar_cluster("cluster", 2), [],
                     id="TestEnoughRequests/scalar resource predicate resources success"),
        pytest.param(_scalar_unit(1), _scalar_cluster("cluster", 0), [EXAMPLE],
                     id="TestEnoughRequests/scalar predicate resources fails"),
        pytest.param(_scalar_unit(0), _scalar_cluster("cluster", 0), [],
                     id="TestEnoughRequests/scalar predicate resources success"),
        pytest.param(_scalar_unit(1), _cluster("cluster", 2, 2, 2, 2), [EXAMPLE],
                     id="TestEnoughRequests/scalar predicate resources fails (cluster lacks it)"),
        pytest.param(_scalar_unit(0), _cluster("cluster", 2, 2, 2, 2), [],
                     id="TestEnoughRequests/zero scalar request fits"),
    ],
)
def test_cluster_resources_fit(unit: SchedulingUnit, cluster: ClusterInfo, insufficient: list[str]) -> None:
    reasons = _filter(CLUSTER_RESOURCES_FIT, unit, cluster)
    if not insufficient:
        assert reasons == []
        return
    assert len(reasons) == 1 and reasons[0].startswith("ClusterResourcesFit: ")
    for resource in insufficient:
        assert f"insufficient {resource} (" in reasons[0]


def test_cluster_resources_fit_reason_is_readable() -> None:
    unit = _unit(4000, 2 * GiB)
    cluster = _cluster("c", 8000, 16 * GiB, 2000, 512 * 2**20)
    assert _filter(CLUSTER_RESOURCES_FIT, unit, cluster) == [
        ("ClusterResourcesFit: insufficient cpu (requests 4, available 2), "
         "insufficient memory (requests 2Gi, available 512Mi)")
    ]


def test_cluster_resources_fit_skips_clusters_already_running_the_unit() -> None:
    """Upstream workaround: free resources do not count the unit's own pods."""
    unit = _unit(4000, 0, current_clusters={"c": 3})
    assert _filter(CLUSTER_RESOURCES_FIT, unit, _cluster("c", 8000, GiB, 0, GiB)) == []


def test_cluster_info_derives_available_from_requested() -> None:
    cluster = ClusterInfo("c", allocatable={"cpu": 8000, "memory": 8 * GiB}, requested={"cpu": 6000},
                          available={"memory": GiB})
    assert cluster.available == {"memory": GiB, "cpu": 2000}
    assert cluster.requested == {"cpu": 6000, "memory": 7 * GiB}


# --------------------------------------------------------------------------- resource scores

BALANCED, LEAST, MOST = (CLUSTER_RESOURCES_BALANCED_ALLOCATION, CLUSTER_RESOURCES_LEAST_ALLOCATED,
                         CLUSTER_RESOURCES_MOST_ALLOCATED)
#: The upstream test function of each score plugin's table.
_SCORE_TESTS = {BALANCED: "TestClusterResourcesBalancedAllocation", LEAST: "TestClusterResourcesLeastAllocated",
                MOST: "TestClusterResourcesMostAllocated"}

ScoreCase = Callable[[], tuple[SchedulingUnit, list[ClusterInfo]]]


def _idle(unit: SchedulingUnit, *cpus: int) -> tuple[SchedulingUnit, list[ClusterInfo]]:
    """``unit`` over cluster1, cluster2… with these millicores and 10000 bytes of memory, all of it available."""
    return unit, [_cluster(f"cluster{i}", cpu, 10000, cpu, 10000) for i, cpu in enumerate(cpus, 1)]


def _extra(resource: str, cpu: int, request: int, *clusters: tuple[int, int]) -> tuple[SchedulingUnit, list[ClusterInfo]]:
    """A unit asking for ``cpu``, 5000 bytes and ``request`` of ``resource`` over idle clusters of (cpu, resource)."""
    unit = _unit(cpu, 5000)
    unit.resource_request[resource] = request
    _, idle = _idle(unit, *(size for size, _ in clusters))
    return unit, [_with(cluster, resource, amount) for cluster, (_, amount) in zip(idle, clusters)]


def _with(cluster: ClusterInfo, resource: str, amount: int) -> ClusterInfo:
    cluster.allocatable[resource] = amount
    cluster.available[resource] = amount
    return cluster


def _nothing_requested() -> tuple[SchedulingUnit, list[ClusterInfo]]:
    return _idle(_unit(0, 0), 4000, 4000)


def _differently_sized() -> tuple[SchedulingUnit, list[ClusterInfo]]:
    return _idle(_unit(3000, 5000), 4000, 6000)


def _external_resource() -> tuple[SchedulingUnit, list[ClusterInfo]]:
    return _extra("foo.bar/any", 6000, 4000, (10000, 10000), (15000, 20000))


def _upstream(plugin: str, case: ScoreCase, want: list[int], name: str) -> Any:
    """A case of upstream's table for ``plugin``, its test and case name as the id."""
    return pytest.param(plugin, case, want, id=f"{_SCORE_TESTS[plugin]}/{name}")


@pytest.mark.parametrize(
    ("plugin", "case", "want"),
    [
        _upstream(BALANCED, _nothing_requested, [100, 100], "nothing scheduled, nothing requested"),
        _upstream(BALANCED, _differently_sized, [87, 100], "resources requested, differently sized machines"),
        _upstream(BALANCED, lambda: _extra(GPU_RESOURCE, 3000, 5000, (4000, 20000), (6000, 10000)), [79, 100],
                  "resources requested with gpu"),
        _upstream(BALANCED, _external_resource, [91, 87], "external resource fraction differs"),
        pytest.param(BALANCED, lambda: (_unit(5000, 0), [_cluster("full", 4000, 10000, 4000, 10000)]), [0],
                     id="requested >= capacity"),
        _upstream(LEAST, _nothing_requested, [100, 100], "nothing scheduled, nothing requested"),
        _upstream(LEAST, _differently_sized, [37, 50], "resources requested, differently sized machines"),
        _upstream(LEAST, lambda: _extra(GPU_RESOURCE, 3000, 5000, (4000, 10000), (6000, 10000)), [45, 50],
                  "resources requested with gpu"),
        _upstream(LEAST, lambda: _extra(GPU_RESOURCE, 6000, 4000, (10000, 10000), (15000, 6700)), [55, 45],
                  "resources requested with gpu, gpu fraction differs"),
        _upstream(LEAST, _external_resource, [50, 63], "external resource fraction differs"),
        _upstream(MOST, _nothing_requested, [0, 0], "nothing scheduled, nothing requested"),
        _upstream(MOST, _differently_sized, [62, 50], "resources requested, differently sized machines"),
        pytest.param(MOST, lambda: (_unit(3000, 5000), [_cluster("used", 4000, 10000, 1000, 5000)]), [50],
                     id="cpu over capacity scores 0, memory exactly full scores 100"),
    ],
)
def test_resource_scores(plugin: str, case: ScoreCase, want: list[int]) -> None:
    """Upstream's balanced, least and most allocated tables: one scenario, each plugin's scores."""
    unit, clusters = case()
    assert _scores(plugin, unit, clusters) == want


@pytest.mark.parametrize(
    ("scores", "reverse", "want"),
    [
        ({"a": 0, "b": 0}, False, {"a": 0, "b": 0}),
        ({"a": 0, "b": 0}, True, {"a": 100, "b": 100}),
        ({"a": 2, "b": 11, "c": 4}, False, {"a": 18, "b": 100, "c": 36}),
        ({"a": 0, "b": 1, "c": 2}, True, {"a": 100, "b": 50, "c": 0}),
    ],
)
def test_default_normalize_score(scores: dict[str, int], reverse: bool, want: dict[str, int]) -> None:
    default_normalize_score(scores, reverse)
    assert scores == want


# --------------------------------------------------------------------------- ClusterAffinity


def _req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def _terms(*terms: dict[str, Any]) -> ClusterAffinity:
    return ClusterAffinity(required=list(terms))


def _exprs(*reqs: dict[str, Any]) -> dict[str, Any]:
    return {"matchExpressions": list(reqs)}


def _name_in(name: str) -> dict[str, Any]:
    return {"matchFields": [_req("metadata.name", "In", name)]}


_AFFINITY_CASES = [
    ("no selector", {}, None, {}, "", True),
    ("missing labels", {"foo": "bar"}, None, {}, "", False),
    ("same labels", {"foo": "bar"}, None, {"foo": "bar"}, "", True),
    ("cluster labels are superset", {"foo": "bar"}, None, {"foo": "bar", "baz": "blah"}, "", True),
    ("cluster labels are subset", {"foo": "bar", "baz": "blah"}, None, {"foo": "bar"}, "", False),
    ("matchExpressions using In operator that matches the existing cluster", {},
     _terms(_exprs(_req("foo", "In", "bar", "value2"))), {"foo": "bar"}, "", True),
    ("matchExpressions using Gt operator that matches the existing cluster", {},
     _terms(_exprs(_req("kernel-version", "Gt", "0204"))), {"kernel-version": "0206"}, "", True),
    ("matchExpressions using NotIn operator that matches the existing cluster", {},
     _terms(_exprs(_req("mem-type", "NotIn", "DDR", "DDR2"))), {"mem-type": "DDR3"}, "", True),
    ("matchExpressions using Exists operator that matches the existing cluster", {},
     _terms(_exprs(_req("GPU", "Exists"))), {"GPU": "NVIDIA-GRID-K1"}, "", True),
    ("affinity that don't match cluster's labels won't schedule onto the cluster", {},
     _terms(_exprs(_req("foo", "In", "value1", "value2"))), {"foo": "bar"}, "", False),
    ("a nil []ClusterSelectorTerm in affinity won't schedule onto the cluster", {},
     ClusterAffinity(required=[]), {"foo": "bar"}, "", False),
    ("empty MatchExpressions will match no objects", {}, _terms({"matchExpressions": []}), {"foo": "bar"}, "", False),
    ("no Affinity will schedule onto a cluster", {}, None, {"foo": "bar"}, "", True),
    ("Affinity but nil NodeSelector will schedule onto a cluster", {}, ClusterAffinity(required=None),
     {"foo": "bar"}, "", True),
    ("multiple matchExpressions ANDed that matches the existing cluster", {},
     _terms(_exprs(_req("GPU", "Exists"), _req("GPU", "NotIn", "AMD", "INTEL"))), {"GPU": "NVIDIA-GRID-K1"}, "", True),
    ("multiple matchExpressions ANDed that doesn't match the existing cluster", {},
     _terms(_exprs(_req("GPU", "Exists"), _req("GPU", "In", "AMD", "INTEL"))), {"GPU": "NVIDIA-GRID-K1"}, "", False),
    ("multiple NodeSelectorTerms ORed in affinity, matches the cluster's labels", {},
     _terms(_exprs(_req("foo", "In", "bar", "value2")), _exprs(_req("diffkey", "In", "wrong", "value2"))),
     {"foo": "bar"}, "", True),
    ("an Affinity and a ClusterSelector both are satisfied", {"foo": "bar"},
     _terms(_exprs(_req("foo", "Exists"))), {"foo": "bar"}, "", True),
    ("an Affinity matches cluster's labels but the ClusterSelector is not satisfied", {"foo": "bar"},
     _terms(_exprs(_req("foo", "Exists"))), {"foo": "barrrrrr"}, "", False),
    ("an invalid value in Affinity term won't be scheduled onto the cluster", {},
     _terms(_exprs(_req("foo", "NotIn", "invalid value: ___@#$%^"))), {"foo": "bar"}, "", False),
    ("matchFields using In operator that matches the existing cluster", {}, _terms(_name_in("cluster_1")),
     {}, "cluster_1", True),
    ("matchFields using In operator that does not match the existing cluster", {}, _terms(_name_in("cluster_1")),
     {}, "cluster_2", False),
    ("two terms: matchFields does not match, but matchExpressions matches", {},
     _terms(_name_in("cluster_1"), _exprs(_req("foo", "In", "bar"))), {"foo": "bar"}, "cluster_2", True),
    ("one term: matchFields does not match, but matchExpressions matches", {},
     _terms(_name_in("cluster_1") | _exprs(_req("foo", "In", "bar"))), {"foo": "bar"}, "cluster_2", False),
    ("one term: both matchFields and matchExpressions match", {},
     _terms(_name_in("cluster_1") | _exprs(_req("foo", "In", "bar"))), {"foo": "bar"}, "cluster_1", True),
    ("two terms: both matchFields and matchExpressions do not match", {},
     _terms(_name_in("cluster_1"), _exprs(_req("foo", "In", "not-match-to-bar"))), {"foo": "bar"}, "cluster_2", False),
]


@pytest.mark.parametrize(
    ("selector", "affinity", "labels", "cluster_name", "passes"),
    [pytest.param(*case[1:], id=f"TestClusterAffinity/{case[0]}") for case in _AFFINITY_CASES],
)
def test_cluster_affinity_filter(
    selector: dict[str, str], affinity: ClusterAffinity | None, labels: dict[str, str], cluster_name: str, passes: bool
) -> None:
    unit = SchedulingUnit("su", cluster_selector=selector, cluster_affinity=affinity)
    reasons = _filter(CLUSTER_AFFINITY, unit, ClusterInfo(cluster_name or "cluster", labels=labels))
    assert (reasons == []) is passes
    if not passes:
        assert len(reasons) == 1 and reasons[0].startswith("ClusterAffinity: ")


def test_cluster_affinity_reasons_are_readable() -> None:
    unit = SchedulingUnit("su", cluster_selector={"region": "eu"})
    assert _filter(CLUSTER_AFFINITY, unit, ClusterInfo("c", labels={"region": "us"})) == [
        "ClusterAffinity: cluster labels do not match clusterSelector region=eu"
    ]
    unit = SchedulingUnit("su", cluster_affinity={"required": [_exprs(_req("tier", "In", "gold"))]})
    assert _filter(CLUSTER_AFFINITY, unit, ClusterInfo("c")) == [
        "ClusterAffinity: cluster labels do not match the required cluster affinity"
    ]


def test_cluster_affinity_accepts_upstream_json_names() -> None:
    affinity = {
        "requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [_exprs(_req("a", "Exists"))]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "preference": _exprs(_req("b", "Exists"))}],
    }
    parsed = ClusterAffinity.from_dict(affinity)
    assert parsed.required == [_exprs(_req("a", "Exists"))] and parsed.preferred[0]["weight"] == 3


_AFFINITY1 = ClusterAffinity(preferred=[{"weight": 2, "preference": _exprs(_req("foo", "In", "bar"))}])
_AFFINITY2 = ClusterAffinity(preferred=[
    {"weight": 2, "preference": _exprs(_req("foo", "In", "bar"))},
    {"weight": 4, "preference": _exprs(_req("key", "In", "value"))},
    {"weight": 5, "preference": _exprs(_req("foo", "In", "bar"), _req("key", "In", "value"), _req("az", "In", "az1"))},
])
_L1, _L2, _L3 = {"foo": "bar"}, {"key": "value"}, {"az": "az1"}
_L4, _L5 = {"abc": "az11", "def": "az22"}, {"foo": "bar", "key": "value", "az": "az1"}


@pytest.mark.parametrize(
    ("affinity", "labels", "want"),
    [
        pytest.param(None, [_L1, _L2, _L3], [0, 0, 0],
                     id="TestClusterAffinityPriority/all clusters are same priority as ClusterAffinity is nil"),
        pytest.param(_AFFINITY1, [_L4, _L2, _L3], [0, 0, 0],
                     id="TestClusterAffinityPriority/no cluster matches preferred scheduling requirements"),
        pytest.param(_AFFINITY1, [_L1, _L2, _L3], [100, 0, 0],
                     id="TestClusterAffinityPriority/only cluster1 matches the preferred scheduling requirements"),
        pytest.param(_AFFINITY2, [_L1, _L5, _L2], [18, 100, 36],
                     id="TestClusterAffinityPriority/all machines match with different priorities"),
    ],
)
def test_cluster_affinity_score(affinity: ClusterAffinity | None, labels: list[dict], want: list[int]) -> None:
    clusters = [ClusterInfo(f"cluster{i}", labels=l) for i, l in enumerate(labels)]
    assert _scores(CLUSTER_AFFINITY, SchedulingUnit("su", cluster_affinity=affinity), clusters) == want


# --------------------------------------------------------------------------- PlacementFilter


@pytest.mark.parametrize(
    ("placements", "passes"),
    [
        pytest.param({}, True, id="TestPlacementFilterPlugin/not filtered when clusterNames is empty"),
        pytest.param({"cluster2": Placement(), "cluster3": Placement()}, False,
                     id="TestPlacementFilterPlugin/filtered when name not in clusterNames"),
        pytest.param({"cluster1": Placement(), "cluster2": Placement()}, True,
                     id="TestPlacementFilterPlugin/not filtered when name in clusterNames"),
        pytest.param({"cluster1": {"weight": 2}}, True, id="placement given as a dict"),
        pytest.param({"cluster1": ClusterPreference(weight=1)}, True, id="placement given as a planner preference"),
    ],
)
def test_placement_filter(placements: dict[str, Any], passes: bool) -> None:
    reasons = _filter(PLACEMENT_FILTER, SchedulingUnit("su", placements=placements), ClusterInfo("cluster1"))
    assert reasons == ([] if passes else ["PlacementFilter: cluster is not in the placement list"])


# --------------------------------------------------------------------------- ClusterReady (+ cordon)


@pytest.mark.parametrize(
    ("ready", "cordoned", "current", "avoid_migration", "reason"),
    [
        pytest.param(True, False, {}, True, None, id="ready cluster passes"),
        pytest.param(False, False, {}, True, "cluster is not ready", id="unready cluster is filtered"),
        pytest.param(False, False, {"c": 3}, True, None, id="unready cluster already scheduled to is kept (upstream)"),
        pytest.param(True, True, {}, True, "cluster is cordoned", id="cordoned cluster gets no new workload"),
        pytest.param(True, True, {"c": 3}, True, None, id="cordoned cluster keeps its replicas when avoiding migration"),
        pytest.param(True, True, {"c": 3}, False,
                     "cluster is cordoned; its replicas are migrated away (avoid_migration is off)",
                     id="cordoned cluster is drained when migration is allowed"),
        pytest.param(True, True, {"c": 0}, True, "cluster is cordoned", id="zero current replicas is not scheduled"),
    ],
)
def test_cluster_ready_filter(ready: bool, cordoned: bool, current: dict, avoid_migration: bool, reason: str | None) -> None:
    unit = SchedulingUnit("su", current_clusters=current, avoid_migration=avoid_migration)
    reasons = _filter(CLUSTER_READY, unit, ClusterInfo("c", ready=ready, cordoned=cordoned))
    assert reasons == ([] if reason is None else [f"ClusterReady: {reason}"])


# --------------------------------------------------------------------------- MaxCluster


def _select(max_clusters: int | None, scores: dict[str, int]) -> list[str]:
    ctx = SimpleNamespace(unit=SimpleNamespace(max_clusters=max_clusters))
    selected, _ = select_max_cluster(ctx, list(scores), scores)  # type: ignore[arg-type]
    return selected


@pytest.mark.parametrize(
    ("max_clusters", "scores", "want"),
    [
        pytest.param(None, {"foo": 1}, ["foo"], id="TestMaxClusterSelectClusters/1 cluster, nil max clusters"),
        pytest.param(None, {"foo": 1, "fun": 2}, ["fun", "foo"], id="TestMaxClusterSelectClusters/2 clusters"),
        pytest.param(3, {"foo": 1, "fun": 2}, ["fun", "foo"], id="TestMaxClusterSelectClusters/2 clusters, 3 max clusters"),
        pytest.param(1, {"foo": 1, "fun": 2}, ["fun"], id="TestMaxClusterSelectClusters/2 clusters, 1 max cluster"),
        pytest.param(0, {"foo": 1}, [], id="TestMaxClusterSelectClusters/1 cluster, 0 max clusters"),
        pytest.param(2, {"c": 5, "b": 5, "a": 5}, ["a", "b"], id="ties are broken by name"),
    ],
)
def test_max_cluster(max_clusters: int | None, scores: dict[str, int], want: list[str]) -> None:
    assert _select(max_clusters, scores) == want


def test_max_cluster_rejects_negative() -> None:
    """TestMaxClusterSelectClusters/cluster with invalid max clusters."""
    with pytest.raises(ValueError, match="max clusters is less than 0"):
        _select(-1, {"foo": 1})


# --------------------------------------------------------------------------- end to end

_BIG = {"cpu": 100_000, "memory": 400 * GiB}


def _fleet(*names: str, **kwargs: Any) -> list[ClusterInfo]:
    return [ClusterInfo(n, allocatable=dict(_BIG), available=dict(_BIG), **kwargs) for n in names]


def _talk_unit(desired: int, **kwargs: Any) -> SchedulingUnit:
    kwargs.setdefault("avoid_migration", True)
    return SchedulingUnit(
        "web", "default", desired_replicas=desired, resource_request={"cpu": 100, "memory": 2**20},
        current_clusters={"A": 15, "B": 15, "C": 0}, **kwargs,
    )


@pytest.mark.parametrize("placements", [
    pytest.param({n: Placement(weight=1) for n in "ABC"}, id="static equal weights"),
    pytest.param({}, id="dynamic weights of equal clusters"),
])
def test_talk_example_scale_down_only_stops(placements: dict) -> None:
    """30 → 15 with [15, 15, 0]: weighted says [5, 5, 5]; without migration only stops happen.

    Which of A/B keeps the odd replica is the planner's hash tie-break over
    cluster name and the unit key ``default/web``.
    """
    result = schedule(_talk_unit(15, placements=placements), _fleet("A", "B", "C"))
    assert result.error is None
    assert result.clusters == {"A": 8, "B": 7}  # C planned at 0 is dropped, as upstream
    assert "C: 0 replicas (dropped from the placement)" in "\n".join(result.explanation)


@pytest.mark.parametrize("placements", [{n: Placement(weight=1) for n in "ABC"}, {}])
def test_talk_example_scale_up_only_starts(placements: dict) -> None:
    result = schedule(_talk_unit(36, placements=placements), _fleet("A", "B", "C"))
    assert result.clusters == {"A": 15, "B": 15, "C": 6}


def test_talk_example_without_avoid_migration_rebalances() -> None:
    unit = _talk_unit(15, placements={n: Placement(weight=1) for n in "ABC"}, avoid_migration=False)
    result = schedule(unit, _fleet("A", "B", "C"))
    assert result.clusters == {"A": 5, "B": 5, "C": 5}


def test_dynamic_weights_follow_free_capacity() -> None:
    """300 replicas over 5 clusters: weights are per-mille shares of free CPU cores."""
    free_cores = {"c1": 10, "c2": 20, "c3": 30, "c4": 40, "c5": 50}
    clusters = [
        ClusterInfo(name, allocatable={"cpu": 5000 * cores, "memory": 100 * GiB},
                    available={"cpu": 1000 * cores, "memory": 80 * GiB}, api_resources=frozenset({"apps/v1/Deployment"}))
        for name, cores in free_cores.items()
    ]
    unit = SchedulingUnit("batch", "jobs", desired_replicas=300, resource_request={"cpu": 100, "memory": 64 * 2**20})
    result = schedule(unit, clusters)
    assert result.weights_source == "dynamic"
    assert result.weights == {"c1": 67, "c2": 133, "c3": 200, "c4": 267, "c5": 333}
    assert result.clusters == {"c5": 100, "c4": 81, "c3": 60, "c2": 40, "c1": 19}
    assert sum(result.clusters.values()) == 300 and result.unplaced == 0
    for name, replicas in result.clusters.items():
        assert abs(replicas - 300 * result.weights[name] / 1000) <= 1.5


def test_dynamic_weights_use_gpus_for_gpu_workloads() -> None:
    clusters = [
        ClusterInfo("cpu-rich", allocatable={"cpu": 400_000, GPU_RESOURCE: 8}, available={"cpu": 400_000, GPU_RESOURCE: 2}),
        ClusterInfo("gpu-rich", allocatable={"cpu": 100_000, GPU_RESOURCE: 8}, available={"cpu": 100_000, GPU_RESOURCE: 6}),
    ]
    unit = SchedulingUnit("train", desired_replicas=4, resource_request={GPU_RESOURCE: 1})
    result = schedule(unit, clusters)
    # free GPUs 2 : 6 would be 250 : 750, but gpu-rich is capped at 1.4 x its 50% size share (700)
    assert result.weights == {"cpu-rich": 263, "gpu-rich": 737}
    assert result.clusters == {"gpu-rich": 3, "cpu-rich": 1}


def test_profile_without_dynamic_weights_splits_equally() -> None:
    clusters = [ClusterInfo("a", allocatable={"cpu": 9000}, available={"cpu": 9000}),
                ClusterInfo("b", allocatable={"cpu": 1000}, available={"cpu": 1000})]
    profile = DEFAULT_PROFILE.derive("equal", dynamic_weights=False)
    result = schedule(SchedulingUnit("u", desired_replicas=10), clusters, profile)
    assert result.weights_source == "equal" and result.clusters == {"a": 5, "b": 5}


def test_static_weights_with_min_and_max() -> None:
    placements = {"a": Placement(weight=1, max_replicas=2), "b": Placement(weight=1, min_replicas=6), "c": Placement(weight=2)}
    result = schedule(SchedulingUnit("u", desired_replicas=12, avoid_migration=False, placements=placements),
                      _fleet("a", "b", "c", "d"))
    assert result.weights_source == "static"
    assert "d" in result.filtered and result.filtered["d"] == ["PlacementFilter: cluster is not in the placement list"]
    assert result.clusters["a"] <= 2 and result.clusters["b"] >= 6
    assert sum(result.clusters.values()) == 12


def test_filtering_gives_readable_reasons_for_every_failing_plugin() -> None:
    clusters = [
        ClusterInfo("ok", labels={"region": "eu"}),
        ClusterInfo("gpu-only", labels={"region": "eu"}, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        ClusterInfo("us", labels={"region": "us"}),
        ClusterInfo("broken", labels={"region": "us"}, ready=False,
                    taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        ClusterInfo("tolerated", labels={"region": "eu"}, taints=[{"key": "team", "value": "web", "effect": "NoSchedule"}]),
    ]
    unit = SchedulingUnit(
        "web", desired_replicas=4, cluster_selector={"region": "eu"},
        tolerations=[{"key": "team", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
    )
    result = schedule(unit, clusters)
    assert result.filtered == {
        "gpu-only": ["TaintToleration: untolerated taint dedicated=gpu:NoSchedule"],
        "us": ["ClusterAffinity: cluster labels do not match clusterSelector region=eu"],
        "broken": [
            "ClusterReady: cluster is not ready",
            "TaintToleration: untolerated taint dedicated=gpu:NoSchedule",
            "ClusterAffinity: cluster labels do not match clusterSelector region=eu",
        ],
    }
    assert result.feasible == ["ok", "tolerated"]
    assert sum(result.clusters.values()) == 4 and set(result.clusters) == {"ok", "tolerated"}


def test_prefer_no_schedule_and_preferred_affinity_steer_selection() -> None:
    clusters = [
        ClusterInfo("a", labels={"zone": "1"}, taints=[{"key": "spot", "effect": "PreferNoSchedule"}]),
        ClusterInfo("b", labels={"zone": "2"}),
        ClusterInfo("c", labels={"zone": "1"}),
    ]
    affinity = {"preferred": [{"weight": 10, "preference": _exprs(_req("zone", "In", "1"))}]}
    result = schedule(SchedulingUnit("u", desired_replicas=2, max_clusters=1, cluster_affinity=affinity), clusters)
    assert result.scores["a"][TAINT_TOLERATION] == 0 and result.scores["c"][TAINT_TOLERATION] == 100
    assert result.scores["b"][CLUSTER_AFFINITY] == 0 and result.scores["c"][CLUSTER_AFFINITY] == 100
    assert result.selected == ["c"] and result.clusters == {"c": 2}
    assert set(result.not_selected) == {"a", "b"}
    assert result.not_selected["a"].startswith("MaxCluster: not among the top 1 clusters (score")


def test_max_clusters_keeps_the_best_and_explains_the_cut() -> None:
    clusters = [ClusterInfo(n, allocatable={"cpu": 10_000, "memory": 10 * GiB},
                            available={"cpu": free, "memory": 10 * GiB})
                for n, free in (("small", 2_000), ("large", 9_000), ("medium", 5_000))]
    result = schedule(SchedulingUnit("u", desired_replicas=6, max_clusters=2, resource_request={"cpu": 500}), clusters)
    assert result.selected == ["large", "medium"]
    assert list(result.not_selected) == ["small"]
    assert set(result.clusters) <= {"large", "medium"} and sum(result.clusters.values()) == 6


def test_most_allocated_profile_bin_packs() -> None:
    clusters = [ClusterInfo(n, allocatable={"cpu": 10_000, "memory": 10 * GiB},
                            available={"cpu": free, "memory": 5 * GiB})
                for n, free in (("busy", 3_000), ("idle", 9_000))]
    profile = DEFAULT_PROFILE.derive(
        "binpack",
        disabled={"scores": [CLUSTER_RESOURCES_LEAST_ALLOCATED]},
        enabled={"scores": [CLUSTER_RESOURCES_MOST_ALLOCATED]},
    )
    unit = SchedulingUnit("u", desired_replicas=1, max_clusters=1, resource_request={"cpu": 500})
    assert schedule(unit, clusters).selected == ["idle"]
    assert schedule(unit, clusters, profile).selected == ["busy"]


def test_duplicate_mode_copies_everywhere() -> None:
    clusters = _fleet("a", "b", "c") + [ClusterInfo("down", ready=False)]
    for unit in (SchedulingUnit("cm", gvk="v1/ConfigMap", scheduling_mode="Duplicate", desired_replicas=3),
                 SchedulingUnit("cm", gvk="v1/ConfigMap")):  # no replicas: Duplicate whatever the mode
        result = schedule(unit, clusters)
        assert result.clusters == {"a": None, "b": None, "c": None}
        assert result.weights == {} and result.weights_source is None


def test_duplicate_mode_respects_max_clusters() -> None:
    result = schedule(SchedulingUnit("cm", scheduling_mode="Duplicate", max_clusters=2), _fleet("c", "a", "b"))
    assert result.clusters == {"a": None, "b": None}


def test_sticky_cluster_keeps_current_placement() -> None:
    """Upstream TestSchedulingWithStickyCluster."""
    clusters = _fleet("cluster1", "cluster2")
    first = schedule(SchedulingUnit("su", desired_replicas=10, sticky_cluster=True), clusters)
    assert set(first.clusters) == {"cluster1", "cluster2"} and not first.sticky
    again = schedule(SchedulingUnit("su", desired_replicas=10, sticky_cluster=True,
                                    current_clusters={"cluster1": 60}), clusters)
    assert again.sticky and again.clusters == {"cluster1": 60}
    assert any("cluster2: not considered" in line for line in again.explanation)


def test_cordoned_cluster_keeps_but_never_grows_when_avoiding_migration() -> None:
    clusters = _fleet("a", "b")
    clusters[0].cordoned = True
    unit = SchedulingUnit("u", desired_replicas=20, placements={"a": Placement(weight=1), "b": Placement(weight=1)},
                          current_clusters={"a": 4, "b": 4})
    result = schedule(unit, clusters)
    assert result.clusters == {"a": 4, "b": 16}
    assert "cordoned: no new replicas, at most the 4 it runs" in "\n".join(result.explanation)


def test_cordoned_cluster_drains_when_migration_is_allowed() -> None:
    clusters = _fleet("a", "b")
    clusters[0].cordoned = True
    unit = SchedulingUnit("u", desired_replicas=8, avoid_migration=False, current_clusters={"a": 4, "b": 4})
    result = schedule(unit, clusters)
    assert result.clusters == {"b": 8}
    assert result.filtered["a"][0].startswith("ClusterReady: cluster is cordoned")


def test_untolerated_no_schedule_taint_caps_a_running_cluster() -> None:
    """Upstream rsp: a tainted cluster the unit already uses gets no new replicas."""
    clusters = _fleet("a", "b")
    clusters[0].taints = [{"key": "maintenance", "effect": "NoSchedule"}]
    unit = SchedulingUnit("u", desired_replicas=10, current_clusters={"a": 3, "b": 3})
    result = schedule(unit, clusters)
    assert result.clusters["a"] <= 3 and sum(result.clusters.values()) == 10


def test_cluster_info_current_replicas_is_used_when_the_unit_does_not_say() -> None:
    clusters = _fleet("a", "b")
    clusters[0].current_replicas = 5
    result = schedule(SchedulingUnit("u", desired_replicas=5, sticky_cluster=True), clusters)
    assert result.sticky and result.clusters == {"a": 5}


def test_estimated_capacity_limits_replicas_and_reports_overflow() -> None:
    clusters = [
        ClusterInfo("tight", allocatable={"cpu": 4000}, available={"cpu": 1000}),
        ClusterInfo("roomy", allocatable={"cpu": 4000}, available={"cpu": 1000}),
    ]
    unit = SchedulingUnit("u", desired_replicas=30, resource_request={"cpu": 100},
                          placements={"tight": Placement(weight=1), "roomy": Placement(weight=1)})
    result = schedule(unit, clusters)
    assert result.estimated_capacity == {"tight": 10, "roomy": 10}
    assert result.clusters == {"tight": 10, "roomy": 10}
    assert result.unplaced == 10 and sum(result.overflow.values()) == 10
    no_estimate = DEFAULT_PROFILE.derive("no-estimate", estimate_capacity=False)
    assert schedule(unit, clusters, no_estimate).clusters == {"tight": 15, "roomy": 15}


def test_zero_replicas_places_nothing() -> None:
    result = schedule(SchedulingUnit("u", desired_replicas=0), _fleet("a"))
    assert result.clusters == {} and result.selected == ["a"]


def test_no_feasible_cluster() -> None:
    result = schedule(SchedulingUnit("u", desired_replicas=3), [ClusterInfo("a", ready=False)])
    assert result.clusters == {} and result.feasible == []
    assert result.explanation[-1] == "Result: no cluster."


def test_explanation_names_every_cluster_step_by_step() -> None:
    clusters = _fleet("alpha", "beta", "gamma", "delta", "epsilon")
    clusters[1].ready = False
    clusters[2].labels = {"tier": "gold"}
    unit = SchedulingUnit("web", "shop", desired_replicas=7, max_clusters=2,
                          cluster_affinity={"preferred": [{"weight": 50, "preference": _exprs(_req("tier", "In", "gold"))}]})
    result = schedule(unit, clusters)
    text = "\n".join(result.explanation)
    for cluster in clusters:
        assert cluster.name in text
    order = [text.index(word) for word in ("Filter", "Score", "Select", "Replicas", "Result")]
    assert order == sorted(order)
    assert "beta: filtered out: ClusterReady: cluster is not ready" in text
    assert "gamma" in result.clusters


def test_unit_errors_are_reported_not_raised() -> None:
    clusters = _fleet("a", "b")
    bad_max = schedule(SchedulingUnit("u", desired_replicas=2, max_clusters=-1), clusters)
    assert bad_max.clusters == {} and bad_max.error == "MaxCluster: max clusters is less than 0"
    bad_pref = schedule(SchedulingUnit("u", cluster_affinity={"preferred": [
        {"weight": 1, "preference": _exprs(_req("a", "Gt", "x"))}]}), clusters)
    assert bad_pref.error and bad_pref.error.startswith("ClusterAffinity: preferred[0]")
    assert all(name in "\n".join(bad_pref.explanation) for name in ("a", "b"))
    assert schedule(SchedulingUnit("u"), clusters, "nope").error == "unknown scheduling profile 'nope'"
    with pytest.raises(ValueError, match="unique"):
        schedule(SchedulingUnit("u"), _fleet("a", "a"))


def test_result_to_dict_is_json_ready() -> None:
    import json

    result = schedule(_talk_unit(15), _fleet("A", "B", "C"))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["clusters"] == {"A": 8, "B": 7} and data["weights_source"] == "dynamic"


def test_schedule_over_500_clusters() -> None:
    clusters = [
        ClusterInfo(f"c{i:03d}", labels={"zone": str(i % 5)}, api_resources=frozenset({"apps/v1/Deployment"}),
                    allocatable={"cpu": 64_000 + 1000 * (i % 7), "memory": 256 * GiB},
                    available={"cpu": 8_000 + 3000 * (i % 11), "memory": 100 * GiB},
                    taints=[{"key": "spot", "effect": "PreferNoSchedule"}] if i % 3 == 0 else [])
        for i in range(500)
    ]
    unit = SchedulingUnit("big", "prod", desired_replicas=5000, resource_request={"cpu": 250, "memory": GiB},
                          cluster_affinity={"preferred": [{"weight": 5, "preference": _exprs(_req("zone", "In", "1"))}]})
    result = schedule(unit, clusters)
    assert result.error is None and sum(result.clusters.values()) == 5000
    assert len(result.feasible) == 500


# --------------------------------------------------------------------------- profiles


def test_default_profile_matches_upstream_plus_cluster_ready() -> None:
    assert DEFAULT_PROFILE.filters == (CLUSTER_READY, API_RESOURCES, TAINT_TOLERATION, CLUSTER_RESOURCES_FIT,
                                       PLACEMENT_FILTER, CLUSTER_AFFINITY)
    assert DEFAULT_PROFILE.scores == (TAINT_TOLERATION, CLUSTER_RESOURCES_BALANCED_ALLOCATION,
                                      CLUSTER_RESOURCES_LEAST_ALLOCATED, CLUSTER_AFFINITY)
    assert DEFAULT_PROFILE.select == (MAX_CLUSTER,)
    assert CLUSTER_RESOURCES_MOST_ALLOCATED not in DEFAULT_PROFILE.scores


def test_profile_derive_reconciles_like_upstream() -> None:
    derived = DEFAULT_PROFILE.derive("mine", enabled={"filters": [CLUSTER_READY]}, disabled={"filters": ["*"]})
    assert derived.filters == (CLUSTER_READY,) and derived.scores == DEFAULT_PROFILE.scores
    with pytest.raises(ValueError, match="unknown filters plugin"):
        Profile("bad", filters=("Nope",))
    with pytest.raises(ValueError, match="listed twice"):
        Profile("bad", scores=(CLUSTER_AFFINITY, CLUSTER_AFFINITY))


def test_score_weights_multiply_plugin_scores() -> None:
    clusters = [ClusterInfo("a", labels={"x": "1"}), ClusterInfo("b")]
    unit = SchedulingUnit("u", cluster_affinity={"preferred": [{"weight": 1, "preference": _exprs(_req("x", "Exists"))}]})
    profile = Profile("w", scores=(CLUSTER_AFFINITY,), weights={CLUSTER_AFFINITY: 3})
    assert schedule(unit, clusters, profile).total_scores == {"a": 300, "b": 0}


# --------------------------------------------------------------------------- validation


def test_valid_unit_has_no_errors() -> None:
    unit = SchedulingUnit(
        "web", "shop", desired_replicas=3, resource_request={"cpu": 100}, cluster_selector={"region": "eu"},
        cluster_affinity={"required": [_exprs(_req("tier", "In", "gold"))],
                          "preferred": [{"weight": 5, "preference": _exprs(_req("zone", "Exists"))}]},
        tolerations=[{"key": "team", "operator": "Exists", "effect": "NoSchedule"}],
        placements={"a": Placement(weight=1, min_replicas=1, max_replicas=2)},
    )
    assert validate_unit(unit, profile="default") == {}


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"name": ""}, "name", "must not be empty"),
        ({"gvk": "Deployment"}, "gvk", "invalid GVK"),
        ({"scheduling_mode": "Spread"}, "scheduling_mode", "must be one of"),
        ({"desired_replicas": -1}, "desired_replicas", "must not be negative"),
        ({"resource_request": {"cpu": -5}}, "resource_request.cpu", "non-negative"),
        ({"cluster_selector": {"bad key!": "x"}}, "cluster_selector", "'bad key!'"),
        ({"cluster_affinity": {"required": [_exprs(_req("k", "Sometimes", "x"))]}}, "cluster_affinity.required[0]",
         "not a valid cluster selector operator"),
        ({"cluster_affinity": {"required": []}}, "cluster_affinity.required", "matches no cluster"),
        ({"cluster_affinity": {"required": [{}]}}, "cluster_affinity.required[0]", "matchExpressions or matchFields"),
        ({"cluster_affinity": {"preferred": [{"weight": 0, "preference": _exprs(_req("k", "Exists"))}]}},
         "cluster_affinity.preferred[0]", "from 1 to 100"),
        ({"cluster_affinity": {"preferred": [{"weight": 5, "preference": _exprs(_req("k", "Lt", "a"))}]}},
         "cluster_affinity.preferred[0]", "integer"),
        ({"tolerations": [{"key": "k", "operator": "Maybe"}]}, "tolerations[0]", "not Equal or Exists"),
        ({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}, "tolerations[0]", "must be empty"),
        ({"tolerations": [{"key": "k", "effect": "Sometimes"}]}, "tolerations[0]", "effect"),
        ({"max_clusters": -1}, "max_clusters", "must not be negative"),
        ({"placements": {"a": Placement(min_replicas=5, max_replicas=2)}}, "placements.a", "exceeds max_replicas"),
        ({"placements": {"a": {"weight": -1}}}, "placements.a", "weight must not be negative"),
        ({"current_clusters": {"a": -2}}, "current_clusters.a", "must not be negative"),
    ],
)
def test_validate_unit_reports_fields(changes: dict[str, Any], field: str, message: str) -> None:
    unit = SchedulingUnit("web", desired_replicas=1)
    for key, value in changes.items():
        setattr(unit, key, value)
    errors = validate_unit(unit)
    assert field in errors and message in errors[field]


def test_validate_unit_checks_the_profile_name() -> None:
    unit = SchedulingUnit("web")
    assert validate_unit(unit, profile="fancy") == {"profile": "unknown scheduling profile 'fancy'"}
    assert validate_unit(unit, profile="fancy", known_profiles={"fancy", "default"}) == {}


def test_parse_resources() -> None:
    assert parse_resources({"cpu": "1500m", "memory": "2Gi", GPU_RESOURCE: "2"}) == {
        "cpu": 1500, "memory": 2 * GiB, GPU_RESOURCE: 2,
    }
