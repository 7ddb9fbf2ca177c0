"""KubeAdmiral's global scheduler framework over plain data.

A federated workload (a *scheduling unit*) is placed on member clusters in
four phases, each run by the plugins a *profile* enables, exactly as
``kubewharf/kubeadmiral`` ``pkg/controllers/scheduler`` does:

1. **Filter** drops clusters that cannot take the workload (not ready, API
   not served, selector/affinity mismatch, untolerated taint, not enough
   free resources, not in the placement list).
2. **Score** ranks the survivors; every plugin scores 0..100 (some after
   upstream's ``DefaultNormalizeScore``) and the totals are summed.
3. **Select** keeps the top ``maxClusters`` (``MaxCluster``).
4. **Replicas** (Divide mode only) splits the replica count with the
   existing Spread planner (:func:`federation.planner.plan`), using static
   placement weights, or water-level weights
   (:func:`federation.weights.dynamic_weights`) when no placement sets one.

Everything is plain dataclasses in, a :class:`ScheduleResult` out, so the
same code serves the placement "explain" view, the simulator and Celery
reconcilers, and can be tested without a database. Unlike upstream (which
stops at the first failing filter and logs), every filter runs on every
cluster and each failure is kept as one readable reason per plugin; the set
of feasible clusters is the same either way, and the explanation is what
operators asked for.

Deliberate differences from upstream, each documented where it lives:

* ``ClusterReady`` is in the default profile and also handles *cordoned*
  clusters (Meridian's one-click migrate): a cordoned cluster gets no new
  replicas. It is filtered out unless the workload already runs there and
  ``avoid_migration`` is set; then it keeps (at most) its current replicas,
  the way upstream treats an untolerated ``NoSchedule`` taint on a cluster
  the workload already uses. Without ``avoid_migration`` the cordoned
  cluster is filtered, so its replicas drain to the other clusters.
  (Sticky units are never rescheduled at all, so they stay put.)
* ``ClusterInfo.api_resources = None`` means "not reported" and passes the
  ``APIResources`` filter; an empty set means "serves nothing".
* The replicas phase estimates each cluster's capacity from its free
  resources (``current + available // per-replica request``) and hands it to
  the planner as *estimated capacity*. Upstream only learns capacities from
  pods that stayed pending (auto migration) and therefore adds the planner's
  overflow back onto the full cluster; our estimate is a prediction, so the
  overflow is reported (``ScheduleResult.overflow``/``unplaced``) instead of
  being placed on a cluster that cannot run it.
* Score plugins may be weighted per profile (Kubernetes-scheduler style);
  every weight defaults to 1, which is upstream's plain sum.
* ``MaxCluster`` breaks score ties by cluster name (upstream's sort is not
  stable, so its choice among equals is arbitrary).
* The resource scorers take every resource the unit requests into account,
  weighting ``nvidia.com/gpu`` 4 and everything else 1 (upstream's
  ``DefaultRequestedRatioResources`` and ``DefaultRatio``).

Resources are integers: ``cpu`` in millicores, ``memory`` (and
``ephemeral-storage``, ``hugepages-*``) in bytes, anything else (e.g.
``nvidia.com/gpu``) in whole units. :func:`parse_resources` converts
Kubernetes quantity strings.

Cost is linear in the number of clusters for everything this module does
(unit-level data such as selectors and tolerations is prepared once, not per
cluster); the planner's weighted rounds are the only part that can repeat.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from federation.planner import ClusterPreference, plan
from federation.weights import GPU_RESOURCE, dynamic_weights
from kube.labels import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    validate_label_key,
    validate_label_value,
)
from kube.quantity import BINARY_SI, Quantity, parse_quantity

__all__ = [
    "API_RESOURCES",
    "CLUSTER_AFFINITY",
    "CLUSTER_CAPACITY_WEIGHT",
    "CLUSTER_READY",
    "CLUSTER_RESOURCES_BALANCED_ALLOCATION",
    "CLUSTER_RESOURCES_FIT",
    "CLUSTER_RESOURCES_LEAST_ALLOCATED",
    "CLUSTER_RESOURCES_MOST_ALLOCATED",
    "DEFAULT_PROFILE",
    "DIVIDE",
    "DUPLICATE",
    "FILTER_PLUGINS",
    "MAX_CLUSTER",
    "MAX_CLUSTER_SCORE",
    "PLACEMENT_FILTER",
    "PROFILES",
    "REPLICAS_PLUGINS",
    "SCORE_PLUGINS",
    "SELECT_PLUGINS",
    "TAINT_TOLERATION",
    "ClusterAffinity",
    "ClusterInfo",
    "Placement",
    "Profile",
    "ScheduleResult",
    "SchedulingUnit",
    "default_normalize_score",
    "format_amount",
    "parse_resources",
    "schedule",
    "select_max_cluster",
    "taint_text",
    "tolerates",
    "validate_unit",
]

# --------------------------------------------------------------------------- names

# Plugin names are upstream's (``framework/plugins/names``) so profiles read the same.
API_RESOURCES = "APIResources"
TAINT_TOLERATION = "TaintToleration"
CLUSTER_READY = "ClusterReady"
CLUSTER_RESOURCES_FIT = "ClusterResourcesFit"
PLACEMENT_FILTER = "PlacementFilter"
CLUSTER_AFFINITY = "ClusterAffinity"
CLUSTER_RESOURCES_BALANCED_ALLOCATION = "ClusterResourcesBalancedAllocation"
CLUSTER_RESOURCES_LEAST_ALLOCATED = "ClusterResourcesLeastAllocated"
CLUSTER_RESOURCES_MOST_ALLOCATED = "ClusterResourcesMostAllocated"
MAX_CLUSTER = "MaxCluster"
CLUSTER_CAPACITY_WEIGHT = "ClusterCapacityWeight"

DIVIDE = "Divide"
DUPLICATE = "Duplicate"
SCHEDULING_MODES = (DIVIDE, DUPLICATE)

#: Highest score a score plugin gives (upstream ``MaxClusterScore``).
MAX_CLUSTER_SCORE = 100

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
#: Upstream's ``DefaultRequestedRatioResources``; other requested resources weigh ``_DEFAULT_RATIO``.
_RESOURCE_WEIGHTS = {CPU: 1, MEMORY: 1, GPU_RESOURCE: 4}
_DEFAULT_RATIO = 1
_BYTE_RESOURCES = (MEMORY, EPHEMERAL_STORAGE)

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

# --------------------------------------------------------------------------- inputs


@dataclass
class ClusterInfo:
    """A member cluster as the scheduler sees it.

    ``allocatable``, ``available`` and ``requested`` are per resource, in the
    module's integer units. Only two of the three are needed: a resource
    missing from ``available`` is derived as ``allocatable - requested`` and
    vice versa (upstream derives "requested" from allocatable minus
    available). A resource missing from both counts as nothing free, as
    upstream's status arithmetic does.

    ``api_resources`` holds ``group/version/Kind`` strings (``v1/ConfigMap``
    for the core group); ``None`` means the cluster has not reported them.
    ``current_replicas`` is a convenience for per-workload cluster views; the
    unit's ``current_clusters`` takes precedence when it names the cluster.
    """

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    ready: bool = True
    api_resources: frozenset[str] | None = None
    allocatable: dict[str, int] = field(default_factory=dict)
    available: dict[str, int] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    current_replicas: int = 0
    cordoned: bool = False

    def __post_init__(self) -> None:
        available = dict(self.available)
        requested = dict(self.requested)
        for resource, total in self.allocatable.items():
            if resource not in available and resource in requested:
                available[resource] = total - requested[resource]
            elif resource not in requested and resource in available:
                requested[resource] = total - available[resource]
        self.available = available
        self.requested = requested
        if self.api_resources is not None and not isinstance(self.api_resources, frozenset):
            self.api_resources = frozenset(self.api_resources)


@dataclass
class Placement:
    """One entry of a propagation policy's ``placement`` list.

    ``weight=None`` means the entry only restricts clusters (and sets
    min/max); as soon as any placement sets a weight, weights are static.
    """

    weight: int | None = None
    min_replicas: int = 0
    max_replicas: int | None = None


@dataclass
class ClusterAffinity:
    """Upstream's ``ClusterAffinity``: required terms (ORed) and weighted preferences.

    Terms are decoded JSON: ``{"matchExpressions": [{"key", "operator",
    "values"}], "matchFields": [...]}`` with operators ``In``, ``NotIn``,
    ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt`` (``matchFields`` supports
    ``metadata.name`` with ``In``/``NotIn`` and one value). ``required=None``
    does not restrict; an empty list matches no cluster (upstream).
    Preferences are ``{"weight": 1..100, "preference": term}``.
    """

    required: list[dict[str, Any]] | None = None
    preferred: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any] | None) -> ClusterAffinity:
        """Accept the short keys or upstream's long JSON names."""
        if not obj:
            return cls()
        required = obj.get("required", obj.get("requiredDuringSchedulingIgnoredDuringExecution"))
        if isinstance(required, Mapping):
            required = required.get("clusterSelectorTerms") or []
        preferred = obj.get("preferred", obj.get("preferredDuringSchedulingIgnoredDuringExecution")) or []
        return cls(required=None if required is None else list(required), preferred=list(preferred))


@dataclass
class SchedulingUnit:
    """A federated workload to place, as upstream's ``framework.SchedulingUnit``.

    ``desired_replicas=None`` marks a workload without replicas (ConfigMap,
    Secret, ...), scheduled as Duplicate whatever ``scheduling_mode`` says,
    like upstream does for types without a replicas path. ``placements`` maps
    cluster names to :class:`Placement` (or planner ``ClusterPreference``, or
    a dict with ``weight``/``min_replicas``/``max_replicas``); empty means all
    clusters. ``current_clusters`` is where the workload runs today (replicas
    per cluster; ``None`` = a full Duplicate copy). ``key`` defaults to
    ``namespace/name`` and seeds the planner's tie-break.
    """

    name: str
    namespace: str = ""
    gvk: str = "apps/v1/Deployment"
    desired_replicas: int | None = None
    resource_request: dict[str, int] = field(default_factory=dict)
    scheduling_mode: str = DIVIDE
    cluster_selector: dict[str, str] = field(default_factory=dict)
    cluster_affinity: ClusterAffinity | Mapping[str, Any] | None = None
    tolerations: list[dict[str, str]] = field(default_factory=list)
    max_clusters: int | None = None
    placements: Mapping[str, Any] = field(default_factory=dict)
    sticky_cluster: bool = False
    avoid_migration: bool = True
    current_clusters: dict[str, int | None] = field(default_factory=dict)
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            self.key = f"{self.namespace}/{self.name}" if self.namespace else self.name


# --------------------------------------------------------------------------- profiles

_PHASES = ("filters", "scores", "select", "replicas")


@dataclass(frozen=True)
class Profile:
    """Which plugins run in each phase (upstream ``SchedulingProfile``).

    ``weights`` multiplies each score plugin's 0..100 score (default 1).
    ``dynamic_weights`` lets ``ClusterCapacityWeight`` use water-level
    weights when no placement sets a static weight (upstream always does;
    without it clusters weigh equally). ``estimate_capacity`` bounds each
    cluster by what its free resources can hold.
    """

    name: str
    filters: tuple[str, ...] = ()
    scores: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    replicas: tuple[str, ...] = ()
    weights: tuple[tuple[str, int], ...] | Mapping[str, int] = ()
    dynamic_weights: bool = True
    estimate_capacity: bool = True

    def __post_init__(self) -> None:
        for phase in _PHASES:
            names = tuple(getattr(self, phase))
            registry = _REGISTRIES[phase]
            for plugin in names:
                if plugin not in registry:
                    raise ValueError(f"profile {self.name!r}: unknown {phase} plugin {plugin!r}")
            if len(set(names)) != len(names):
                raise ValueError(f"profile {self.name!r}: a {phase} plugin is listed twice")
            object.__setattr__(self, phase, names)
        weights = self.weights.items() if isinstance(self.weights, Mapping) else self.weights
        object.__setattr__(self, "weights", tuple(sorted((str(k), int(v)) for k, v in weights)))

    def score_weight(self, plugin: str) -> int:
        for name, weight in self.weights:  # type: ignore[misc]
            if name == plugin:
                return weight
        return 1

    def derive(
        self,
        name: str,
        enabled: Mapping[str, Sequence[str]] | None = None,
        disabled: Mapping[str, Sequence[str]] | None = None,
        **changes: Any,
    ) -> Profile:
        """A new profile from this one, like upstream ``applyProfile``.

        Per phase, ``disabled`` removes plugins (``"*"`` removes them all) and
        ``enabled`` appends plugins after the remaining ones.
        """
        enabled = enabled or {}
        disabled = disabled or {}
        values: dict[str, Any] = {}
        for phase in _PHASES:
            drop = set(disabled.get(phase, ()))
            kept = [] if "*" in drop else [p for p in getattr(self, phase) if p not in drop]
            values[phase] = tuple(kept) + tuple(enabled.get(phase, ()))
        values.update(weights=self.weights, dynamic_weights=self.dynamic_weights,
                      estimate_capacity=self.estimate_capacity)
        values.update(changes)
        return Profile(name=name, **values)


# --------------------------------------------------------------------------- results


@dataclass
class ScheduleResult:
    """Where the unit goes and why, phase by phase.

    ``clusters`` maps each chosen cluster to its replicas (``None`` for a
    Duplicate copy); clusters planned at 0 replicas are left out, as
    upstream drops them from the placement. ``filtered`` gives one reason per
    failing filter plugin; ``not_selected`` says why ``MaxCluster`` cut a
    feasible cluster. ``weights`` are what the replicas phase used
    (``weights_source`` is ``"static"``, ``"dynamic"`` or ``"equal"``).
    ``overflow`` is the planner's: replicas a cluster's estimated capacity
    could not take; ``unplaced`` counts those no cluster took. ``error`` is
    set when the unit itself is unschedulable as given (upstream's Error).
    """

    profile: str
    clusters: dict[str, int | None] = field(default_factory=dict)
    feasible: list[str] = field(default_factory=list)
    filtered: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    total_scores: dict[str, int] = field(default_factory=dict)
    selected: list[str] = field(default_factory=list)
    not_selected: dict[str, str] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    weights_source: str | None = None
    estimated_capacity: dict[str, int] = field(default_factory=dict)
    overflow: dict[str, int] = field(default_factory=dict)
    unplaced: int = 0
    sticky: bool = False
    error: str | None = None
    explanation: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the API (dict order is kept)."""
        return {
            "profile": self.profile,
            "clusters": dict(self.clusters),
            "feasible": list(self.feasible),
            "filtered": {k: list(v) for k, v in self.filtered.items()},
            "scores": {k: dict(v) for k, v in self.scores.items()},
            "total_scores": dict(self.total_scores),
            "selected": list(self.selected),
            "not_selected": dict(self.not_selected),
            "weights": dict(self.weights),
            "weights_source": self.weights_source,
            "estimated_capacity": dict(self.estimated_capacity),
            "overflow": dict(self.overflow),
            "unplaced": self.unplaced,
            "sticky": self.sticky,
            "error": self.error,
            "explanation": list(self.explanation),
        }


class _UnitError(ValueError):
    """The unit cannot be scheduled as given (upstream returns a framework Error)."""


# --------------------------------------------------------------------------- helpers


def _go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, like Go's ``/`` on int64."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _whole_units(milli: int) -> int:
    """Millicores to whole cores rounded away from zero, like ``Quantity.Value()``.

    Upstream weighs clusters by whole cores; rounding the same way keeps our
    water-level weights equal to KubeAdmiral's.
    """
    cores = -(-abs(milli) // 1000)
    return cores if milli >= 0 else -cores


def format_amount(resource: str, amount: int) -> str:
    """An amount in the module's units as a Kubernetes quantity string ("500m", "2Gi")."""
    if resource == CPU:
        return str(Quantity.from_milli(amount))
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        return str(Quantity.from_int(amount, BINARY_SI))
    return str(Quantity.from_int(amount))


def parse_resources(resources: Mapping[str, str | int]) -> dict[str, int]:
    """Quantity strings to the module's units: cpu in millicores, the rest whole units.

    Raises :class:`kube.quantity.QuantityError` for a bad quantity.
    """
    parsed: dict[str, int] = {}
    for name, value in resources.items():
        quantity = parse_quantity(str(value)) if not isinstance(value, Quantity) else value
        parsed[name] = quantity.milli_value() if name == CPU else quantity.value()
    return parsed


def taint_text(taint: Mapping[str, str]) -> str:
    """``key=value:Effect`` (``key:Effect`` without value), as kubectl prints taints."""
    key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def tolerates(toleration: Mapping[str, str], taint: Mapping[str, str]) -> bool:
    """Kubernetes ``Toleration.ToleratesTaint``.

    An empty effect tolerates every effect, an empty key with ``Exists``
    tolerates every taint, and ``Equal`` (the default operator) compares
    values.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect", ""):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key", ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def _tolerated(tolerations: Sequence[Mapping[str, str]], taint: Mapping[str, str]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def _first_untolerated(
    taints: Iterable[Mapping[str, str]],
    tolerations: Sequence[Mapping[str, str]],
    effects: tuple[str, ...],
) -> Mapping[str, str] | None:
    """Upstream ``FindMatchingUntoleratedTaint`` restricted to ``effects``."""
    for taint in taints:
        if taint.get("effect") in effects and not _tolerated(tolerations, taint):
            return taint
    return None


def _gvk_spellings(gvk: str) -> frozenset[str]:
    """Every way a cluster may list the unit's GVK (core group with or without a leading slash)."""
    parts = gvk.split("/")
    if len(parts) == 2:
        parts = ["", *parts]
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise _UnitError(f"invalid GVK {gvk!r}: want group/version/Kind or version/Kind")
    group, version, kind = parts
    if group in ("", "core"):
        return frozenset({f"{version}/{kind}", f"/{version}/{kind}", f"core/{version}/{kind}"})
    return frozenset({f"{group}/{version}/{kind}"})


def _placement(value: Any) -> Placement:
    """Normalise a placement given as Placement, ClusterPreference or dict."""
    if isinstance(value, Placement):
        return value
    if isinstance(value, ClusterPreference):
        return Placement(value.weight, value.min_replicas, value.max_replicas)
    if isinstance(value, Mapping):
        return Placement(
            weight=value.get("weight"),
            min_replicas=value.get("min_replicas", value.get("minReplicas", 0)) or 0,
            max_replicas=value.get("max_replicas", value.get("maxReplicas")),
        )
    if value is None:
        return Placement()
    raise TypeError(f"placement must be a Placement, ClusterPreference or mapping, not {type(value).__name__}")


def _affinity(value: ClusterAffinity | Mapping[str, Any] | None) -> ClusterAffinity:
    if value is None:
        return ClusterAffinity()
    if isinstance(value, ClusterAffinity):
        return value
    return ClusterAffinity.from_dict(value)


# ------------------------------------------------------------------ cluster selector terms

_SELECTOR_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}


def _expressions_selector(expressions: Sequence[Mapping[str, Any]]) -> Selector:
    """Upstream ``ClusterSelectorRequirementsAsSelector``: no expressions select nothing."""
    if not expressions:
        return Selector.nothing()
    requirements = []
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise _UnitError("a match expression must be an object with key, operator and values")
        operator = _SELECTOR_OPERATORS.get(expr.get("operator"))  # type: ignore[arg-type]
        if operator is None:
            raise _UnitError(f"{expr.get('operator')!r} is not a valid cluster selector operator")
        try:
            requirements.append(Requirement(expr.get("key"), operator, tuple(expr.get("values") or ())))
        except (SelectorError, TypeError) as exc:
            raise _UnitError(str(exc)) from exc
    return Selector(requirements)


def _fields_check(fields: Sequence[Mapping[str, Any]]) -> Callable[[str], bool]:
    """Upstream ``ClusterSelectorRequirementsAsFieldSelector`` over ``metadata.name``."""
    checks: list[tuple[str, str, bool]] = []
    for expr in fields:
        if not isinstance(expr, Mapping):
            raise _UnitError("a match field must be an object with key, operator and values")
        operator, values = expr.get("operator"), list(expr.get("values") or ())
        if operator not in ("In", "NotIn"):
            raise _UnitError(f"{operator!r} is not a valid cluster field selector operator")
        if len(values) != 1:
            raise _UnitError(f"unexpected number of value ({len(values)}) for cluster field selector operator {operator!r}")
        checks.append((str(expr.get("key")), values[0], operator == "In"))

    def matches(name: str) -> bool:
        known = {"metadata.name": name}
        return all((known.get(key, "") == value) == equal for key, value, equal in checks)

    return matches


@dataclass(frozen=True)
class _Term:
    """A compiled cluster selector term; ``error`` makes it (and later terms) fail like upstream."""

    selector: Selector | None = None
    fields: Callable[[str], bool] | None = None
    empty: bool = False
    error: str | None = None

    @classmethod
    def compile(cls, term: Mapping[str, Any] | None) -> _Term:
        term = term or {}
        expressions = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not expressions and not fields:
            return cls(empty=True)
        try:
            selector = _expressions_selector(expressions) if expressions else None
            checks = _fields_check(fields) if fields else None
        except _UnitError as exc:
            return cls(error=str(exc))
        return cls(selector=selector, fields=checks)


def _match_terms(terms: Sequence[_Term], cluster: ClusterInfo) -> tuple[bool, str | None]:
    """Upstream ``MatchClusterSelectorTerms``: terms are ORed, an invalid term stops the search."""
    for term in terms:
        if term.empty:
            continue
        if term.error is not None:
            return False, term.error
        if term.selector is not None and not term.selector.matches(cluster.labels):
            continue
        if term.fields is not None and not term.fields(cluster.name):
            continue
        return True, None
    return False, None


# --------------------------------------------------------------------------- context


@dataclass
class _Context:
    """The unit prepared once per ``schedule`` call, so plugins stay O(1) per cluster."""

    unit: SchedulingUnit
    profile: Profile
    mode: str
    current: dict[str, int | None]
    scheduled: frozenset[str]
    gvk: frozenset[str] | None
    gvk_error: str | None
    selector: tuple[tuple[str, str], ...]
    required: tuple[_Term, ...] | None
    preferred: tuple[tuple[int, Selector], ...]
    tolerations: tuple[Mapping[str, str], ...]
    prefer_tolerations: tuple[Mapping[str, str], ...]
    request: dict[str, int]
    score_resources: tuple[tuple[str, int], ...]
    placements: dict[str, Placement]

    @property
    def desired(self) -> int:
        return self.unit.desired_replicas or 0


def _merged_current(unit: SchedulingUnit, clusters: Sequence[ClusterInfo]) -> dict[str, int | None]:
    current: dict[str, int | None] = dict(unit.current_clusters)
    for cluster in clusters:
        if cluster.current_replicas and cluster.name not in current:
            current[cluster.name] = cluster.current_replicas
    return current


def _compile_preferred(preferred: Sequence[Mapping[str, Any]]) -> tuple[tuple[int, Selector], ...]:
    """Weighted preference selectors; an invalid one is an error for the whole unit, as upstream."""
    compiled = []
    for i, term in enumerate(preferred):
        weight = int(term.get("weight") or 0)
        if weight == 0:
            continue
        try:
            selector = _expressions_selector((term.get("preference") or {}).get("matchExpressions") or [])
        except _UnitError as exc:
            raise _UnitError(f"ClusterAffinity: preferred[{i}]: {exc}") from exc
        compiled.append((weight, selector))
    return tuple(compiled)


def _score_resources(request: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """cpu, memory and every other requested resource, with upstream's ratio weights."""
    names = [CPU, MEMORY] + sorted(r for r in request if r not in (CPU, MEMORY, EPHEMERAL_STORAGE))
    return tuple((name, _RESOURCE_WEIGHTS.get(name, _DEFAULT_RATIO)) for name in names)


def _prepare(unit: SchedulingUnit, profile: Profile, clusters: Sequence[ClusterInfo]) -> _Context:
    mode = DUPLICATE if unit.scheduling_mode == DUPLICATE or unit.desired_replicas is None else DIVIDE
    current = _merged_current(unit, clusters)
    scheduled = frozenset(name for name, replicas in current.items() if replicas is None or replicas > 0)
    try:
        gvk, gvk_error = _gvk_spellings(unit.gvk), None
    except _UnitError as exc:
        gvk, gvk_error = None, str(exc)
    affinity = _affinity(unit.cluster_affinity)
    required = None if affinity.required is None else tuple(_Term.compile(t) for t in affinity.required)
    tolerations = tuple(unit.tolerations)
    return _Context(
        unit=unit,
        profile=profile,
        mode=mode,
        current=current,
        scheduled=scheduled,
        gvk=gvk,
        gvk_error=gvk_error,
        selector=tuple(unit.cluster_selector.items()),
        required=required,
        preferred=_compile_preferred(affinity.preferred),
        tolerations=tolerations,
        prefer_tolerations=tuple(t for t in tolerations if (t.get("effect") or "") in ("", PREFER_NO_SCHEDULE)),
        request=dict(unit.resource_request),
        score_resources=_score_resources(unit.resource_request),
        placements={name: _placement(p) for name, p in unit.placements.items()},
    )


# --------------------------------------------------------------------------- filter plugins
# Each returns None when the cluster passes, else the reason (without the plugin prefix).


def filter_cluster_ready(ctx: _Context, cluster: ClusterInfo) -> str | None:
    """Unready clusters get nothing new; cordoned ones only keep what they run (see module doc)."""
    scheduled = cluster.name in ctx.scheduled
    if not cluster.ready and not scheduled:
        return "cluster is not ready"
    if cluster.cordoned:
        if not scheduled:
            return "cluster is cordoned"
        if not ctx.unit.avoid_migration:
            return "cluster is cordoned; its replicas are migrated away (avoid_migration is off)"
    return None


def filter_api_resources(ctx: _Context, cluster: ClusterInfo) -> str | None:
    if ctx.gvk is None:
        return ctx.gvk_error
    if cluster.api_resources is None or not ctx.gvk.isdisjoint(cluster.api_resources):
        return None
    return f"cluster does not serve {ctx.unit.gvk}"


def filter_taint_toleration(ctx: _Context, cluster: ClusterInfo) -> str | None:
    """NoSchedule and NoExecute must be tolerated; only NoExecute once the unit runs there (upstream)."""
    effects = (NO_EXECUTE,) if cluster.name in ctx.scheduled else (NO_SCHEDULE, NO_EXECUTE)
    taint = _first_untolerated(cluster.taints, ctx.tolerations, effects)
    return None if taint is None else f"untolerated taint {taint_text(taint)}"


def filter_cluster_resources_fit(ctx: _Context, cluster: ClusterInfo) -> str | None:
    """One replica must fit in the free resources.

    Skipped where the unit already runs: the cluster's free resources do not
    count the unit's own pods, so re-checking would evict it (upstream's
    workaround, kept).
    """
    if cluster.name in ctx.scheduled or not any(ctx.request.values()):
        return None
    problems = []
    for resource, _ in ctx.score_resources:
        wanted = ctx.request.get(resource, 0)
        if resource not in (CPU, MEMORY) and wanted <= 0:
            continue
        free = cluster.available.get(resource, 0)
        if free < wanted:
            problems.append(
                f"insufficient {resource} (requests {format_amount(resource, wanted)}, "
                f"available {format_amount(resource, free)})"
            )
    return ", ".join(problems) or None


def filter_placement(ctx: _Context, cluster: ClusterInfo) -> str | None:
    if not ctx.placements or cluster.name in ctx.placements:
        return None
    return "cluster is not in the placement list"


def filter_cluster_affinity(ctx: _Context, cluster: ClusterInfo) -> str | None:
    for key, value in ctx.selector:
        if cluster.labels.get(key) != value:
            wanted = ",".join(f"{k}={v}" for k, v in ctx.selector)
            return f"cluster labels do not match clusterSelector {wanted}"
    if ctx.required is not None:
        matched, error = _match_terms(ctx.required, cluster)
        if error is not None:
            return f"invalid required cluster affinity: {error}"
        if not matched:
            return "cluster labels do not match the required cluster affinity"
    return None


FilterPlugin = Callable[[_Context, ClusterInfo], "str | None"]

FILTER_PLUGINS: dict[str, FilterPlugin] = {
    CLUSTER_READY: filter_cluster_ready,
    API_RESOURCES: filter_api_resources,
    TAINT_TOLERATION: filter_taint_toleration,
    CLUSTER_RESOURCES_FIT: filter_cluster_resources_fit,
    PLACEMENT_FILTER: filter_placement,
    CLUSTER_AFFINITY: filter_cluster_affinity,
}

# --------------------------------------------------------------------------- score plugins


def _allocatable_and_requested(ctx: _Context, cluster: ClusterInfo, resource: str) -> tuple[int, int]:
    """(allocatable, already requested + one replica), upstream ``calculateResourceAllocatableRequest``."""
    total = cluster.allocatable.get(resource, 0)
    used = total - cluster.available.get(resource, 0)
    return total, used + ctx.request.get(resource, 0)


def score_taint_toleration(ctx: _Context, cluster: ClusterInfo) -> int:
    """How many PreferNoSchedule taints are not tolerated (reversed when normalised)."""
    return sum(
        1 for taint in cluster.taints
        if taint.get("effect") == PREFER_NO_SCHEDULE and not _tolerated(ctx.prefer_tolerations, taint)
    )


def score_cluster_affinity(ctx: _Context, cluster: ClusterInfo) -> int:
    """Sum of the weights of matching preferred terms."""
    return sum(weight for weight, selector in ctx.preferred if selector.matches(cluster.labels))


def score_balanced_allocation(ctx: _Context, cluster: ClusterInfo) -> int:
    """100 × (1 − standard deviation of the requested fractions); 0 if anything would be full."""
    fractions = []
    for resource, _ in ctx.score_resources:
        total, wanted = _allocatable_and_requested(ctx, cluster, resource)
        fraction = 1.0 if total == 0 else wanted / total
        if fraction >= 1:
            return 0
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_CLUSTER_SCORE)


def _weighted_resource_score(ctx: _Context, cluster: ClusterInfo, per_resource: Callable[[int, int], int]) -> int:
    score = weight_sum = 0
    for resource, weight in ctx.score_resources:
        total, wanted = _allocatable_and_requested(ctx, cluster, resource)
        score += per_resource(wanted, total) * weight
        weight_sum += weight
    return _go_div(score, weight_sum) if weight_sum else 0


def _least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return _go_div((capacity - requested) * MAX_CLUSTER_SCORE, capacity)


def _most_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return _go_div(requested * MAX_CLUSTER_SCORE, capacity)


def score_least_allocated(ctx: _Context, cluster: ClusterInfo) -> int:
    """Favours the emptiest clusters (spreads load)."""
    return _weighted_resource_score(ctx, cluster, _least_requested)


def score_most_allocated(ctx: _Context, cluster: ClusterInfo) -> int:
    """Favours the fullest clusters (bin-packs); off by default like upstream."""
    return _weighted_resource_score(ctx, cluster, _most_requested)


def default_normalize_score(scores: dict[str, int], reverse: bool, max_priority: int = MAX_CLUSTER_SCORE) -> None:
    """Upstream ``DefaultNormalizeScore``: scale to 0..max by the highest score, optionally reversed."""
    highest = max((s for s in scores.values() if s > 0), default=0)
    if highest == 0:
        if reverse:
            for name in scores:
                scores[name] = max_priority
        return
    for name, score in scores.items():
        score = _go_div(max_priority * score, highest)
        scores[name] = max_priority - score if reverse else score


@dataclass(frozen=True)
class _ScorePlugin:
    score: Callable[[_Context, ClusterInfo], int]
    normalize: bool = False
    reverse: bool = False


SCORE_PLUGINS: dict[str, _ScorePlugin] = {
    TAINT_TOLERATION: _ScorePlugin(score_taint_toleration, normalize=True, reverse=True),
    CLUSTER_RESOURCES_BALANCED_ALLOCATION: _ScorePlugin(score_balanced_allocation),
    CLUSTER_RESOURCES_LEAST_ALLOCATED: _ScorePlugin(score_least_allocated),
    CLUSTER_RESOURCES_MOST_ALLOCATED: _ScorePlugin(score_most_allocated),
    CLUSTER_AFFINITY: _ScorePlugin(score_cluster_affinity, normalize=True),
}

# --------------------------------------------------------------------------- select plugins


def select_max_cluster(
    ctx: _Context, ranked: list[str], totals: Mapping[str, int]
) -> tuple[list[str], dict[str, str]]:
    """Keep the ``max_clusters`` best clusters (score descending, then name)."""
    limit = ctx.unit.max_clusters
    if limit is not None and limit < 0:
        raise _UnitError("MaxCluster: max clusters is less than 0")
    ordered = sorted(ranked, key=lambda name: (-totals.get(name, 0), name))
    if limit is None or limit >= len(ordered):
        return ordered, {}
    kept, cut = ordered[:limit], ordered[limit:]
    if not kept:
        return [], {name: "maxClusters is 0" for name in cut}
    floor = totals.get(kept[-1], 0)
    reasons = {}
    for name in cut:
        score = totals.get(name, 0)
        detail = f"score {score} < {floor}" if score < floor else f"score {score} ties, name sorts after {kept[-1]}"
        reasons[name] = f"not among the top {limit} clusters ({detail})"
    return kept, reasons


SelectPlugin = Callable[[_Context, list[str], Mapping[str, int]], tuple[list[str], dict[str, str]]]

SELECT_PLUGINS: dict[str, SelectPlugin] = {MAX_CLUSTER: select_max_cluster}

# --------------------------------------------------------------------------- replicas plugins


@dataclass
class _ReplicaPlan:
    replicas: dict[str, int]
    weights: dict[str, int]
    source: str
    estimated_capacity: dict[str, int]
    overflow: dict[str, int]
    capped: dict[str, str]


def _scheduling_weights(ctx: _Context, clusters: Sequence[ClusterInfo]) -> tuple[dict[str, int], str]:
    """Static placement weights, else water-level weights, else equal (upstream rsp)."""
    static = {name: p.weight for name, p in ctx.placements.items() if p.weight is not None}
    if static:
        return {c.name: int(static.get(c.name, 0)) for c in clusters}, "static"
    if not ctx.profile.dynamic_weights:
        return {c.name: 1 for c in clusters}, "equal"
    resource = GPU_RESOURCE if GPU_RESOURCE in ctx.request else CPU
    rows = []
    for c in clusters:
        if resource == CPU:
            alloc = {CPU: _whole_units(c.allocatable[CPU])} if CPU in c.allocatable else {}
            avail = {CPU: _whole_units(c.available[CPU])} if CPU in c.available else {}
        else:
            alloc = {resource: c.allocatable[resource]} if resource in c.allocatable else {}
            avail = {resource: c.available[resource]} if resource in c.available else {}
        rows.append((c.name, alloc, avail))
    return dynamic_weights(rows, resource=resource), "dynamic"


def _estimated_capacity(ctx: _Context, cluster: ClusterInfo, current: int) -> int | None:
    """Replicas the cluster could run: today's plus what its free resources hold."""
    room = None
    for resource, wanted in ctx.request.items():
        if wanted > 0:
            fits = max(cluster.available.get(resource, 0), 0) // wanted
            room = fits if room is None else min(room, fits)
    return None if room is None else current + room


def replicas_cluster_capacity_weight(ctx: _Context, clusters: Sequence[ClusterInfo]) -> _ReplicaPlan:
    """Upstream ``ClusterCapacityWeight``: weights + min/max + capacity into the Spread planner."""
    weights, source = _scheduling_weights(ctx, clusters)
    total = ctx.desired
    current = {name: (total if replicas is None else replicas) for name, replicas in ctx.current.items()}
    preferences: dict[str, ClusterPreference] = {}
    estimates: dict[str, int] = {}
    capped: dict[str, str] = {}
    for cluster in clusters:
        placement = ctx.placements.get(cluster.name, Placement())
        ceiling = placement.max_replicas
        why = None
        if _first_untolerated(cluster.taints, ctx.tolerations, (NO_SCHEDULE,)) is not None:
            why = "untolerated NoSchedule taint"
        elif cluster.cordoned:
            why = "cordoned"
        if why is not None:
            have = current.get(cluster.name, 0)
            if ceiling is None or have < ceiling:
                ceiling = have
            capped[cluster.name] = f"{why}: no new replicas, at most the {have} it runs"
        preferences[cluster.name] = ClusterPreference(
            weight=max(int(weights.get(cluster.name, 0)), 0),
            min_replicas=placement.min_replicas,
            max_replicas=ceiling,
        )
        if ctx.profile.estimate_capacity:
            estimate = _estimated_capacity(ctx, cluster, current.get(cluster.name, 0))
            if estimate is not None:
                estimates[cluster.name] = estimate
    names = [c.name for c in clusters]
    planned, overflow = plan(
        preferences, total, names, current, estimates, {},
        key=ctx.unit.key, avoid_migration=ctx.unit.avoid_migration,
    )
    return _ReplicaPlan(planned, weights, source, estimates, overflow, capped)


ReplicasPlugin = Callable[[_Context, Sequence[ClusterInfo]], _ReplicaPlan]

REPLICAS_PLUGINS: dict[str, ReplicasPlugin] = {CLUSTER_CAPACITY_WEIGHT: replicas_cluster_capacity_weight}

_REGISTRIES: dict[str, Mapping[str, Any]] = {
    "filters": FILTER_PLUGINS,
    "scores": SCORE_PLUGINS,
    "select": SELECT_PLUGINS,
    "replicas": REPLICAS_PLUGINS,
}

#: Upstream's default plugins, plus ClusterReady (Meridian lists unready and cordoned clusters too).
DEFAULT_PROFILE = Profile(
    name="default",
    filters=(CLUSTER_READY, API_RESOURCES, TAINT_TOLERATION, CLUSTER_RESOURCES_FIT, PLACEMENT_FILTER, CLUSTER_AFFINITY),
    scores=(TAINT_TOLERATION, CLUSTER_RESOURCES_BALANCED_ALLOCATION, CLUSTER_RESOURCES_LEAST_ALLOCATED, CLUSTER_AFFINITY),
    select=(MAX_CLUSTER,),
    replicas=(CLUSTER_CAPACITY_WEIGHT,),
)

#: Profiles known by name (the API resolves a policy's ``schedulingProfile`` here).
PROFILES: dict[str, Profile] = {DEFAULT_PROFILE.name: DEFAULT_PROFILE}

# --------------------------------------------------------------------------- phases


def _run_filters(ctx: _Context, clusters: Sequence[ClusterInfo]) -> tuple[list[ClusterInfo], dict[str, list[str]]]:
    plugins = [(name, FILTER_PLUGINS[name]) for name in ctx.profile.filters]
    feasible: list[ClusterInfo] = []
    filtered: dict[str, list[str]] = {}
    for cluster in clusters:
        reasons = []
        for name, plugin in plugins:
            reason = plugin(ctx, cluster)
            if reason is not None:
                reasons.append(f"{name}: {reason}")
        if reasons:
            filtered[cluster.name] = reasons
        else:
            feasible.append(cluster)
    return feasible, filtered


def _run_scores(ctx: _Context, clusters: Sequence[ClusterInfo]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    per_cluster: dict[str, dict[str, int]] = {c.name: {} for c in clusters}
    totals = dict.fromkeys(per_cluster, 0)
    for name in ctx.profile.scores:
        plugin = SCORE_PLUGINS[name]
        scores = {c.name: plugin.score(ctx, c) for c in clusters}
        if plugin.normalize:
            default_normalize_score(scores, plugin.reverse)
        weight = ctx.profile.score_weight(name)
        for cluster, score in scores.items():
            per_cluster[cluster][name] = score
            totals[cluster] += weight * score
    return per_cluster, totals


def _run_select(ctx: _Context, names: list[str], totals: Mapping[str, int]) -> tuple[list[str], dict[str, str]]:
    selected, cut = list(names), {}
    for name in ctx.profile.select:
        selected, more = SELECT_PLUGINS[name](ctx, selected, totals)
        cut.update({cluster: f"{name}: {why}" for cluster, why in more.items()})
    return selected, cut


# --------------------------------------------------------------------------- explanation


def _explain_filters(result: ScheduleResult, clusters: Sequence[ClusterInfo], profile: Profile) -> None:
    lines = result.explanation
    lines.append(
        f"Filter ({', '.join(profile.filters) or 'no plugins'}): "
        f"{len(result.feasible)} of {len(clusters)} clusters passed."
    )
    for cluster in clusters:
        reasons = result.filtered.get(cluster.name)
        if reasons:
            lines.append(f"  {cluster.name}: filtered out: {'; '.join(reasons)}")
        else:
            lines.append(f"  {cluster.name}: passed")


def _explain_scores(result: ScheduleResult, profile: Profile) -> None:
    lines = result.explanation
    if not profile.scores:
        lines.append("Score: no score plugins; every feasible cluster scores 0.")
        return
    weighted = [f"{p}x{profile.score_weight(p)}" if profile.score_weight(p) != 1 else p for p in profile.scores]
    lines.append(f"Score ({', '.join(weighted)}; each 0..{MAX_CLUSTER_SCORE}, summed):")
    for name in result.feasible:
        parts = ", ".join(f"{plugin} {score}" for plugin, score in result.scores[name].items())
        lines.append(f"  {name}: {result.total_scores[name]} ({parts})")


def _explain_select(result: ScheduleResult, profile: Profile, max_clusters: int | None) -> None:
    lines = result.explanation
    limit = "unlimited" if max_clusters is None else str(max_clusters)
    lines.append(
        f"Select ({', '.join(profile.select) or 'no plugins'}, maxClusters {limit}): "
        f"kept {len(result.selected)} of {len(result.feasible)}: {', '.join(result.selected) or 'none'}."
    )
    for name, why in result.not_selected.items():
        lines.append(f"  {name}: not selected: {why}")


def _describe_weights(plan_: _ReplicaPlan, unit: SchedulingUnit) -> str:
    if plan_.source == "static":
        return "static weights from the placements"
    if plan_.source == "equal":
        return "equal weights (dynamic weights disabled in the profile)"
    resource = GPU_RESOURCE if GPU_RESOURCE in unit.resource_request else CPU
    return f"dynamic weights from free {resource} (water level, per mille)"


def _explain_replicas(result: ScheduleResult, ctx: _Context, plan_: _ReplicaPlan) -> None:
    lines = result.explanation
    mode = "avoiding migration" if ctx.unit.avoid_migration else "rebalancing freely"
    lines.append(f"Replicas ({CLUSTER_CAPACITY_WEIGHT}): {ctx.desired} replicas, {_describe_weights(plan_, ctx.unit)}, {mode}.")
    for name in result.selected:
        parts = [f"weight {plan_.weights.get(name, 0)}"]
        placement = ctx.placements.get(name)
        if placement is not None and placement.min_replicas:
            parts.append(f"min {placement.min_replicas}")
        if placement is not None and placement.max_replicas is not None:
            parts.append(f"max {placement.max_replicas}")
        if name in plan_.capped:
            parts.append(plan_.capped[name])
        if name in plan_.estimated_capacity:
            parts.append(f"estimated capacity {plan_.estimated_capacity[name]}")
        have = ctx.current.get(name)
        if have is not None:
            parts.append(f"currently {have}")
        got = plan_.replicas.get(name, 0)
        outcome = f"{got} replicas" if got else "0 replicas (dropped from the placement)"
        lines.append(f"  {name}: {outcome} ({', '.join(parts)})")
    for name, extra in plan_.overflow.items():
        lines.append(f"  {name}: overflow {extra}: its estimated capacity could not take them")
    if result.unplaced:
        lines.append(f"  {result.unplaced} replicas found no cluster with room.")


def _explain_result(result: ScheduleResult) -> None:
    if not result.clusters:
        result.explanation.append("Result: no cluster.")
        return
    shown = ", ".join(f"{n}={'copy' if r is None else r}" for n, r in result.clusters.items())
    result.explanation.append(f"Result: {shown}.")


# --------------------------------------------------------------------------- schedule


def _sticky(ctx: _Context, clusters: Sequence[ClusterInfo], result: ScheduleResult) -> None:
    """Sticky units keep their current clusters untouched (upstream does not reschedule them)."""
    result.sticky = True
    for name, replicas in ctx.current.items():
        result.clusters[name] = None if ctx.mode == DUPLICATE else replicas
    result.selected = list(result.clusters)
    result.explanation.append("Sticky cluster: the unit is already placed, so it is not rescheduled.")
    for cluster in clusters:
        if cluster.name in result.clusters:
            result.explanation.append(f"  {cluster.name}: kept as is")
        else:
            result.explanation.append(f"  {cluster.name}: not considered (sticky placement)")
    _explain_result(result)


def _resolve_profile(profile: Profile | str) -> Profile:
    if isinstance(profile, Profile):
        return profile
    if profile in PROFILES:
        return PROFILES[profile]
    raise _UnitError(f"unknown scheduling profile {profile!r}")


def schedule(
    unit: SchedulingUnit,
    clusters: Sequence[ClusterInfo],
    profile: Profile | str = DEFAULT_PROFILE,
) -> ScheduleResult:
    """Run filter → score → select → replicas for ``unit`` over ``clusters``.

    Never raises for a bad unit: the problem is reported in
    ``ScheduleResult.error`` (and the explanation) with no clusters chosen,
    as upstream fails the scheduling attempt. Duplicate cluster names are a
    caller bug and raise ``ValueError``.
    """
    names = [c.name for c in clusters]
    if len(set(names)) != len(names):
        raise ValueError("cluster names must be unique")
    result = ScheduleResult(profile=getattr(profile, "name", str(profile)))
    try:
        prof = _resolve_profile(profile)
        ctx = _prepare(unit, prof, clusters)
    except _UnitError as exc:
        return _fail(result, str(exc), clusters)
    result.explanation.append(
        f"Scheduling {unit.key} ({ctx.mode}"
        + (f", {ctx.desired} replicas" if ctx.mode == DIVIDE else "")
        + f") with profile {prof.name!r} over {len(clusters)} clusters."
    )
    if unit.sticky_cluster and ctx.current:
        _sticky(ctx, clusters, result)
        return result
    try:
        _schedule(ctx, clusters, result)
    except _UnitError as exc:
        return _fail(result, str(exc), clusters)
    return result


def _fail(result: ScheduleResult, message: str, clusters: Sequence[ClusterInfo]) -> ScheduleResult:
    result.error = message
    result.clusters = {}
    result.explanation.append(f"Error: {message}; nothing is scheduled.")
    shown = {line.split(":", 1)[0].strip() for line in result.explanation if line.startswith("  ")}
    for cluster in clusters:
        if cluster.name not in shown:
            result.explanation.append(f"  {cluster.name}: not scheduled")
    return result


def _schedule(ctx: _Context, clusters: Sequence[ClusterInfo], result: ScheduleResult) -> None:
    prof = ctx.profile
    feasible, result.filtered = _run_filters(ctx, clusters)
    result.feasible = [c.name for c in feasible]
    _explain_filters(result, clusters, prof)
    if not feasible:
        _explain_result(result)
        return

    result.scores, result.total_scores = _run_scores(ctx, feasible)
    _explain_scores(result, prof)

    result.selected, result.not_selected = _run_select(ctx, result.feasible, result.total_scores)
    _explain_select(result, prof, ctx.unit.max_clusters)

    if ctx.mode == DUPLICATE:
        result.clusters = dict.fromkeys(result.selected)
        result.explanation.append("Replicas: Duplicate mode, every selected cluster gets a full copy.")
        _explain_result(result)
        return
    _replicas_phase(ctx, feasible, result)
    _explain_result(result)


def _replicas_phase(ctx: _Context, feasible: Sequence[ClusterInfo], result: ScheduleResult) -> None:
    lines = result.explanation
    by_name = {c.name: c for c in feasible}
    chosen = [by_name[name] for name in result.selected]
    if not chosen:
        lines.append("Replicas: no cluster selected.")
        return
    if ctx.desired <= 0:
        lines.append("Replicas: nothing to split (0 replicas wanted); no cluster is used.")
        return
    if not ctx.profile.replicas:
        lines.append("Replicas: no replicas plugin in the profile; nothing is placed (as upstream).")
        return
    plan_ = REPLICAS_PLUGINS[ctx.profile.replicas[0]](ctx, chosen)
    result.weights = dict(plan_.weights)
    result.weights_source = plan_.source
    result.estimated_capacity = dict(plan_.estimated_capacity)
    result.overflow = dict(plan_.overflow)
    result.clusters = {name: plan_.replicas[name] for name in result.selected if plan_.replicas.get(name, 0) > 0}
    result.unplaced = max(ctx.desired - sum(result.clusters.values()), 0)  # type: ignore[arg-type]
    _explain_replicas(result, ctx, plan_)


# --------------------------------------------------------------------------- validation


def _validate_terms(terms: Any, path: str, errors: dict[str, str]) -> None:
    if not isinstance(terms, list):
        errors[path] = "must be a list of cluster selector terms"
        return
    if not terms:
        errors[path] = "an empty list of terms matches no cluster"
        return
    for i, term in enumerate(terms):
        compiled = _Term.compile(term if isinstance(term, Mapping) else {})
        if compiled.empty:
            errors[f"{path}[{i}]"] = "a term needs matchExpressions or matchFields (an empty term matches nothing)"
        elif compiled.error:
            errors[f"{path}[{i}]"] = compiled.error


def _validate_affinity(value: Any, errors: dict[str, str]) -> None:
    try:
        affinity = _affinity(value)
    except (TypeError, AttributeError):
        errors["cluster_affinity"] = "must be an object with required/preferred terms"
        return
    if affinity.required is not None:
        _validate_terms(affinity.required, "cluster_affinity.required", errors)
    for i, term in enumerate(affinity.preferred):
        path = f"cluster_affinity.preferred[{i}]"
        weight = term.get("weight") if isinstance(term, Mapping) else None
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            errors[path] = "weight must be an integer from 1 to 100"
            continue
        try:
            _expressions_selector((term.get("preference") or {}).get("matchExpressions") or [])
        except _UnitError as exc:
            errors[path] = str(exc)


def _validate_tolerations(tolerations: Any, errors: dict[str, str]) -> None:
    for i, tol in enumerate(tolerations or ()):
        path = f"tolerations[{i}]"
        if not isinstance(tol, Mapping):
            errors[path] = "must be an object"
            continue
        operator = tol.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            errors[path] = f"operator {operator!r} is not Equal or Exists"
        elif (tol.get("effect") or "") not in ("", *TAINT_EFFECTS):
            errors[path] = f"effect {tol.get('effect')!r} is not one of {', '.join(TAINT_EFFECTS)}"
        elif operator == "Exists" and tol.get("value"):
            errors[path] = "value must be empty when operator is Exists"
        elif not tol.get("key") and operator != "Exists":
            errors[path] = "operator must be Exists when key is empty"


def _validate_placements(placements: Any, errors: dict[str, str]) -> None:
    for name, value in (placements or {}).items():
        path = f"placements.{name}"
        try:
            p = _placement(value)
        except TypeError as exc:
            errors[path] = str(exc)
            continue
        if p.weight is not None and p.weight < 0:
            errors[path] = "weight must not be negative"
        elif p.min_replicas < 0:
            errors[path] = "min_replicas must not be negative"
        elif p.max_replicas is not None and p.max_replicas < 0:
            errors[path] = "max_replicas must not be negative"
        elif p.max_replicas is not None and p.min_replicas > p.max_replicas:
            errors[path] = f"min_replicas ({p.min_replicas}) exceeds max_replicas ({p.max_replicas})"


def _validate_selector(selector: Any, errors: dict[str, str]) -> None:
    if not isinstance(selector, Mapping):
        errors["cluster_selector"] = "must map label keys to values"
        return
    for key, value in selector.items():
        problems = validate_label_key(key) or validate_label_value(value)
        if problems:
            errors["cluster_selector"] = f"{key!r}: {'; '.join(problems)}"
            return


def validate_unit(
    unit: SchedulingUnit,
    profile: str | None = None,
    known_profiles: Iterable[str] | Mapping[str, Profile] = PROFILES,
) -> dict[str, str]:
    """Field → message for everything that would make scheduling fail or surprise.

    For the API: an empty dict means the unit is valid. ``profile`` is the
    policy's scheduling profile name, checked against ``known_profiles``.
    """
    errors: dict[str, str] = {}
    if not unit.name:
        errors["name"] = "must not be empty"
    try:
        _gvk_spellings(unit.gvk)
    except _UnitError as exc:
        errors["gvk"] = str(exc)
    if unit.scheduling_mode not in SCHEDULING_MODES:
        errors["scheduling_mode"] = f"must be one of {', '.join(SCHEDULING_MODES)}"
    if unit.desired_replicas is not None and unit.desired_replicas < 0:
        errors["desired_replicas"] = "must not be negative"
    for resource, amount in unit.resource_request.items():
        if not isinstance(amount, int) or amount < 0:
            errors[f"resource_request.{resource}"] = "must be a non-negative integer"
    _validate_selector(unit.cluster_selector, errors)
    _validate_affinity(unit.cluster_affinity, errors)
    _validate_tolerations(unit.tolerations, errors)
    if unit.max_clusters is not None and unit.max_clusters < 0:
        errors["max_clusters"] = "must not be negative"
    _validate_placements(unit.placements, errors)
    for name, replicas in unit.current_clusters.items():
        if replicas is not None and replicas < 0:
            errors[f"current_clusters.{name}"] = "must not be negative"
    if profile is not None and profile not in known_profiles:
        errors["profile"] = f"unknown scheduling profile {profile!r}"
    return errors

