"""Every change to federation state: validated, in one transaction, audited, and followed by
a reconcile of what it affects (a job per object, sent after commit to the object's shard).
A refusal is ``core.errors.Refused`` with the field paths at fault
(``spec.placement[0].preferences.minReplicas``); a stale ETag is refused too."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from core import concurrency, events, revisions
from core.audit import record_change, snapshot
from core.context import current_actor
from core.errors import Conflict, Refused
from fleet.models import Cluster
from kube.limits import deeper_than, too_deep_message
from kube.resources import PodSpecError, UnsupportedWorkloadError, pod_requests, workload_pod_template

from .followers import FOLLOWER_KINDS, referenced
from .models import (
    CLUSTER_OVERRIDE_POLICY_LABEL,
    CLUSTER_PROPAGATION_POLICY_LABEL,
    OVERRIDE_POLICY_LABEL,
    PROPAGATION_POLICY_LABEL,
    FederatedObject,
    FederatedRevision,
    OverridePolicy,
    PropagationPolicy,
)
from .policy import validate_override, validate_propagation
from .reconcile import queue_reconcile
from .render import clean_template, template_hash

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
#: Kinds that are never federated: they belong to one cluster.
#: Pod spec fields Kubernetes decodes as lists (the followers are found in some of them).
_POD_LIST_FIELDS = ("volumes", "imagePullSecrets", "tolerations", "initContainers", "ephemeralContainers")
_REFUSED_KINDS = frozenset({"Node", "Pod", "Namespace", "Event", "Lease", "CustomResourceDefinition"})


def _queue(object_ids: list[int]) -> None:
    """A reconcile job per object, sent after commit to the object's shard."""
    queue_reconcile(object_ids)


def _name_errors(namespace: str, name: str) -> dict[str, str]:
    errors = {}
    if not isinstance(name, str) or not _NAME.match(name):
        errors["name"] = _("must be a DNS subdomain: lowercase letters, digits, '-' and '.', at most 253")
    if namespace and not _NAMESPACE.match(namespace):
        errors["namespace"] = _("must be a DNS label: lowercase letters, digits and '-', at most 63")
    return errors


# --------------------------------------------------------------------------- policies


def save_policy(model: type[PropagationPolicy] | type[OverridePolicy], *, namespace: str, name: str, spec: Any,
                description: str = "", instance: PropagationPolicy | OverridePolicy | None = None):
    """Create or replace a policy; its objects are rescheduled with it."""
    if deeper_than(spec):
        raise Refused.from_errors({"spec": too_deep_message()})
    errors = _name_errors(namespace, name) if instance is None else {}
    validate = validate_propagation if model is PropagationPolicy else validate_override
    errors.update({f"spec.{k}" if k != "spec" else k: v for k, v in validate(spec).items()})
    if instance is None and model.objects.filter(namespace=namespace, name=name).exists():
        errors["name"] = _("a %(kind)s named %(name)s already exists here") % {
            "kind": model._meta.verbose_name, "name": repr(name)}
    if errors:
        raise Refused.from_errors(errors)
    with transaction.atomic():
        if instance is None:
            try:
                with transaction.atomic():
                    policy = model.objects.create(namespace=namespace, name=name, spec=spec, description=description)
            except IntegrityError as exc:
                raise Conflict("already_exists", _("a %(kind)s named %(name)s already exists here") % {
                    "kind": model._meta.verbose_name, "name": repr(name)}, field="name") from exc
            record_change(policy, "create", after=snapshot(policy))
            _queue(_bound_by_label(policy))
        else:
            policy = model.objects.select_for_update(no_key=True).get(pk=instance.pk)
            concurrency.check(policy)
            before = snapshot(policy)
            policy.spec, policy.description = spec, description
            policy.save(update_fields=["spec", "description", "updated"])
            record_change(policy, "update", before=before, after=snapshot(policy))
            _queue(list(policy.federated_objects.values_list("pk", flat=True)))
    return policy


def delete_policy(policy: PropagationPolicy | OverridePolicy) -> None:
    """A policy objects still use is not deleted (they would lose their placement)."""
    used = list(policy.federated_objects.values_list("name", flat=True)[:5])
    if used:
        raise Refused("in_use", _("still used by %(objects)s; rebind or delete them first") % {"objects": ", ".join(used)},
                      field="name")
    with transaction.atomic():
        locked = type(policy).objects.select_for_update(no_key=True).get(pk=policy.pk)
        concurrency.check(locked)
        record_change(locked, "delete", before=snapshot(locked))
        locked.delete()


def _labels_naming(policy: PropagationPolicy | OverridePolicy) -> str:
    if isinstance(policy, PropagationPolicy):
        return CLUSTER_PROPAGATION_POLICY_LABEL if policy.is_cluster_scoped else PROPAGATION_POLICY_LABEL
    return CLUSTER_OVERRIDE_POLICY_LABEL if policy.is_cluster_scoped else OVERRIDE_POLICY_LABEL


def _bound_by_label(policy: PropagationPolicy | OverridePolicy) -> list[int]:
    """Objects whose labels named this policy before it existed get it now."""
    label = _labels_naming(policy)
    field = "propagation_policy" if isinstance(policy, PropagationPolicy) else "override_policy"
    candidates = FederatedObject.objects.filter(**{f"{field}__isnull": True})
    if not policy.is_cluster_scoped:
        candidates = candidates.filter(namespace=policy.namespace)
    ids = [obj.pk for obj in candidates.only("pk", "template")
           if ((obj.template.get("metadata") or {}).get("labels") or {}).get(label) == policy.name]
    FederatedObject.objects.filter(pk__in=ids).update(**{field: policy})
    return ids


def check_policy_namespace(explicit: str, namespace: str, field: str) -> None:
    """A namespaced policy serves the objects of its own namespace only (as upstream)."""
    ns = explicit.rpartition("/")[0]
    if "/" in explicit and ns not in ("", namespace):
        raise Refused.from_errors({field: _("%(policy)s belongs to namespace %(policy_namespace)s; an object in "
                                            "%(namespace)s may use its own namespace's policies or fleet-wide ones") % {
            "policy": repr(explicit), "policy_namespace": repr(ns), "namespace": repr(namespace or _("no namespace"))}})


def _resolve_policy(model, labels: Mapping[str, str], namespace: str, explicit: str | None, field: str):
    """Explicit name first, then the namespaced label, then the cluster-scoped label."""
    namespaced, cluster_scoped = ((PROPAGATION_POLICY_LABEL, CLUSTER_PROPAGATION_POLICY_LABEL) if model is PropagationPolicy
                                  else (OVERRIDE_POLICY_LABEL, CLUSTER_OVERRIDE_POLICY_LABEL))
    if explicit:
        ns, _slash, name = explicit.rpartition("/")
        check_policy_namespace(explicit, namespace, field)
        policy = model.objects.filter(namespace=ns if "/" in explicit else namespace, name=name).first()
        if policy is None and "/" not in explicit:
            policy = model.objects.filter(namespace="", name=name).first()
        if policy is None:
            raise Refused.from_errors({field: _("no %(kind)s named %(name)s") % {
                "kind": model._meta.verbose_name, "name": repr(explicit)}})
        return policy
    if labels.get(namespaced):
        return model.objects.filter(namespace=namespace, name=labels[namespaced]).first()
    if labels.get(cluster_scoped):
        return model.objects.filter(namespace="", name=labels[cluster_scoped]).first()
    return None


def resolve_policies(template: Mapping[str, Any], propagation_policy: str | None = None,
                     override_policy: str | None = None) -> tuple[PropagationPolicy | None, OverridePolicy | None]:
    """The policies ``submit`` would give an object (explicit name, else its labels' policy)."""
    meta = template.get("metadata") if isinstance(template.get("metadata"), Mapping) else {}
    labels, namespace = meta.get("labels") or {}, meta.get("namespace") or ""
    return (_resolve_policy(PropagationPolicy, labels, namespace, propagation_policy, "propagation_policy"),
            _resolve_policy(OverridePolicy, labels, namespace, override_policy, "override_policy"))


# --------------------------------------------------------------------------- objects


def object_errors(obj: Any) -> dict[str, str]:
    if not isinstance(obj, Mapping):
        return {"object": _("must be a Kubernetes object (a JSON/YAML mapping)")}
    if deeper_than(obj):
        return {"object": too_deep_message()}
    errors: dict[str, str] = {}
    for name in ("apiVersion", "kind"):
        if not isinstance(obj.get(name), str) or not obj.get(name):
            errors[f"object.{name}"] = _("is required")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        errors["object.metadata"] = _("is required")
        return errors
    errors.update({f"object.metadata.{k}": v for k, v in _name_errors(meta.get("namespace") or "", meta.get("name")).items()})
    if obj.get("kind") in _REFUSED_KINDS:
        errors["object.kind"] = _("%(kind)s objects belong to one cluster and cannot be federated") % {"kind": obj["kind"]}
    labels = meta.get("labels")
    if labels is not None and (not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values())):
        errors["object.metadata.labels"] = _("must map strings to strings")
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        errors["object.spec"] = _("must be an object")
    elif isinstance(spec, Mapping) and "replicas" in spec:
        replicas = spec["replicas"]
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            errors["object.spec.replicas"] = _("must be a non-negative integer")
    if not errors:
        errors.update(_pod_template_errors(obj))
    return errors


def _pod_template_errors(obj: Mapping[str, Any]) -> dict[str, str]:
    """A workload whose pods Kubernetes could not count is refused here, not in every cluster."""
    try:
        template = workload_pod_template(obj)
    except UnsupportedWorkloadError:
        return {}
    except (PodSpecError, TypeError, ValueError, KeyError) as exc:
        return {"object.spec.template": str(exc)}
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return {"object.spec.template.spec": _("is required: the pods' containers")}
    try:
        pod_requests({"spec": spec})
    except (PodSpecError, TypeError, ValueError) as exc:
        return {"object.spec.template.spec": str(exc)}
    for name in _POD_LIST_FIELDS:
        if spec.get(name) is not None and not isinstance(spec[name], list):
            return {f"object.spec.template.spec.{name}": _("must be a list")}
    return {}


def _references(template: Mapping[str, Any]) -> list[str]:
    return [f"{kind}/{name}" for kind, name in referenced(template)]


def submit(obj: Any, *, propagation_policy: str | None = None, override_policy: str | None = None,
           change_cause: str = "") -> tuple[FederatedObject, bool]:
    """Create a federated object from a native one, or update its template (a new revision
    when the template changed). Returns (object, created)."""
    errors = object_errors(obj)
    if errors:
        raise Refused.from_errors(errors)
    template = clean_template(obj)
    meta = template["metadata"]
    namespace, name, kind = meta.get("namespace") or "", meta["name"], template["kind"]
    labels = meta.get("labels") or {}
    pp = _resolve_policy(PropagationPolicy, labels, namespace, propagation_policy, "propagation_policy")
    op = _resolve_policy(OverridePolicy, labels, namespace, override_policy, "override_policy")
    digest = template_hash(template)
    with transaction.atomic():
        existing = FederatedObject.objects.select_for_update(no_key=True).filter(namespace=namespace, kind=kind, name=name).first()
        if existing is None:
            try:
                with transaction.atomic():
                    fed = FederatedObject.objects.create(
                        namespace=namespace, name=name, api_version=template["apiVersion"], kind=kind, template=template,
                        template_hash=digest, propagation_policy=pp, override_policy=op, references=_references(template))
            except IntegrityError as exc:  # a concurrent submit of the same object won
                raise Conflict("already_exists", _("%(kind)s %(namespace)s/%(name)s was just created by someone else; "
                                                   "submit again to update it") % {
                    "kind": kind, "namespace": namespace, "name": name}, field="object") from exc
            _revision(fed, FederatedRevision.Action.CREATE, change_cause)
            record_change(fed, "create", after=snapshot(fed))
            created = True
        else:
            concurrency.check(existing)
            if existing.deleting:
                raise Refused("deleting", _("%(object)s is being deleted; submit it again once it is gone") % {"object": existing},
                              field="object")
            fed, created = _update(existing, template, digest, pp, op, change_cause), False
        _queue([fed.pk, *_leaders_of(fed)])
    events.publish("federation", "object.changed", {"id": fed.pk, "key": fed.key, "kind": kind})
    return fed, created


def _update(fed: FederatedObject, template: dict[str, Any], digest: str, pp, op, change_cause: str) -> FederatedObject:
    before = snapshot(fed)
    changed = template != fed.template
    fed.template, fed.api_version = template, template["apiVersion"]
    fed.references = _references(template)
    if pp is not None or fed.propagation_policy_id is None:
        fed.propagation_policy = pp
    if op is not None:
        fed.override_policy = op
    if changed:
        fed.revision += 1
        fed.template_hash = digest
        _revision(fed, FederatedRevision.Action.UPDATE, change_cause)
    fed.save()
    record_change(fed, "update", before=before, after=snapshot(fed))
    return fed


def _revision(fed: FederatedObject, action: str, reason: str, *, rollback_of: int | None = None) -> FederatedRevision:
    """The object's current template as revision ``fed.revision`` (the number the object shows)."""
    return FederatedRevision.objects.create(object=fed, number=fed.revision, action=action, template=fed.template,
                                            template_hash=fed.template_hash, reason=reason[:500], rollback_of=rollback_of,
                                            created_by=current_actor().name[:150])


def _leaders_of(fed: FederatedObject) -> list[int]:
    """A new or changed ConfigMap/Secret: the workloads referencing it re-place it."""
    if fed.kind not in FOLLOWER_KINDS:
        return []
    ref = f"{fed.kind}/{fed.name}"
    return [pk for pk, refs in FederatedObject.objects.filter(namespace=fed.namespace).exclude(references=[])
            .values_list("pk", "references") if ref in refs]


def delete(fed: FederatedObject) -> None:
    """Remove from every member cluster, then forget it (the reconciler finishes the job)."""
    with transaction.atomic():
        fed = FederatedObject.objects.select_for_update(no_key=True).get(pk=fed.pk)
        concurrency.check(fed)
        if fed.deleting:
            return
        before = snapshot(fed)
        fed.deleting = True
        fed.phase = FederatedObject.Phase.DELETING
        fed.save(update_fields=["deleting", "phase", "updated"])
        record_change(fed, "delete", before=before)
        _queue([fed.pk, *_leaders_of(fed)])


def rollback(fed: FederatedObject, number: int, reason: str = "") -> FederatedRevision:
    """Roll out an earlier template again, as a new revision (like ``kubectl rollout undo``)."""
    revisions.require_reason(reason)
    old = revisions.revision_to_restore(fed.revisions.all(), number, fed)
    if old.template_hash == fed.template_hash and old.template == fed.template:
        raise Refused("unchanged", _("revision %(number)s is what runs now") % {"number": number}, field="revision")
    with transaction.atomic():
        fed = FederatedObject.objects.select_for_update(no_key=True).get(pk=fed.pk)
        concurrency.check(fed)
        before = snapshot(fed)
        fed.template, fed.template_hash = old.template, old.template_hash
        fed.references = _references(old.template)
        fed.revision += 1
        fed.rollout_paused = False
        fed.save()
        revision = _revision(fed, FederatedRevision.Action.ROLLBACK, reason, rollback_of=number)
        record_change(fed, "update", before=before, after=snapshot(fed), verb="rollback", reason=reason)
        _queue([fed.pk])
    return revision


def set_paused(fed: FederatedObject, paused: bool, reason: str = "") -> FederatedObject:
    with transaction.atomic():
        fed = FederatedObject.objects.select_for_update(no_key=True).get(pk=fed.pk)
        concurrency.check(fed)
        if fed.rollout_paused != paused:
            before = snapshot(fed)
            fed.rollout_paused = paused
            fed.save(update_fields=["rollout_paused", "updated"])
            record_change(fed, "update", before=before, after=snapshot(fed), verb="pause" if paused else "resume", reason=reason)
        _queue([fed.pk])
    return fed


def reschedule(fed: FederatedObject, reason: str = "") -> None:
    """Forget the scheduling digest so the next reconcile schedules afresh (it may move
    replicas, so it is audited)."""
    with transaction.atomic():
        FederatedObject.objects.filter(pk=fed.pk).update(schedule_digest="")
        record_change(fed, "update", before=snapshot(fed), after=snapshot(fed), verb="reschedule", reason=reason)
        _queue([fed.pk])


# --------------------------------------------------------------------------- clusters


def cluster_cordoned(sender: Any, cluster: Cluster, **_: Any) -> None:
    """``fleet.signals.cluster_cordoned`` (inside the cordon's transaction): what runs on the
    cluster is scheduled afresh — a drain moves it away, an uncordon lets it come back."""
    ids = list(FederatedObject.objects.filter(members__cluster=cluster).values_list("pk", flat=True).distinct())
    FederatedObject.objects.filter(pk__in=ids).update(schedule_digest="")
    _queue(ids)
