"""Plugin argument defaulting and validation against upstream's validation tables.

Ported from ``pkg/scheduler/apis/config/validation/validation_pluginargs_test.go``:
TestValidateInterPodAffinityArgs, TestValidateNodeResourcesBalancedAllocationArgs,
TestValidateNodeAffinityArgs, TestValidateFitArgs, TestValidateLeastAllocatedScoringStrategy,
TestValidateMostAllocatedScoringStrategy, TestValidateRequestedToCapacityRatioScoringStrategy.
Invalid args raise ``ValueError`` (an ``ArgsError`` listing each field error) from both contract
functions; the tables compare the failing field paths, as upstream compares type and field.

Skipped, with why:

* TestValidateFitArgs "ScoringStrategy: field is required": in v1 JSON an absent scoringStrategy is
  defaulted (LeastAllocated over cpu and memory), so the internal-config nil cannot be expressed.
* TestValidateDefaultPreemptionArgs, TestValidatePodTopologySpreadArgs, TestValidateVolumeBindingArgs,
  TestValidateDynamicResourcesArgs: plugins outside the five this module implements.

Message wording: ``IgnoredResources: too long value`` is checked on "name part must be no more than
63", because ``kube.labels`` (the project's apimachinery port) says "bytes" where that table says
"characters".
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.framework import PLUGINS, filter_nodes, score_nodes
from scheduling.status import ArgsError

POD: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": []}}


def validate(plugin: str, args: dict[str, Any] | None) -> list[str]:
    """The failing field paths, or [] when the args are accepted (both contract functions agree)."""
    try:
        filter_nodes(plugin, POD, [], [], args)
    except ArgsError as exc:
        with pytest.raises(ArgsError) as again:
            score_nodes(plugin, POD, [], [], args)
        assert again.value.fields == exc.fields
        return exc.fields
    score_nodes(plugin, POD, [], [], args)
    return []


def message(plugin: str, args: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as excinfo:
        filter_nodes(plugin, POD, [], [], args)
    return str(excinfo.value)


INTER_POD = [
    ("valid args", {"hardPodAffinityWeight": 10}, []),
    ("hardPodAffinityWeight less than min", {"hardPodAffinityWeight": -1}, ["hardPodAffinityWeight"]),
    ("hardPodAffinityWeight more than max", {"hardPodAffinityWeight": 101}, ["hardPodAffinityWeight"]),
]


@pytest.mark.parametrize(("args", "want"), [pytest.param(*c[1:], id=c[0]) for c in INTER_POD])
def test_validate_inter_pod_affinity_args(args: dict[str, Any], want: list[str]) -> None:
    assert validate("InterPodAffinity", args) == want


BALANCED = [
    ("valid config", {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}, []),
    ("invalid config", {"resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]}, ["resources[0].weight"]),
    ("repeated resources", {"resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}]}, ["resources[1].name"]),
]


@pytest.mark.parametrize(("args", "want"), [pytest.param(*c[1:], id=c[0]) for c in BALANCED])
def test_validate_node_resources_balanced_allocation_args(args: dict[str, Any], want: list[str]) -> None:
    assert validate("NodeResourcesBalancedAllocation", args) == want


def _added(key: str, name_values: list[str]) -> dict[str, Any]:
    return {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": ["label-1-val"]}]}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": name_values}]}}
            ],
        }
    }


NODE_AFFINITY = [
    ("empty", None, []),
    ("valid added affinity", _added("label-1", ["node-1"]), []),
    ("invalid added affinity", _added("invalid/label/key", ["node-1", "node-2"]), [
        "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key",
        "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values",
    ]),
]


@pytest.mark.parametrize(("args", "want"), [pytest.param(*c[1:], id=c[0]) for c in NODE_AFFINITY])
def test_validate_node_affinity_args(args: dict[str, Any] | None, want: list[str]) -> None:
    assert validate("NodeAffinity", args) == want


DEFAULT_STRATEGY = {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
FIT = [
    ("IgnoredResources: too long value", {"ignoredResources": ["longvalue" + "a" * 64], "scoringStrategy": DEFAULT_STRATEGY}, "name part must be no more than 63"),
    ("IgnoredResources: name is empty", {"ignoredResources": ["example.com/"], "scoringStrategy": DEFAULT_STRATEGY}, "name part must be non-empty"),
    ("IgnoredResources: name has too many slash", {"ignoredResources": ["example.com/aaa/bbb"], "scoringStrategy": DEFAULT_STRATEGY}, "a qualified name must consist of alphanumeric characters"),
    ("IgnoredResources: valid args", {"ignoredResources": ["example.com"], "scoringStrategy": DEFAULT_STRATEGY}, None),
    ("IgnoredResourceGroups: valid args ", {"ignoredResourceGroups": ["example.com"], "scoringStrategy": DEFAULT_STRATEGY}, None),
    ("IgnoredResourceGroups: illegal args", {"ignoredResourceGroups": ["example.com/"], "scoringStrategy": DEFAULT_STRATEGY}, "name part must be non-empty"),
    ("IgnoredResourceGroups: name is too long", {"ignoredResourceGroups": ["a" * 64], "scoringStrategy": DEFAULT_STRATEGY}, "name part must be no more than 63"),
    ("IgnoredResourceGroups: name cannot be contain slash", {"ignoredResourceGroups": ["example.com/aa"], "scoringStrategy": DEFAULT_STRATEGY}, "resource group name can't contain '/'"),
    ("ScoringStrategy: type is unsupported", {"scoringStrategy": {"type": "Invalid"}}, 'Unsupported value: "Invalid"'),
]


@pytest.mark.parametrize(("args", "expect"), [pytest.param(*c[1:], id=c[0]) for c in FIT])
def test_validate_fit_args(args: dict[str, Any], expect: str | None) -> None:
    if expect is None:
        assert validate("NodeResourcesFit", args) == []
    else:
        assert expect in message("NodeResourcesFit", args)


WEIGHTS = [
    ("default config", None, []),
    ("multi valid resources", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 10}], []),
    ("weight less than min", [{"name": "cpu", "weight": 0}], ["scoringStrategy.resources[0].weight"]),
    ("weight greater than max", [{"name": "cpu", "weight": 101}], ["scoringStrategy.resources[0].weight"]),
    ("multi invalid resources", [{"name": "cpu", "weight": 0}, {"name": "memory", "weight": 101}],
     ["scoringStrategy.resources[0].weight", "scoringStrategy.resources[1].weight"]),
]


@pytest.mark.parametrize("kind", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize(("resources", "want"), [pytest.param(*c[1:], id=c[0]) for c in WEIGHTS])
def test_validate_least_and_most_allocated_scoring_strategy(kind: str, resources: Any, want: list[str]) -> None:
    strategy: dict[str, Any] = {"type": kind}
    if resources is not None:
        strategy["resources"] = resources
    assert validate("NodeResourcesFit", {"scoringStrategy": strategy}) == want


def _shape(*points: tuple[int, int]) -> list[dict[str, int]]:
    return [{"utilization": u, "score": s} for u, s in points]


RTCR = [
    ("no shapes", None, None, ["scoringStrategy.shape"]),
    ("weight greater than max", [{"name": "cpu", "weight": 101}], _shape((30, 3)), ["scoringStrategy.resources[0].weight"]),
    ("weight less than min", [{"name": "cpu", "weight": 0}], _shape((30, 3)), ["scoringStrategy.resources[0].weight"]),
    ("valid shapes", None, _shape((30, 3)), []),
    ("utilization less than min", None, _shape((-1, 3)), ["scoringStrategy.shape[0].utilization"]),
    ("utilization greater than max", None, _shape((101, 3)), ["scoringStrategy.shape[0].utilization"]),
    ("duplicated utilization values", None, _shape((10, 3), (10, 3)), ["scoringStrategy.shape[1].utilization"]),
    ("increasing utilization values", None, _shape((10, 3), (20, 3), (30, 3)), []),
    ("non-increasing utilization values", None, _shape((10, 3), (20, 3), (15, 3)), ["scoringStrategy.shape[2].utilization"]),
    ("score less than min", None, _shape((10, -1)), ["scoringStrategy.shape[0].score"]),
    ("score greater than max", None, _shape((10, 11)), ["scoringStrategy.shape[0].score"]),
]


@pytest.mark.parametrize(("resources", "shape", "want"), [pytest.param(*c[1:], id=c[0]) for c in RTCR])
def test_validate_requested_to_capacity_ratio_scoring_strategy(resources: Any, shape: Any, want: list[str]) -> None:
    strategy: dict[str, Any] = {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": shape}}
    if resources is not None:
        strategy["resources"] = resources
    assert validate("NodeResourcesFit", {"scoringStrategy": strategy}) == want


# ------------------------------------------------------------------------ Meridian's own rules


def test_unknown_plugin_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown scheduling plugin"):
        filter_nodes("NoSuchPlugin", POD, [], [])


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_unknown_fields_are_refused(plugin: str) -> None:
    with pytest.raises(ValueError, match='unknown field "bogus"'):
        score_nodes(plugin, POD, [], [], {"bogus": 1})


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_none_and_empty_args_take_every_default(plugin: str) -> None:
    assert validate(plugin, None) == []
    assert validate(plugin, {}) == []


def test_requested_to_capacity_ratio_without_shape_is_refused() -> None:
    assert validate("NodeResourcesFit", {"scoringStrategy": {"type": "RequestedToCapacityRatio"}}) == ["scoringStrategy.requestedToCapacityRatio"]


def test_scoring_strategy_without_type_defaults_to_least_allocated() -> None:
    assert validate("NodeResourcesFit", {"scoringStrategy": {"resources": [{"name": "cpu"}]}}) == []


@pytest.mark.parametrize(
    ("plugin", "args", "want"),
    [
        ("WaterLevelStackSpread", {"threshold": 1.5}, ["threshold"]),
        ("WaterLevelStackSpread", {"resources": [{"name": "cpu", "weight": 0}]}, ["resources[0].weight"]),
        ("ExtendedBalancedAllocation", {"resources": [{"name": "nvidia.com/gpu", "weight": 101}]}, ["resources[0].weight"]),
        ("MostAvailable", {"resources": [{"name": "cpu", "weight": -1}]}, ["resources[0].weight"]),
    ],
)
def test_meridian_plugin_args_are_validated(plugin: str, args: dict[str, Any], want: list[str]) -> None:
    assert validate(plugin, args) == want
