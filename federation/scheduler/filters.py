"""Filter plugins: each returns None when the cluster passes, else the reason (without the
plugin prefix); every filter runs on every cluster, so each failure is explained."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kube.taints import NO_EXECUTE, NO_SCHEDULE, find_untolerated_taint, taint_to_string

from .context import Context
from .resources import format_amount
from .terms import match_terms
from .types import (
    API_RESOURCES,
    CLUSTER_AFFINITY,
    CLUSTER_READY,
    CLUSTER_RESOURCES_FIT,
    CPU,
    MEMORY,
    PLACEMENT_FILTER,
    TAINT_TOLERATION,
    ClusterInfo,
)

if TYPE_CHECKING:
    from .profiles import Profile


def filter_cluster_ready(ctx: Context, cluster: ClusterInfo) -> str | None:
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


def filter_api_resources(ctx: Context, cluster: ClusterInfo) -> str | None:
    if ctx.gvk is None:
        return ctx.gvk_error
    if cluster.api_resources is None or not ctx.gvk.isdisjoint(cluster.api_resources):
        return None
    return f"cluster does not serve {ctx.unit.gvk}"


def filter_taint_toleration(ctx: Context, cluster: ClusterInfo) -> str | None:
    """NoSchedule and NoExecute must be tolerated; only NoExecute once the unit runs there (upstream)."""
    effects = (NO_EXECUTE,) if cluster.name in ctx.scheduled else (NO_SCHEDULE, NO_EXECUTE)
    taint = find_untolerated_taint(cluster.taints, ctx.tolerations, effects)
    return None if taint is None else f"untolerated taint {taint_to_string(taint)}"


def filter_cluster_resources_fit(ctx: Context, cluster: ClusterInfo) -> str | None:
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


def filter_placement(ctx: Context, cluster: ClusterInfo) -> str | None:
    if not ctx.placements or cluster.name in ctx.placements:
        return None
    return "cluster is not in the placement list"


def filter_cluster_affinity(ctx: Context, cluster: ClusterInfo) -> str | None:
    for key, value in ctx.selector:
        if cluster.labels.get(key) != value:
            wanted = ",".join(f"{k}={v}" for k, v in ctx.selector)
            return f"cluster labels do not match clusterSelector {wanted}"
    if ctx.required is not None:
        matched, error = match_terms(ctx.required, cluster)
        if error is not None:
            return f"invalid required cluster affinity: {error}"
        if not matched:
            return "cluster labels do not match the required cluster affinity"
    return None


FilterPlugin = Callable[[Context, ClusterInfo], "str | None"]

FILTER_PLUGINS: dict[str, FilterPlugin] = {
    CLUSTER_READY: filter_cluster_ready,
    API_RESOURCES: filter_api_resources,
    TAINT_TOLERATION: filter_taint_toleration,
    CLUSTER_RESOURCES_FIT: filter_cluster_resources_fit,
    PLACEMENT_FILTER: filter_placement,
    CLUSTER_AFFINITY: filter_cluster_affinity,
}


def filter_plugins(profile: Profile) -> list[tuple[str, FilterPlugin]]:
    return [(name, FILTER_PLUGINS[name]) for name in profile.filters]


def filter_reasons(ctx: Context, plugins: Sequence[tuple[str, FilterPlugin]], cluster: ClusterInfo) -> list[str]:
    """Every failing filter's reason for one cluster, prefixed by the plugin name (empty = passes)."""
    reasons = []
    for name, plugin in plugins:
        reason = plugin(ctx, cluster)
        if reason is not None:
            reasons.append(f"{name}: {reason}")
    return reasons


def run_filters(ctx: Context, clusters: Sequence[ClusterInfo]) -> tuple[list[ClusterInfo], dict[str, list[str]]]:
    plugins = filter_plugins(ctx.profile)
    feasible: list[ClusterInfo] = []
    filtered: dict[str, list[str]] = {}
    for cluster in clusters:
        reasons = filter_reasons(ctx, plugins, cluster)
        if reasons:
            filtered[cluster.name] = reasons
        else:
            feasible.append(cluster)
    return feasible, filtered
