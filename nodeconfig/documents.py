"""Node config as ``meridian.io/v1`` documents (``core.documents``): ``ConfigType`` and
``ConfigTarget``, written through ``nodeconfig.services`` like the REST API.

A target is named by its type and its name (``spec.type`` + ``metadata.name``, as the REST
API's unique pair); its spec is the REST API's write body (``node_label_selector``,
``priority``, ``node_names``, ``last_duration``, ``config``, the rollout knobs). Pausing is an
operation (``rollout pause``), not configuration; emergency downgrades and deleted targets
are not exported (applying to one is refused as the API refuses it).
"""

from __future__ import annotations

from typing import Any

from core.api.exceptions import flatten
from core.documents import Document, DocumentKind, Rendered, only_fields, register
from core.errors import Refused

from . import services
from .api.serializers import ConfigTargetWriteSerializer
from .models import ConfigTarget, ConfigType

TYPE_FIELDS = ("group", "version", "resource", "allowed_keys", "schema", "default_config")
TARGET_FIELDS = ("type", "cluster", "node_label_selector", "priority", "node_names", "last_duration", "config",
                 "wave_size", "wave_interval_seconds", "failure_threshold_percent")


# ---------------------------------------------------------------------------- config types

def _type_spec(config_type: ConfigType) -> dict[str, Any]:
    return {"group": config_type.group, "version": config_type.version, "resource": config_type.resource,
            "allowed_keys": [dict(entry) for entry in config_type.allowed_keys or []], "schema": config_type.schema,
            "default_config": config_type.default_config or {}}


def _type_values(document: Document) -> dict[str, Any]:
    """What ``save_config_type`` takes: the spec with the model's defaults, ``{}`` schema as none."""
    spec = document.spec
    return {"name": document.name, "description": document.description,
            "group": spec.get("group", ConfigType._meta.get_field("group").default),
            "version": spec.get("version", ConfigType._meta.get_field("version").default),
            "resource": spec.get("resource", ""), "allowed_keys": spec.get("allowed_keys") or [],
            "schema": spec.get("schema") or None, "default_config": spec.get("default_config") or {}}


def _normalize_type(document: Document, live: ConfigType | None) -> dict[str, Any]:
    only_fields(document, TYPE_FIELDS, required=("resource",))
    values = _type_values(document)
    errors = services.config_type_errors(values, live)
    if errors:
        raise Refused.from_errors(errors)
    return {k: v for k, v in values.items() if k in TYPE_FIELDS}


def _save_type(document: Document, spec: dict[str, Any], live: ConfigType | None, reason: str) -> ConfigType:
    return services.save_config_type({"name": document.name, "description": document.description, **spec}, instance=live)


CONFIG_TYPE = DocumentKind(
    kind="ConfigType", model=ConfigType, order=20,
    find=lambda d: ConfigType.objects.filter(name=d.name).first(),
    render=lambda t: Rendered(name=t.name, spec=_type_spec(t), description=t.description),
    normalize=_normalize_type, save=_save_type,
    remove=lambda t, reason: services.delete_config_type(t),
    listing=lambda: ConfigType.objects.order_by("name"),
)


# ---------------------------------------------------------------------------- config targets

def _target_spec(config_type: str, spec: services.TargetSpec) -> dict[str, Any]:
    return {"type": config_type, "cluster": spec.cluster or None, "node_label_selector": spec.node_label_selector,
            "priority": spec.priority, "node_names": list(spec.node_names), "last_duration": spec.last_duration,
            "config": spec.config if spec.config is not None else {}, "wave_size": spec.wave_size,
            "wave_interval_seconds": spec.wave_interval_seconds,
            "failure_threshold_percent": spec.failure_threshold_percent}


def _normalize_target(document: Document, live: ConfigTarget | None) -> dict[str, Any]:
    """The REST API's write serializer fills the defaults and checks the types; the service
    checks the rules when the target is saved."""
    only_fields(document, TARGET_FIELDS)
    serializer = ConfigTargetWriteSerializer(data={**document.spec, "name": document.name})
    if not serializer.is_valid():
        raise Refused.from_errors(flatten(serializer.errors))
    data = serializer.validated_data
    return _target_spec(data["type"].name, ConfigTargetWriteSerializer.spec_from(data))


def _save_target(document: Document, spec: dict[str, Any], live: ConfigTarget | None, reason: str) -> ConfigTarget:
    config_type = ConfigType.objects.get(name=spec["type"])
    fields = {k: v for k, v in spec.items() if k != "type"}
    target_spec = services.TargetSpec(name=document.name, **fields | {"node_names": tuple(spec["node_names"])})
    return services.save_target(config_type, target_spec, reason=reason or "applied")[0]


def _find_target(document: Document) -> ConfigTarget | None:
    config_type = document.spec.get("type")
    if not isinstance(config_type, str):
        return None  # normalize refuses it, naming spec.type
    return (ConfigTarget.objects.filter(config_type__name=config_type, name=document.name, deleted=False)
            .select_related("config_type", "cluster").first())


CONFIG_TARGET = DocumentKind(
    kind="ConfigTarget", model=ConfigTarget, order=30, described=False,
    identity=lambda d: (str(d.spec.get("type")), d.name),
    find=_find_target,
    render=lambda t: Rendered(name=t.name, spec=_target_spec(t.config_type.name, services.spec_of(t))),
    normalize=_normalize_target, save=_save_target,
    remove=lambda t, reason: services.delete_target(t, reason=reason),
    listing=lambda: (ConfigTarget.objects.filter(deleted=False, emergency=False).select_related("config_type", "cluster")
                     .order_by("config_type__name", "name")),
    fields={"type": "spec.type"},
)


def register_documents() -> None:
    register(CONFIG_TYPE)
    register(CONFIG_TARGET)
