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

The package, phase by phase (``from federation.scheduler import ...`` is the public API; the
modules are its layout, and a module's names without a leading underscore are what the other
modules may import from it, the package's internal API; ``_names`` stay in their module):

* ``types``: plugin and mode names, the input dataclasses and :class:`ScheduleResult`;
* ``resources``, ``terms``: quantities and cluster selector terms (KubeAdmiral's reading of
  :mod:`kube.nodeaffinity`); taints and tolerations are :mod:`kube.taints`';
* ``context``: a unit prepared once per call; ``filters``, ``scores``, ``select``,
  ``replicas``: each phase's plugins and registry; ``profiles``: :class:`Profile` and the
  registries by phase;
* ``explain``: the explanation lines; ``framework``: :func:`schedule`;
* ``batch``: :class:`ClusterSnapshot` and :func:`schedule_many`; ``validation``:
  :func:`validate_unit`.
"""

from __future__ import annotations

from federation.weights import GPU_RESOURCE
from kube.taints import NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, TAINT_EFFECTS
from kube.taints import taint_to_string as taint_text
from kube.taints import tolerates_taint as tolerates

from .batch import ClusterSnapshot, schedule_many
from .filters import (
    FILTER_PLUGINS,
    FilterPlugin,
    filter_api_resources,
    filter_cluster_affinity,
    filter_cluster_ready,
    filter_cluster_resources_fit,
    filter_placement,
    filter_taint_toleration,
)
from .framework import schedule
from .profiles import DEFAULT_PROFILE, PROFILES, Profile
from .replicas import REPLICAS_PLUGINS, ReplicasPlugin, replicas_cluster_capacity_weight
from .resources import format_amount, parse_resources
from .scores import (
    SCORE_PLUGINS,
    default_normalize_score,
    score_balanced_allocation,
    score_cluster_affinity,
    score_least_allocated,
    score_most_allocated,
    score_taint_toleration,
)
from .select import SELECT_PLUGINS, SelectPlugin, select_max_cluster
from .terms import matches_terms
from .types import (
    API_RESOURCES,
    CLUSTER_AFFINITY,
    CLUSTER_CAPACITY_WEIGHT,
    CLUSTER_READY,
    CLUSTER_RESOURCES_BALANCED_ALLOCATION,
    CLUSTER_RESOURCES_FIT,
    CLUSTER_RESOURCES_LEAST_ALLOCATED,
    CLUSTER_RESOURCES_MOST_ALLOCATED,
    CPU,
    DIVIDE,
    DUPLICATE,
    EPHEMERAL_STORAGE,
    MAX_CLUSTER,
    MAX_CLUSTER_SCORE,
    MEMORY,
    PLACEMENT_FILTER,
    SCHEDULING_MODES,
    TAINT_TOLERATION,
    ClusterAffinity,
    ClusterInfo,
    Placement,
    ScheduleResult,
    SchedulingUnit,
)
from .validation import validate_unit

# Also public: names importable since the scheduler was one module (CPU, the taint effects, the
# plugin functions and types), not in that module's __all__ then.
__all__ = [
    "API_RESOURCES",
    "CLUSTER_AFFINITY",
    "CLUSTER_CAPACITY_WEIGHT",
    "CLUSTER_READY",
    "CLUSTER_RESOURCES_BALANCED_ALLOCATION",
    "CLUSTER_RESOURCES_FIT",
    "CLUSTER_RESOURCES_LEAST_ALLOCATED",
    "CLUSTER_RESOURCES_MOST_ALLOCATED",
    "CPU",
    "DEFAULT_PROFILE",
    "DIVIDE",
    "DUPLICATE",
    "EPHEMERAL_STORAGE",
    "FILTER_PLUGINS",
    "GPU_RESOURCE",
    "MAX_CLUSTER",
    "MAX_CLUSTER_SCORE",
    "MEMORY",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PLACEMENT_FILTER",
    "PREFER_NO_SCHEDULE",
    "PROFILES",
    "REPLICAS_PLUGINS",
    "SCHEDULING_MODES",
    "SCORE_PLUGINS",
    "SELECT_PLUGINS",
    "TAINT_EFFECTS",
    "TAINT_TOLERATION",
    "ClusterAffinity",
    "ClusterInfo",
    "ClusterSnapshot",
    "FilterPlugin",
    "Placement",
    "Profile",
    "ReplicasPlugin",
    "ScheduleResult",
    "SchedulingUnit",
    "SelectPlugin",
    "default_normalize_score",
    "filter_api_resources",
    "filter_cluster_affinity",
    "filter_cluster_ready",
    "filter_cluster_resources_fit",
    "filter_placement",
    "filter_taint_toleration",
    "format_amount",
    "matches_terms",
    "parse_resources",
    "replicas_cluster_capacity_weight",
    "schedule",
    "schedule_many",
    "score_balanced_allocation",
    "score_cluster_affinity",
    "score_least_allocated",
    "score_most_allocated",
    "score_taint_toleration",
    "select_max_cluster",
    "taint_text",
    "tolerates",
    "validate_unit",
]

