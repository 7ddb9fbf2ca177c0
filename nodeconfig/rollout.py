"""Rollout progress per target revision, paced waves, and automatic pause on failures.

Counts come from one aggregate over the target's node config rows. "Delivered" means the
node's config now names the revision (upstream's "updated"); "applied" means its agent said
so. Progress events are coalesced (``core.live``): writers mark targets, and one summary
per marked target goes out each tick, however many nodes reported.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from collections.abc import Iterable, Iterator
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from core import concurrency, events
from core.audit import record_change
from core.context import acting_as

from .models import ConfigTarget, ConfigType, NodeConfig
from .planning import wave_count
from .reconcile import ReconcileReport, after_write, mark_dirty, nodes_for_targets, reconcile

State = ConfigTarget.RolloutState


def progress(target: ConfigTarget) -> dict[str, Any]:
    """targeted / delivered / applied / failed / pending / held for the target's current revision."""
    return progress_many([target])[target.pk]


def progress_many(targets: Iterable[ConfigTarget]) -> dict[int, dict[str, Any]]:
    """``progress`` for many targets in at most two grouped queries, not one per target.

    A regular target counts the rows matched to it, current when the row (or the base under
    an emergency override) has its revision; an emergency target counts the rows it overrides,
    and once restored the rows its restore moved back (``restored_from``): acknowledged when
    the agent applied its regular config again.
    """
    targets = list(targets)
    regular = [t.pk for t in targets if not t.emergency]
    emergency = [t.pk for t in targets if t.emergency and not t.deleted]
    restored = [t.pk for t in targets if t.emergency and t.deleted]
    counts: dict[int, dict[str, int]] = {}
    if restored:
        counts |= _grouped(NodeConfig.objects.filter(restored_from_id__in=restored), "restored_from_id", Q())
    if regular:
        revision = F("matched_target__revision_id")
        counts |= _grouped(NodeConfig.objects.filter(matched_target_id__in=regular), "matched_target_id",
                           Q(revision_id=revision) | Q(base_revision_id=revision))
    if emergency:
        counts |= _grouped(NodeConfig.objects.filter(target_id__in=emergency), "target_id",
                           Q(revision_id=F("target__revision_id")))
    summaries = {t.pk: _summary(t, counts.get(t.pk, {})) for t in targets}
    for t in targets:
        if t.pk in restored:  # nodes without a regular target: no entry now, they run the type's default
            summaries[t.pk]["default"] = max(t.matched_node_count - summaries[t.pk]["targeted"], 0)
    return summaries


def _grouped(rows: QuerySet[NodeConfig], key: str, current: Q) -> dict[int, dict[str, int]]:
    applied = Q(applied_hash=F("config_hash"))
    grouped = rows.order_by().values(key).annotate(
        targeted=Count("pk"), delivered=Count("pk", filter=current), applied=Count("pk", filter=current & applied),
        failed=Count("pk", filter=current & ~Q(error="") & ~applied),
    )
    return {row.pop(key): row for row in grouped}


def _summary(target: ConfigTarget, counts: dict[str, int]) -> dict[str, Any]:
    """The ``nodeconfig.progress`` event payload for ``target`` from its raw counts."""
    result = {name: counts.get(name, 0) for name in ("targeted", "delivered", "applied", "failed")}
    result["pending"] = result["delivered"] - result["applied"] - result["failed"]
    result["held"] = result["targeted"] - result["delivered"]
    current = target.revision.number if target.revision_id else 0
    # Until the reconciler has matched the current revision, no count above is about it.
    result["delivery"] = "delivered" if target.observed_revision >= current else "pending"
    # "revision" is what the reconciler has matched; "current_revision" what the target is now
    # (they differ until the delivery of an edit); "matched_nodes" is the reconciler's count.
    return result | {"target": target.name, "target_id": target.pk, "config_type": target.config_type.name,
                     "revision": target.observed_revision or current, "current_revision": current,
                     "matched_nodes": target.matched_node_count,
                     "hash": target.config_hash, "rollout_state": target.rollout_state, "paused": target.paused,
                     "message": target.rollout_message}


def rollout_metrics() -> Iterator[Any]:
    """Scrape-time figures (``core.metrics``): each live target's nodes by rollout state
    (targeted, delivered, applied, failed, pending, held) for its current revision."""
    from prometheus_client.core import GaugeMetricFamily

    nodes = GaugeMetricFamily("meridian_rollout_nodes", "A config target's nodes by rollout state, for its current revision.",
                              labels=["config_type", "target", "state"])
    targets = ConfigTarget.objects.filter(deleted=False).select_related("config_type", "revision")
    for summary in progress_many(targets).values():
        for state in ("targeted", "delivered", "applied", "failed", "pending", "held"):
            nodes.add_metric([summary["config_type"], summary["target"], state], float(summary[state]))
    yield nodes


def failure_ratio_exceeded(counts: dict[str, int], threshold_percent: int) -> bool:
    reported = counts["delivered"]
    return reported > 0 and counts["failed"] * 100 > threshold_percent * reported


def advance_rollout(target: ConfigTarget, *, now: datetime | None = None, force: bool = False) -> dict[str, Any]:
    """One step of a paced rollout: complete it, pause it on failures, or release the next wave.

    ``force`` releases the next wave now (the operator's "advance"), ignoring the interval.
    """
    now = now or timezone.now()
    with transaction.atomic():
        target = ConfigTarget.objects.select_for_update(no_key=True, of=("self",)).select_related("config_type", "revision").get(pk=target.pk)
        counts = progress(target)
        if target.deleted or not target.wave_size or target.rollout_state == State.COMPLETE:
            return counts
        if counts["targeted"] and counts["held"] == 0:
            _set_state(target, State.COMPLETE, f"all {counts['targeted']} nodes have revision {target.revision.number}")
        elif failure_ratio_exceeded(counts, target.failure_threshold_percent) and target.rollout_state != State.FAILED:
            target.paused = True
            _set_state(target, State.FAILED, f"{counts['failed']} of {counts['delivered']} nodes failed to apply "
                                             f"(threshold {target.failure_threshold_percent}%)")
            record_change(target, "update", verb="auto_pause", after=counts, reason=target.rollout_message)
        elif target.paused and not force:
            pass
        elif force or _wave_due(target, counts, now):
            released = _release_wave(target, wave_count(target.wave_size, counts["targeted"]), now)
            target.last_wave_at = now
            target.save(update_fields=["last_wave_at", "updated"])
            counts["released_now"] = released
        mark_dirty([target.pk])
    return counts


def _wave_due(target: ConfigTarget, counts: dict[str, int], now: datetime) -> bool:
    if target.last_wave_at is None:
        return True
    interval_over = now - target.last_wave_at >= timedelta(seconds=target.wave_interval_seconds)
    return interval_over and counts["pending"] == 0


def _set_state(target: ConfigTarget, state: str, message: str) -> None:
    target.rollout_state, target.rollout_message = state, message[:500]
    target.save(update_fields=["rollout_state", "rollout_message", "paused", "updated"])


def _release_wave(target: ConfigTarget, size: int, now: datetime) -> int:
    """Give the next ``size`` held nodes, in byte-wise name order, the current revision."""
    held = (NodeConfig.objects.filter(matched_target=target).exclude(revision_id=target.revision_id)
            .exclude(target__emergency=True).order_by("node__name", "node_id").values_list("pk", "node_id")[:size])
    held = list(held)
    if not held:
        return 0
    NodeConfig.objects.filter(pk__in=[pk for pk, _ in held]).update(
        target=target, revision_id=target.revision_id, base_revision=None, config_hash=target.config_hash,
        delivered_at=now, error="")
    node_ids = [node_id for _, node_id in held]

    transaction.on_commit(lambda: after_write(node_ids))
    return len(held)


def promote(target: ConfigTarget, *, reason: str = "") -> dict[str, Any]:
    """Release every held node now (end the pacing)."""
    with transaction.atomic():
        locked = ConfigTarget.objects.select_for_update(no_key=True).get(pk=target.pk)
        concurrency.check(locked)
        released = _release_wave(locked, 10**9, timezone.now())
        locked.paused = False
        _set_state(locked, State.COMPLETE, "promoted: all nodes released")
        record_change(locked, "update", verb="promote", after={"released": released}, reason=reason)
    mark_dirty([target.pk])
    return {"released": released}


def step_all(now: datetime | None = None) -> int:
    """Beat: advance every paced rollout that is not complete."""
    stepped = 0
    with acting_as("system:nodeconfig-rollout"):
        for target in ConfigTarget.objects.filter(deleted=False).exclude(wave_size="").exclude(rollout_state=State.COMPLETE):
            advance_rollout(target, now=now)
            stepped += 1
    return stepped


def progress_events(keys: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """``core.live`` builder: one summary per marked target, on the list and on its own topic."""
    targets = ConfigTarget.objects.filter(pk__in=[int(k) for k in keys if k.isdigit()]).select_related(
        "config_type", "revision")
    out = []
    for target_id, summary in progress_many(targets).items():
        out.append(("nodeconfig", "target.progress", summary))
        out.append((f"nodeconfig-target-{target_id}", "target.progress", summary))
    return out


def reconcile_targets(config_type: ConfigType, target_ids: list[int]) -> ReconcileReport:
    """After a target change: reconcile only what it can affect, then start paced rollouts' first wave."""
    plan = nodes_for_targets(config_type, target_ids)
    report = reconcile(config_type, node_ids=plan.node_ids, target_ids=target_ids)
    plan.record()
    for target in ConfigTarget.objects.filter(pk__in=target_ids, deleted=False):
        if target.wave_size and not target.emergency and target.rollout_state != State.COMPLETE:
            advance_rollout(target)
    mark_dirty(target_ids)
    events.publish("nodeconfig", "target.reconciled", report.as_dict() | {"targets": list(target_ids)})
    return report
