"""Score plugins: each scores a feasible cluster 0..100 (some after upstream's
``DefaultNormalizeScore``); the profile's weights sum them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kube.taints import count_intolerable_prefer_no_schedule

from .context import Context
from .resources import go_div
from .types import (
    CLUSTER_AFFINITY,
    CLUSTER_RESOURCES_BALANCED_ALLOCATION,
    CLUSTER_RESOURCES_LEAST_ALLOCATED,
    CLUSTER_RESOURCES_MOST_ALLOCATED,
    MAX_CLUSTER_SCORE,
    TAINT_TOLERATION,
    ClusterInfo,
)


def _allocatable_and_requested(ctx: Context, cluster: ClusterInfo, resource: str) -> tuple[int, int]:
    """(allocatable, already requested + one replica), upstream ``calculateResourceAllocatableRequest``."""
    total = cluster.allocatable.get(resource, 0)
    used = total - cluster.available.get(resource, 0)
    return total, used + ctx.request.get(resource, 0)


def score_taint_toleration(ctx: Context, cluster: ClusterInfo) -> int:
    """How many PreferNoSchedule taints are not tolerated (reversed when normalised)."""
    return count_intolerable_prefer_no_schedule(cluster.taints, ctx.prefer_tolerations)


def score_cluster_affinity(ctx: Context, cluster: ClusterInfo) -> int:
    """Sum of the weights of matching preferred terms."""
    return sum(weight for weight, selector in ctx.preferred if selector.matches(cluster.labels))


def score_balanced_allocation(ctx: Context, cluster: ClusterInfo) -> int:
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


def _weighted_resource_score(ctx: Context, cluster: ClusterInfo, per_resource: Callable[[int, int], int]) -> int:
    score = weight_sum = 0
    for resource, weight in ctx.score_resources:
        total, wanted = _allocatable_and_requested(ctx, cluster, resource)
        score += per_resource(wanted, total) * weight
        weight_sum += weight
    return go_div(score, weight_sum) if weight_sum else 0


def _least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - requested) * MAX_CLUSTER_SCORE, capacity)


def _most_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div(requested * MAX_CLUSTER_SCORE, capacity)


def score_least_allocated(ctx: Context, cluster: ClusterInfo) -> int:
    """Favours the emptiest clusters (spreads load)."""
    return _weighted_resource_score(ctx, cluster, _least_requested)


def score_most_allocated(ctx: Context, cluster: ClusterInfo) -> int:
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
        score = go_div(max_priority * score, highest)
        scores[name] = max_priority - score if reverse else score


@dataclass(frozen=True)
class ScorePlugin:
    score: Callable[[Context, ClusterInfo], int]
    normalize: bool = False
    reverse: bool = False


SCORE_PLUGINS: dict[str, ScorePlugin] = {
    TAINT_TOLERATION: ScorePlugin(score_taint_toleration, normalize=True, reverse=True),
    CLUSTER_RESOURCES_BALANCED_ALLOCATION: ScorePlugin(score_balanced_allocation),
    CLUSTER_RESOURCES_LEAST_ALLOCATED: ScorePlugin(score_least_allocated),
    CLUSTER_RESOURCES_MOST_ALLOCATED: ScorePlugin(score_most_allocated),
    CLUSTER_AFFINITY: ScorePlugin(score_cluster_affinity, normalize=True),
}


def run_scores(ctx: Context, clusters: Sequence[ClusterInfo]) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
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
