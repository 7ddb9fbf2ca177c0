"""Plugin arguments in KubeSchedulerConfiguration (v1) JSON casing: defaults, then validation.

``None`` means every default.  A partial mapping takes the v1 default for each *absent* field
(``hardPodAffinityWeight`` 1; NodeResourcesFit ``LeastAllocated`` over cpu and memory with weight
1; BalancedAllocation over cpu and memory); a value that is present is used as given, 0 and ``[]``
included, so upstream's validation tables (written against the internal config types) apply
unchanged.  Validation is ``pkg/scheduler/apis/config/validation/validation_pluginargs.go`` with its
field paths, raised as :class:`~scheduling.status.ArgsError` (a ``ValueError``).

Deliberate differences from upstream v1, all about input upstream cannot even express or crashes on:

* a ``scoringStrategy`` without ``type`` defaults to ``LeastAllocated`` (v1 leaves it empty and
  validation refuses it);
* ``type: RequestedToCapacityRatio`` without ``requestedToCapacityRatio`` is refused with a
  ``Required`` error at ``scoringStrategy.requestedToCapacityRatio`` (upstream dereferences nil);
* unknown fields are refused, as strict decoding of a scheduler configuration does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.labels import validate_label_key
from kube.nodeaffinity import NodeSelector, PreferredTerm, parse_node_selector, parse_preferred_terms
from scheduling.helpers import MAX_CUSTOM_PRIORITY_SCORE, MAX_NODE_SCORE, ShapePoint
from scheduling.status import ArgsError, FieldError, child, index

__all__ = [
    "BalancedArgs",
    "FitArgs",
    "InterPodAffinityArgs",
    "NodeAffinityArgs",
    "ResourceSpec",
    "check_fields",
    "read_resources",
]

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str
    weight: int


DEFAULT_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


# ------------------------------------------------------------------------ reading JSON


def as_mapping(raw: Any, path: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ArgsError([FieldError.invalid(path or "args", type(raw).__name__, "must be an object")])
    return raw


def check_fields(raw: Mapping[str, Any], allowed: Sequence[str], path: str = "") -> None:
    """Strict decoding: a misspelt field must not silently fall back to its default."""
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        raise ArgsError([f'unknown field "{child(path, str(k))}"' for k in unknown])


def _int(raw: Any, path: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        raise ArgsError([FieldError.invalid(path, raw, "must be an integer")])
    return raw


def _number(raw: Any, path: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ArgsError([FieldError.invalid(path, raw, "must be a number")])
    return float(raw)


def _bool(raw: Any, path: str) -> bool:
    if not isinstance(raw, bool):
        raise ArgsError([FieldError.invalid(path, raw, "must be a boolean")])
    return raw


def _list(raw: Any, path: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise ArgsError([FieldError.invalid(path, raw, "must be a list")])
    return list(raw)


def _strings(raw: Any, path: str) -> list[str]:
    items = _list(raw, path)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ArgsError([FieldError.invalid(index(path, i), item, "must be a string")])
    return items


def read_resources(
    raw: Any, path: str, default: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
) -> tuple[ResourceSpec, ...]:
    """A ``resources`` list: absent/null takes ``default``, an absent weight is 1."""
    if raw is None:
        return default
    out = []
    for i, item in enumerate(_list(raw, path)):
        p = index(path, i)
        item = as_mapping(item, p)
        check_fields(item, ("name", "weight"), p)
        name = item.get("name")
        if not isinstance(name, str):
            raise ArgsError([FieldError.invalid(child(p, "name"), name, "must be a string")])
        weight = 1 if item.get("weight") is None else _int(item["weight"], child(p, "weight"))
        out.append(ResourceSpec(name, weight))
    return tuple(out)


def _qualified_name_errors(name: str, path: str) -> list[FieldError]:
    """``metav1validation.ValidateLabelName`` (``IsQualifiedName``): one Invalid error per problem.

    Label keys are qualified names, so ``kube.labels`` does the checking; only the subject of the
    many-slashes message differs ("a valid label key" there, "a qualified name" here).
    """
    return [FieldError.invalid(path, name, msg.replace("a valid label key ", "a qualified name ", 1)) for msg in validate_label_key(name)]


def _raise(errors: list[FieldError]) -> None:
    if errors:
        raise ArgsError(errors)


# ------------------------------------------------------------------------ NodeResourcesFit


@dataclass(frozen=True, slots=True)
class FitArgs:
    ignored_resources: frozenset[str]
    ignored_resource_groups: frozenset[str]
    strategy: str
    resources: tuple[ResourceSpec, ...]
    shape: tuple[ShapePoint, ...]  # scaled to 0..MaxNodeScore, for RequestedToCapacityRatio

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> FitArgs:
        raw = as_mapping(raw, "")
        check_fields(raw, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy"))
        ignored = _strings(raw.get("ignoredResources"), "ignoredResources")
        groups = _strings(raw.get("ignoredResourceGroups"), "ignoredResourceGroups")
        errors: list[FieldError] = []
        for i, name in enumerate(ignored):
            errors += _qualified_name_errors(name, index("ignoredResources", i))
        for i, group in enumerate(groups):
            p = index("ignoredResourceGroups", i)
            if "/" in group:
                errors.append(FieldError.invalid(p, group, "resource group name can't contain '/'"))
            errors += _qualified_name_errors(group, p)
        strategy, resources, shape = cls._strategy(raw.get("scoringStrategy"), errors)
        _raise(errors)
        return cls(frozenset(ignored), frozenset(groups), strategy, resources, shape)

    @staticmethod
    def _strategy(raw: Any, errors: list[FieldError]) -> tuple[str, tuple[ResourceSpec, ...], tuple[ShapePoint, ...]]:
        path = "scoringStrategy"
        if raw is None:
            return LEAST_ALLOCATED, DEFAULT_RESOURCES, ()
        raw = as_mapping(raw, path)
        check_fields(raw, ("type", "resources", "requestedToCapacityRatio"), path)
        kind = raw.get("type")
        kind = LEAST_ALLOCATED if kind is None else kind
        if kind not in SCORING_STRATEGIES:
            errors.append(FieldError.not_supported(child(path, "type"), kind, sorted(SCORING_STRATEGIES)))
        resources = read_resources(raw.get("resources"), child(path, "resources"))
        errors += validate_weights(resources, child(path, "resources"))
        shape: tuple[ShapePoint, ...] = ()
        rtcr = raw.get("requestedToCapacityRatio")
        if rtcr is not None:
            rtcr = as_mapping(rtcr, child(path, "requestedToCapacityRatio"))
            check_fields(rtcr, ("shape",), child(path, "requestedToCapacityRatio"))
            points = _shape(rtcr.get("shape"), child(path, "shape"), errors)
            shape = tuple(ShapePoint(p.utilization, p.score * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for p in points)
        elif kind == REQUESTED_TO_CAPACITY_RATIO:
            errors.append(FieldError.required(child(path, "requestedToCapacityRatio"), "a shape is needed for RequestedToCapacityRatio"))
        return str(kind), resources, shape


def validate_weights(resources: Sequence[ResourceSpec], path: str) -> list[FieldError]:
    """``validateResources``: every weight in (0, 100]."""
    return [
        FieldError.invalid(child(index(path, i), "weight"), r.weight, f"resource weight of {r.name} not in valid range (0, 100]")
        for i, r in enumerate(resources)
        if r.weight <= 0 or r.weight > MAX_NODE_SCORE
    ]


def _shape(raw: Any, path: str, errors: list[FieldError]) -> list[ShapePoint]:
    """``validateFunctionShape``: at least one point, utilizations increasing, values in range."""
    points: list[ShapePoint] = []
    for i, item in enumerate(_list(raw, path)):
        p = index(path, i)
        item = as_mapping(item, p)
        check_fields(item, ("utilization", "score"), p)
        points.append(ShapePoint(_int(item.get("utilization", 0), child(p, "utilization")), _int(item.get("score", 0), child(p, "score"))))
    if not points:
        errors.append(FieldError.required(path, "at least one point must be specified"))
        return points
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            errors.append(FieldError.invalid(child(index(path, i), "utilization"), points[i].utilization, "values must be sorted in increasing order"))
            break
    for i, point in enumerate(points):
        if not 0 <= point.utilization <= 100:
            errors.append(FieldError.invalid(child(index(path, i), "utilization"), point.utilization, "not in valid range [0, 100]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append(FieldError.invalid(child(index(path, i), "score"), point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"))
    return points


# ------------------------------------------------------------------------ BalancedAllocation


@dataclass(frozen=True, slots=True)
class BalancedArgs:
    resources: tuple[ResourceSpec, ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> BalancedArgs:
        raw = as_mapping(raw, "")
        check_fields(raw, ("resources",))
        resources = read_resources(raw.get("resources"), "resources")
        errors: list[FieldError] = []
        seen: set[str] = set()
        for i, r in enumerate(resources):
            p = index("resources", i)
            if r.name in seen:
                errors.append(FieldError.duplicate(child(p, "name"), r.name))
            seen.add(r.name)
            if r.weight != 1:
                errors.append(FieldError.invalid(child(p, "weight"), r.weight, "must be 1"))
        _raise(errors)
        return cls(resources)


# ------------------------------------------------------------------------ InterPodAffinity


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int
    ignore_preferred_terms_of_existing_pods: bool

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> InterPodAffinityArgs:
        raw = as_mapping(raw, "")
        check_fields(raw, ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"))
        weight = raw.get("hardPodAffinityWeight")
        weight = 1 if weight is None else _int(weight, "hardPodAffinityWeight")
        ignore = raw.get("ignorePreferredTermsOfExistingPods")
        ignore = False if ignore is None else _bool(ignore, "ignorePreferredTermsOfExistingPods")
        if not 0 <= weight <= 100:
            raise ArgsError([FieldError.invalid("hardPodAffinityWeight", weight, "not in valid range [0, 100]")])
        return cls(weight, ignore)


# ------------------------------------------------------------------------ NodeAffinity


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    required: NodeSelector | None
    preferred: tuple[PreferredTerm, ...] | None

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> NodeAffinityArgs:
        raw = as_mapping(raw, "")
        check_fields(raw, ("addedAffinity",))
        added = raw.get("addedAffinity")
        if added is None:
            return cls(None, None)
        added = as_mapping(added, "addedAffinity")
        required_path = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        preferred_path = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        errors: list[FieldError] = []
        required = None
        if added.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
            required = parse_node_selector(added["requiredDuringSchedulingIgnoredDuringExecution"], required_path)
            errors += required.errors
        preferred = None
        terms = added.get("preferredDuringSchedulingIgnoredDuringExecution")
        if terms:
            preferred, problems = parse_preferred_terms(terms, preferred_path)
            errors += problems
        _raise(errors)
        return cls(required, preferred)


ArgsParser = Callable[[Mapping[str, Any] | None], Any]


def no_args(raw: Mapping[str, Any] | None) -> None:
    """TaintToleration takes no arguments."""
    check_fields(as_mapping(raw, ""), ())


def fraction(raw: Any, path: str, default: float) -> float:
    value = default if raw is None else _number(raw, path)
    if not 0.0 <= value <= 1.0:
        raise ArgsError([FieldError.invalid(path, value, "not in valid range [0, 1]")])
    return value
