"""The explanation: one readable line per phase and per cluster, as the placement view shows it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from federation.weights import GPU_RESOURCE

from .context import Context
from .replicas import ReplicaPlan
from .types import CLUSTER_CAPACITY_WEIGHT, CPU, DIVIDE, MAX_CLUSTER_SCORE, ClusterInfo, ScheduleResult, SchedulingUnit

if TYPE_CHECKING:
    from .profiles import Profile


def explain_filters(result: ScheduleResult, clusters: Sequence[ClusterInfo], profile: Profile) -> None:
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


def explain_scores(result: ScheduleResult, profile: Profile) -> None:
    lines = result.explanation
    if not profile.scores:
        lines.append("Score: no score plugins; every feasible cluster scores 0.")
        return
    weighted = [f"{p}x{profile.score_weight(p)}" if profile.score_weight(p) != 1 else p for p in profile.scores]
    lines.append(f"Score ({', '.join(weighted)}; each 0..{MAX_CLUSTER_SCORE}, summed):")
    for name in result.feasible:
        parts = ", ".join(f"{plugin} {score}" for plugin, score in result.scores[name].items())
        lines.append(f"  {name}: {result.total_scores[name]} ({parts})")


def explain_select(result: ScheduleResult, profile: Profile, max_clusters: int | None) -> None:
    lines = result.explanation
    limit = "unlimited" if max_clusters is None else str(max_clusters)
    lines.append(
        f"Select ({', '.join(profile.select) or 'no plugins'}, maxClusters {limit}): "
        f"kept {len(result.selected)} of {len(result.feasible)}: {', '.join(result.selected) or 'none'}."
    )
    for name, why in result.not_selected.items():
        lines.append(f"  {name}: not selected: {why}")


def _describe_weights(plan_: ReplicaPlan, unit: SchedulingUnit) -> str:
    if plan_.source == "static":
        return "static weights from the placements"
    if plan_.source == "equal":
        return "equal weights (dynamic weights disabled in the profile)"
    resource = GPU_RESOURCE if GPU_RESOURCE in unit.resource_request else CPU
    return f"dynamic weights from free {resource} (water level, per mille)"


def explain_replicas(result: ScheduleResult, ctx: Context, plan_: ReplicaPlan) -> None:
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


def explain_result(result: ScheduleResult) -> None:
    if not result.clusters:
        result.explanation.append("Result: no cluster.")
        return
    shown = ", ".join(f"{n}={'copy' if r is None else r}" for n, r in result.clusters.items())
    result.explanation.append(f"Result: {shown}.")


def explain_sticky(result: ScheduleResult, clusters: Sequence[ClusterInfo]) -> None:
    result.explanation.append("Sticky cluster: the unit is already placed, so it is not rescheduled.")
    for cluster in clusters:
        if cluster.name in result.clusters:
            result.explanation.append(f"  {cluster.name}: kept as is")
        else:
            result.explanation.append(f"  {cluster.name}: not considered (sticky placement)")
    explain_result(result)


def header_line(ctx: Context, count: int) -> str:
    return (
        f"Scheduling {ctx.unit.key} ({ctx.mode}"
        + (f", {ctx.desired} replicas" if ctx.mode == DIVIDE else "")
        + f") with profile {ctx.profile.name!r} over {count} clusters."
    )


def fail_result(result: ScheduleResult, message: str, clusters: Sequence[ClusterInfo]) -> ScheduleResult:
    result.error = message
    result.clusters = {}
    result.explanation.append(f"Error: {message}; nothing is scheduled.")
    shown = {line.split(":", 1)[0].strip() for line in result.explanation if line.startswith("  ")}
    for cluster in clusters:
        if cluster.name not in shown:
            result.explanation.append(f"  {cluster.name}: not scheduled")
    return result


DUPLICATE_LINE = "Replicas: Duplicate mode, every selected cluster gets a full copy."
