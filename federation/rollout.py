"""Cross-cluster rolling-upgrade planner.

A federated Deployment spread over many clusters would, left alone, roll every
cluster at once with each cluster's own maxSurge/maxUnavailable, so the fleet
as a whole could lose far more than the workload's maxUnavailable. This
planner hands out one global surge / unavailability budget, cluster by
cluster, by overriding ``replicas``, ``maxSurge`` and ``maxUnavailable`` per
cluster for the current step. It is re-run as clusters report progress, so
the window slides instead of waiting for whole batches.

Semantics follow KubeAdmiral's ``pkg/controllers/util/rolloutplan.go`` (a
kubefed-derived controller), so plans are identical for identical status.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

__all__ = ["RolloutPlan", "RolloutTarget", "plan_rollout"]


@dataclass(frozen=True)
class RolloutTarget:
    """One member cluster's view of the workload.

    ``replicas`` is the member Deployment's ``spec.replicas``; ``actual`` and
    ``available`` come from its status. ``updated_*`` describe the newest
    ReplicaSet only if it carries the desired template (else 0), while
    ``current_new_*`` describe the newest ReplicaSet of the member Deployment
    whatever its template. ``updated`` says the member already has the desired
    template; ``max_surge``/``max_unavailable`` are its current (resolved)
    values. A cluster where the workload does not exist yet has all zeros.
    """

    cluster: str
    desired_replicas: int
    replicas: int = 0
    actual_replicas: int = 0
    available_replicas: int = 0
    updated_replicas: int = 0
    updated_available_replicas: int = 0
    current_new_replicas: int = 0
    current_new_available_replicas: int = 0
    updated: bool = False
    max_surge: int = 0
    max_unavailable: int = 0


@dataclass(frozen=True)
class RolloutPlan:
    """Overrides for one cluster in this step; ``None`` means "do not override".

    ``only_patch_replicas`` marks a pure scale-in: only ``replicas`` is to be
    applied, the template stays as it is for now.
    """

    replicas: int | None = None
    max_surge: int | None = None
    max_unavailable: int | None = None
    only_patch_replicas: bool = False


class _Budget:
    """Fleet-wide surge and unavailability still free to hand out in this step."""

    def __init__(self, surge: int, unavailable: int) -> None:
        self.surge = surge
        self.unavailable = unavailable


# --- per-target measures ---------------------------------------------------


def _not_updated(t: RolloutTarget) -> int:
    """Replicas not yet running the desired template."""
    return max(t.replicas - t.updated_replicas, 0)


def _not_updated_available(t: RolloutTarget) -> int:
    """Replicas not yet available on the desired template."""
    return max(t.replicas - t.updated_available_replicas, 0)


def _not_in_newest(t: RolloutTarget) -> int:
    """Replicas outside the member's newest ReplicaSet."""
    return max(t.replicas - t.current_new_replicas, 0)


def _not_available_in_newest(t: RolloutTarget) -> int:
    """Replicas not available in the member's newest ReplicaSet."""
    return max(t.replicas - t.current_new_available_replicas, 0)


def _rolling(t: RolloutTarget) -> bool:
    """Whether the member Deployment is mid-rollout (of any template)."""
    return t.current_new_replicas < t.replicas or (t.updated and _not_updated(t) > 0)


def _finished(t: RolloutTarget) -> bool:
    return _not_updated(t) == 0


def _surges(t: RolloutTarget) -> bool:
    """The member currently rolls by surging only."""
    return t.max_surge != 0 and t.max_unavailable == 0


def _flips(t: RolloutTarget, fleet_surges: bool) -> bool:
    """A surge-only member of a non-surge workload with pods still unavailable.

    Resetting its fenceposts to the template values now would flip its
    strategy mid-flight, so such a member keeps explicit values.
    """
    return _surges(t) and not fleet_surges and _not_updated_available(t) > 0


def _surge_in_use(t: RolloutTarget) -> int:
    """Surge the member already occupies (or is entitled to while rolling)."""
    extra = max(t.actual_replicas - t.replicas, 0)
    if not _rolling(t):
        return extra
    return max(extra, min(t.max_surge, extra + _not_in_newest(t)))


def _unavailable_in_use(t: RolloutTarget) -> int:
    """Unavailability the member already occupies (or is entitled to while rolling)."""
    missing = max(t.replicas - t.available_replicas, 0)
    if not _rolling(t):
        return missing
    return max(missing, min(t.max_unavailable, _not_available_in_newest(t)))


# --- grants: (value for the member, budget consumed beyond what it holds) ---


def _grant(budget: int, held: int, ceiling: int) -> tuple[int, int]:
    """Up to ``budget`` more than ``held``, never beyond ``ceiling`` nor below 0."""
    value = max(min(budget + held, ceiling), 0)
    return value, max(value - held, 0)


def _grant_surge(t: RolloutTarget, budget: int, held: int) -> tuple[int, int]:
    """maxSurge for the member; when the budget is overdrawn, keep its current value."""
    value, consumed = _grant(budget, held, _not_updated(t))
    if budget < 0 and held > t.max_surge and value > t.max_surge:
        value = t.max_surge
    return value, consumed


def _grant_unavailable(t: RolloutTarget, budget: int, held: int) -> tuple[int, int]:
    """maxUnavailable for the member; when the budget is overdrawn, keep its current value."""
    value, consumed = _grant(budget, held, _not_updated_available(t))
    if budget < 0 and held > t.max_unavailable and value > t.max_unavailable:
        value = t.max_unavailable
    return value, consumed


def _grant_scale_out(t: RolloutTarget, budget: int, held: int) -> tuple[int, int]:
    return _grant(budget, held, t.desired_replicas - t.replicas)


def _grant_scale_in(t: RolloutTarget, budget: int, held: int) -> tuple[int, int]:
    value = min(budget + held, t.replicas - t.desired_replicas, t.replicas)
    value = max(value, 0)
    return value, max(value - held, 0)


def _fencepost(plan: RolloutPlan, t: RolloutTarget, fleet_surges: bool) -> RolloutPlan:
    """Final touch on a plan's maxSurge/maxUnavailable.

    A finished member goes back to the template's values (``None``). Both
    zero would stall a Deployment, so one becomes 1, as the Kubernetes
    Deployment controller itself does.
    """
    if _finished(t) and not _flips(t, fleet_surges):
        return replace(plan, max_surge=None, max_unavailable=None)
    if plan.max_surge == 0 and plan.max_unavailable == 0:
        if _surges(t):
            return replace(plan, max_surge=1)
        return replace(plan, max_unavailable=1)
    return plan


# --- skip rules ------------------------------------------------------------


def _idle(t: RolloutTarget, budget: _Budget) -> bool:
    """Nothing to hand out and the member is neither started nor holding anything."""
    return (
        budget.surge <= 0
        and budget.unavailable <= 0
        and not t.updated
        and not _rolling(t)
        and _surge_in_use(t) <= 0
        and _unavailable_in_use(t) <= 0
    )


def _idle_shrinking(t: RolloutTarget, budget: _Budget, held_unavailable: int) -> bool:
    """:func:`_idle` for a member being scaled in (its surge does not count)."""
    if budget.surge > 0 or budget.unavailable > 0 or t.updated or _rolling(t):
        return False
    return held_unavailable <= 0


# --- the five passes ---------------------------------------------------------


def _upgrade(t: RolloutTarget, budget: _Budget, plan: RolloutPlan, fleet_surges: bool,
             held_unavailable: int | None = None) -> RolloutPlan:
    """Give a member its share of both budgets for upgrading its template."""
    if held_unavailable is None:
        held_unavailable = _unavailable_in_use(t)
    surge, surge_used = _grant_surge(t, budget.surge, _surge_in_use(t))
    unavailable, unavailable_used = _grant_unavailable(t, budget.unavailable, held_unavailable)
    budget.surge -= surge_used
    budget.unavailable -= unavailable_used
    plan = replace(plan, max_surge=surge, max_unavailable=unavailable)
    return _fencepost(plan, t, fleet_surges)


def _upgrade_growing(growing: Sequence[RolloutTarget], budget: _Budget, fleet_surges: bool,
                     plans: dict[str, RolloutPlan]) -> None:
    """Pass 1: upgrade members that will grow, at their current size, before growing them."""
    for t in growing:
        if _idle(t, budget):
            continue
        plans[t.cluster] = _upgrade(t, budget, RolloutPlan(replicas=t.replicas), fleet_surges)


def _shrink(shrinking: Sequence[RolloutTarget], budget: _Budget, plans: dict[str, RolloutPlan]) -> None:
    """Pass 2: scale in first, preferably removing replicas that are unavailable anyway."""
    for t in shrinking:
        if budget.unavailable <= 0 and _unavailable_in_use(t) <= 0:
            continue
        held = 0 if _rolling(t) else _unavailable_in_use(t)
        removed, used = _grant_scale_in(t, budget.unavailable, held)
        budget.unavailable -= used
        plans[t.cluster] = RolloutPlan(replicas=t.replicas - removed, only_patch_replicas=True)


def _upgrade_steady(steady: Sequence[RolloutTarget], budget: _Budget, fleet_surges: bool,
                    plans: dict[str, RolloutPlan]) -> None:
    """Pass 3: upgrade members whose size does not change."""
    for t in steady:
        if _idle(t, budget):
            continue
        plans[t.cluster] = _upgrade(t, budget, RolloutPlan(), fleet_surges)


def _grow(growing: Sequence[RolloutTarget], budget: _Budget, plans: dict[str, RolloutPlan]) -> None:
    """Pass 4: scale out, but only members already on the new template (or empty).

    Growing a member still on the old template would create old pods that
    must then be replaced too.
    """
    for t in growing:
        if budget.surge <= 0 and _surge_in_use(t) <= 0:
            continue
        if not t.updated and t.replicas != 0:
            continue
        held = 0 if _rolling(t) else _surge_in_use(t)
        added, used = _grant_scale_out(t, budget.surge, held)
        budget.surge -= used
        plan = plans.get(t.cluster, RolloutPlan())
        plans[t.cluster] = replace(plan, replicas=t.replicas + added)


def _upgrade_shrinking(shrinking: Sequence[RolloutTarget], budget: _Budget, fleet_surges: bool,
                       plans: dict[str, RolloutPlan]) -> None:
    """Pass 5: upgrade members being scaled in, last.

    Replicas removed in pass 2 were counted as unavailable already, so they
    are not counted twice.
    """
    for t in shrinking:
        plan = plans.get(t.cluster) or RolloutPlan(replicas=t.replicas)
        held = _unavailable_in_use(t)
        if not _rolling(t):
            planned = t.replicas if plan.replicas is None else plan.replicas
            held = max(held - (t.replicas - planned), 0)
        if _idle_shrinking(t, budget, held):
            continue
        plan = replace(plan, only_patch_replicas=False)
        plans[t.cluster] = _upgrade(t, budget, plan, fleet_surges, held_unavailable=held)


# --- whole plan ------------------------------------------------------------------


def _partition(targets: Sequence[RolloutTarget]) -> tuple[list[RolloutTarget], list[RolloutTarget], list[RolloutTarget]]:
    """Split into (steady, growing, shrinking), each in cluster-name order."""
    steady: list[RolloutTarget] = []
    growing: list[RolloutTarget] = []
    shrinking: list[RolloutTarget] = []
    for t in sorted(targets, key=lambda target: target.cluster):
        change = t.desired_replicas - t.replicas
        (shrinking if change < 0 else growing if change > 0 else steady).append(t)
    return steady, growing, shrinking


def _only_scaling(targets: Sequence[RolloutTarget], growing: Sequence[RolloutTarget],
                  shrinking: Sequence[RolloutTarget], fleet_surges: bool) -> bool:
    """A pure scale in one direction with every member fully upgraded.

    Then there is nothing to roll, and the members' own controllers may scale
    freely.
    """
    if bool(growing) == bool(shrinking):
        return False
    return all(_finished(t) and not _flips(t, fleet_surges) for t in targets)



def planned_replicas(targets: Sequence[RolloutTarget], plans: Mapping[str, RolloutPlan]) -> int:
    """The replicas the members will have once ``plans`` are applied: a member without a plan
    keeps what it runs, one whose plan leaves the count alone scales to what it is scheduled."""
    planned = 0
    for t in targets:
        plan = plans.get(t.cluster)
        if plan is None:
            planned += t.replicas
        else:
            planned += t.desired_replicas if plan.replicas is None else plan.replicas
    return planned

def _plans_are_safe(replicas: int, max_surge: int, max_unavailable: int,
                    targets: Sequence[RolloutTarget], plans: dict[str, RolloutPlan]) -> bool:
    """Final guard: the step must stay within the global surge / unavailability window.

    Also refuses to plan when the desired total has drifted further below
    ``replicas`` than ``max_unavailable`` allows (e.g. clusters not ready).
    """
    desired = sum(t.desired_replicas for t in targets)
    current = sum(t.replicas for t in targets)
    planned = planned_replicas(targets, plans)
    if replicas - desired > max_unavailable:
        return False
    low, high = min(desired, current), max(desired, current)
    return low - planned <= max_unavailable and planned - high <= max_surge


def plan_rollout(
    replicas: int,
    max_surge: int,
    max_unavailable: int,
    targets: Sequence[RolloutTarget],
) -> dict[str, RolloutPlan]:
    """Plan this step of a cross-cluster rollout.

    ``replicas`` is the federated workload's total, ``max_surge`` and
    ``max_unavailable`` its resolved absolute fenceposts. Returns a plan per
    cluster allowed to act now; a cluster absent from the result waits for
    its turn. An empty result means "everyone waits" (also returned when the
    computed step would break the global window).

    The passes run in this order so that capacity freed by scaling in is
    used before capacity is added: upgrade members about to grow, scale in,
    upgrade unchanged members, scale out, upgrade members being scaled in.
    """
    names = [t.cluster for t in targets]
    if len(set(names)) != len(names):
        raise ValueError("each cluster may appear only once among the targets")

    steady, growing, shrinking = _partition(targets)
    fleet_surges = max_surge != 0 and max_unavailable == 0
    if _only_scaling(targets, growing, shrinking, fleet_surges):
        return {t.cluster: RolloutPlan() for t in sorted(targets, key=lambda target: target.cluster)}

    total = sum(t.replicas for t in targets)
    budget = _Budget(
        surge=max_surge - (total - replicas) - sum(_surge_in_use(t) for t in targets),
        unavailable=max_unavailable - (replicas - total) - sum(_unavailable_in_use(t) for t in targets),
    )
    plans: dict[str, RolloutPlan] = {}
    _upgrade_growing(growing, budget, fleet_surges, plans)
    _shrink(shrinking, budget, plans)
    _upgrade_steady(steady, budget, fleet_surges, plans)
    _grow(growing, budget, plans)
    _upgrade_shrinking(shrinking, budget, fleet_surges, plans)

    if not _plans_are_safe(replicas, max_surge, max_unavailable, targets, plans):
        return {}
    return plans
