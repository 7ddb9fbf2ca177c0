"""Frozen copy of federation/planner.py before the speed-up, only to prove results did not change.

Do not import this outside tests; do not "fix" it: it is the reference.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Unchanged by the speed-up, so taken from the live module: the preference type and the wildcard.
from federation.planner import WILDCARD, ClusterPreference

__all__ = ["fnv1_32", "plan"]

_FNV32_OFFSET_BASIS = 0x811C9DC5
_FNV32_PRIME = 0x01000193
_UINT32_MASK = 0xFFFFFFFF


@dataclass(frozen=True)
class _Ranked:
    """A cluster's preference with the tie-break value used for ordering."""

    name: str
    preference: ClusterPreference
    tiebreak: int


def fnv1_32(data: bytes) -> int:
    """See :func:`federation.planner.fnv1_32`."""
    value = _FNV32_OFFSET_BASIS
    for byte in data:
        value = (value * _FNV32_PRIME) & _UINT32_MASK
        value ^= byte
    return value


def _tiebreak(cluster: str, key: str) -> int:
    """Hash of the cluster name followed by the workload key (upstream's order)."""
    return fnv1_32(cluster.encode("utf-8") + key.encode("utf-8"))


def _rank(preferences: Mapping[str, ClusterPreference], key: str) -> list[_Ranked]:
    """Order clusters by decreasing weight, then increasing tie-break hash.

    The cluster name is a last resort only for a (practically impossible)
    32-bit hash collision, where upstream's order is itself unspecified.
    """
    ranked = [_Ranked(name, pref, _tiebreak(name, key)) for name, pref in preferences.items()]
    ranked.sort(key=lambda r: (-r.preference.weight, r.tiebreak, r.name))
    return ranked


def _resolve(preferences: Mapping[str, ClusterPreference], clusters: Sequence[str]) -> dict[str, ClusterPreference]:
    """See :func:`federation.planner._resolve`."""
    resolved: dict[str, ClusterPreference] = {}
    for cluster in clusters:
        if cluster in preferences:
            resolved[cluster] = preferences[cluster]
        elif WILDCARD in preferences:
            resolved[cluster] = preferences[WILDCARD]
    return resolved


def _ceil_share(amount: int, weight: int, weight_sum: int) -> int:
    """``amount * weight / weight_sum`` rounded up (all operands non-negative)."""
    return (amount * weight + weight_sum - 1) // weight_sum


def _assign_minimums(
    ranked: Sequence[_Ranked],
    estimated_capacity: Mapping[str, int],
    limited_capacity: Mapping[str, int],
    total: int,
    result: dict[str, int],
    overflow: dict[str, int],
) -> int:
    """Give clusters their min_replicas in rank order; return what is left.

    A limited capacity silently lowers the minimum, while an estimated capacity
    records the shortfall as overflow: without that record a cluster whose
    capacity is below its minimum would be rescheduled forever.
    """
    remaining = total
    for entry in ranked:
        floor = min(entry.preference.min_replicas, remaining)
        limit = limited_capacity.get(entry.name)
        if limit is not None and limit < floor:
            floor = limit
        estimate = estimated_capacity.get(entry.name)
        if estimate is not None and estimate < floor:
            overflow[entry.name] = floor - estimate
            floor = estimate
        remaining -= floor
        result[entry.name] = floor
    return remaining


def _cap(
    entry: _Ranked,
    wanted: int,
    estimated_capacity: Mapping[str, int],
    limited_capacity: Mapping[str, int],
    overflow: dict[str, int],
) -> tuple[int, bool]:
    """Clamp a cluster's new total by max replicas and capacities.

    Returns the clamped total and whether the cluster is now full (and so
    leaves later distribution rounds). Only the estimated capacity produces
    overflow: it is a guess that may turn out wrong, so the excess is kept
    as a hint rather than dropped.
    """
    full = False
    ceiling = entry.preference.max_replicas
    if ceiling is not None and wanted > ceiling:
        wanted, full = ceiling, True
    limit = limited_capacity.get(entry.name)
    if limit is not None and wanted > limit:
        wanted, full = limit, True
    estimate = estimated_capacity.get(entry.name)
    if estimate is not None and wanted > estimate:
        overflow[entry.name] = overflow.get(entry.name, 0) + wanted - estimate
        wanted, full = estimate, True
    return wanted, full


def _distribute_round(
    active: Sequence[_Ranked],
    remaining: int,
    estimated_capacity: Mapping[str, int],
    limited_capacity: Mapping[str, int],
    result: dict[str, int],
    overflow: dict[str, int],
) -> tuple[list[_Ranked], int, bool]:
    """One weighted pass: every active cluster gets its rounded-up share.

    Rounding up means clusters early in rank order may take a little more
    and the last ones less; that is the upstream rounding and what makes
    tie-breaks observable. Returns (still-active clusters, remaining, progress).
    """
    weight_sum = sum(entry.preference.weight for entry in active)
    to_hand_out = remaining
    still_active: list[_Ranked] = []
    progressed = False
    for entry in active:
        start = result[entry.name]
        extra = min(_ceil_share(to_hand_out, entry.preference.weight, weight_sum), remaining)
        new_total, full = _cap(entry, start + extra, estimated_capacity, limited_capacity, overflow)
        if not full:
            still_active.append(entry)
        remaining -= new_total - start
        result[entry.name] = new_total
        if new_total > start:
            progressed = True
    return still_active, remaining, progressed


def _desired_plan(
    ranked: Sequence[_Ranked],
    estimated_capacity: Mapping[str, int],
    limited_capacity: Mapping[str, int],
    total: int,
    keep_unschedulable: bool,
) -> tuple[dict[str, int], dict[str, int]]:
    """The plan from preferences alone, ignoring where replicas run today.

    Weighted rounds repeat because a single pass can leave replicas over when
    clusters hit their max or capacity; every pass either places everything
    or fills at least one cluster, so the loop ends.
    """
    result: dict[str, int] = {}
    overflow: dict[str, int] = {}
    remaining = _assign_minimums(ranked, estimated_capacity, limited_capacity, total, result, overflow)

    active = list(ranked)
    progressed = True
    while progressed and remaining > 0:
        if sum(entry.preference.weight for entry in active) <= 0:
            break
        active, remaining, progressed = _distribute_round(
            active, remaining, estimated_capacity, limited_capacity, result, overflow
        )

    if keep_unschedulable:
        return result, overflow
    return result, _trim_overflow(overflow, remaining)


def _trim_overflow(overflow: Mapping[str, int], unplaced: int) -> dict[str, int]:
    """See :func:`federation.planner._trim_overflow`."""
    return {cluster: min(value, unplaced) for cluster, value in overflow.items() if min(value, unplaced) > 0}


def _current_plan(
    ranked: Sequence[_Ranked],
    current: Mapping[str, int],
    estimated_capacity: Mapping[str, int],
    limited_capacity: Mapping[str, int],
) -> dict[str, int]:
    """Today's replicas per eligible cluster, minus those that cannot run there."""
    result: dict[str, int] = {}
    for entry in ranked:
        replicas = current.get(entry.name, 0)
        limit = limited_capacity.get(entry.name)
        if limit is not None and limit < replicas:
            replicas = limit
        estimate = estimated_capacity.get(entry.name)
        if estimate is not None and estimate < replicas:
            replicas = estimate
        result[entry.name] = replicas
    return result


def _scale_up(
    explicit: Mapping[str, ClusterPreference],
    current_plan: dict[str, int],
    desired: Mapping[str, int],
    count: int,
    key: str,
) -> dict[str, int]:
    """Add ``count`` replicas only where the desired plan is above today's.

    Shares are weighted by how far each cluster is below its desired count,
    so nothing is stopped anywhere and the layout drifts toward the weights.
    The max comes from the cluster's own preference entry only (never the
    wildcard), as upstream does; it can only bind when min > max.
    """
    gaps: dict[str, ClusterPreference] = {}
    for cluster, wanted in desired.items():
        have = current_plan.get(cluster, 0)
        if wanted > have:
            own_max = explicit[cluster].max_replicas if cluster in explicit else None
            ceiling = None if own_max is None else own_max - have
            gaps[cluster] = ClusterPreference(weight=wanted - have, max_replicas=ceiling)
    additions, _ = _desired_plan(_rank(gaps, key), {}, {}, count, keep_unschedulable=False)
    for cluster, added in additions.items():
        current_plan[cluster] = current_plan.get(cluster, 0) + added
    return current_plan


def _scale_down(
    current_plan: dict[str, int],
    desired: Mapping[str, int],
    count: int,
    key: str,
) -> dict[str, int]:
    """Remove ``count`` replicas only where today's count is above the desired one.

    Removal is weighted by each cluster's excess, so nothing is started
    anywhere while shrinking.
    """
    excess: dict[str, ClusterPreference] = {}
    for cluster, wanted in desired.items():
        have = current_plan.get(cluster, 0)
        if wanted < have:
            excess[cluster] = ClusterPreference(weight=have - wanted, max_replicas=have)
    removals, _ = _desired_plan(_rank(excess, key), {}, {}, count, keep_unschedulable=False)
    for cluster, removed in removals.items():
        current_plan[cluster] = current_plan.get(cluster, 0) - removed
    return current_plan


def _check_non_negative(
    preferences: Mapping[str, ClusterPreference],
    total: int,
    current: Mapping[str, int],
    estimated_capacity: Mapping[str, int],
    limited_capacity: Mapping[str, int],
) -> None:
    """Reject negative inputs: the algorithm (like upstream's) is undefined for them."""
    if total < 0:
        raise ValueError(f"total replicas must not be negative: {total}")
    for name, pref in preferences.items():
        if pref.weight < 0 or pref.min_replicas < 0 or (pref.max_replicas is not None and pref.max_replicas < 0):
            raise ValueError(f"preference for {name!r} has a negative value: {pref}")
    for label, values in (("current", current), ("estimated_capacity", estimated_capacity),
                          ("limited_capacity", limited_capacity)):
        for name, value in values.items():
            if value < 0:
                raise ValueError(f"{label}[{name!r}] must not be negative: {value}")


def plan(preferences, total, clusters, current, estimated_capacity, limited_capacity,
         key="", avoid_migration=False, keep_unschedulable=False):
    """See :func:`federation.planner.plan`."""
    _check_non_negative(preferences, total, current, estimated_capacity, limited_capacity)
    resolved = _resolve(preferences, clusters)
    ranked = _rank(resolved, key)
    if not avoid_migration:
        keep_unschedulable = True

    desired, overflow = _desired_plan(ranked, estimated_capacity, limited_capacity, total, keep_unschedulable)
    if not avoid_migration:
        return desired, overflow

    current_plan = _current_plan(ranked, current, estimated_capacity, limited_capacity)
    have = sum(current_plan.values())
    want = sum(desired.values())
    if have > want:
        return _scale_down(current_plan, desired, have - want, key), overflow
    if have < want:
        return _scale_up(preferences, current_plan, desired, want - have, key), overflow
    return current_plan, overflow
