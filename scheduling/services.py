"""Every change to scheduling policies, templates and bindings: validated, versioned, audited.

A change is one transaction: the row, its new immutable revision, the audit entry and the
bump of ``SchedulingConfigVersion`` commit together or not at all. Validation is the pure
modules' (``engine.Policy.from_config`` for policies, ``schedconfig.validate_template`` /
``validate_binding`` through ``manifests.from_manifest`` for templates and bindings); a
refusal raises ``core.errors.Refused`` with the problem's ``code``, the field at fault and
every message, before anything is written. A writer holding a stale ETag is refused under
the row lock (``core.concurrency.check``).

Reading side (hot paths, no restart ever needed):

* ``policy_for(pod)`` / ``policy_named(name)``: the pod's policy as an ``engine.Policy``, read
  from the current revision and compiled once per revision id (``PolicyCache``), so a change
  is seen by the next pod;
* ``config_snapshot()``: templates, bindings and policy names for the mutating webhook,
  cached per process keyed by ``SchedulingConfigVersion`` (``scheduling.webhook``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F, Model
from django.utils.translation import gettext as _

from core import concurrency, events, revisions
from core.audit import record_change, snapshot
from core.errors import Conflict, NotFound, Refused
from fleet.models import Cluster

from . import admission, manifests, schedconfig
from .admission import (  # noqa: F401 (part of this module's interface)
    POLICY_ANNOTATIONS,
    TEMPLATE_MODELS,
    ConfigSnapshot,
    all_templates,
    as_binding,
    as_template,
    binding_manifest,
    binding_manifest_of,
    load_snapshot,
    policy_name_of,
    read_version,
    template_manifest,
)
from .engine import DEFAULT_FILTERS, DEFAULT_SCORES, Policy
from .models import (
    NodeSchedulerConfig,
    PodSchedulerConfig,
    SchedulerConfigBinding,
    SchedulingConfigVersion,
    SchedulingPolicy,
)
from .status import ArgsError

DEFAULT_POLICY = "default"
#: A Meridian cluster label naming the policy of the cluster's pods that name none.
CLUSTER_POLICY_LABEL = "scheduling.meridian.io/policy"
NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")
TOPIC = "scheduling"

TEMPLATE_SLUGS = {model.SLUG: model for model in TEMPLATE_MODELS.values()}


def refused(exc: schedconfig.SchedulingConfigError) -> Refused:
    """A pure module's problems as the one refusal (code, detail, errors by field)."""
    return Refused(exc.code, exc.detail, errors=exc.body()["errors"])


def _publish(event: str, data: Mapping[str, Any]) -> None:
    events.publish(TOPIC, event, dict(data))


# ---------------------------------------------------------------------------- the version

def bump_version() -> int:
    """Inside the change's transaction: the new version number (published to Redis on commit)."""
    SchedulingConfigVersion.objects.get_or_create(pk=1)
    SchedulingConfigVersion.objects.filter(pk=1).update(number=F("number") + 1)
    number = SchedulingConfigVersion.objects.values_list("number", flat=True).get(pk=1)
    transaction.on_commit(lambda: admission.announce_version(number), robust=True)
    return number


# ---------------------------------------------------------------------------- policies

def default_policy_config() -> dict[str, Any]:
    """Upstream's default profile (the plugins implemented here, upstream weights), spelled out."""
    return {
        "schedulerName": "default-scheduler",
        "percentageOfNodesToScore": 0,
        "plugins": {
            "filter": {"enabled": [{"name": spec.name} for spec in DEFAULT_FILTERS]},
            "score": {"enabled": [{"name": spec.name, "weight": spec.weight} for spec in DEFAULT_SCORES]},
        },
    }


def compile_policy(config: Any, *, field: str = "config") -> Policy:
    """The engine policy of a config, or a refusal naming each invalid field under ``field``."""
    try:
        return Policy.from_config(config)
    except ArgsError as exc:
        messages = [str(m) for m in exc.messages] or [str(exc)]
        raise Refused("policy_invalid", "; ".join(messages), errors={field: messages}) from exc
    except (TypeError, ValueError) as exc:
        raise Refused("policy_invalid", str(exc), field=field) from exc


@dataclass
class PolicySpec:
    name: str
    description: str = ""
    config: dict[str, Any] | None = None
    is_default: bool = False


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise Refused("invalid_name", _("A %(what)s name is a DNS label or subdomain: lowercase letters, digits, '-' and "
                                        "'.', at most 63 characters.") % {"what": what}, field="name")


def save_policy(spec: PolicySpec, *, reason: str = "", instance: SchedulingPolicy | None = None) -> tuple[SchedulingPolicy, bool]:
    """Create (``instance`` None: the name must be free) or change a policy; returns (policy, changed).

    An unchanged spec writes nothing. Making a policy the default takes the flag from the
    previous default in the same transaction.
    """
    _check_name(spec.name, "policy")
    config = spec.config if spec.config is not None else {}
    compile_policy(config)
    with transaction.atomic():
        if instance is not None:
            policy = SchedulingPolicy.objects.select_for_update(no_key=True).filter(pk=instance.pk).first()
            if policy is None:
                raise NotFound("not_found", _("This policy no longer exists."))
            concurrency.check(policy)
            if spec.name != policy.name:
                raise Refused("immutable", _("A policy's name is what pods name; create a new policy instead."), field="name")
        else:
            policy = None
            if SchedulingPolicy.objects.filter(name=spec.name).exists():
                raise Conflict("already_exists", _("A scheduling policy named %(name)s already exists.") % {"name": spec.name},
                               field="name")
        if policy is not None and policy.config == config and policy.description == spec.description \
                and policy.is_default == spec.is_default:
            return policy, False
        before = snapshot(policy) if policy is not None else None
        if spec.is_default:
            SchedulingPolicy.objects.filter(is_default=True).exclude(name=spec.name).update(is_default=False)
        elif policy is not None and policy.is_default:
            raise Refused("default_required", _("One policy is always the default: make another policy the default "
                                                "instead."), field="is_default")
        spec_changed = policy is None or policy.config != config or policy.description != spec.description
        policy = policy or SchedulingPolicy(name=spec.name)
        policy.description, policy.config, policy.is_default = spec.description, config, spec.is_default
        try:
            with transaction.atomic():
                policy.save()
        except IntegrityError as exc:
            raise Conflict("already_exists", _("A scheduling policy named %(name)s already exists.") % {"name": spec.name},
                           field="name") from exc
        if spec_changed:
            _revise_policy(policy, "create" if before is None else "update", reason)
        record_change(policy, "create" if before is None else "update", before=before, after=snapshot(policy), reason=reason)
        if before is None:
            bump_version()
        _publish("policy.changed", {"name": policy.name, "revision": policy.revision.number if policy.revision else None})
    return policy, True


def _revise_policy(policy: SchedulingPolicy, action: str, reason: str, *, rollback_of: int | None = None):
    revision = revisions.write_revision(policy.revisions.all(), owner=policy, owner_field="policy", action=action,
                                        reason=reason, rollback_of=rollback_of, description=policy.description,
                                        config=policy.config)
    policy.revision = revision
    policy.save(update_fields=["revision", "updated"])
    return revision


def rollback_policy(policy: SchedulingPolicy, number: int, *, reason: str):
    """A new revision equal to revision ``number`` (validated like any change)."""
    reason = revisions.require_reason(reason)
    with transaction.atomic():
        locked = SchedulingPolicy.objects.select_for_update(no_key=True).get(pk=policy.pk)
        concurrency.check(locked)
        old = revisions.revision_to_restore(locked.revisions.all(), number, locked)
        compile_policy(old.config)
        before = snapshot(locked)
        locked.config, locked.description = old.config, old.description
        locked.save()
        revision = _revise_policy(locked, "rollback", reason, rollback_of=number)
        record_change(locked, "update", verb="rollback", before=before, after=snapshot(locked), reason=reason)
        _publish("policy.changed", {"name": locked.name, "revision": revision.number})
    policy.refresh_from_db()
    return revision


def delete_policy(policy: SchedulingPolicy, *, reason: str = "") -> None:
    with transaction.atomic():
        locked = SchedulingPolicy.objects.select_for_update(no_key=True).get(pk=policy.pk)
        concurrency.check(locked)
        if locked.is_default:
            raise Refused("in_use", _("%(name)s is the default policy; make another policy the default first.")
                          % {"name": locked.name})
        record_change(locked, "delete", before=snapshot(locked), reason=reason)
        name = locked.name
        locked.delete()
        bump_version()
        _publish("policy.deleted", {"name": name})


def ensure_default_policy(sender: Any = None, **kwargs: Any) -> None:
    """post_migrate: the default policy (upstream's default plugins and weights) exists."""
    if kwargs.get("using", "default") != "default":
        return
    if SchedulingPolicy.objects.filter(is_default=True).exists():
        return
    from core.context import acting_as

    with acting_as("system:migrate"), transaction.atomic():
        existing = SchedulingPolicy.objects.filter(name=DEFAULT_POLICY).first()
        if existing is not None:
            SchedulingPolicy.objects.filter(pk=existing.pk).update(is_default=True)
            return
        policy = SchedulingPolicy.objects.create(
            name=DEFAULT_POLICY, is_default=True, config=default_policy_config(),
            description="Upstream kube-scheduler defaults: TaintToleration, NodeAffinity, NodeResourcesFit, "
                        "InterPodAffinity, NodeResourcesBalancedAllocation with upstream weights.")
        _revise_policy(policy, "create", "seeded")  # seed data like node config's seed types: no audit entry


class PolicyCache:
    """Compiled policies keyed by revision id: a revision is immutable, so an entry never goes
    stale; a change makes a new revision, which the next lookup finds and compiles. The name and
    config are checked too: SQLite hands a deleted policy's revision id out again, and a flushed
    database (tests) starts over at 1."""

    def __init__(self) -> None:
        self._compiled: dict[int, tuple[str, Any, Policy]] = {}
        self._lock = threading.Lock()

    def get(self, revision_id: int | None, config: Any, name: str) -> Policy:
        if revision_id is not None:
            found = self._compiled.get(revision_id)
            if found is not None and found[0] == name and found[1] == config:
                return found[2]
        policy = Policy.from_config(config)
        policy = Policy(policy.filters, policy.scores, policy.percentage_of_nodes_to_score, name)
        if revision_id is not None:
            with self._lock:
                if len(self._compiled) > 1000:
                    self._compiled.clear()
                self._compiled[revision_id] = (name, config, policy)
        return policy


policy_cache = PolicyCache()


def policy_named(name: str | None) -> tuple[Policy, int | None]:
    """The current revision of policy ``name`` (None: the default policy), compiled; and the
    revision id. One indexed query per call; refuses an unknown name."""
    rows = SchedulingPolicy.objects.filter(name=name) if name else SchedulingPolicy.objects.filter(is_default=True)
    row = rows.values_list("name", "revision_id", "config").first()
    if row is None:
        if name:
            raise Refused("unknown_policy", _("Scheduling policy %(name)s does not exist.") % {"name": name},
                          field="policy")
        return Policy.default(), None
    policy_name, revision_id, config = row
    return policy_cache.get(revision_id, config, policy_name), revision_id


def policy_for(pod: Mapping[str, Any], override: str | None = None) -> Policy:
    """The policy the scheduler uses for ``pod``: ``override``, else its annotation, else the default."""
    return policy_named(override or policy_name_of(pod))[0]


def cluster_policy_name(labels: Any) -> str | None:
    """The policy a Meridian cluster's label names for its pods that name none (None: the default)."""
    value = labels.get(CLUSTER_POLICY_LABEL) if isinstance(labels, Mapping) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


class ClusterPolicies:
    """Each cluster's policy (its label's, else the default), read at most every ``ttl`` seconds:
    the fleet simulator asks at every build of every simulated cluster. A name that does not
    resolve (no such policy, the database unreachable) gives the engine's default policy."""

    def __init__(self, ttl: float = 10.0) -> None:
        self.ttl = ttl
        self._found: dict[str, tuple[float, Policy]] = {}
        self._lock = threading.Lock()

    def __call__(self, cluster: str) -> Policy:
        now = time.monotonic()
        found = self._found.get(cluster)
        if found is not None and now - found[0] < self.ttl:
            return found[1]
        try:
            labels = Cluster.objects.filter(name=cluster).values_list("labels", flat=True).first()
            policy = policy_named(cluster_policy_name(labels))[0]
        except (Refused, DatabaseError):
            policy = Policy.default()
        with self._lock:
            self._found[cluster] = (now, policy)
        return policy


# ---------------------------------------------------------------------------- templates and bindings

def template_model(kind: str) -> type[NodeSchedulerConfig] | type[PodSchedulerConfig]:
    model = TEMPLATE_MODELS.get(kind) or TEMPLATE_SLUGS.get(kind)
    if model is None:
        raise NotFound("unknown_kind", _("Unknown template kind %(kind)s.") % {"kind": kind})
    return model


def checked_template(kind: str, name: str, spec: Any) -> schedconfig.SchedulerTemplate:
    """The template if it can be saved; else a refusal with every problem."""
    try:
        template = manifests.from_manifest(template_manifest(kind, name, spec))
    except schedconfig.SchedulingConfigError as exc:
        raise refused(exc) from exc
    return template  # type: ignore[return-value]


def checked_binding(name: str, namespace: str, spec: Any,
                    templates: Iterable[schedconfig.SchedulerTemplate] | None = None) -> schedconfig.SchedulerBinding:
    """The binding if it can be saved: valid, and its templates exist and render with its args."""
    try:
        binding = manifests.from_manifest(binding_manifest(name, namespace, spec))
    except schedconfig.SchedulingConfigError as exc:
        raise refused(exc) from exc
    problems = schedconfig.validate_binding(binding, list(templates) if templates is not None else all_templates())  # type: ignore[arg-type]
    if problems:
        raise refused(schedconfig.SchedulingConfigError(problems))
    return binding  # type: ignore[return-value]


def _revise_spec(row: Model, owner_field: str, action: str, reason: str, *, rollback_of: int | None = None):
    revision = revisions.write_revision(row.revisions.all(), owner=row, owner_field=owner_field, action=action,  # type: ignore[attr-defined]
                                        reason=reason, rollback_of=rollback_of, description=row.description,  # type: ignore[attr-defined]
                                        body=row.spec)  # type: ignore[attr-defined]
    row.revision = revision  # type: ignore[attr-defined]
    row.save(update_fields=["revision", "updated"])
    return revision


def save_template(kind: str, name: str, spec: Any, *, description: str = "", reason: str = "",
                  instance: Model | None = None, expect_new: bool = False) -> tuple[Model, bool]:
    """Create or update a template by name; returns (template, changed). Unchanged writes nothing."""
    model = template_model(kind)
    template = checked_template(model.KIND, name, spec)
    with transaction.atomic():
        row = model.objects.select_for_update(no_key=True).filter(pk=instance.pk if instance else None).first() if instance \
            else model.objects.select_for_update(no_key=True).filter(name=name).first()
        if instance is not None and row is None:
            raise NotFound("not_found", _("This template no longer exists."))
        if row is not None and expect_new:
            raise Conflict("already_exists", _("A %(kind)s named %(name)s already exists.") % {"kind": model.KIND, "name": name},
                           field="name")
        if row is not None:
            concurrency.check(row)
            if row.name != name:
                raise Refused("immutable", _("A template's name is what pods and bindings name; create a new one instead."),
                              field="name")
            if row.spec == template.spec and row.description == description:
                return row, False
        before = snapshot(row) if row is not None else None
        row = row or model(name=name)
        row.spec, row.description = dict(template.spec), description
        row.save()
        _revise_spec(row, "template", "create" if before is None else "update", reason)
        record_change(row, "create" if before is None else "update", before=before, after=snapshot(row), reason=reason)
        bump_version()
        _publish("template.changed", {"kind": model.KIND, "name": row.name, "revision": row.revision.number})
    return row, True


def save_binding(name: str, namespace: str, spec: Any, *, description: str = "", reason: str = "",
                 instance: SchedulerConfigBinding | None = None, expect_new: bool = False,
                 templates: Iterable[schedconfig.SchedulerTemplate] | None = None) -> tuple[SchedulerConfigBinding, bool]:
    """Create or update a binding by (namespace, name); returns (binding, changed)."""
    namespace = namespace or ""
    binding = checked_binding(name, namespace, spec, templates)
    stored = binding_manifest_spec(binding)
    with transaction.atomic():
        rows = SchedulerConfigBinding.objects.select_for_update(no_key=True)
        row = rows.filter(pk=instance.pk).first() if instance is not None else rows.filter(name=name, namespace=namespace).first()
        if instance is not None and row is None:
            raise NotFound("not_found", _("This binding no longer exists."))
        if row is not None and expect_new:
            raise Conflict("already_exists", _("A binding named %(name)s already exists in that scope.") % {"name": name},
                           field="name")
        if row is not None:
            concurrency.check(row)
            if (row.name, row.namespace) != (name, namespace):
                raise Refused("immutable", _("A binding's name and namespace cannot change; create a new one instead."),
                              field="name")
            if row.spec == stored and row.description == description:
                return row, False
        before = snapshot(row) if row is not None else None
        row = row or SchedulerConfigBinding(name=name, namespace=namespace)
        row.spec, row.description = stored, description
        row.save()
        _revise_spec(row, "binding", "create" if before is None else "update", reason)
        record_change(row, "create" if before is None else "update", before=before, after=snapshot(row), reason=reason)
        bump_version()
        _publish("binding.changed", {"id": row.pk, "name": str(row), "revision": row.revision.number})
    return row, True


def binding_manifest_spec(binding: schedconfig.SchedulerBinding) -> dict[str, Any]:
    """What is stored: the upstream spec as the export writes it (defaults left out)."""
    return manifests.to_manifest(binding)["spec"]


def rollback_spec(row: Model, number: int, *, reason: str) -> Any:
    """A template or binding back to revision ``number``: a new revision, validated like any change."""
    reason = revisions.require_reason(reason)
    is_binding = isinstance(row, SchedulerConfigBinding)
    with transaction.atomic():
        locked = type(row).objects.select_for_update(no_key=True).get(pk=row.pk)
        concurrency.check(locked)
        old = revisions.revision_to_restore(locked.revisions.all(), number, locked)
        if is_binding:
            checked_binding(locked.name, locked.namespace, old.body)
        else:
            checked_template(locked.KIND, locked.name, old.body)
        before = snapshot(locked)
        locked.spec, locked.description = old.body, old.description
        locked.save()
        revision = _revise_spec(locked, "binding" if is_binding else "template", "rollback", reason, rollback_of=number)
        record_change(locked, "update", verb="rollback", before=before, after=snapshot(locked), reason=reason)
        bump_version()
        _publish("binding.changed" if is_binding else "template.changed", {"name": str(locked), "revision": revision.number})
    row.refresh_from_db()
    return revision


def delete_spec(row: Model, *, reason: str = "") -> None:
    """Delete a template or binding; a template some binding names is refused (its pods would be denied)."""
    with transaction.atomic():
        locked = type(row).objects.select_for_update(no_key=True).get(pk=row.pk)
        concurrency.check(locked)
        if not isinstance(locked, SchedulerConfigBinding):
            users = bindings_naming(locked.KIND, locked.name)
            if users:
                raise Refused("in_use", _("Bindings %(names)s name %(name)s; change or delete them first.")
                              % {"names": ", ".join(users), "name": locked.name})
        record_change(locked, "delete", before=snapshot(locked), reason=reason)
        name = str(locked)
        locked.delete()
        bump_version()
        _publish("binding.deleted" if isinstance(row, SchedulerConfigBinding) else "template.deleted", {"name": name})


def bindings_naming(kind: str, name: str) -> list[str]:
    field = "nodeSchedulerConfig" if kind == NodeSchedulerConfig.KIND else "podSchedulerConfig"
    return sorted(str(b) for b in SchedulerConfigBinding.objects.all()
                  if isinstance(b.spec.get(field), Mapping) and b.spec[field].get("name") == name)


# ---------------------------------------------------------------------------- upstream YAML

@dataclass(frozen=True)
class Imported:
    kind: str
    name: str
    namespace: str
    changed: bool
    id: int


def import_manifests(text: str, *, reason: str = "") -> tuple[list[Imported], list[str]]:
    """Create or update every object of the YAML (one or more documents); all or nothing.

    Templates are saved first, so bindings in the same text may name them; bindings are
    checked against the templates as they will be after the import.
    """
    try:
        loaded = manifests.load_manifests(text)
    except schedconfig.SchedulingConfigError as exc:
        raise refused(exc) from exc
    if not loaded.objects:
        raise Refused("manifest_invalid", _("No objects found in the YAML."), field="yaml")
    reason = reason or "imported from YAML"
    results: list[Imported] = []
    with transaction.atomic():
        imported = {(o.kind, o.name): o for o in loaded.objects if isinstance(o, schedconfig.SchedulerTemplate)}
        templates = {(t.kind, t.name): t for t in all_templates()} | imported
        for obj in loaded.objects:
            if isinstance(obj, schedconfig.SchedulerTemplate):
                row, changed = save_template(obj.kind, obj.name, dict(obj.spec), reason=reason,
                                             description=_description_of(template_model(obj.kind), obj.name))
                results.append(Imported(obj.kind, obj.name, "", changed, row.pk))
        for obj in loaded.objects:
            if isinstance(obj, schedconfig.SchedulerBinding):
                existing = SchedulerConfigBinding.objects.filter(name=obj.name, namespace=obj.namespace or "").first()
                row, changed = save_binding(obj.name, obj.namespace or "", binding_manifest_spec(obj), reason=reason,
                                            description=existing.description if existing else "",
                                            templates=templates.values())
                results.append(Imported(schedconfig.SCHEDULER_CONFIG_BINDING, obj.name, obj.namespace or "", changed, row.pk))
    return results, list(loaded.warnings)


def _description_of(model: type[Model], name: str) -> str:
    return model.objects.filter(name=name).values_list("description", flat=True).first() or ""


def export_objects(*, kinds: Iterable[str] | None = None) -> list[Any]:
    """Every template and binding as pure objects, templates first (what the YAML export writes)."""
    wanted = set(kinds or (*TEMPLATE_MODELS, schedconfig.SCHEDULER_CONFIG_BINDING))
    out: list[Any] = [as_template(row) for kind, model in TEMPLATE_MODELS.items() if kind in wanted
                      for row in model.objects.order_by("name")]
    if schedconfig.SCHEDULER_CONFIG_BINDING in wanted:
        out += [as_binding(row) for row in SchedulerConfigBinding.objects.order_by("namespace", "name")]
    return out


def export_yaml(*, kinds: Iterable[str] | None = None) -> str:
    return manifests.dump_manifests(export_objects(kinds=kinds))


# ---------------------------------------------------------------------------- render preview

def preview_pod(pod: Any, *, namespace: str | None = None) -> dict[str, Any]:
    """What the webhook would do to ``pod`` now: the explanation, the merged affinity, the
    JSONPatch, or the denial. Nothing is written."""
    return admission.decide_pod(pod, namespace=namespace, snapshot=config_snapshot())


def config_snapshot() -> ConfigSnapshot:
    return admission.cache.current()
