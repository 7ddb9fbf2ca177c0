"""One unit over the clusters: filter → score → select → replicas (:func:`schedule`)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import gt

from .context import Context, prepare
from .explain import (
    DUPLICATE_LINE,
    explain_filters,
    explain_replicas,
    explain_result,
    explain_scores,
    explain_select,
    explain_sticky,
    fail_result,
    header_line,
)
from .filters import run_filters
from .profiles import DEFAULT_PROFILE, Profile, resolve_profile
from .replicas import REPLICAS_PLUGINS, ReplicaPlan
from .scores import run_scores
from .select import run_select
from .types import DUPLICATE, ClusterInfo, ScheduleResult, SchedulingUnit, UnitError


def _sticky(ctx: Context, clusters: Sequence[ClusterInfo], result: ScheduleResult) -> None:
    """Sticky units keep their current clusters untouched (upstream does not reschedule them)."""
    keep_sticky(ctx, result)
    explain_sticky(result, clusters)


def keep_sticky(ctx: Context, result: ScheduleResult) -> None:
    result.sticky = True
    for name, replicas in ctx.current.items():
        result.clusters[name] = None if ctx.mode == DUPLICATE else replicas
    result.selected = list(result.clusters)


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
        prof = resolve_profile(profile)
        ctx = prepare(unit, prof, clusters)
    except UnitError as exc:
        return fail_result(result, str(exc), clusters)
    result.explanation.append(header_line(ctx, len(clusters)))
    if unit.sticky_cluster and ctx.current:
        _sticky(ctx, clusters, result)
        return result
    try:
        _schedule(ctx, clusters, result)
    except UnitError as exc:
        return fail_result(result, str(exc), clusters)
    return result


def _schedule(ctx: Context, clusters: Sequence[ClusterInfo], result: ScheduleResult) -> None:
    prof = ctx.profile
    feasible, result.filtered = run_filters(ctx, clusters)
    result.feasible = [c.name for c in feasible]
    explain_filters(result, clusters, prof)
    if not feasible:
        explain_result(result)
        return

    result.scores, result.total_scores = run_scores(ctx, feasible)
    explain_scores(result, prof)

    result.selected, result.not_selected = run_select(ctx, result.feasible, result.total_scores)
    explain_select(result, prof, ctx.unit.max_clusters)

    if ctx.mode == DUPLICATE:
        result.clusters = dict.fromkeys(result.selected)
        result.explanation.append(DUPLICATE_LINE)
        explain_result(result)
        return
    _replicas_phase(ctx, feasible, result)
    explain_result(result)


def _replicas_phase(ctx: Context, feasible: Sequence[ClusterInfo], result: ScheduleResult) -> None:
    by_name = {c.name: c for c in feasible}
    chosen = [by_name[name] for name in result.selected]
    skipped = replicas_skipped(ctx, bool(chosen))
    if skipped is not None:
        result.explanation.append(skipped)
        return
    plan_ = REPLICAS_PLUGINS[ctx.profile.replicas[0]](ctx, chosen)
    apply_replica_plan(result, ctx, plan_)
    explain_replicas(result, ctx, plan_)


def replicas_skipped(ctx: Context, any_chosen: bool) -> str | None:
    """Why the replicas phase places nothing (the explanation line), or None when it runs."""
    if not any_chosen:
        return "Replicas: no cluster selected."
    if ctx.desired <= 0:
        return "Replicas: nothing to split (0 replicas wanted); no cluster is used."
    if not ctx.profile.replicas:
        return "Replicas: no replicas plugin in the profile; nothing is placed (as upstream)."
    return None


def apply_replica_plan(result: ScheduleResult, ctx: Context, plan_: ReplicaPlan) -> None:
    result.weights = dict(plan_.weights)
    result.weights_source = plan_.source
    result.estimated_capacity = dict(plan_.estimated_capacity)
    result.overflow = dict(plan_.overflow)
    planned = plan_.replicas
    counts = list(map(planned.get, result.selected, repeat(0)))
    placed = list(map(gt, counts, repeat(0)))  # at C speed: hundreds of clusters, most of them placing nothing
    result.clusters = dict(zip(compress(result.selected, placed), compress(counts, placed)))
    result.unplaced = max(ctx.desired - sum(result.clusters.values()), 0)  # type: ignore[arg-type]
