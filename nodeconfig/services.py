"""Every change to config types and targets: validated, versioned, audited, then reconciled.

A target change is one transaction: the target row, its new immutable revision and the
audit entry commit together or not at all, and matching runs after commit. A refused
target raises ``TargetRefused`` before anything is written, so it never changes what any
node runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jsonschema
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from core.audit import record_change, snapshot
from core.context import current_actor
from fleet.models import Cluster

from .hashing import config_hash
from .matching import TargetRef, parse_go_duration
from .models import ConfigRevision, ConfigTarget, ConfigType
from .planning import parse_wave_size
from .validation import TargetProblem, validate_target

NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
EMERGENCY_TYPE = "AdminQoSConfiguration"
EMERGENCY_CONFIG = {"reclaimedResourceConfig": {"enableReclaim": False}}
SPEC_FIELDS = ("cluster", "node_label_selector", "priority", "node_names", "last_duration", "config")
ROLLOUT_FIELDS = ("wave_size", "wave_interval_seconds", "failure_threshold_percent")


class TargetRefused(ValueError):
    """A target that may not be saved; ``code`` is a contracts.md reason code or a Meridian one."""

    def __init__(self, code: str, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.code, self.detail, self.field = code, detail, field

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "detail": self.detail}


@dataclass
class TargetSpec:
    """What a user asks a target to be, before validation (from the API, UI or YAML)."""

    name: str
    cluster: str | None = None
    node_label_selector: str = ""
    priority: int = 0
    node_names: tuple[str, ...] = ()
    last_duration: str = ""
    config: dict[str, Any] | None = None
    wave_size: str = ""
    wave_interval_seconds: int = 60
    failure_threshold_percent: int = 10

    def ref(self) -> TargetRef:
        return TargetRef(name=self.name, node_label_selector=self.node_label_selector, priority=self.priority,
                         node_names=tuple(self.node_names), last_duration=self.last_duration or None)


def ref_of(target: ConfigTarget) -> TargetRef:
    return TargetRef(name=target.name, node_label_selector=target.node_label_selector, priority=target.priority,
                     node_names=tuple(target.node_names), last_duration=target.last_duration or None)


# ---------------------------------------------------------------------------- validation

def live_targets(config_type: ConfigType, *, now: datetime | None = None):
    now = now or timezone.now()
    return (ConfigTarget.objects.filter(config_type=config_type, deleted=False)
            .exclude(expires_at__lte=now).select_related("cluster"))


def problems_for(config_type: ConfigType, spec: TargetSpec, *, emergency: bool = False) -> list[TargetProblem]:
    """Everything wrong with ``spec`` among the type's live targets whose scope overlaps."""
    others = [ref_of(t) for t in live_targets(config_type).exclude(name=spec.name).filter(emergency=False)
              if t.cluster is None or spec.cluster is None or t.cluster.name == spec.cluster]
    allowed = config_type.allowed_keys_by_priority() or None
    if emergency:
        allowed = {spec.priority: sorted({k for keys in (allowed or {}).values() for k in keys} | {"cluster"})}
        others = []
    return validate_target(spec.ref(), allowed, others)


def check_spec(config_type: ConfigType, spec: TargetSpec, *, emergency: bool = False) -> None:
    """Raise TargetRefused for the first problem, naming the field or the other target."""
    if not NAME_PATTERN.match(spec.name or ""):
        raise TargetRefused("invalid_name", "Name must be a DNS subdomain: lowercase letters, digits, '-' and '.'.", field="name")
    if spec.cluster and not Cluster.objects.filter(name=spec.cluster).exists():
        raise TargetRefused("unknown_cluster", f"There is no member cluster named {spec.cluster!r}.", field="cluster")
    if not isinstance(spec.config, Mapping):
        raise TargetRefused("config_invalid", "config must be a JSON object.", field="config")
    if spec.last_duration:
        try:
            if parse_go_duration(spec.last_duration).total_seconds() <= 0:
                raise ValueError("must be positive")
        except ValueError as exc:
            raise TargetRefused("last_duration_invalid", f"lastDuration {spec.last_duration!r}: {exc}", field="last_duration") from exc
    if spec.wave_size:
        try:
            parse_wave_size(spec.wave_size)
        except ValueError as exc:
            raise TargetRefused("wave_size_invalid", str(exc), field="wave_size") from exc
    if not 0 <= spec.failure_threshold_percent <= 100:
        raise TargetRefused("failure_threshold_invalid", "failure threshold must be 0–100 percent.", field="failure_threshold_percent")
    problems = problems_for(config_type, spec, emergency=emergency)
    if problems:
        raise TargetRefused(problems[0].reason, problems[0].message)
    if config_type.schema:
        check_config(config_type, spec.config)


def check_config(config_type: ConfigType, config: Mapping[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(config_type.schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(str(p) for p in error.absolute_path) or "config"
        raise TargetRefused("config_invalid", f"{where}: {error.message}", field="config")


# ---------------------------------------------------------------------------- targets

def _next_number(target: ConfigTarget) -> int:
    return (target.revisions.aggregate(n=Max("number"))["n"] or 0) + 1


def _apply_spec(target: ConfigTarget, spec: TargetSpec, now: datetime) -> None:
    target.cluster = Cluster.objects.get(name=spec.cluster) if spec.cluster else None
    target.node_label_selector = spec.node_label_selector
    target.priority = spec.priority
    target.node_names = list(spec.node_names)
    target.last_duration = spec.last_duration
    target.config = dict(spec.config or {})
    target.config_hash = config_hash(target.config)
    target.expires_at = now + parse_go_duration(spec.last_duration) if spec.last_duration else None
    target.wave_size = spec.wave_size
    target.wave_interval_seconds = spec.wave_interval_seconds
    target.failure_threshold_percent = spec.failure_threshold_percent
    paced = bool(spec.wave_size) and not target.emergency
    target.rollout_state = ConfigTarget.RolloutState.PROGRESSING if paced else ConfigTarget.RolloutState.COMPLETE
    target.rollout_message = ""
    target.paused = False
    target.last_wave_at = None
    target.valid, target.status_reason, target.status_message = True, "", ""


def _revise(target: ConfigTarget, action: str, reason: str, *, rollback_of: int | None = None) -> ConfigRevision:
    revision = ConfigRevision.objects.create(
        target=target, number=_next_number(target), action=action,
        cluster_name=target.cluster.name if target.cluster else "", node_label_selector=target.node_label_selector,
        priority=target.priority, node_names=list(target.node_names), last_duration=target.last_duration,
        config=target.config, config_hash=target.config_hash, rollback_of=rollback_of, reason=reason,
        created_by=current_actor().name[:150],
    )
    target.revision = revision
    target.save()
    return revision


def save_target(config_type: ConfigType, spec: TargetSpec, *, reason: str = "", emergency: bool = False,
                expect_new: bool = False) -> tuple[ConfigTarget, bool]:
    """Create or update the target ``spec.name``; returns (target, created).

    An unchanged spec writes nothing. A deleted target of the same name is revived, keeping
    its history. Concurrent writers of one name serialize on the row lock.
    """
    check_spec(config_type, spec, emergency=emergency)
    now = timezone.now()
    with transaction.atomic():
        target = (ConfigTarget.objects.select_for_update().filter(config_type=config_type, name=spec.name).first())
        created = target is None or target.deleted
        if target is not None and not target.deleted and expect_new:
            raise TargetRefused("already_exists", f"A {config_type.name} target named {spec.name!r} already exists.", field="name")
        if target is not None and not created and _same_spec(target, spec):
            return target, False
        before = snapshot(target) if target is not None else None
        if target is None:
            target = ConfigTarget(config_type=config_type, name=spec.name, emergency=emergency)
        target.deleted = False
        _apply_spec(target, spec, now)
        try:
            with transaction.atomic():
                target.save()
        except IntegrityError as exc:  # a concurrent create of the same name won
            raise TargetRefused("already_exists", f"A {config_type.name} target named {spec.name!r} already exists.") from exc
        _revise(target, ConfigRevision.Action.CREATE if created else ConfigRevision.Action.UPDATE, reason)
        record_change(target, "create" if before is None else "update", before=before, after=snapshot(target), reason=reason)
    schedule_reconcile(target)
    return target, created


def _same_spec(target: ConfigTarget, spec: TargetSpec) -> bool:
    return ((target.cluster.name if target.cluster else None) == (spec.cluster or None)
            and target.node_label_selector == spec.node_label_selector and target.priority == spec.priority
            and list(target.node_names) == list(spec.node_names) and target.last_duration == spec.last_duration
            and target.config == spec.config and target.wave_size == spec.wave_size
            and target.wave_interval_seconds == spec.wave_interval_seconds
            and target.failure_threshold_percent == spec.failure_threshold_percent)


def spec_of(target: ConfigTarget, **changes: Any) -> TargetSpec:
    spec = TargetSpec(name=target.name, cluster=target.cluster.name if target.cluster else None,
                      node_label_selector=target.node_label_selector, priority=target.priority,
                      node_names=tuple(target.node_names), last_duration=target.last_duration, config=target.config,
                      wave_size=target.wave_size, wave_interval_seconds=target.wave_interval_seconds,
                      failure_threshold_percent=target.failure_threshold_percent)
    for key, value in changes.items():
        setattr(spec, key, value)
    return spec


def delete_target(target: ConfigTarget, *, reason: str = "", action: str = ConfigRevision.Action.DELETE) -> None:
    """Soft delete: nodes fall back to the next target; history stays."""
    with transaction.atomic():
        locked = ConfigTarget.objects.select_for_update().get(pk=target.pk)
        if locked.deleted:
            return
        before = snapshot(locked)
        locked.deleted = True
        locked.rollout_state = ConfigTarget.RolloutState.COMPLETE
        _revise(locked, action, reason)
        record_change(locked, "delete", before=before, reason=reason)
    target.refresh_from_db()
    schedule_reconcile(target)


def rollback_target(target: ConfigTarget, number: int, *, reason: str) -> ConfigRevision:
    """A new revision equal to revision ``number``, validated like any other change."""
    if not reason.strip():
        raise TargetRefused("reason_required", "Say why you roll back.", field="reason")
    old = target.revisions.filter(number=number).first()
    if old is None:
        raise TargetRefused("unknown_revision", f"{target} has no revision {number}.", field="revision")
    if old.action == ConfigRevision.Action.DELETE:
        raise TargetRefused("unknown_revision", f"Revision {number} records a deletion; pick a revision with a spec.", field="revision")
    spec = spec_of(target, cluster=old.cluster_name or None, node_label_selector=old.node_label_selector,
                   priority=old.priority, node_names=tuple(old.node_names), last_duration=old.last_duration,
                   config=old.config)
    check_spec(target.config_type, spec, emergency=target.emergency)
    with transaction.atomic():
        locked = ConfigTarget.objects.select_for_update().get(pk=target.pk)
        before = snapshot(locked)
        locked.deleted = False
        _apply_spec(locked, spec, timezone.now())
        revision = _revise(locked, ConfigRevision.Action.ROLLBACK, reason, rollback_of=number)
        record_change(locked, "update", verb="rollback", before=before, after=snapshot(locked), reason=reason)
    target.refresh_from_db()
    schedule_reconcile(target)
    return revision


def diff_revisions(a: ConfigRevision, b: ConfigRevision) -> list[dict[str, Any]]:
    """Field-level differences from ``a`` to ``b``; config compared leaf by leaf."""
    changes: list[dict[str, Any]] = []
    spec_a, spec_b = a.spec(), b.spec()
    for field in SPEC_FIELDS:
        if field == "config":
            _diff_values("config", spec_a["config"], spec_b["config"], changes)
        elif spec_a[field] != spec_b[field]:
            changes.append({"path": field, "op": "change", "old": spec_a[field], "new": spec_b[field]})
    return changes


def _diff_values(path: str, old: Any, new: Any, changes: list[dict[str, Any]]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new)):
            sub = f"{path}.{key}"
            if key not in old:
                changes.append({"path": sub, "op": "add", "old": None, "new": new[key]})
            elif key not in new:
                changes.append({"path": sub, "op": "remove", "old": old[key], "new": None})
            else:
                _diff_values(sub, old[key], new[key], changes)
    elif old != new or type(old) is not type(new):
        changes.append({"path": path, "op": "change", "old": old, "new": new})


# ---------------------------------------------------------------------------- rollout control

def set_paused(target: ConfigTarget, paused: bool, *, reason: str = "") -> ConfigTarget:
    with transaction.atomic():
        locked = ConfigTarget.objects.select_for_update().get(pk=target.pk)
        before = {"paused": locked.paused, "rollout_state": locked.rollout_state}
        locked.paused = paused
        if locked.rollout_state != ConfigTarget.RolloutState.COMPLETE:
            locked.rollout_state = ConfigTarget.RolloutState.PAUSED if paused else ConfigTarget.RolloutState.PROGRESSING
            locked.rollout_message = reason if paused else ""
        locked.save(update_fields=["paused", "rollout_state", "rollout_message", "updated"])
        record_change(locked, "update", verb="pause" if paused else "resume", before=before,
                      after={"paused": locked.paused, "rollout_state": locked.rollout_state}, reason=reason)
    return locked


# ---------------------------------------------------------------------------- emergency downgrade

def emergency_name(cluster: str | None, selector: str) -> str:
    if selector:
        from kube.hashing import stable_hash

        scope = f"{cluster or ''}|{selector}"
        return f"emergency-downgrade-{stable_hash(scope):08x}"
    return f"emergency-downgrade-{cluster}" if cluster else "emergency-downgrade-fleet"


def emergency_downgrade(*, cluster: str | None, selector: str, reason: str) -> tuple[ConfigTarget, bool]:
    """Turn reclaim off now for a scope: a top-tier override, reconciled in this request.

    Idempotent per scope: the name is derived from the scope and writers serialize on the
    target row (or on its unique name), so fifty presses make one downgrade.
    """
    if not reason.strip():
        raise TargetRefused("reason_required", "An emergency downgrade needs a reason.", field="reason")
    config_type = ConfigType.objects.filter(name=EMERGENCY_TYPE).first()
    if config_type is None:
        raise TargetRefused("unknown_type", f"Config type {EMERGENCY_TYPE} is not registered.")
    spec = TargetSpec(name=emergency_name(cluster, selector), cluster=cluster, node_label_selector=selector,
                      config=dict(EMERGENCY_CONFIG))
    try:
        target, created = save_target(config_type, spec, reason=reason, emergency=True)
    except TargetRefused as exc:
        if exc.code != "already_exists":
            raise
        target, created = ConfigTarget.objects.get(config_type=config_type, name=spec.name), False
    from .reconcile import reconcile_targets

    if created:
        with transaction.atomic():
            record_change(target, "update", verb="emergency_downgrade", after={"scope": scope_text(target)}, reason=reason)
        reconcile_targets(config_type, [target.pk])
    return target, created


def restore_downgrade(target: ConfigTarget, *, reason: str) -> None:
    if not target.emergency:
        raise TargetRefused("not_emergency", f"{target} is not an emergency downgrade.")
    delete_target(target, reason=reason, action=ConfigRevision.Action.RESTORE)
    from .reconcile import reconcile_targets

    reconcile_targets(target.config_type, [target.pk])


def scope_text(target: ConfigTarget) -> str:
    parts = [f"cluster {target.cluster.name}" if target.cluster else "whole fleet"]
    if target.node_label_selector:
        parts.append(f"nodes matching {target.node_label_selector}")
    if target.node_names:
        parts.append(f"{len(target.node_names)} listed nodes")
    return ", ".join(parts)


# ---------------------------------------------------------------------------- config types

def save_config_type(values: Mapping[str, Any], *, instance: ConfigType | None = None) -> ConfigType:
    """Register or change a type; existing targets are revalidated against new key lists."""
    with transaction.atomic():
        before = snapshot(instance) if instance is not None else None
        config_type = instance or ConfigType()
        for field, value in values.items():
            setattr(config_type, field, value)
        config_type.default_hash = config_hash(config_type.default_config or {})
        config_type.save()
        record_change(config_type, "create" if before is None else "update", before=before, after=snapshot(config_type))
        if before is not None:
            _revalidate(config_type)
    schedule_reconcile_type(config_type)
    return config_type


def _revalidate(config_type: ConfigType) -> None:
    """Mark targets the new rules refuse as invalid: they keep serving, loudly flagged."""
    for target in live_targets(config_type).filter(emergency=False):
        problems = problems_for(config_type, spec_of(target))
        reason, message = (problems[0].reason, problems[0].message) if problems else ("", "")
        if target.valid != (not problems) or target.status_reason != reason:
            ConfigTarget.objects.filter(pk=target.pk).update(valid=not problems, status_reason=reason, status_message=message)


# ---------------------------------------------------------------------------- reconcile hooks

def schedule_reconcile(target: ConfigTarget) -> None:
    type_id, target_id = target.config_type_id, target.pk

    def queue() -> None:
        from .tasks import reconcile_type_task

        reconcile_type_task.delay(type_id, target_ids=[target_id])

    transaction.on_commit(queue)


def schedule_reconcile_type(config_type: ConfigType) -> None:
    type_id = config_type.pk

    def queue() -> None:
        from .tasks import reconcile_type_task

        reconcile_type_task.delay(type_id)

    transaction.on_commit(queue)


def preview(config_type: ConfigType, spec: TargetSpec, *, limit: int = 50) -> dict[str, Any]:
    """Which nodes ``spec`` would match now and what saving it would run into."""
    from .reconcile import match_preview

    try:
        check_spec(config_type, spec)
        problem = None
    except TargetRefused as exc:
        problem = exc.as_dict()
    conflicts = [{"code": p.reason, "detail": p.message} for p in problems_for(config_type, spec)] \
        if problem is None or problem["code"] not in UNREADABLE else []
    matches = match_preview(config_type, spec, limit=limit) if problem is None or problem["code"] not in UNREADABLE \
        else {"matched_count": 0, "nodes": []}
    return {"problem": problem, "conflicts": conflicts} | matches


#: Problems that leave nothing to preview: the selector, scope or name cannot be read.
UNREADABLE = frozenset({"selector_parse_failed", "unknown_cluster", "invalid_name", "both_selector_and_node_names"})



# ---------------------------------------------------------------------------- upstream YAML

def import_manifests(text: str, *, reason: str = "") -> list[tuple[ConfigTarget, bool]]:
    """Create or update a target per upstream object; one bad object refuses the whole import."""
    from . import manifests

    objects = manifests.load_documents(text)
    if not objects:
        raise manifests.ManifestError("yaml", "no objects found")
    results = []
    with transaction.atomic():
        for i, obj in enumerate(objects):
            fields = manifests.target_fields(obj)
            config_type = ConfigType.objects.filter(name=fields["type"]).first()
            if config_type is None:
                raise TargetRefused("unknown_type", f"object {i + 1}: config type {fields['type']!r} is not registered.")
            spec = TargetSpec(name=fields["name"], cluster=fields["cluster"], node_label_selector=fields["node_label_selector"],
                              priority=fields["priority"], node_names=tuple(fields["node_names"]),
                              last_duration=fields["last_duration"], config=fields["config"], wave_size=fields["wave_size"])
            target, created = save_target(config_type, spec, reason=reason or "imported from YAML")
            if fields["paused"] and not target.paused:
                target = set_paused(target, True, reason="spec.paused in the imported object")
            results.append((target, created))
    return results


def manifest_of(target: ConfigTarget) -> dict[str, Any]:
    from . import manifests

    return manifests.to_manifest(
        api_version=target.config_type.api_version, kind=target.config_type.name, name=target.name,
        cluster=target.cluster.name if target.cluster else None, node_label_selector=target.node_label_selector,
        priority=target.priority, node_names=list(target.node_names), last_duration=target.last_duration,
        config=target.config, wave_size=target.wave_size, config_hash=target.config_hash,
        revision=target.revision.number if target.revision_id else None)
