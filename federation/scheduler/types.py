"""Names, inputs and results of the scheduler: plugin and mode names, the plain dataclasses a
caller fills in (:class:`ClusterInfo`, :class:`SchedulingUnit`, :class:`Placement`,
:class:`ClusterAffinity`) and the :class:`ScheduleResult` it gets back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from federation.weights import GPU_RESOURCE

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
#: Upstream's ``DefaultRequestedRatioResources``; other requested resources weigh ``DEFAULT_RATIO``.
RESOURCE_WEIGHTS = {CPU: 1, MEMORY: 1, GPU_RESOURCE: 4}
DEFAULT_RATIO = 1
BYTE_RESOURCES = (MEMORY, EPHEMERAL_STORAGE)

# Taint effects (NO_SCHEDULE, ...) are kube.taints'.

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

    def share_scores(self, scores: dict[str, dict[str, int]]) -> None:
        """Take ``scores`` as this result's, copied only when ``scores`` is first read.

        A batch reschedule reads where units go, not why: copying hundreds of
        cached per-cluster score dicts into every result was a tenth of its
        time. Until read, ``scores`` is absent from the instance and
        :meth:`__getattr__` makes the copies then (equality, ``repr`` and
        :meth:`to_dict` read it like any field).
        """
        self.__dict__.pop("scores", None)
        self.__dict__["_shared_scores"] = scores

    def __getattr__(self, name: str) -> Any:
        """Only for ``scores`` shared by :meth:`share_scores` and not yet read: fresh copies of them."""
        shared = self.__dict__.get("_shared_scores") if name == "scores" else None
        if shared is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        del self.__dict__["_shared_scores"]
        self.scores = dict(zip(shared, map(dict.copy, shared.values())))
        return self.scores

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


class UnitError(ValueError):
    """The unit cannot be scheduled as given (upstream returns a framework Error)."""
