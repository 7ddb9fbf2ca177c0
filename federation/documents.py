"""Federation as ``meridian.io/v1`` documents (``core.documents``), written through
``federation.services`` like the REST API.

- ``PropagationPolicy`` / ``OverridePolicy``: ``metadata.namespace`` (none: fleet-wide) and the
  policy's own spec, verbatim (KubeAdmiral's fields);
- ``FederatedObject``: ``spec.template`` (the native object, stored as ``submit`` cleans it),
  ``spec.propagation_policy`` / ``spec.override_policy`` (``name`` for a fleet-wide policy,
  ``namespace/name`` for a namespaced one). Its identity is its namespace, the template's kind
  and its name. As with ``submit``, leaving a policy out keeps the one the object has (or the
  one its labels name). Objects being deleted are not exported.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from core.documents import Document, DocumentKind, Rendered, only_fields, register
from core.errors import Refused

from . import services
from .models import FederatedObject, OverridePolicy, PolicyBase, PropagationPolicy
from .render import clean_template

OBJECT_FIELDS = ("template", "propagation_policy", "override_policy")


# --------------------------------------------------------------------------- policies

def _policy_kind(model: type[PropagationPolicy] | type[OverridePolicy], order: int) -> DocumentKind:
    return DocumentKind(
        kind=model.__name__, model=model, order=order, namespaced=True,
        find=lambda d: model.objects.filter(namespace=d.namespace, name=d.name).first(),
        render=lambda p: Rendered(name=p.name, namespace=p.namespace, description=p.description, spec=dict(p.spec)),
        normalize=lambda d, live: dict(d.spec),
        save=lambda d, spec, live, reason: services.save_policy(model, namespace=d.namespace, name=d.name, spec=spec,
                                                                description=d.description, instance=live),
        remove=lambda p, reason: services.delete_policy(p),
        listing=lambda: model.objects.order_by("namespace", "name"),
        fields={"spec": "spec"},
    )


# --------------------------------------------------------------------------- objects

def policy_ref(policy: PolicyBase | None, namespace: str) -> str | None:
    """How a document names a policy: ``namespace/name``, or ``name`` for a fleet-wide one
    (``/name`` when the object's namespace holds a policy of that name, which ``name`` would mean)."""
    if policy is None:
        return None
    if policy.namespace:
        return f"{policy.namespace}/{policy.name}"
    shadowed = namespace and type(policy).objects.filter(namespace=namespace, name=policy.name).exists()
    return f"/{policy.name}" if shadowed else policy.name


def _render_object(fed: FederatedObject) -> Rendered:
    return Rendered(name=fed.name, namespace=fed.namespace, spec={
        "template": fed.template, "propagation_policy": policy_ref(fed.propagation_policy, fed.namespace),
        "override_policy": policy_ref(fed.override_policy, fed.namespace)})


def _template(document: Document) -> dict[str, Any]:
    """The template with the document's name and namespace filled in; they must agree."""
    template = document.spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("metadata", {}), dict):
        raise Refused("invalid", _("The native object to federate (apiVersion, kind, metadata, spec)."), field="template")
    template = clean_template(template)
    meta = template["metadata"]
    meta.setdefault("name", document.name)
    if document.namespace:
        meta.setdefault("namespace", document.namespace)
    errors = {}
    if meta.get("name") != document.name:
        errors["template.metadata.name"] = _("must be the document's name, %(name)s") % {"name": repr(document.name)}
    if (meta.get("namespace") or "") != document.namespace:
        errors["template.metadata.namespace"] = _("must be the document's namespace, %(namespace)s") % {
            "namespace": repr(document.namespace or _("(none)"))}
    errors |= {key.replace("object", "template", 1): message for key, message in services.object_errors(template).items()}
    if errors:
        raise Refused.from_errors(errors)
    return template


def _normalize_object(document: Document, live: FederatedObject | None) -> dict[str, Any]:
    only_fields(document, OBJECT_FIELDS, required=("template",))
    refs = {name: document.spec.get(name) for name in ("propagation_policy", "override_policy")}
    wrong = {name: _("A policy's name, or namespace/name.") for name, ref in refs.items()
             if ref is not None and not isinstance(ref, str)}
    if wrong:
        raise Refused.from_errors(wrong)
    template = _template(document)
    propagation, override = services.resolve_policies(template, document.spec.get("propagation_policy") or None,
                                                      document.spec.get("override_policy") or None)
    if live is not None:  # as submit: a policy left out keeps the object's
        propagation = propagation or live.propagation_policy
        override = override or live.override_policy
    return {"template": template, "propagation_policy": policy_ref(propagation, document.namespace),
            "override_policy": policy_ref(override, document.namespace)}


def _save_object(document: Document, spec: dict[str, Any], live: FederatedObject | None, reason: str) -> FederatedObject:
    return services.submit(spec["template"], propagation_policy=spec["propagation_policy"],
                           override_policy=spec["override_policy"], change_cause=reason)[0]


def _find_object(document: Document) -> FederatedObject | None:
    template = document.spec.get("template")
    kind = template.get("kind") if isinstance(template, dict) else None
    if not isinstance(kind, str):
        return None  # normalize refuses it, naming spec.template
    return (FederatedObject.objects.select_related("propagation_policy", "override_policy")
            .filter(namespace=document.namespace, kind=kind, name=document.name).first())


FEDERATED_OBJECT = DocumentKind(
    kind="FederatedObject", model=FederatedObject, order=60, namespaced=True, described=False,
    identity=lambda d: (d.namespace, str((d.spec.get("template") or {}).get("kind") if isinstance(d.spec.get("template"), dict)
                                          else None), d.name),
    find=_find_object, render=_render_object, normalize=_normalize_object, save=_save_object,
    remove=lambda fed, reason: services.delete(fed),
    listing=lambda: (FederatedObject.objects.filter(deleting=False).select_related("propagation_policy", "override_policy")
                     .order_by("namespace", "kind", "name")),
    fields={"object": "spec.template", "propagation_policy": "spec.propagation_policy",
            "override_policy": "spec.override_policy"},
)


def register_documents() -> None:
    register(_policy_kind(PropagationPolicy, 50))
    register(_policy_kind(OverridePolicy, 51))
    register(FEDERATED_OBJECT)
