"""The federation reconciler: schedule, roll out, render, apply, observe, aggregate.

One pass over one federated object (``reconcile_object``) is idempotent and may run any
number of times; the Celery task runs it on the object's shard under a per-object Redis
lock. Scheduling is incremental: an object is rescheduled only when a scheduling input
changed (its template's replicas or requests, its policy, cluster structure: labels, taints,
readiness, served APIs, cordons), which is what upstream's scheduler triggers on; water
levels alone do not move running replicas. A member cluster that fails to apply keeps its
error, is retried with backoff, and never holds the others back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import events, jobs, live
from fleet.connectors.base import Connector, ConnectorError
from fleet.models import Cluster
from fleet.services import connector_for
from kube.hashing import object_digest

from .aggregate import MemberView, aggregate
from .models import OBJECT_LIVE, FederatedObject, FederatedRevision, MemberObject
from .policy import cluster_patches, desired_replicas, scheduling_unit
from .render import RenderError, fenceposts, member_object, observe, rollout_target
from .rollout import RolloutPlan, plan_rollout
from .scheduler import GPU_RESOURCE, ClusterInfo, ClusterSnapshot, ScheduleResult, schedule

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 300
RESYNC_SECONDS = 3  # the beat's pace (``federation.resync``)
#: Longest pause between periodic passes over an unsettled object that keeps finding nothing
#: to do: short while it is moving (a rollout waits for pods), longer once it is stuck (it
#: still notices a cluster that joined or freed capacity within a minute).
QUIET_BACKOFF_SECONDS = {"moving": 30, "stuck": 60}
FIELD_MANAGER = "meridian-federation"
RECONCILE_TASK = "federation.reconcile_object"


# --------------------------------------------------------------------------- fleet snapshot


@dataclass
class FleetSnapshot:
    """Member clusters as the scheduler sees them, read once per pass (or per batch)."""

    infos: list[ClusterInfo]
    rows: dict[str, Cluster]
    structure: str
    draining: frozenset[str] = frozenset()


def cluster_info(row: Cluster) -> ClusterInfo:
    resources = frozenset(row.api_resources) if row.api_resources else None
    return ClusterInfo(
        name=row.name, labels=dict(row.labels or {}), taints=list(row.taints or []), ready=row.ready,
        api_resources=resources,
        allocatable={"cpu": row.cpu_allocatable_milli, "memory": row.memory_allocatable_bytes,
                     GPU_RESOURCE: row.gpu_allocatable, "pods": row.pods_allocatable},
        requested={"cpu": row.cpu_requested_milli, "memory": row.memory_requested_bytes,
                   GPU_RESOURCE: row.gpu_requested, "pods": row.pod_count},
        cordoned=row.cordoned,
    )


def fleet_snapshot() -> FleetSnapshot:
    rows = {c.name: c for c in Cluster.objects.all()}
    infos = [cluster_info(row) for row in rows.values()]
    structure = object_digest([
        [i.name, i.labels, i.taints, i.ready, sorted(i.api_resources or ()), i.cordoned, rows[i.name].drain]
        for i in infos])
    draining = frozenset(row.name for row in rows.values() if row.cordoned and row.drain)
    return FleetSnapshot(infos, rows, structure, draining)


# --------------------------------------------------------------------------- scheduling


def _current(members: Iterable[MemberObject], draining: frozenset[str]) -> dict[str, int | None]:
    """Where it runs now; a draining cluster counts as not running it, so it is not kept."""
    return {m.cluster.name: m.replicas for m in members
            if m.state != MemberObject.State.DELETING and m.cluster.name not in draining}


def _leaders(fed: FederatedObject) -> list[FederatedObject]:
    ref = f"{fed.kind}/{fed.name}"
    return [o for o in FederatedObject.objects.filter(namespace=fed.namespace, deleting=False).exclude(references=[])
            .select_related("propagation_policy") if ref in o.references]


def _follower_placement(fed: FederatedObject) -> tuple[dict[str, int | None], dict[str, Any]]:
    """A ConfigMap/Secret without its own policy goes everywhere its workloads go."""
    clusters: set[str] = set()
    leaders = []
    for leader in _leaders(fed):
        spec = leader.propagation_policy.spec if leader.propagation_policy else {}
        if not spec.get("disableFollowerScheduling"):
            clusters.update(leader.placement)
            leaders.append(leader.key)
    explanation = ([f"Follows {', '.join(leaders)}: copied to {', '.join(sorted(clusters)) or 'no cluster'}."] if leaders
                   else ["No propagation policy is bound and no workload references it: nothing is scheduled."])
    error = None if leaders else "no propagation policy (label kubeadmiral.io/propagation-policy-name) and no workload references it"
    return dict.fromkeys(sorted(clusters)), {"profile": "follower", "clusters": dict.fromkeys(sorted(clusters)),
                                             "follows": leaders, "error": error, "explanation": explanation}


def _schedule(fed: FederatedObject, members: list[MemberObject], fleet: FleetSnapshot, force: bool) -> bool:
    """Recompute ``placement`` when an input changed; returns whether placement changed."""
    policy = fed.propagation_policy
    if policy is None:
        placement, result = _follower_placement(fed)
        digest = object_digest(["follower", result["follows"], placement])
    else:
        current = _current(members, fleet.draining)
        unit = scheduling_unit(fed.template, policy.spec, current=current, key=fed.key)
        digest = object_digest(["policy", policy.spec, unit.desired_replicas, unit.resource_request, fed.template_hash,
                                fleet.structure, policy.updated.isoformat()])
        if digest == fed.schedule_digest and not force:
            return False
        outcome: ScheduleResult = schedule(unit, fleet.infos, policy.spec.get("schedulingProfile") or "default")
        placement, result = outcome.clusters, outcome.to_dict()
    changed = placement != fed.placement
    fed.placement, fed.schedule, fed.schedule_digest, fed.scheduled_at = placement, result, digest, timezone.now()
    return changed


# --------------------------------------------------------------------------- rollout


def rollout_steps(fed: FederatedObject, desired: Mapping[str, int | None],
                  members: Mapping[str, MemberObject]) -> dict[str, RolloutPlan] | None:
    """This step's plan per cluster for a Deployment (None: not rolled, apply as scheduled).

    The planner sees every cluster that runs it or should: clusters leaving the placement
    are shrinking targets, so draining and rescheduling also stay within the budget.
    """
    if fed.kind != "Deployment":
        return None
    copy_replicas = desired_replicas(fed.template) or 0
    wanted = {name: (copy_replicas if replicas is None else replicas) for name, replicas in desired.items()}
    total = sum(wanted.values())
    surge, unavailable = fenceposts(fed.template, total)
    targets = []
    for name in sorted(set(desired) | set(members)):
        member = members.get(name)
        observed = member.observed if member and member.state != MemberObject.State.PENDING else {}
        targets.append(rollout_target(name, wanted.get(name, 0), observed or {}, fed.template_hash))
    plans = plan_rollout(total, surge, unavailable, targets)
    if fed.rollout_paused:
        by_name = {t.cluster: t for t in targets}
        plans = {n: p for n, p in plans.items() if p.only_patch_replicas or by_name[n].updated}
    return plans


# --------------------------------------------------------------------------- members


@dataclass
class _Pass:
    fed: FederatedObject
    fleet: FleetSnapshot
    patches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    revisions: dict[int, dict[str, Any]] = field(default_factory=dict)
    connectors: dict[str, Connector] = field(default_factory=dict)

    def connector(self, cluster: Cluster) -> Connector:
        if cluster.name not in self.connectors:
            self.connectors[cluster.name] = connector_for(cluster)
        return self.connectors[cluster.name]

    def template_of(self, revision: int | None) -> dict[str, Any]:
        if revision is None or revision == self.fed.revision:
            return self.fed.template
        if revision not in self.revisions:
            row = FederatedRevision.objects.filter(object=self.fed, number=revision).first()
            self.revisions[revision] = row.template if row else self.fed.template
        return self.revisions[revision]

    def close(self) -> None:
        for connector in self.connectors.values():
            connector.close()


def _patches_for(fed: FederatedObject, cluster: Cluster) -> list[dict[str, Any]]:
    return cluster_patches(fed.override_policy.spec if fed.override_policy else None, cluster.name, cluster.labels or {})


def _fail(member: MemberObject, message: str, now) -> None:
    member.state = MemberObject.State.ERROR
    member.error = message[:2000]
    member.attempts += 1
    member.next_retry = now + timedelta(seconds=min(2 ** member.attempts, MAX_BACKOFF_SECONDS))


def _apply_member(run: _Pass, member: MemberObject, body: dict[str, Any], revision: int, now) -> None:
    digest = object_digest(body)
    retry_due = member.state == MemberObject.State.ERROR and (member.next_retry is None or member.next_retry <= now)
    if digest == member.applied_hash and member.state == MemberObject.State.APPLIED:
        return
    if member.state == MemberObject.State.ERROR and not retry_due and digest == member.applied_hash:
        return
    try:
        run.connector(member.cluster).apply(body, field_manager=FIELD_MANAGER)
    except ConnectorError as exc:
        member.applied_hash = digest
        _fail(member, f"{exc.reason}: {exc}", now)
        return
    member.state, member.error, member.attempts, member.next_retry = MemberObject.State.APPLIED, "", 0, None
    member.applied_hash, member.applied_revision = digest, revision


def _observe(run: _Pass, member: MemberObject) -> None:
    fed = run.fed
    meta = fed.template.get("metadata") or {}
    try:
        obj = run.connector(member.cluster).get(fed.api_version, fed.kind, meta["name"], namespace=meta.get("namespace") or None)
    except ConnectorError as exc:
        logger.info("cannot read %s in %s: %s", fed, member.cluster.name, exc)
        return
    member.observed = observe(obj)


def _render(run: _Pass, member: MemberObject, replicas: int | None, step: RolloutPlan | None) -> tuple[dict[str, Any], int]:
    fed = run.fed
    revision = fed.revision
    if step is not None and step.only_patch_replicas and member.applied_revision:
        revision = member.applied_revision
    if member.cluster.name not in run.patches:
        run.patches[member.cluster.name] = _patches_for(fed, member.cluster)
    body = member_object(run.template_of(revision), key=fed.key, revision=revision, replicas=replicas,
                         patches=run.patches[member.cluster.name], step=step)
    return body, revision


def _remove_member(run: _Pass, member: MemberObject, now) -> bool:
    """Delete from the cluster; True once it is gone."""
    fed = run.fed
    meta = fed.template.get("metadata") or {}
    try:
        run.connector(member.cluster).delete(fed.api_version, fed.kind, meta["name"], namespace=meta.get("namespace") or None)
    except ConnectorError as exc:
        _fail(member, f"{exc.reason}: cannot delete: {exc}", now)
        member.state = MemberObject.State.DELETING
        return False
    return True


def _sync_members(run: _Pass, members: dict[str, MemberObject]) -> list[MemberObject]:
    """Apply what each cluster should run now; returns the members that remain."""
    fed, now = run.fed, timezone.now()
    desired = {} if fed.deleting else dict(fed.placement)
    for name in desired:
        if name not in members and name in run.fleet.rows:
            members[name] = MemberObject(object=fed, cluster=run.fleet.rows[name], replicas=desired[name])
    steps = rollout_steps(fed, desired, members) if desired else None
    kept: list[MemberObject] = []
    for name in sorted(members):
        member = members[name]
        step = None if steps is None else steps.get(name)
        leaving = name not in desired
        emptied = leaving and (member.pk is None or not (member.observed or {}).get("specReplicas"))
        if steps is not None and step is None and not emptied:
            if member.pk is not None:
                kept.append(member)  # waits for its turn in the rollout
            continue
        if leaving and (emptied or steps is None or step is None or step.replicas in (None, 0)):
            if member.pk is None or _remove_member(run, member, now):
                if member.pk is not None:
                    member.delete()
                continue
            kept.append(member)
            continue
        member.replicas = desired.get(name, member.replicas)
        try:
            body, revision = _render(run, member, desired.get(name), step)
        except RenderError as exc:
            _fail(member, str(exc), now)
        else:
            _apply_member(run, member, body, revision, now)
        kept.append(member)
    for member in kept:
        if member.state == MemberObject.State.APPLIED:
            _observe(run, member)
    return kept


def _progress(fed: FederatedObject) -> str:
    """What a pass can change that people and the rollout wait for."""
    return object_digest([fed.phase, fed.message, fed.status, fed.placement])


def resync_backoff(fed: FederatedObject, progressed: bool, now: datetime) -> None:
    """Pace the periodic passes over an unsettled object by whether they achieve anything.

    A pass that changed nothing is followed by one after 3 s, then 6, 12, … up to 30 s while
    the object is moving (pending, rolling out) and a minute once it is stuck (degraded,
    unschedulable, paused): replicas that fit nowhere are not retried every 3 s forever, and
    any change (a pass that made progress, a user's action) brings the normal pace back.
    """
    if progressed or fed.phase == FederatedObject.Phase.READY:
        fed.quiet_passes, fed.next_resync = 0, None
        return
    stuck = fed.rollout_paused or fed.phase in (FederatedObject.Phase.DEGRADED, FederatedObject.Phase.UNSCHEDULABLE)
    cap = QUIET_BACKOFF_SECONDS["stuck" if stuck else "moving"]
    fed.quiet_passes = min(fed.quiet_passes + 1, 32)
    delay = min(RESYNC_SECONDS * 2 ** (fed.quiet_passes - 1), cap)
    fed.next_resync = now + timedelta(seconds=delay)


def _save(fed: FederatedObject, members: list[MemberObject], before: str) -> None:
    unplaced = int((fed.schedule or {}).get("unplaced") or 0)
    views = [MemberView(m.cluster.name, m.replicas, m.state, m.error, m.observed,
                        (m.observed or {}).get("templateHash") == fed.template_hash or fed.kind not in ("Deployment",))
             for m in members]
    status, phase, message = aggregate(fed.kind, desired_replicas(fed.template), views,
                                       scheduling_error=(fed.schedule or {}).get("error") or "", unplaced=unplaced,
                                       deleting=fed.deleting,
                                       leaving=tuple(m.cluster.name for m in members if m.cluster.name not in fed.placement))
    now = timezone.now()
    with transaction.atomic():
        for member in members:
            member.save()
        fed.status, fed.phase, fed.message = status, phase, message
        resync_backoff(fed, _progress(fed) != before, now)
        FederatedObject.objects.filter(pk=fed.pk).update(
            placement=fed.placement, schedule=fed.schedule, schedule_digest=fed.schedule_digest,
            scheduled_at=fed.scheduled_at, status=status, phase=phase, message=message,
            quiet_passes=fed.quiet_passes, next_resync=fed.next_resync, updated=now)


def reconcile_object(pk: int, *, fleet: FleetSnapshot | None = None, force_schedule: bool = False) -> str | None:
    """One pass over one object; returns its phase (None when it no longer exists)."""
    fed = (FederatedObject.objects.select_related("propagation_policy", "override_policy").filter(pk=pk).first())
    if fed is None:
        return None
    fleet = fleet or fleet_snapshot()
    before = _progress(fed)
    members = {m.cluster.name: m for m in fed.members.select_related("cluster")}
    placement_changed = False if fed.deleting else _schedule(fed, list(members.values()), fleet, force_schedule)
    run = _Pass(fed, fleet)
    try:
        kept = _sync_members(run, members)
    finally:
        run.close()
    if fed.deleting and not kept:
        fed.delete()
        for topic in ("federation", f"federation-object-{pk}"):
            events.publish(topic, "object.deleted", {"id": pk, "key": fed.key})
        return None
    _save(fed, kept, before)
    if placement_changed:
        _queue_followers(fed)
    live.mark(OBJECT_LIVE, [fed.pk])  # one summary per object per tick, however many passes
    return fed.phase


def object_events(keys: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """``core.live`` builder: each marked object's status on its own topic and on the list's."""
    out = []
    rows = FederatedObject.objects.filter(pk__in=[int(k) for k in keys if k.isdigit()]).only(
        "pk", "namespace", "name", "phase", "message", "status")
    for fed in rows:
        out.append((f"federation-object-{fed.pk}", "object.status",
                    {"id": fed.pk, "phase": fed.phase, "message": fed.message, "status": fed.status}))
        out.append(("federation", "object.status", {"id": fed.pk, "key": fed.key, "phase": fed.phase}))
    return out


def queue_reconcile(ids: Iterable[int]) -> None:
    """A reconcile job per object (sent after the current transaction commits, to its shard)."""
    for pk, namespace, name in FederatedObject.objects.filter(pk__in=list(ids)).values_list("pk", "namespace", "name"):
        jobs.enqueue(RECONCILE_TASK, pk, f"{namespace}/{name}" if namespace else name)


def _queue_followers(fed: FederatedObject) -> None:
    if not fed.references:
        return
    names = [ref.split("/", 1) for ref in fed.references]
    ids = [o.pk for o in FederatedObject.objects.filter(namespace=fed.namespace, propagation_policy__isnull=True)
           .only("pk", "kind", "name") if [o.kind, o.name] in names]
    queue_reconcile(ids)


def needs_attention(now=None) -> list[int]:
    """Objects a periodic pass should look at: not settled (unless backing off, see
    ``resync_backoff``), or with a member retry due."""
    now = now or timezone.now()
    unsettled = (FederatedObject.objects.exclude(phase=FederatedObject.Phase.READY)
                 .filter(Q(next_resync__isnull=True) | Q(next_resync__lte=now)).values_list("pk", flat=True))
    retries = MemberObject.objects.filter(state=MemberObject.State.ERROR, next_retry__lte=now).values_list("object_id", flat=True)
    return sorted(set(unsettled) | set(retries))


def _current_by_object(ids: list[int], draining: frozenset[str]) -> dict[int, dict[str, int | None]]:
    current: dict[int, dict[str, int | None]] = {pk: {} for pk in ids}
    rows = (MemberObject.objects.filter(object_id__in=ids).exclude(state=MemberObject.State.DELETING)
            .values_list("object_id", "cluster__name", "replicas"))
    for pk, cluster, replicas in rows:
        if cluster not in draining:
            current[pk][cluster] = replicas
    return current


def reschedule_all(*, chunk_size: int = 2000) -> tuple[dict[str, int], list[int]]:
    """Schedule every policy-bound object again over one fleet snapshot (with today's water
    levels) and send the ones whose placement would change to their shards.

    The batch scheduler (``ClusterSnapshot``) shares filter/score work between objects with
    the same policy and request shape; objects are read in chunks with their members in one
    query per chunk. Only changed objects are touched: their digest is cleared so their own
    reconcile pass schedules them again with the full explanation and rolls the change out
    within their budget. Returns the counts and the ids of the changed objects.
    """
    fleet = fleet_snapshot()
    snapshots: dict[str, ClusterSnapshot] = {}
    seen, changed = 0, []
    objects = (FederatedObject.objects.filter(deleting=False, propagation_policy__isnull=False)
               .select_related("propagation_policy").only("pk", "namespace", "name", "template", "placement",
                                                          "propagation_policy__spec").order_by("pk"))
    last = 0
    while True:
        jobs.checkpoint()  # a canceled job stops between chunks
        chunk = list(objects.filter(pk__gt=last)[:chunk_size])
        if not chunk:
            break
        last = chunk[-1].pk
        current = _current_by_object([o.pk for o in chunk], fleet.draining)
        for fed in chunk:
            spec = fed.propagation_policy.spec
            profile = spec.get("schedulingProfile") or "default"
            if profile not in snapshots:
                snapshots[profile] = ClusterSnapshot(fleet.infos, profile, explain=False)
            unit = scheduling_unit(fed.template, spec, current=current[fed.pk], key=fed.key)
            if snapshots[profile].schedule(unit).clusters != fed.placement:
                changed.append(fed.pk)
        seen += len(chunk)
    for start in range(0, len(changed), chunk_size):
        FederatedObject.objects.filter(pk__in=changed[start:start + chunk_size]).update(schedule_digest="")
    return {"objects": seen, "changed": len(changed)}, changed
