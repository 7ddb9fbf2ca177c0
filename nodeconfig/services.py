"""Every change to config types and targets: validated, versioned, audited, then reconciled.

A target change is one transaction: the target row, its new immutable revision, the audit
entry and the job that reconciles it commit together or not at all. Validation runs inside
that transaction under the config type's row lock, so two writers of one type cannot both
pass the overlap checks. A refused target raises ``core.errors.Refused`` (``code`` = a
contracts.md reason code or a Meridian one, ``field`` = the input at fault) before anything
is written, so it never changes what any node runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jsonschema
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from core import concurrency, jobs, revisions
from core.audit import record_change, snapshot
from core.errors import Refused
from core.models import Job
from fleet.models import Cluster
from kube.hashing import stable_hash
from kube.labels import SelectorError, parse_selector, validate_label_key

from . import manifests, rollout
from .hashing import config_hash
from .matching import TargetRef, parse_go_duration
from .models import ConfigRevision, ConfigTarget, ConfigType
from .planning import parse_wave_size
from .reconcile import match_preview
from .validation import TargetProblem, validate_target

NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
EMERGENCY_TYPE = "AdminQoSConfiguration"
EMERGENCY_CONFIG = {"reclaimedResourceConfig": {"enableReclaim": False}}


#: Validation reason codes and the input each is about (the pages put the message there).
REASON_FIELDS = {
    "node_names_without_last_duration": "last_duration",
    "selector_with_last_duration": "last_duration",
    "global_with_last_duration": "last_duration",
    "selector_parse_failed": "node_label_selector",
    "selector_key_not_allowed": "node_label_selector",
    "label_selector_not_supported": "node_label_selector",
    "priority_not_supported": "priority",
    "node_names_overlap": "node_names",
    "both_selector_and_node_names": "node_label_selector",
}


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
        return TargetRef.stored(self.name, self.node_label_selector, self.priority, self.node_names, self.last_duration)


# ---------------------------------------------------------------------------- validation

def live_targets(config_type: ConfigType, *, now: datetime | None = None):
    now = now or timezone.now()
    return (ConfigTarget.objects.filter(config_type=config_type, deleted=False)
            .exclude(expires_at__lte=now).select_related("cluster"))


def problems_for(config_type: ConfigType, spec: TargetSpec, *, emergency: bool = False) -> list[TargetProblem]:
    """Everything wrong with ``spec`` among the type's live targets whose scope overlaps."""
    rows = live_targets(config_type).exclude(name=spec.name).filter(emergency=False)
    if spec.cluster is not None:
        rows = rows.filter(Q(cluster__isnull=True) | Q(cluster__name=spec.cluster))
    others = [TargetRef.stored(*row) for row in rows.values_list(  # plain rows: a thousand at fleet scale
        "name", "node_label_selector", "priority", "node_names", "last_duration")]
    allowed = config_type.allowed_keys_by_priority() or None
    if emergency:
        allowed = {spec.priority: sorted({k for keys in (allowed or {}).values() for k in keys} | {"cluster"})}
        others = []
    return validate_target(spec.ref(), allowed, others)


def check_spec(config_type: ConfigType, spec: TargetSpec, *, emergency: bool = False) -> None:
    """Raise Refused for the first problem, naming the field or the other target.

    Call it inside the write transaction, after ``_lock_type``: the overlap checks read the
    type's other targets, which must not change until this write commits.
    """
    if not NAME_PATTERN.match(spec.name or ""):
        raise Refused("invalid_name", _("Name must be a DNS subdomain: lowercase letters, digits, '-' and '.'."), field="name")
    if spec.cluster and not Cluster.objects.filter(name=spec.cluster).exists():
        raise Refused("unknown_cluster", _("There is no member cluster named %(name)s.") % {"name": repr(spec.cluster)},
                      field="cluster")
    if not isinstance(spec.config, Mapping):
        raise Refused("config_invalid", _("config must be a JSON object."), field="config")
    if spec.last_duration:
        try:
            if parse_go_duration(spec.last_duration).total_seconds() <= 0:
                raise ValueError(_("must be positive"))
        except ValueError as exc:
            raise Refused("last_duration_invalid", _("lastDuration %(value)s: %(problem)s") % {
                "value": repr(spec.last_duration), "problem": exc}, field="last_duration") from exc
    if spec.wave_size:
        try:
            parse_wave_size(spec.wave_size)
        except ValueError as exc:
            raise Refused("wave_size_invalid", str(exc), field="wave_size") from exc
    if not 0 <= spec.failure_threshold_percent <= 100:
        raise Refused("failure_threshold_invalid", _("failure threshold must be 0–100 percent."),
                      field="failure_threshold_percent")
    problems = problems_for(config_type, spec, emergency=emergency)
    if problems:
        raise Refused(problems[0].reason, problems[0].message, field=REASON_FIELDS.get(problems[0].reason))
    if config_type.schema:
        check_config(config_type, spec.config)


def check_config(config_type: ConfigType, config: Mapping[str, Any]) -> None:
    validator = jsonschema.Draft202012Validator(config_type.schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(str(p) for p in error.absolute_path) or "config"
        raise Refused("config_invalid", _("%(path)s: %(error)s") % {"path": where, "error": error.message}, field="config")


# ---------------------------------------------------------------------------- targets

def _lock_type(config_type: ConfigType) -> None:
    """Serialise the writers of one config type for the rest of the transaction (validation
    reads the type's other targets). SQLite's IMMEDIATE transactions are exclusive already."""
    ConfigType.objects.select_for_update(no_key=True).filter(pk=config_type.pk).values_list("pk", flat=True).first()


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
    # A paused rollout (by hand or on failures) stays paused through an edit or a rollback: the
    # fix is looked at (diffed) and released by a resume, not by the save.
    State = ConfigTarget.RolloutState
    held = paced and target.pk is not None and target.paused and target.rollout_state != State.COMPLETE
    target.rollout_state = State.PAUSED if held else State.PROGRESSING if paced else State.COMPLETE
    target.rollout_message = "a new revision waits for Resume" if held else ""
    target.paused = held
    target.last_wave_at = None
    target.valid, target.status_reason, target.status_message = True, "", ""


def revise(target: ConfigTarget, action: str, reason: str, *, rollback_of: int | None = None) -> ConfigRevision:
    revision = revisions.write_revision(
        target.revisions.all(), owner=target, owner_field="target", action=action, reason=reason, rollback_of=rollback_of,
        cluster_name=target.cluster.name if target.cluster else "", node_label_selector=target.node_label_selector,
        priority=target.priority, node_names=list(target.node_names), last_duration=target.last_duration,
        config=target.config, config_hash=target.config_hash)
    target.revision = revision
    target.save()
    return revision


def save_target(config_type: ConfigType, spec: TargetSpec, *, reason: str = "", emergency: bool = False,
                expect_new: bool = False) -> tuple[ConfigTarget, bool]:
    """Create or update the target ``spec.name``; returns (target, created).

    An unchanged spec writes nothing. A deleted target of the same name is revived, keeping
    its history. Concurrent writers of one type serialize on the type's row lock, and the
    spec is validated under it; a writer holding a stale ETag (``core.concurrency``) is refused.
    """
    now = timezone.now()
    with transaction.atomic():
        _lock_type(config_type)
        target = ConfigTarget.objects.select_for_update(no_key=True).filter(config_type=config_type, name=spec.name).first()
        created = target is None or target.deleted
        if target is not None and not target.deleted and expect_new:
            raise Refused("already_exists", _("A %(type)s target named %(name)s already exists.") % {
                "type": config_type.name, "name": repr(spec.name)}, field="name")
        if target is not None:
            concurrency.check(target)
            if target.emergency and not target.deleted and not emergency:
                raise Refused("emergency", _("%(target)s is an emergency downgrade: its scope and body are fixed; "
                                             "restore it and start another one instead.") % {"target": target})
        check_spec(config_type, spec, emergency=emergency)
        if target is not None and not created and _same_spec(target, spec):
            return target, False
        before = snapshot(target) if target is not None else None
        if target is None:
            target = ConfigTarget(config_type=config_type, name=spec.name, emergency=emergency)
        target.deleted = False
        _apply_spec(target, spec, now)
        target.save()
        revise(target, ConfigRevision.Action.CREATE if created else ConfigRevision.Action.UPDATE, reason)
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


def delete_target(target: ConfigTarget, *, reason: str = "", action: str = ConfigRevision.Action.DELETE) -> Job | None:
    """Soft delete: nodes fall back to the next target; history stays. Returns the reconcile job."""
    with transaction.atomic():
        locked = ConfigTarget.objects.select_for_update(no_key=True).get(pk=target.pk)
        if locked.deleted:
            return None
        concurrency.check(locked)
        if locked.emergency and action != ConfigRevision.Action.RESTORE:
            raise Refused("emergency", _("An emergency downgrade is ended with Restore, not deleted."))
        before = snapshot(locked)
        locked.deleted = True
        locked.reconciled_selection = ""  # its nodes move away: a revival searches them again
        locked.rollout_state = ConfigTarget.RolloutState.COMPLETE
        revise(locked, action, reason)
        record_change(locked, "delete", verb="restore" if action == ConfigRevision.Action.RESTORE else "", before=before, reason=reason)
        job = schedule_reconcile(locked)
    target.refresh_from_db()
    return job


def rollback_target(target: ConfigTarget, number: int, *, reason: str) -> ConfigRevision:
    """A new revision equal to revision ``number``, validated like any other change."""
    revisions.require_reason(reason)
    old = revisions.revision_to_restore(target.revisions.all(), number, target)
    spec = spec_of(target, cluster=old.cluster_name or None, node_label_selector=old.node_label_selector,
                   priority=old.priority, node_names=tuple(old.node_names), last_duration=old.last_duration,
                   config=old.config)
    with transaction.atomic():
        _lock_type(target.config_type)
        locked = ConfigTarget.objects.select_for_update(no_key=True).get(pk=target.pk)
        concurrency.check(locked)
        check_spec(target.config_type, spec, emergency=target.emergency)
        before = snapshot(locked)
        locked.deleted = False
        _apply_spec(locked, spec, timezone.now())
        revision = revise(locked, ConfigRevision.Action.ROLLBACK, reason, rollback_of=number)
        record_change(locked, "update", verb="rollback", before=before, after=snapshot(locked), reason=reason)
        schedule_reconcile(locked)
    target.refresh_from_db()
    return revision


# ---------------------------------------------------------------------------- rollout control

def set_paused(target: ConfigTarget, paused: bool, *, reason: str = "") -> ConfigTarget:
    with transaction.atomic():
        locked = ConfigTarget.objects.select_for_update(no_key=True).get(pk=target.pk)
        concurrency.check(locked)
        before = {"paused": locked.paused, "rollout_state": locked.rollout_state}
        locked.paused = paused
        if locked.rollout_state != ConfigTarget.RolloutState.COMPLETE:
            locked.rollout_state = ConfigTarget.RolloutState.PAUSED if paused else ConfigTarget.RolloutState.PROGRESSING
            locked.rollout_message = reason if paused else ""
        locked.save(update_fields=["paused", "rollout_state", "rollout_message", "updated"])
        record_change(locked, "update", verb="pause" if paused else "resume", before=before,
                      after={"paused": locked.paused, "rollout_state": locked.rollout_state}, reason=reason)
    return locked


def resume(target: ConfigTarget, *, reason: str = "") -> ConfigTarget:
    """Unpause a paced rollout and take its next step now."""
    target = set_paused(target, False, reason=reason)
    rollout.advance_rollout(target)
    target.refresh_from_db()
    return target


# ---------------------------------------------------------------------------- emergency downgrade

def canonical_selector(selector: str) -> str:
    """One spelling per meaning, so ``diskMode=hdd``, ``diskMode==hdd`` and ``diskMode in (hdd)``
    are one downgrade scope: each requirement spelled one way (equality ``=``, set values sorted
    and unique, ``>``/``<`` for gt/lt), then sorted as text, repeated requirements dropped."""
    try:
        parsed = parse_selector(selector)
    except SelectorError as exc:
        raise Refused("selector_parse_failed", _("The label selector does not parse: %(error)s") % {"error": exc},
                      field="selector") from exc
    parts = set()
    for req in parsed.requirements:
        values = sorted(set(req.values))
        op = req.operator.value
        if op in ("=", "==", "in") and len(values) == 1:
            parts.add(f"{req.key}={values[0]}")
        elif op in ("!=", "notin") and len(values) == 1:
            parts.add(f"{req.key}!={values[0]}")
        elif op in ("in", "notin"):
            parts.add(f"{req.key} {op} ({','.join(values)})")
        elif op == "!":
            parts.add(f"!{req.key}")
        elif op == "exists":
            parts.add(req.key)
        else:
            parts.add(f"{req.key}{'>' if op == 'gt' else '<'}{values[0]}")
    return ",".join(sorted(parts))


def emergency_name(cluster: str | None, selector: str) -> str:
    if selector:
        scope = f"{cluster or ''}|{canonical_selector(selector)}"
        return f"emergency-downgrade-{stable_hash(scope):08x}"
    return f"emergency-downgrade-{cluster}" if cluster else "emergency-downgrade-fleet"


def emergency_type() -> ConfigType:
    config_type = ConfigType.objects.filter(name=EMERGENCY_TYPE).first()
    if config_type is None:
        raise Refused("unknown_type", _("Config type %(type)s is not registered; run migrate to restore it.") % {
            "type": EMERGENCY_TYPE})
    return config_type


def emergency_downgrade(*, cluster: str | None, selector: str, reason: str) -> tuple[ConfigTarget, bool, Job | None]:
    """Turn reclaim off for a scope: a top-tier override, delivered by a job.

    The target, its revision, the audit entries and the delivery job commit together; the
    delivery (matching + agents' ETags) runs on a worker and is retried until done, so a
    Redis or worker outage delays it but never loses it, and the progress says "delivery
    pending" until the reconciler has seen this revision. Nothing here waits for a lock.
    Idempotent per scope: the name is derived from the scope (equivalent selector spellings
    are one scope) and writers serialize on the type's row, so fifty presses make one
    downgrade. Returns (target, created, delivery job).
    """
    if not reason.strip():
        raise Refused("reason_required", _("An emergency downgrade needs a reason."), field="reason")
    config_type = emergency_type()
    selector = canonical_selector(selector) if selector.strip() else ""
    spec = TargetSpec(name=emergency_name(cluster, selector), cluster=cluster, node_label_selector=selector,
                      config=dict(EMERGENCY_CONFIG))
    with transaction.atomic():
        try:
            target, created = save_target(config_type, spec, reason=reason, emergency=True)
        except Refused as exc:  # the downgrade's inputs are "cluster" and "selector"
            if type(exc) is not Refused or "node_label_selector" not in exc.errors:
                raise
            errors = {("selector" if path == "node_label_selector" else path): messages
                      for path, messages in exc.errors.items()}
            raise Refused(exc.code, exc.detail, errors=errors) from exc
        if not created:
            return target, False, latest_delivery(target)
        record_change(target, "update", verb="emergency_downgrade", after={"scope": scope_text(target)}, reason=reason)
    return target, True, latest_delivery(target)


def restore_downgrade(target: ConfigTarget, *, reason: str) -> Job | None:
    """End a downgrade: nodes return to exactly what they ran before it (delivered by a job)."""
    if not target.emergency:
        raise Refused("not_emergency", _("%(target)s is not an emergency downgrade.") % {"target": target})
    if not reason.strip():
        raise Refused("reason_required", _("Say why the downgrade ends."), field="reason")
    return delete_target(target, reason=reason, action=ConfigRevision.Action.RESTORE)


def latest_delivery(target: ConfigTarget) -> Job | None:
    """The newest job delivering this target's changes to its nodes."""
    return Job.objects.filter(kind=RECONCILE_TASK, object_type__model="configtarget", object_id=str(target.pk)).order_by(
        "-created").first()


def scope_text(target: ConfigTarget) -> str:
    parts = [f"cluster {target.cluster.name}" if target.cluster else "whole fleet"]
    if target.node_label_selector:
        parts.append(f"nodes matching {target.node_label_selector}")
    if target.node_names:
        parts.append(f"{len(target.node_names)} listed nodes")
    return ", ".join(parts)


# ---------------------------------------------------------------------------- config types

KIND_PATTERN = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
GROUP_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
VERSION_PATTERN = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
RESOURCE_PATTERN = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def config_type_errors(values: Mapping[str, Any], instance: ConfigType | None) -> dict[str, str]:
    """Everything wrong with a type's fields: the GVR an agent and a cluster resolve, the
    selector keys per priority, the schema and the default body it must satisfy."""
    errors: dict[str, str] = {}
    name = values.get("name", instance.name if instance else "")
    if instance is not None and "name" in values and values["name"] != instance.name:
        errors["name"] = _("A config type's name is its kind and cannot change; register a new type instead.")
    elif not isinstance(name, str) or not KIND_PATTERN.match(name):
        errors["name"] = _("Must be a Kubernetes kind: a capital letter, then letters and digits (at most 63).")
    for field, pattern, message in (
            ("group", GROUP_PATTERN, _("Must be a DNS subdomain such as config.katalyst.kubewharf.io.")),
            ("version", VERSION_PATTERN, _("Must be a Kubernetes API version such as v1alpha1.")),
            ("resource", RESOURCE_PATTERN, _("Must be a lowercase plural resource name such as adminqosconfigurations."))):
        value = values.get(field, getattr(instance, field) if instance is not None else _field_default(field))
        if not isinstance(value, str) or len(value) > 253 or not pattern.match(value):
            errors[field] = message
    errors.update(_allowed_keys_errors(values.get("allowed_keys", getattr(instance, "allowed_keys", []))))
    schema = values.get("schema", getattr(instance, "schema", None))
    default = values.get("default_config", getattr(instance, "default_config", {}))
    if not isinstance(default, Mapping):
        errors["default_config"] = _("Must be a JSON object.")
    if schema not in (None, {}):
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            errors["schema"] = _("Not a valid JSON schema: %(error)s") % {"error": exc.message}
        else:
            problems = list(jsonschema.Draft202012Validator(schema).iter_errors(default or {}))
            if problems and "default_config" not in errors:
                errors["default_config"] = _("Does not satisfy the schema: %(error)s") % {"error": problems[0].message}
    return errors


def _field_default(field: str) -> Any:
    """What a new type gets for a field the request leaves out (the group and version have defaults)."""
    default = ConfigType._meta.get_field(field).get_default()
    return "" if default is None else default


def _allowed_keys_errors(entries: Any) -> dict[str, str]:
    if not isinstance(entries, list):
        return {"allowed_keys": _("Must be a list of {priority, keyList}.")}
    seen: set[int] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("priority", 0), int) \
                or not isinstance(entry.get("keyList", []), list):
            return {f"allowed_keys[{i}]": _("Must be {\"priority\": <integer>, \"keyList\": [<label key>, ...]}.")}
        if entry.get("priority", 0) in seen:
            return {f"allowed_keys[{i}].priority": _("Each priority may appear once.")}
        seen.add(entry.get("priority", 0))
        for key in entry.get("keyList", []):
            problems = validate_label_key(key) if isinstance(key, str) else [_("must be a string")]
            if problems:
                return {f"allowed_keys[{i}].keyList": f"{key!r}: {problems[0]}"}
    return {}


def save_config_type(values: Mapping[str, Any], *, instance: ConfigType | None = None) -> ConfigType:
    """Register or change a type; existing targets are revalidated against new key lists.

    A change is validated against the type as it is under its row lock (not the caller's
    copy, which may be stale), and the caller's ``instance`` is refreshed afterwards.
    """
    with transaction.atomic():
        locked = None
        if instance is not None:
            locked = ConfigType.objects.select_for_update(no_key=True).get(pk=instance.pk)
            concurrency.check(locked)
        errors = config_type_errors(values, locked)
        if errors:
            raise Refused.from_errors(errors)
        before = snapshot(locked) if locked is not None else None
        config_type = locked or ConfigType()
        for field, value in values.items():
            setattr(config_type, field, None if field == "schema" and value == {} else value)
        config_type.default_hash = config_hash(config_type.default_config or {})
        try:
            with transaction.atomic():
                config_type.save()
        except IntegrityError as exc:
            raise Refused("already_exists", _("A config type named %(name)s already exists.") % {"name": repr(config_type.name)},
                          field="name") from exc
        record_change(config_type, "create" if before is None else "update", before=before, after=snapshot(config_type))
        if before is not None:
            _revalidate(config_type)
        schedule_reconcile_type(config_type)
    if instance is not None:
        instance.refresh_from_db()
    return config_type


def delete_config_type(config_type: ConfigType) -> None:
    """Only a type without live targets goes; the emergency downgrade's type never does."""
    if config_type.name == EMERGENCY_TYPE:
        raise Refused("in_use", _("%(type)s carries the emergency downgrade and cannot be deleted.") % {"type": config_type})
    with transaction.atomic():
        locked = ConfigType.objects.select_for_update(no_key=True).get(pk=config_type.pk)
        concurrency.check(locked)
        if locked.targets.filter(deleted=False).exists():
            raise Refused("in_use", _("%(type)s still has targets; delete them first.") % {"type": locked})
        record_change(locked, "delete", before=snapshot(locked))
        locked.targets.all().delete()
        locked.delete()


def _revalidate(config_type: ConfigType) -> None:
    """Mark targets the new rules refuse as invalid: they keep serving, loudly flagged."""
    for target in live_targets(config_type).filter(emergency=False):
        problems = problems_for(config_type, spec_of(target))
        reason, message = (problems[0].reason, problems[0].message) if problems else ("", "")
        if target.valid != (not problems) or target.status_reason != reason:
            ConfigTarget.objects.filter(pk=target.pk).update(valid=not problems, status_reason=reason, status_message=message)


# ---------------------------------------------------------------------------- reconcile hooks

RECONCILE_TASK = "nodeconfig.reconcile_type"


def schedule_reconcile(target: ConfigTarget) -> Job:
    """The job that matches what this target change can affect (sent after commit)."""
    return jobs.enqueue(RECONCILE_TASK, target.config_type_id, target_ids=[target.pk], obj=target,
                        params={"target": target.name, "revision": target.revision.number if target.revision_id else None})


def schedule_reconcile_type(config_type: ConfigType) -> Job:
    """A full matching pass over every node for the type (its keys or default changed)."""
    return jobs.enqueue(RECONCILE_TASK, config_type.pk, obj=config_type, params={"type": config_type.name})


def preview(config_type: ConfigType, spec: TargetSpec, *, limit: int = 50) -> dict[str, Any]:
    """Which nodes ``spec`` would match now and what saving it would run into."""
    try:
        check_spec(config_type, spec)
        problem = None
    except Refused as exc:
        problem = {"code": exc.code, "detail": exc.detail}
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
    try:
        objects = manifests.load_documents(text)
        if not objects:
            raise manifests.ManifestError("yaml", _("no objects found"))
        results = []
        with transaction.atomic():
            for i, obj in enumerate(objects):
                fields = manifests.target_fields(obj)
                config_type = ConfigType.objects.filter(name=fields["type"]).first()
                if config_type is None:
                    raise Refused("unknown_type", _("object %(number)s: config type %(type)s is not registered.") % {
                        "number": i + 1, "type": repr(fields["type"])}, field="yaml")
                spec = TargetSpec(name=fields["name"], cluster=fields["cluster"],
                                  node_label_selector=fields["node_label_selector"], priority=fields["priority"],
                                  node_names=tuple(fields["node_names"]), last_duration=fields["last_duration"],
                                  config=fields["config"], wave_size=fields["wave_size"])
                target, created = save_target(config_type, spec, reason=reason or "imported from YAML")
                if fields["paused"] and not target.paused:
                    target = set_paused(target, True, reason="spec.paused in the imported object")
                results.append((target, created))
    except manifests.ManifestError as exc:
        raise Refused("manifest_invalid", str(exc), field="yaml") from exc
    return results


def manifest_of(target: ConfigTarget) -> dict[str, Any]:
    return manifests.to_manifest(
        api_version=target.config_type.api_version, kind=target.config_type.name, name=target.name,
        cluster=target.cluster.name if target.cluster else None, node_label_selector=target.node_label_selector,
        priority=target.priority, node_names=list(target.node_names), last_duration=target.last_duration,
        config=target.config, wave_size=target.wave_size, config_hash=target.config_hash,
        revision=target.revision.number if target.revision_id else None)
