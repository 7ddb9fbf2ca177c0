"""One status for a federated object from its members' statuses, so users read it as if it
ran in one cluster (upstream's status aggregation plugins, per kind). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MemberView", "aggregate"]

_COUNTS = ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas")


@dataclass(frozen=True)
class MemberView:
    """What the aggregator needs of one member."""

    cluster: str
    scheduled: int | None          # replicas the scheduler gave it (None: full copy)
    state: str                     # pending / applied / error / deleting
    error: str
    observed: Mapping[str, Any]
    updated: bool                  # runs the desired template


def _cluster_entry(member: MemberView) -> dict[str, Any]:
    entry: dict[str, Any] = {"state": member.state, "scheduled": member.scheduled, "updated": member.updated}
    if member.error:
        entry["error"] = member.error
    for name in (*_COUNTS, "succeeded"):
        if name in member.observed:
            entry[name] = member.observed[name]
    return entry


def aggregate(kind: str, desired: int | None, members: list[MemberView], *, scheduling_error: str = "",
              unplaced: int = 0, deleting: bool = False, leaving: tuple[str, ...] = ()) -> tuple[dict[str, Any], str, str]:
    """(status, phase, message).

    Phases: Unschedulable (the scheduler placed nothing, or an error), Propagating (members not
    yet applied), Rolling (applied, some not on the desired template or not available yet),
    Degraded (a member failed to apply, or replicas could not be placed), Ready. ``leaving``
    names clusters it still runs in but was scheduled away from (a drain, a reschedule).
    """
    status: dict[str, Any] = {name: 0 for name in _COUNTS} if desired is not None else {}
    clusters: dict[str, Any] = {}
    for member in members:
        clusters[member.cluster] = _cluster_entry(member)
        if desired is not None and member.state != "deleting":
            for name in _COUNTS:
                if member.updated or name != "updatedReplicas":
                    status[name] += int(member.observed.get(name, 0) or 0)
    if desired is not None:
        status["desiredReplicas"] = desired
    if kind == "Job":
        status["succeeded"] = sum(int(m.observed.get("succeeded", 0) or 0) for m in members)
    status["clusters"] = clusters
    failed = sorted(m.cluster for m in members if m.state == "error")
    if deleting:
        return status, "Deleting", f"removing from {len(members)} clusters" if members else "removed from every cluster"
    if scheduling_error:
        return status, "Unschedulable", scheduling_error
    if not members:
        return status, "Unschedulable", "no cluster was selected"
    if failed:
        return status, "Degraded", "failed to apply in " + ", ".join(failed) + "; retrying"
    if any(m.state == "pending" for m in members):
        return status, "Propagating", "applying to member clusters"
    if leaving:
        return status, "Rolling", "moving away from " + ", ".join(sorted(leaving))
    if desired is None:
        return status, "Ready", f"copied to {len(members)} clusters"
    if unplaced:
        return status, "Degraded", f"{unplaced} replicas fit in no selected cluster"
    not_updated = any(not m.updated for m in members)
    if kind == "Job":
        return status, ("Rolling" if not_updated else "Ready"), f"{status['succeeded']} pods succeeded"
    if not_updated or status["updatedReplicas"] < desired or status["availableReplicas"] < desired:
        return status, "Rolling", (f"{status['updatedReplicas']}/{desired} updated, "
                                   f"{status['availableReplicas']}/{desired} available")
    return status, "Ready", f"{status['availableReplicas']}/{desired} available in {len(members)} clusters"
