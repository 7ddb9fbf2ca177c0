"""Scheduling configuration as ``meridian.io/v1`` documents (``core.documents``), written
through ``scheduling.services`` like the REST API and the upstream YAML import:

- ``SchedulingPolicy``: ``spec.config`` (a KubeSchedulerConfiguration profile) and
  ``spec.is_default``;
- ``NodeSchedulerConfig`` / ``PodSchedulerConfig``: the upstream template's spec, verbatim;
- ``SchedulerConfigBinding``: ``metadata.namespace`` (none: cluster-wide) and the upstream
  binding's spec, stored as the upstream export writes it (defaults left out).

Templates are applied before bindings (a binding naming a template in the same batch is
checked against it) and deleted after them. CPU allocations are runtime state, not
configuration.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from core.documents import Document, DocumentKind, Rendered, only_fields, register
from core.errors import Refused

from . import services
from .models import NodeSchedulerConfig, PodSchedulerConfig, SchedulerConfigBinding, SchedulingPolicy

#: The pure modules' problems name Kubernetes paths of the manifest, which are the document's too.
MANIFEST_FIELDS = {"spec": "spec", "metadata": "metadata"}


def _normalize_policy(document: Document, live: SchedulingPolicy | None) -> dict[str, Any]:
    only_fields(document, ("config", "is_default"))
    config = document.spec.get("config")
    config = {} if config is None else config
    is_default = document.spec.get("is_default", False)
    if not isinstance(is_default, bool):
        raise Refused("invalid", _("Must be true or false."), field="is_default")
    services.compile_policy(config)
    return {"config": config, "is_default": is_default}


def _save_policy(document: Document, spec: dict[str, Any], live: SchedulingPolicy | None, reason: str) -> SchedulingPolicy:
    policy_spec = services.PolicySpec(document.name, document.description, spec["config"], spec["is_default"])
    return services.save_policy(policy_spec, reason=reason, instance=live)[0]


SCHEDULING_POLICY = DocumentKind(
    kind="SchedulingPolicy", model=SchedulingPolicy, order=70,
    find=lambda d: SchedulingPolicy.objects.filter(name=d.name).first(),
    render=lambda p: Rendered(name=p.name, description=p.description,
                              spec={"config": p.config, "is_default": p.is_default}),
    normalize=_normalize_policy, save=_save_policy,
    remove=lambda p, reason: services.delete_policy(p, reason=reason),
    listing=lambda: SchedulingPolicy.objects.order_by("name"),
)


def _template_kind(model: type[NodeSchedulerConfig] | type[PodSchedulerConfig], order: int) -> DocumentKind:
    return DocumentKind(
        kind=model.KIND, model=model, order=order,
        find=lambda d: model.objects.filter(name=d.name).first(),
        render=lambda row: Rendered(name=row.name, description=row.description, spec=dict(row.spec)),
        normalize=lambda d, live: dict(services.checked_template(model.KIND, d.name, d.spec).spec),
        save=lambda d, spec, live, reason: services.save_template(model.KIND, d.name, spec, description=d.description,
                                                                  reason=reason, instance=live)[0],
        remove=lambda row, reason: services.delete_spec(row, reason=reason),
        listing=lambda: model.objects.order_by("name"),
        fields=MANIFEST_FIELDS,
    )


SCHEDULER_CONFIG_BINDING = DocumentKind(
    kind="SchedulerConfigBinding", model=SchedulerConfigBinding, order=90,
    namespaced=True,
    find=lambda d: SchedulerConfigBinding.objects.filter(name=d.name, namespace=d.namespace).first(),
    render=lambda row: Rendered(name=row.name, namespace=row.namespace, description=row.description, spec=dict(row.spec)),
    normalize=lambda d, live: services.binding_manifest_spec(services.checked_binding(d.name, d.namespace, d.spec)),
    save=lambda d, spec, live, reason: services.save_binding(d.name, d.namespace, spec, description=d.description,
                                                             reason=reason, instance=live)[0],
    remove=lambda row, reason: services.delete_spec(row, reason=reason),
    listing=lambda: SchedulerConfigBinding.objects.order_by("namespace", "name"),
    fields=MANIFEST_FIELDS,
)


def register_documents() -> None:
    register(SCHEDULING_POLICY)
    register(_template_kind(NodeSchedulerConfig, 80))
    register(_template_kind(PodSchedulerConfig, 81))
    register(SCHEDULER_CONFIG_BINDING)
