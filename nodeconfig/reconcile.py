"""The matching reconciler: decide each node's target per config type and write node configs.

Incremental by construction: a target change reconciles the nodes that had it plus the
nodes its new spec can reach (found by SQL on the labels index) — only the nodes that had it
when the change left its selection as last reconciled (a new body) — and a node change
reconciles that node. Only rows whose outcome changed are written; their agents' ETags are refreshed
after commit so the next poll sees the change.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from core import jobs, live
from core.locks import hold
from fleet.models import Cluster, Node
from fleet.selectors import requirement_q
from kube.labels import SelectorError, parse_selector

from .etags import REDIS_FAULTS, refresh_etags
from .katalyst import runs_katalyst
from .matching import TargetRef
from .models import TARGET_LIVE, ConfigRevision, ConfigTarget, ConfigType, NodeConfig
from .planning import ScopedTarget, TargetIndex, node_labels_with_cluster, overlay_hash

logger = logging.getLogger(__name__)
BATCH = 2000
ROW_FIELDS = ("matched_target_id", "target_id", "revision_id", "base_revision_id", "config_hash")
PUSH_TASK = "nodeconfig.push_to_cluster"
REFRESH_TASK = "nodeconfig.refresh_etags"


@dataclass(frozen=True)
class TargetInfo:
    id: int
    revision_id: int | None
    config_hash: str
    config: dict[str, Any]
    emergency: bool
    paced: bool


@dataclass
class ReconcileReport:
    config_type: str
    nodes: int = 0
    written: int = 0
    removed: int = 0
    conflicts: int = 0
    changed_nodes: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"config_type": self.config_type, "nodes": self.nodes, "written": self.written, "removed": self.removed,
                "conflicts": self.conflicts}


@dataclass(frozen=True)
class LiveTarget:
    """What matching reads of a live target: plain values, no model instance (a change's pass
    reads all of the type's targets, a thousand at fleet scale, to match a few hundred nodes)."""

    pk: int
    name: str
    cluster_id: int | None
    cluster_name: str | None
    node_label_selector: str
    priority: int
    node_names: list[str]
    last_duration: str
    expires_at: datetime | None
    emergency: bool
    revision_id: int | None
    config_hash: str
    config: dict[str, Any]
    paced: bool
    reconciled_selection: str

    def scoped(self) -> ScopedTarget:
        ref = TargetRef.stored(self.name, self.node_label_selector, self.priority, self.node_names, self.last_duration)
        return ScopedTarget(id=self.pk, ref=ref, cluster=self.cluster_name, emergency=self.emergency)


LIVE_FIELDS = ("pk", "name", "cluster_id", "cluster__name", "node_label_selector", "priority", "node_names",
               "last_duration", "expires_at", "emergency", "revision_id", "config_hash", "config", "wave_size",
               "rollout_state", "reconciled_selection", "valid")


def _live(config_type: ConfigType, now: datetime) -> tuple[list[LiveTarget], set[int]]:
    """Targets that take part in matching, and the invalid ones whose nodes stay as they are."""
    live, frozen = [], set()
    for *values, wave_size, rollout_state, reconciled, valid in (
            ConfigTarget.objects.filter(config_type=config_type, deleted=False).exclude(expires_at__lte=now)
            .order_by("emergency", "name").values_list(*LIVE_FIELDS)):
        if not valid:
            frozen.add(values[0])
        elif values[10] is not None:  # revision_id: a target is live from its first revision
            paced = bool(wave_size) and not values[9] and rollout_state != ConfigTarget.RolloutState.COMPLETE
            live.append(LiveTarget(*values, paced=paced, reconciled_selection=reconciled))
    return live, frozen


@dataclass(frozen=True)
class RevisionInfo:
    target_id: int
    config_hash: str
    config: dict[str, Any]


def desired_entry(match, current: tuple | None, infos: dict[int, TargetInfo], revisions: dict[int, RevisionInfo],
                  frozen: set[int]) -> tuple | None:
    """The row a node should have: (matched, target, revision, base revision, hash), or None.

    An emergency override is layered on the node's *regular* entry (what it would run
    without the override), kept in ``base``, so restoring the override returns each node to
    exactly where it was, paced rollouts included.
    """
    if current is not None and current[1] in frozen:
        return current
    regular_now = current
    gone_or_override = current is not None and (current[1] not in infos or infos[current[1]].emergency)
    if gone_or_override:
        base = revisions.get(current[3]) if current[3] is not None else None
        regular_now = (current[0], base.target_id, current[3], None, base.config_hash) if base else None
    regular = _regular_entry(match, regular_now, infos)
    if match.emergency is None:
        return regular
    emergency = infos[match.emergency]
    base_revision = regular[2] if regular is not None else None
    base = revisions.get(base_revision) if base_revision is not None else None
    digest = overlay_hash(base.config if base else None, emergency.config)
    return (match.matched, emergency.id, emergency.revision_id, base_revision, digest)


def _regular_entry(match, current: tuple | None, infos: dict[int, TargetInfo]) -> tuple | None:
    matched = infos.get(match.matched) if match.matched is not None else None
    if matched is None:
        return None
    if not matched.paced or (current is not None and current[2] == matched.revision_id):
        return (matched.id, matched.id, matched.revision_id, None, matched.config_hash)
    held_on = infos.get(current[1]) if current is not None and current[1] is not None else None
    if held_on is not None and not held_on.emergency:
        return (matched.id, *current[1:])  # a paced rollout has not reached this node yet
    return (matched.id, None, None, None, "")


def reconcile(config_type: ConfigType, *, node_ids: Iterable[int] | None = None, now: datetime | None = None,
              target_ids: Iterable[int] = ()) -> ReconcileReport:
    """Match ``node_ids`` (all nodes when None) against the type's live targets and write the outcome.

    ``target_ids`` names targets whose status must be refreshed even if no node changed.
    """
    now = now or timezone.now()
    with hold(f"nodeconfig-type-{config_type.pk}"):  # LockBusy: another pass of this type runs; the task retries
        return _reconcile(config_type, None if node_ids is None else list(node_ids), now, set(target_ids))


def _reconcile(config_type: ConfigType, node_ids: list[int] | None, now: datetime, extra_targets: set[int]) -> ReconcileReport:
    report = ReconcileReport(config_type=config_type.name)
    targets, frozen = _live(config_type, now)
    infos = {t.pk: TargetInfo(t.pk, t.revision_id, t.config_hash, t.config, t.emergency, t.paced) for t in targets}
    index = TargetIndex([t.scoped() for t in targets])
    revisions = _revisions(config_type, targets)
    restored = _restored(config_type, {t.pk for t in targets})
    upserts, removals = [], []
    touched: set[int] = set()
    for chunk in _node_chunks(node_ids):
        nodes = Node.objects.all() if chunk is None else Node.objects.filter(pk__in=chunk)
        rows = NodeConfig.objects.filter(config_type=config_type)
        if chunk is not None:
            rows = rows.filter(node_id__in=chunk)
        existing = {row[0]: row[1:] for row in rows.values_list("node_id", "pk", *ROW_FIELDS).iterator(chunk_size=BATCH)}
        for node_id, cluster_id, cluster_name, name, labels in nodes.values_list(
                "pk", "cluster_id", "cluster__name", "name", "labels").iterator(chunk_size=BATCH):
            report.nodes += 1
            match = index.match(cluster_name, name, labels or {})
            if match.error == "same_priority":
                report.conflicts += 1
            row = existing.get(node_id)
            current = row[1:] if row else None
            wanted = desired_entry(match, current, infos, revisions, frozen)
            if wanted == current:
                continue
            if wanted is None:
                removals.append(row[0])
            else:
                upserts.append(_row(node_id, cluster_id, config_type.pk, wanted, current, now, restored))
            report.changed_nodes.append(node_id)
            touched.update(t for t in (*(current or ())[:2], *(wanted or ())[:2]) if t)
    with transaction.atomic():
        _write(upserts, removals)
        # A pass over some nodes (churn) counts the targets it touched but observes only the
        # revisions it was asked to deliver: it must not say a new downgrade is delivered when
        # it matched a few churned nodes before the downgrade's own pass ran.
        _count_matches(config_type, None if node_ids is None else touched | extra_targets,
                       observed=None if node_ids is None else extra_targets)
        changed = list(report.changed_nodes)
        transaction.on_commit(lambda: after_write(changed))
    if node_ids is None:  # every node was matched against every live target
        record_selections({t.pk: (t.revision_id, digest) for t in targets
                           if (digest := selection_digest(t)) != t.reconciled_selection})
    report.written, report.removed = len(upserts), len(removals)
    return report


def _revisions(config_type: ConfigType, targets: list[LiveTarget]) -> dict[int, RevisionInfo]:
    """Current revisions of live targets, and every revision an override is layered on."""
    revisions = {t.revision_id: RevisionInfo(t.pk, t.config_hash, t.config) for t in targets}
    # Every type's bases by the base_revision index (a few: nodes under an override), then
    # this type's: filtering the rows by type first would walk all of the type's rows.
    bases = set(NodeConfig.objects.filter(base_revision__isnull=False)
                .values_list("base_revision", flat=True).distinct()) - set(revisions)
    for pk, target_id, digest, config in ConfigRevision.objects.filter(
            pk__in=bases, target__config_type=config_type).values_list("pk", "target_id", "config_hash", "config"):
        revisions[pk] = RevisionInfo(target_id, digest, config)
    return revisions


def _node_chunks(node_ids: list[int] | None) -> Iterable[list[int] | None]:
    if node_ids is None:
        yield None
        return
    for start in range(0, len(node_ids), 10 * BATCH):
        jobs.checkpoint()  # a canceled job stops between chunks of nodes
        yield node_ids[start : start + 10 * BATCH]


def _restored(config_type: ConfigType, live: set[int]) -> set[int]:
    """Emergency downgrades of the type that were restored (a handful: ended ones)."""
    return set(ConfigTarget.objects.filter(config_type=config_type, emergency=True, deleted=True).values_list(
        "pk", flat=True)) - live


def _row(node_id: int, cluster_id: int, type_id: int, wanted: tuple, current: tuple | None, now: datetime,
         restored: set[int]) -> NodeConfig:
    """The row to write; one leaving a restored downgrade names it (``restored_from``)."""
    matched, target, revision, base, digest = wanted
    fresh = current is None or current[4] != digest
    restored_from = current[1] if current is not None and current[1] in restored else None
    row = NodeConfig(node_id=node_id, cluster_id=cluster_id, config_type_id=type_id, matched_target_id=matched,
                     target_id=target, revision_id=revision, base_revision_id=base, config_hash=digest,
                     restored_from_id=restored_from)
    row.delivered_at = now if fresh and digest else None
    row._fresh = fresh  # type: ignore[attr-defined]
    return row


def _write(upserts: list[NodeConfig], removals: list[int]) -> None:
    fresh = [r for r in upserts if r._fresh]  # type: ignore[attr-defined]
    same = [r for r in upserts if not r._fresh]  # type: ignore[attr-defined]
    for start in range(0, len(fresh), BATCH):
        NodeConfig.objects.bulk_create(
            fresh[start : start + BATCH], update_conflicts=True, unique_fields=["node", "config_type"],
            update_fields=["matched_target", "target", "revision", "base_revision", "config_hash", "delivered_at", "error",
                           "restored_from"],
        )
    for start in range(0, len(same), BATCH):  # only the match moved; delivery and reports stand
        NodeConfig.objects.bulk_create(
            same[start : start + BATCH], update_conflicts=True, unique_fields=["node", "config_type"],
            update_fields=["matched_target", "target", "revision", "base_revision", "restored_from"],
        )
    for start in range(0, len(removals), BATCH):
        NodeConfig.objects.filter(pk__in=removals[start : start + BATCH]).delete()


def _count_matches(config_type: ConfigType, target_ids: set[int] | None, *, observed: set[int] | None = None) -> None:
    """Refresh matched-node counts: of ``target_ids`` (those a change touched), or of all; and
    mark the current revision observed (delivered) of ``observed`` (None: every target counted)."""
    rows = NodeConfig.objects.filter(config_type=config_type)
    targets = ConfigTarget.objects.filter(config_type=config_type)
    if target_ids is not None:
        if not target_ids:
            return
        targets = targets.filter(pk__in=target_ids)
        # The type's targets name the type's rows: read them by target (index), not by type
        # (SQLite would walk every row of the type, 200,000 at fleet scale, for a few hundred).
        rows = NodeConfig.objects.all()
    matched = rows.filter(matched_target__in=target_ids) if target_ids is not None else rows.filter(matched_target__isnull=False)
    counts = dict(matched.values_list("matched_target").annotate(n=Count("pk")).values_list("matched_target", "n"))
    overrides = rows.filter(target__emergency=True)
    if target_ids is not None:
        overrides = overrides.filter(target__in=target_ids)
    counts.update(overrides.values_list("target").annotate(n=Count("pk")).values_list("target", "n"))
    for pk, count, seen_before, number, emergency, deleted in targets.values_list(
            "pk", "matched_node_count", "observed_revision", "revision__number", "emergency", "deleted"):
        wanted = count if emergency and deleted else counts.get(pk, 0)  # a restored downgrade keeps how many it covered
        seen = (number or 0) if observed is None or pk in observed else seen_before
        if count != wanted or seen_before != seen:
            ConfigTarget.objects.filter(pk=pk).update(matched_node_count=wanted, observed_revision=seen)


def after_write(node_ids: Sequence[int]) -> None:
    """After commit: agents' ETags, and the mirror in clusters that run Katalyst's agents.

    Both are durable: an ETag refresh that cannot reach Redis becomes a job the outbox sends
    again, and pushes are jobs, so neither is lost to a Redis blip after the rows committed.
    """
    if not node_ids:
        return
    try:
        refresh_etags(node_ids)
    except REDIS_FAULTS as exc:
        logger.warning("could not refresh %s agents' ETags (%s); queued as a job", len(node_ids), exc)
        for start in range(0, len(node_ids), 50_000):
            jobs.enqueue(REFRESH_TASK, list(node_ids[start : start + 50_000]))
    queue_pushes(node_ids)


def queue_pushes(node_ids: Sequence[int]) -> None:
    """A push job per affected cluster that runs Katalyst agents: the changed nodes' CNCs."""
    ids = list(node_ids)
    by_cluster: dict[int, list[str]] = {}
    for start in range(0, len(ids), 50_000):
        for cluster_id, name in Node.objects.filter(pk__in=ids[start : start + 50_000]).values_list("cluster_id", "name"):
            by_cluster.setdefault(cluster_id, []).append(name)
    if not by_cluster:
        return
    clusters = Cluster.objects.filter(pk__in=list(by_cluster)).only("pk", "name", "connector", "connector_config",
                                                                    "api_resources")
    for cluster in clusters:
        if runs_katalyst(cluster.api_resources, cluster.connector, cluster.connector_config or {}):
            jobs.enqueue(PUSH_TASK, cluster.name, sorted(by_cluster[cluster.pk]), obj=cluster)


def mark_dirty(target_ids: Iterable[int]) -> None:
    """Targets whose progress changed; ``core.live`` coalesces them into one summary a tick."""
    live.mark(TARGET_LIVE, [i for i in target_ids if i])


# ---------------------------------------------------------------------------- incremental entry points

def candidate_q(cluster_name: str | None, selector: str, node_names: Sequence[str]) -> Q:
    """Nodes a target spec can reach: a superset, narrowed by SQL (labels index, names, scope)."""
    q = Q(cluster__name=cluster_name) if cluster_name else Q()
    if node_names:
        return q & Q(name__in=list(node_names))
    if selector:
        for requirement in parse_selector(selector).requirements:
            if requirement.key == "cluster":
                continue  # the synthetic label is not stored; matching checks it
            q &= requirement_q(requirement)
    return q


def selection_digest(target: ConfigTarget | LiveTarget) -> str:
    """What decides which nodes a target can reach and win, not what it delivers: while it is
    the digest its reachable nodes were last reconciled with, a change (a new body, a wave
    size) can move only the nodes that hold the target."""
    key = [target.cluster_id, target.node_label_selector, list(target.node_names), target.priority, target.emergency,
           target.expires_at.isoformat() if target.expires_at else None]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


@dataclass
class Plan:
    """The nodes a target change can affect, and the selections searched to find them."""

    node_ids: set[int]
    #: target id -> (the revision searched, its selection digest), to be recorded once reconciled
    searched: dict[int, tuple[int | None, str]]

    def record(self) -> None:
        record_selections(self.searched)


def record_selections(reconciled: dict[int, tuple[int | None, str]]) -> None:
    """These targets' reachable nodes are reconciled (target id -> the revision and digest
    matched): the next change that keeps the selection searches no nodes. A target changed
    meanwhile (a new revision: deleted, revived, edited) keeps its old digest and is searched
    again."""
    for pk, (revision_id, digest) in reconciled.items():
        ConfigTarget.objects.filter(pk=pk, revision_id=revision_id, deleted=False).update(reconciled_selection=digest)


def nodes_for_targets(config_type: ConfigType, target_ids: Sequence[int]) -> Plan:
    """Nodes whose outcome these targets may change: those that had them, those they can reach
    (unless their selection is the one last reconciled)."""
    # By target (indexes), not by type: the type's targets name only the type's rows.
    ids = set(NodeConfig.objects.filter(Q(matched_target_id__in=target_ids) | Q(target_id__in=target_ids))
              .values_list("node_id", flat=True))
    searched: dict[int, tuple[int | None, str]] = {}
    for target in ConfigTarget.objects.filter(pk__in=target_ids, config_type=config_type, deleted=False).select_related("cluster"):
        digest = selection_digest(target)
        if digest == target.reconciled_selection:
            continue
        try:
            q = candidate_q(target.cluster.name if target.cluster else None, target.node_label_selector, target.node_names)
        except SelectorError:
            continue
        ids.update(Node.objects.filter(q).values_list("pk", flat=True))
        searched[target.pk] = (target.revision_id, digest)
    return Plan(ids, searched)


def reconcile_nodes(node_ids: Sequence[int]) -> list[ReconcileReport]:
    """After nodes changed (labels, new nodes): every type, those nodes only."""
    reports = []
    for config_type in ConfigType.objects.all():
        report = reconcile(config_type, node_ids=node_ids)
        reports.append(report)
        if report.changed_nodes:
            mark_dirty(NodeConfig.objects.filter(node_id__in=report.changed_nodes, config_type=config_type)
                       .values_list("target_id", flat=True).distinct())
    return reports


def match_preview(config_type: ConfigType, spec, *, limit: int = 50) -> dict[str, Any]:
    """Nodes ``spec`` would match on its own now (selector, names and scope), with a sample."""
    from .planning import cached_selector

    q = candidate_q(spec.cluster, spec.node_label_selector, spec.node_names)
    matched, sample = 0, []
    selector = cached_selector(spec.node_label_selector) if spec.node_label_selector else None
    for cluster_name, name, labels in Node.objects.filter(q).order_by("name").values_list("cluster__name", "name", "labels").iterator(chunk_size=BATCH):
        if selector is not None and not selector.matches(node_labels_with_cluster(labels or {}, cluster_name)):
            continue
        matched += 1
        if len(sample) < limit:
            sample.append({"cluster": cluster_name, "name": name})
    return {"matched_count": matched, "nodes": sample}
