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

For many units over the same clusters (a fleet-wide reschedule) use
:class:`ClusterSnapshot` or :func:`schedule_many`: same results, but filter,
score and select results are shared between units with the same inputs
(units of one policy), and ``explain=False`` skips the explanation text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    "ClusterSnapshot",
    "Placement",
    "Profile",
    "ScheduleResult",
    "SchedulingUnit",
    "default_normalize_score",
    "format_amount",
    "matches_terms",
    "parse_resources",
    "schedule",
    "schedule_many",
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


@dataclass
class _ReplicaInputs:
    """The replicas phase's inputs that do not depend on where the unit runs today.

    They depend on the chosen clusters (in order), the placements, the
    tolerations, the request and the profile only, so a batch reschedule
    can share them between units (see :class:`ClusterSnapshot`).
    ``held`` lists the clusters that may keep but not grow what they run
    (untolerated ``NoSchedule`` taint, cordoned), with the reason and their
    preference before that cap; ``rooms`` is how many more replicas each
    cluster's free resources hold (estimated capacity = current + room).
    """

    names: list[str]
    weights: dict[str, int]
    source: str
    preferences: dict[str, ClusterPreference]
    held: list[tuple[str, str, ClusterPreference]]
    rooms: dict[str, int]


def _replica_inputs(ctx: _Context, clusters: Sequence[ClusterInfo]) -> _ReplicaInputs:
    weights, source = _scheduling_weights(ctx, clusters)
    preferences: dict[str, ClusterPreference] = {}
    held: list[tuple[str, str, ClusterPreference]] = []
    rooms: dict[str, int] = {}
    for cluster in clusters:
        placement = ctx.placements.get(cluster.name, Placement())
        preference = ClusterPreference(
            weight=max(int(weights.get(cluster.name, 0)), 0),
            min_replicas=placement.min_replicas,
            max_replicas=placement.max_replicas,
        )
        preferences[cluster.name] = preference
        if _first_untolerated(cluster.taints, ctx.tolerations, (NO_SCHEDULE,)) is not None:
            held.append((cluster.name, "untolerated NoSchedule taint", preference))
        elif cluster.cordoned:
            held.append((cluster.name, "cordoned", preference))
        if ctx.profile.estimate_capacity:
            room = _estimated_capacity(ctx, cluster, 0)
            if room is not None:
                rooms[cluster.name] = room
    return _ReplicaInputs([c.name for c in clusters], weights, source, preferences, held, rooms)


def _plan_replicas(ctx: _Context, inputs: _ReplicaInputs) -> _ReplicaPlan:
    """Apply today's replicas to the shared inputs (caps of held clusters, capacities) and plan."""
    total = ctx.desired
    current = {name: (total if replicas is None else replicas) for name, replicas in ctx.current.items()}
    preferences = inputs.preferences
    capped: dict[str, str] = {}
    if inputs.held:
        preferences = dict(preferences)
        for name, why, preference in inputs.held:
            have = current.get(name, 0)
            ceiling = preference.max_replicas
            if ceiling is None or have < ceiling:
                ceiling = have
            capped[name] = f"{why}: no new replicas, at most the {have} it runs"
            preferences[name] = ClusterPreference(preference.weight, preference.min_replicas, ceiling)
    estimates = dict(inputs.rooms)
    for name, have in current.items():
        room = inputs.rooms.get(name)
        if room is not None:
            estimates[name] = have + room
    planned, overflow = plan(
        preferences, total, inputs.names, current, estimates, {},
        key=ctx.unit.key, avoid_migration=ctx.unit.avoid_migration,
    )
    return _ReplicaPlan(planned, inputs.weights, inputs.source, estimates, overflow, capped)


def replicas_cluster_capacity_weight(ctx: _Context, clusters: Sequence[ClusterInfo]) -> _ReplicaPlan:
    """Upstream ``ClusterCapacityWeight``: weights + min/max + capacity into the Spread planner."""
    return _plan_replicas(ctx, _replica_inputs(ctx, clusters))


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


def _filter_plugins(profile: Profile) -> list[tuple[str, FilterPlugin]]:
    return [(name, FILTER_PLUGINS[name]) for name in profile.filters]


def _filter_reasons(ctx: _Context, plugins: Sequence[tuple[str, FilterPlugin]], cluster: ClusterInfo) -> list[str]:
    """Every failing filter's reason for one cluster, prefixed by the plugin name (empty = passes)."""
    reasons = []
    for name, plugin in plugins:
        reason = plugin(ctx, cluster)
        if reason is not None:
            reasons.append(f"{name}: {reason}")
    return reasons


def _run_filters(ctx: _Context, clusters: Sequence[ClusterInfo]) -> tuple[list[ClusterInfo], dict[str, list[str]]]:
    plugins = _filter_plugins(ctx.profile)
    feasible: list[ClusterInfo] = []
    filtered: dict[str, list[str]] = {}
    for cluster in clusters:
        reasons = _filter_reasons(ctx, plugins, cluster)
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
    _keep_sticky(ctx, result)
    _explain_sticky(result, clusters)


def _keep_sticky(ctx: _Context, result: ScheduleResult) -> None:
    result.sticky = True
    for name, replicas in ctx.current.items():
        result.clusters[name] = None if ctx.mode == DUPLICATE else replicas
    result.selected = list(result.clusters)


def _explain_sticky(result: ScheduleResult, clusters: Sequence[ClusterInfo]) -> None:
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
    result.explanation.append(_header(ctx, len(clusters)))
    if unit.sticky_cluster and ctx.current:
        _sticky(ctx, clusters, result)
        return result
    try:
        _schedule(ctx, clusters, result)
    except _UnitError as exc:
        return _fail(result, str(exc), clusters)
    return result


def _header(ctx: _Context, count: int) -> str:
    return (
        f"Scheduling {ctx.unit.key} ({ctx.mode}"
        + (f", {ctx.desired} replicas" if ctx.mode == DIVIDE else "")
        + f") with profile {ctx.profile.name!r} over {count} clusters."
    )


def _fail(result: ScheduleResult, message: str, clusters: Sequence[ClusterInfo]) -> ScheduleResult:
    result.error = message
    result.clusters = {}
    result.explanation.append(f"Error: {message}; nothing is scheduled.")
    shown = {line.split(":", 1)[0].strip() for line in result.explanation if line.startswith("  ")}
    for cluster in clusters:
        if cluster.name not in shown:
            result.explanation.append(f"  {cluster.name}: not scheduled")
    return result


_DUPLICATE_LINE = "Replicas: Duplicate mode, every selected cluster gets a full copy."


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
        result.explanation.append(_DUPLICATE_LINE)
        _explain_result(result)
        return
    _replicas_phase(ctx, feasible, result)
    _explain_result(result)


def _replicas_phase(ctx: _Context, feasible: Sequence[ClusterInfo], result: ScheduleResult) -> None:
    by_name = {c.name: c for c in feasible}
    chosen = [by_name[name] for name in result.selected]
    skipped = _replicas_skipped(ctx, bool(chosen))
    if skipped is not None:
        result.explanation.append(skipped)
        return
    plan_ = REPLICAS_PLUGINS[ctx.profile.replicas[0]](ctx, chosen)
    _apply_replica_plan(result, ctx, plan_)
    _explain_replicas(result, ctx, plan_)


def _replicas_skipped(ctx: _Context, any_chosen: bool) -> str | None:
    """Why the replicas phase places nothing (the explanation line), or None when it runs."""
    if not any_chosen:
        return "Replicas: no cluster selected."
    if ctx.desired <= 0:
        return "Replicas: nothing to split (0 replicas wanted); no cluster is used."
    if not ctx.profile.replicas:
        return "Replicas: no replicas plugin in the profile; nothing is placed (as upstream)."
    return None


def _apply_replica_plan(result: ScheduleResult, ctx: _Context, plan_: _ReplicaPlan) -> None:
    result.weights = dict(plan_.weights)
    result.weights_source = plan_.source
    result.estimated_capacity = dict(plan_.estimated_capacity)
    result.overflow = dict(plan_.overflow)
    planned = plan_.replicas
    result.clusters = {name: planned[name] for name in result.selected if planned.get(name, 0) > 0}
    result.unplaced = max(ctx.desired - sum(result.clusters.values()), 0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- batch scheduling
#
# A fleet-wide reschedule runs thousands of units over the same clusters, and most units
# share a policy: the same filters, selector, tolerations and request give the same
# filter and score results on every cluster. ClusterSnapshot computes each phase once per
# *signature* of exactly the unit inputs that phase reads, and does per unit only what
# depends on the unit alone (where it runs today, its replica count, its key).


class _Uncacheable(Exception):
    """A unit input has no canonical hashable form; such a unit takes the plain path."""


def _freeze_json(value: Any) -> tuple[Any, ...]:
    """Hashable canonical form of decoded JSON (affinity terms).

    Dict key order is ignored and lists equal tuples (the plugins only
    ``.get`` keys and iterate sequences); scalars keep their exact type, since
    1, 1.0 and True print differently. Anything else raises ``_Uncacheable``.
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return (kind, value)
    if kind is list or kind is tuple:
        return (list, tuple(_freeze_json(item) for item in value))
    if kind is dict:
        items = []
        for key, item in value.items():
            if type(key) is not str:
                raise _Uncacheable(key)
            items.append((key, _freeze_json(item)))
        items.sort(key=lambda pair: pair[0])
        return (dict, tuple(items))
    raise _Uncacheable(value)


def _typed(value: Any) -> tuple[type, Any]:
    """A value with its exact type: equal but differently typed numbers must not share results."""
    return (type(value), value)


def _tolerations_key(tolerations: Sequence[Mapping[str, str]]) -> tuple[tuple[Any, ...], ...]:
    """The four fields :func:`tolerates` reads, normalised exactly as it normalises them.

    Tolerations are only ever compared for equality (never printed), so two
    that normalise equal tolerate the same taints.
    """
    return tuple(
        (t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or "")
        for t in tolerations
    )


def _request_key(request: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The resource request, order-free; only exact ``str -> int`` requests are cached."""
    for name, amount in request.items():
        if type(name) is not str or type(amount) is not int:
            raise _Uncacheable(name)
    return tuple(sorted(request.items()))


def _selector_key(selector: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The clusterSelector in its own order (the failure reason prints it in that order)."""
    items = tuple(selector.items())
    for key, value in items:
        if type(key) is not str or type(value) is not str:
            raise _Uncacheable(key)
    return items


def _placements_key(placements: Mapping[str, Placement]) -> frozenset[tuple[Any, ...]]:
    return frozenset(
        (name, _typed(p.weight), _typed(p.min_replicas), _typed(p.max_replicas)) for name, p in placements.items()
    )


@dataclass(frozen=True)
class _UnitKeys:
    """What each phase reads from a unit, as cache keys (see :class:`ClusterSnapshot`).

    ``filters``: GVK, tolerations, request, placement names, clusterSelector,
    required affinity. ``scores``: tolerations (PreferNoSchedule), request,
    preferred affinity. ``select``: maxClusters. ``replicas``: placements
    (weights, min, max), tolerations (NoSchedule), request. Per-unit inputs
    (current replicas, avoid_migration, replicas, key, mode) are in no key:
    they are applied per unit.
    """

    filters: tuple[Any, ...]
    scores: tuple[Any, ...]
    select: tuple[Any, ...]
    replicas: tuple[Any, ...]


class _BoundedCache(dict):  # type: ignore[type-arg]
    """A dict that forgets its oldest entry beyond ``limit`` entries.

    Signatures are few in practice (policies × request shapes), but a stream
    of one-off units must not grow memory without bound.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: Any, value: Any) -> Any:
        if len(self) >= self.limit:
            del self[next(iter(self))]
        self[key] = value
        return value


@dataclass(frozen=True)
class _FilterBase:
    """Filter results for a unit that runs nowhere yet: ``reasons`` per cluster index (None = passes)."""

    reasons: tuple[tuple[str, ...] | None, ...]
    feasible: tuple[int, ...]
    filtered: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class _Phases:
    """Scores and selection over one feasible set; ``error`` is the select phase's unit error."""

    feasible: list[str]
    scores: dict[str, dict[str, int]]
    totals: dict[str, int]
    selected: list[str]
    not_selected: dict[str, str]
    error: str | None


class _ProfileCaches:
    """One profile's caches: phase results differ between profiles for the same unit."""

    def __init__(self, limit: int) -> None:
        self.filters = _BoundedCache(limit)
        self.raw_scores = _BoundedCache(limit)
        self.phases = _BoundedCache(limit)
        self.replicas = _BoundedCache(limit * 4)


#: The plugins whose inputs the snapshot's cache keys cover, as registered at import. A
#: profile using anything else (or a plugin replaced in a registry later) is scheduled
#: through plain :func:`schedule`, uncached.
_BUILTIN_PLUGINS: dict[str, dict[str, Any]] = {phase: dict(registry) for phase, registry in _REGISTRIES.items()}


def _profile_plugins(profile: Profile) -> tuple[tuple[Mapping[str, Any], str, Any], ...] | None:
    """(registry, name, built-in plugin) for every plugin of the profile; None if one is not built in."""
    plugins = []
    for phase in _PHASES:
        registry, builtin = _REGISTRIES[phase], _BUILTIN_PLUGINS[phase]
        for name in getattr(profile, phase):
            if name not in builtin:
                return None
            plugins.append((registry, name, builtin[name]))
    return tuple(plugins)


class ClusterSnapshot:
    """The clusters prepared once for scheduling many units (a fleet-wide reschedule).

    ``snapshot.schedule(unit)`` returns exactly what ``schedule(unit,
    clusters, profile)`` returns, field by field, except that with
    ``explain=False`` the ``explanation`` is left empty (building ~one line
    per cluster per unit costs about as much as the scheduling itself).

    Why it is faster: filter, score and select results are cached per
    *signature*, the unit inputs those phases read (see :class:`_UnitKeys`),
    computed as if the unit ran nowhere. Clusters where the unit runs today
    are the only ones whose filter result can depend on the unit alone
    (ClusterReady with cordoning and avoid_migration, NoSchedule taints and
    resource fit are relaxed there), so they are re-filtered per unit; when
    that changes which clusters are feasible, the clusters that flipped become
    part of the score/select key (normalised scores depend on the feasible
    set). The replicas phase caches weights, min/max and free room per chosen
    cluster list and placements; caps from current replicas, capacities and
    the planner itself run per unit. A unit whose inputs have no canonical
    hashable form, or a profile with plugins the snapshot does not know, goes
    through plain :func:`schedule`.

    The snapshot is the cluster state when it was built: build a new one when
    clusters change, and do not mutate the ``ClusterInfo`` objects while using
    it. Not thread-safe; use one per worker (they are cheap to build).
    Duplicate cluster names raise ``ValueError`` here, as :func:`schedule` does.
    """

    def __init__(
        self,
        clusters: Sequence[ClusterInfo],
        profile: Profile | str = DEFAULT_PROFILE,
        *,
        explain: bool = True,
        cache_size: int = 1024,
    ) -> None:
        self.clusters: tuple[ClusterInfo, ...] = tuple(clusters)
        self.names: tuple[str, ...] = tuple(c.name for c in self.clusters)
        if len(set(self.names)) != len(self.names):
            raise ValueError("cluster names must be unique")
        self.profile = profile
        self.explain = explain
        self._index = {name: i for i, name in enumerate(self.names)}
        self._reported_current = [(c.name, c.current_replicas) for c in self.clusters if c.current_replicas]
        self._cache_size = cache_size
        self._profiles: dict[Profile, _ProfileCaches] = {}
        self._plugins: dict[Profile, tuple[tuple[Mapping[str, Any], str, Any], ...] | None] = {}
        self._gvks: dict[str, tuple[frozenset[str] | None, str | None]] = {}
        self._required: _BoundedCache = _BoundedCache(cache_size)
        self._preferred: _BoundedCache = _BoundedCache(cache_size)
        #: How units were served: "cached" (shared phase results) or "plain" (through schedule()).
        self.stats = {"cached": 0, "plain": 0}

    # ------------------------------------------------------------------ entry points

    def schedule(
        self,
        unit: SchedulingUnit,
        profile: Profile | str | None = None,
        *,
        explain: bool | None = None,
    ) -> ScheduleResult:
        """Schedule one unit; ``profile`` and ``explain`` default to the snapshot's."""
        profile = self.profile if profile is None else profile
        explain = self.explain if explain is None else explain
        prepared = self._prepare(unit, profile)
        if prepared is None:
            return self._plain(unit, profile, explain)
        self.stats["cached"] += 1
        ctx, keys, preferred_error = prepared
        result = ScheduleResult(profile=ctx.profile.name if isinstance(profile, Profile) else profile)
        if preferred_error is not None:
            return self._fail(result, preferred_error, explain)
        if explain:
            result.explanation.append(_header(ctx, len(self.clusters)))
        if unit.sticky_cluster and ctx.current:
            _keep_sticky(ctx, result)
            if explain:
                _explain_sticky(result, self.clusters)
            return result
        try:
            self._schedule(ctx, keys, result, explain)
        except _UnitError as exc:
            return self._fail(result, str(exc), explain)
        return result

    def schedule_many(
        self,
        units: Iterable[SchedulingUnit],
        profile: Profile | str | None = None,
        *,
        explain: bool | None = None,
    ) -> Iterator[ScheduleResult]:
        """Results in the order of ``units``, lazily (a reschedule can stream them to storage)."""
        for unit in units:
            yield self.schedule(unit, profile, explain=explain)

    # ------------------------------------------------------------------ unit preparation

    def _plain(self, unit: SchedulingUnit, profile: Profile | str, explain: bool) -> ScheduleResult:
        """The uncached reference path, for inputs the caches cannot key."""
        self.stats["plain"] += 1
        result = schedule(unit, self.clusters, profile)
        if not explain:
            result.explanation = []
        return result

    def _fail(self, result: ScheduleResult, message: str, explain: bool) -> ScheduleResult:
        if explain:
            return _fail(result, message, self.clusters)
        result.error = message
        result.clusters = {}
        return result

    def _prepare(
        self, unit: SchedulingUnit, profile: Profile | str
    ) -> tuple[_Context, _UnitKeys, str | None] | None:
        """The unit's context and cache keys, or None to take the plain path.

        Mirrors :func:`_prepare` with cached compilation. Anything unusual
        (unknown profile, unknown plugins, inputs without a canonical form,
        inputs that make ``_prepare`` raise) returns None: :func:`schedule`
        then reports or raises exactly what it always did. The third item is
        an invalid preferred affinity, which fails the unit like upstream.
        """
        if isinstance(profile, Profile):
            prof = profile
        elif isinstance(profile, str) and profile in PROFILES:
            prof = PROFILES[profile]
        else:
            return None
        if not self._builtin_plugins_only(prof):
            return None
        try:
            return self._context(unit, prof)
        except Exception:  # noqa: BLE001 - the plain path reproduces the exact outcome
            return None

    def _context(self, unit: SchedulingUnit, prof: Profile) -> tuple[_Context, _UnitKeys, str | None]:
        if type(unit.gvk) is not str:
            raise _Uncacheable(unit.gvk)
        current: dict[str, int | None] = dict(unit.current_clusters)
        for name, replicas in self._reported_current:
            if name not in current:
                current[name] = replicas
        affinity = _affinity(unit.cluster_affinity)
        required_key = None if affinity.required is None else _freeze_json(affinity.required)
        preferred_key = _freeze_json(affinity.preferred)
        tolerations = tuple(unit.tolerations)
        tolerations_key = _tolerations_key(tolerations)
        request = dict(unit.resource_request)
        request_key = _request_key(request)
        selector = _selector_key(unit.cluster_selector)
        placements = {name: _placement(p) for name, p in unit.placements.items()}
        keys = _UnitKeys(
            filters=(unit.gvk, tolerations_key, request_key, frozenset(placements), selector, required_key),
            scores=(tolerations_key, request_key, preferred_key),
            select=_typed(unit.max_clusters),
            replicas=(_placements_key(placements), tolerations_key, request_key),
        )
        hash(keys)  # unhashable values (a list as a toleration value, ...) take the plain path
        preferred, preferred_error = self._compiled_preferred(preferred_key, affinity.preferred)
        gvk, gvk_error = self._gvk(unit.gvk)
        ctx = _Context(
            unit=unit,
            profile=prof,
            mode=DUPLICATE if unit.scheduling_mode == DUPLICATE or unit.desired_replicas is None else DIVIDE,
            current=current,
            scheduled=frozenset(name for name, replicas in current.items() if replicas is None or replicas > 0),
            gvk=gvk,
            gvk_error=gvk_error,
            selector=selector,
            required=None if affinity.required is None else self._compiled_required(required_key, affinity.required),
            preferred=preferred,
            tolerations=tolerations,
            prefer_tolerations=tuple(t for t in tolerations if (t.get("effect") or "") in ("", PREFER_NO_SCHEDULE)),
            request=request,
            score_resources=_score_resources(request),
            placements=placements,
        )
        return ctx, keys, preferred_error

    def _builtin_plugins_only(self, prof: Profile) -> bool:
        """Whether the registries still hold the built-in plugins this profile names (checked per unit)."""
        if prof not in self._plugins:
            self._plugins[prof] = _profile_plugins(prof)
        plugins = self._plugins[prof]
        return plugins is not None and all(registry.get(name) is plugin for registry, name, plugin in plugins)

    def _gvk(self, gvk: str) -> tuple[frozenset[str] | None, str | None]:
        known = self._gvks.get(gvk)
        if known is None:
            try:
                known = (_gvk_spellings(gvk), None)
            except _UnitError as exc:
                known = (None, str(exc))
            self._gvks[gvk] = known
        return known

    def _compiled_required(self, key: Any, terms: Sequence[Mapping[str, Any] | None]) -> tuple[_Term, ...]:
        compiled = self._required.get(key)
        if compiled is None:
            compiled = self._required.remember(key, tuple(_Term.compile(t) for t in terms))
        return compiled

    def _compiled_preferred(
        self, key: Any, preferred: Sequence[Mapping[str, Any]]
    ) -> tuple[tuple[tuple[int, Selector], ...], str | None]:
        compiled = self._preferred.get(key)
        if compiled is None:
            try:
                compiled = (_compile_preferred(preferred), None)
            except _UnitError as exc:
                compiled = ((), str(exc))
            self._preferred.remember(key, compiled)
        return compiled

    def _caches(self, prof: Profile) -> _ProfileCaches:
        caches = self._profiles.get(prof)
        if caches is None:
            caches = self._profiles[prof] = _ProfileCaches(self._cache_size)
        return caches

    # ------------------------------------------------------------------ phases

    def _schedule(self, ctx: _Context, keys: _UnitKeys, result: ScheduleResult, explain: bool) -> None:
        """:func:`_schedule` over cached phase results (same order of fields and lines)."""
        prof = ctx.profile
        caches = self._caches(prof)
        base = self._filter_base(ctx, caches, keys)
        reasons, flipped = self._refilter_where_running(ctx, base)
        result.filtered = self._filtered(base, reasons)
        phases = self._phases(ctx, caches, keys, base, reasons, flipped)
        result.feasible = list(phases.feasible)
        if explain:
            _explain_filters(result, self.clusters, prof)
        if not phases.feasible:
            if explain:
                _explain_result(result)
            return
        result.scores = dict(zip(phases.scores, map(dict.copy, phases.scores.values())))
        result.total_scores = dict(phases.totals)
        if explain:
            _explain_scores(result, prof)
        if phases.error is not None:
            raise _UnitError(phases.error)
        result.selected = list(phases.selected)
        result.not_selected = dict(phases.not_selected)
        if explain:
            _explain_select(result, prof, ctx.unit.max_clusters)
        if ctx.mode == DUPLICATE:
            result.clusters = dict.fromkeys(result.selected)
            if explain:
                result.explanation.append(_DUPLICATE_LINE)
        else:
            self._replicas(ctx, caches, keys, result, explain)
        if explain:
            _explain_result(result)

    def _filter_base(self, ctx: _Context, caches: _ProfileCaches, keys: _UnitKeys) -> _FilterBase:
        """Every cluster's filter reasons for a unit running nowhere, cached per filter key.

        With no current replicas the filter plugins read only the key's inputs
        and the cluster, so any unit with the same key gets the same reasons.
        """
        base = caches.filters.get(keys.filters)
        if base is not None:
            return base
        nowhere = replace(ctx, current={}, scheduled=frozenset())
        plugins = _filter_plugins(ctx.profile)
        reasons = tuple(tuple(_filter_reasons(nowhere, plugins, c)) or None for c in self.clusters)
        base = _FilterBase(
            reasons=reasons,
            feasible=tuple(i for i, why in enumerate(reasons) if why is None),
            filtered={self.names[i]: why for i, why in enumerate(reasons) if why is not None},
        )
        return caches.filters.remember(keys.filters, base)

    def _refilter_where_running(
        self, ctx: _Context, base: _FilterBase
    ) -> tuple[dict[int, tuple[str, ...] | None], tuple[int, ...]]:
        """Filter the clusters the unit runs on with the real context.

        Returns the reasons that differ from the base (by cluster index) and
        the indices whose pass/fail flipped, which change the feasible set.
        """
        changed: dict[int, tuple[str, ...] | None] = {}
        plugins = None
        for name in ctx.scheduled:
            i = self._index.get(name)
            if i is None:
                continue
            plugins = plugins or _filter_plugins(ctx.profile)
            reasons = tuple(_filter_reasons(ctx, plugins, self.clusters[i])) or None
            if reasons != base.reasons[i]:
                changed[i] = reasons
        flipped = tuple(sorted(i for i, why in changed.items() if (why is None) != (base.reasons[i] is None)))
        return changed, flipped

    def _filtered(self, base: _FilterBase, changed: Mapping[int, tuple[str, ...] | None]) -> dict[str, list[str]]:
        """``ScheduleResult.filtered`` in cluster order, as fresh lists (results are mutable)."""
        if not changed:
            return dict(zip(base.filtered, map(list, base.filtered.values())))
        filtered: dict[str, list[str]] = {}
        for i, name in enumerate(self.names):
            why = changed[i] if i in changed else base.reasons[i]
            if why is not None:
                filtered[name] = list(why)
        return filtered

    def _phases(
        self,
        ctx: _Context,
        caches: _ProfileCaches,
        keys: _UnitKeys,
        base: _FilterBase,
        changed: Mapping[int, tuple[str, ...] | None],
        flipped: tuple[int, ...],
    ) -> _Phases:
        """Scores and selection for the unit's feasible set, cached.

        The key is the filter key plus the flipped clusters (which, with the
        base, determine the feasible set), the score key and maxClusters.
        """
        key = (keys.filters, flipped, keys.scores, keys.select)
        phases = caches.phases.get(key)
        if phases is not None:
            return phases
        if flipped:
            feasible = [i for i, why in enumerate(base.reasons) if changed.get(i, why) is None]
        else:
            feasible = list(base.feasible)
        scores, totals = self._scores(ctx, caches, keys, feasible)
        names = [self.names[i] for i in feasible]
        selected: list[str] = []
        not_selected: dict[str, str] = {}
        error = None
        if feasible:
            try:
                selected, not_selected = _run_select(ctx, names, totals)
            except _UnitError as exc:
                error = str(exc)
        return caches.phases.remember(key, _Phases(names, scores, totals, selected, not_selected, error))

    def _scores(
        self, ctx: _Context, caches: _ProfileCaches, keys: _UnitKeys, feasible: Sequence[int]
    ) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """:func:`_run_scores` with each cluster's raw (unnormalised) scores cached per score key."""
        prof = ctx.profile
        plugins = [SCORE_PLUGINS[name] for name in prof.scores]
        raw = caches.raw_scores.get(keys.scores)
        if raw is None:
            raw = caches.raw_scores.remember(keys.scores, {})
        rows = []
        for i in feasible:
            row = raw.get(i)
            if row is None:
                row = raw[i] = tuple(plugin.score(ctx, self.clusters[i]) for plugin in plugins)
            rows.append(row)
        per_cluster: dict[str, dict[str, int]] = {self.names[i]: {} for i in feasible}
        totals = dict.fromkeys(per_cluster, 0)
        for column, (name, plugin) in enumerate(zip(prof.scores, plugins)):
            scores = {self.names[i]: row[column] for i, row in zip(feasible, rows)}
            if plugin.normalize:
                default_normalize_score(scores, plugin.reverse)
            weight = prof.score_weight(name)
            for cluster, score in scores.items():
                per_cluster[cluster][name] = score
                totals[cluster] += weight * score
        return per_cluster, totals

    def _replicas(
        self, ctx: _Context, caches: _ProfileCaches, keys: _UnitKeys, result: ScheduleResult, explain: bool
    ) -> None:
        """:func:`_replicas_phase` with the unit-independent inputs cached per chosen clusters."""
        skipped = _replicas_skipped(ctx, bool(result.selected))
        if skipped is not None:
            if explain:
                result.explanation.append(skipped)
            return
        key = (keys.replicas, tuple(result.selected))
        inputs = caches.replicas.get(key)
        if inputs is None:
            chosen = [self.clusters[self._index[name]] for name in result.selected]
            inputs = caches.replicas.remember(key, _replica_inputs(ctx, chosen))
        plan_ = _plan_replicas(ctx, inputs)
        _apply_replica_plan(result, ctx, plan_)
        if explain:
            _explain_replicas(result, ctx, plan_)


def schedule_many(
    units: Iterable[SchedulingUnit],
    clusters: Sequence[ClusterInfo],
    profile: Profile | str = DEFAULT_PROFILE,
    *,
    explain: bool = True,
) -> Iterator[ScheduleResult]:
    """``schedule(unit, clusters, profile)`` for every unit, sharing work between them.

    One :class:`ClusterSnapshot` serves the whole batch, so results equal
    :func:`schedule`'s field by field (``explanation`` is empty with
    ``explain=False``, the fast mode for reschedules that store placements
    only). Lazy: results come in the order of ``units`` as they are
    consumed; duplicate cluster names raise ``ValueError`` as soon as
    iteration starts (even with no units).
    """
    snapshot = ClusterSnapshot(clusters, profile, explain=explain)
    yield from snapshot.schedule_many(units)


def matches_terms(terms: Sequence[Mapping[str, Any]], name: str, labels: Mapping[str, str]) -> bool:
    """Whether a cluster satisfies any of ``terms`` (ORed, as ``ClusterAffinity.required``);
    override policies target clusters with the same terms."""
    matched, _ = _match_terms([_Term.compile(t) for t in terms], ClusterInfo(name=name, labels=dict(labels)))
    return matched


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

