"""Replicas plugins (Divide mode): ``ClusterCapacityWeight`` splits the replica count with the
Spread planner, by static placement weights or water-level weights, within each cluster's
min/max and estimated capacity."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from federation.planner import ClusterPreference, Resolved, plan_resolved, resolve
from federation.weights import GPU_RESOURCE, dynamic_weights
from kube.taints import NO_SCHEDULE, find_untolerated_taint

from .context import Context
from .resources import whole_units
from .types import CLUSTER_CAPACITY_WEIGHT, CPU, ClusterInfo, Placement


@dataclass
class ReplicaPlan:
    replicas: dict[str, int]
    weights: dict[str, int]
    source: str
    estimated_capacity: dict[str, int]
    overflow: dict[str, int]
    capped: dict[str, str]


def _scheduling_weights(ctx: Context, clusters: Sequence[ClusterInfo]) -> tuple[dict[str, int], str]:
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
            alloc = {CPU: whole_units(c.allocatable[CPU])} if CPU in c.allocatable else {}
            avail = {CPU: whole_units(c.available[CPU])} if CPU in c.available else {}
        else:
            alloc = {resource: c.allocatable[resource]} if resource in c.allocatable else {}
            avail = {resource: c.available[resource]} if resource in c.available else {}
        rows.append((c.name, alloc, avail))
    return dynamic_weights(rows, resource=resource), "dynamic"


def _estimated_capacity(ctx: Context, cluster: ClusterInfo, current: int) -> int | None:
    """Replicas the cluster could run: today's plus what its free resources hold."""
    room = None
    for resource, wanted in ctx.request.items():
        if wanted > 0:
            fits = max(cluster.available.get(resource, 0), 0) // wanted
            room = fits if room is None else min(room, fits)
    return None if room is None else current + room


@dataclass
class ReplicaInputs:
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
    resolved: Resolved  # the preferences resolved for the names, for every unit not held back


def replica_inputs(ctx: Context, clusters: Sequence[ClusterInfo]) -> ReplicaInputs:
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
        if find_untolerated_taint(cluster.taints, ctx.tolerations, (NO_SCHEDULE,)) is not None:
            held.append((cluster.name, "untolerated NoSchedule taint", preference))
        elif cluster.cordoned:
            held.append((cluster.name, "cordoned", preference))
        if ctx.profile.estimate_capacity:
            room = _estimated_capacity(ctx, cluster, 0)
            if room is not None:
                rooms[cluster.name] = room
    names = [c.name for c in clusters]
    return ReplicaInputs(names, weights, source, preferences, held, rooms, resolve(preferences, names))


def plan_replicas(ctx: Context, inputs: ReplicaInputs) -> ReplicaPlan:
    """Apply today's replicas to the shared inputs (caps of held clusters, capacities) and plan."""
    total = ctx.desired
    current = {name: (total if replicas is None else replicas) for name, replicas in ctx.current.items()}
    resolved = inputs.resolved
    capped: dict[str, str] = {}
    if inputs.held:
        preferences = dict(inputs.preferences)
        for name, why, preference in inputs.held:
            have = current.get(name, 0)
            ceiling = preference.max_replicas
            if ceiling is None or have < ceiling:
                ceiling = have
            capped[name] = f"{why}: no new replicas, at most the {have} it runs"
            preferences[name] = ClusterPreference(preference.weight, preference.min_replicas, ceiling)
        resolved = resolve(preferences, inputs.names)
    estimates = dict(inputs.rooms)
    for name, have in current.items():
        room = inputs.rooms.get(name)
        if room is not None:
            estimates[name] = have + room
    planned, overflow = plan_resolved(
        resolved, total, current, estimates, {},
        key=ctx.unit.key, avoid_migration=ctx.unit.avoid_migration,
    )
    return ReplicaPlan(planned, inputs.weights, inputs.source, estimates, overflow, capped)


def replicas_cluster_capacity_weight(ctx: Context, clusters: Sequence[ClusterInfo]) -> ReplicaPlan:
    """Upstream ``ClusterCapacityWeight``: weights + min/max + capacity into the Spread planner."""
    return plan_replicas(ctx, replica_inputs(ctx, clusters))


ReplicasPlugin = Callable[[Context, Sequence[ClusterInfo]], ReplicaPlan]

REPLICAS_PLUGINS: dict[str, ReplicasPlugin] = {CLUSTER_CAPACITY_WEIGHT: replicas_cluster_capacity_weight}
