"""The config types every Meridian starts with (upstream's two best-known KCCs)."""

from __future__ import annotations

from typing import Any

QUANTITY = {"type": "string", "pattern": r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$"}
FRACTION = {"type": "number", "minimum": 0, "maximum": 1}

ADMIN_QOS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "reclaimedResourceConfig": {
            "type": "object",
            "properties": {
                "enableReclaim": {"type": "boolean"},
                "reservedResourceForReport": {"type": "object", "additionalProperties": QUANTITY},
                "minReclaimedResourceForReport": {"type": "object", "additionalProperties": QUANTITY},
                "reservedResourceForAllocate": {"type": "object", "additionalProperties": QUANTITY},
            },
        },
        "evictionConfig": {
            "type": "object",
            "properties": {
                "memoryPressureEvictionConfig": {
                    "type": "object",
                    "properties": {
                        "enableNumaLevelEviction": {"type": "boolean"},
                        "enableSystemLevelEviction": {"type": "boolean"},
                        "numaFreeBelowWatermarkTimesThreshold": {"type": "integer", "minimum": 0},
                        "systemFreeMemoryThresholdMinimum": QUANTITY,
                        "systemKswapdRateThreshold": {"type": "integer", "minimum": 0},
                        "gracePeriod": {"type": "integer", "minimum": 0},
                    },
                },
                "cpuPressureEvictionConfig": {
                    "type": "object",
                    "properties": {
                        "enableLoadEviction": {"type": "boolean"},
                        "loadUpperBoundRatio": {"type": "number", "minimum": 0},
                    },
                },
                "reclaimedResourcesEvictionConfig": {
                    "type": "object",
                    "properties": {"evictionThreshold": {"type": "object", "additionalProperties": FRACTION}},
                },
            },
        },
        "qrmPluginConfig": {"type": "object"},
    },
}

AUTH_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "authConfig": {
            "type": "object",
            "properties": {
                "accessControlType": {"type": "string", "enum": ["Insecure", "Secure"]},
                "authType": {"type": "string"},
                "basicAuthSecretNameSpace": {"type": "string"},
                "basicAuthSecretName": {"type": "string"},
                "userPasswordPairs": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
    },
}

SEED_TYPES: list[dict[str, Any]] = [
    {
        "name": "AdminQoSConfiguration", "resource": "adminqosconfigurations",
        "description": "QoS agent administration: reclaimed-resource (co-location) switches and eviction thresholds.",
        "allowed_keys": [{"priority": 0, "keyList": ["diskMode", "machineModel"]}, {"priority": 1, "keyList": ["pool"]}],
        "schema": ADMIN_QOS_SCHEMA,
        "default_config": {
            "reclaimedResourceConfig": {"enableReclaim": True},
            "evictionConfig": {"memoryPressureEvictionConfig": {"enableNumaLevelEviction": False,
                                                                "systemFreeMemoryThresholdMinimum": "10Gi"}},
        },
    },
    {
        "name": "AuthConfiguration", "resource": "authconfigurations",
        "description": "Agent API authentication and access control.",
        "allowed_keys": [{"priority": 0, "keyList": ["pool"]}],
        "schema": AUTH_SCHEMA,
        "default_config": {"authConfig": {"accessControlType": "Insecure"}},
    },
]


def ensure_seed_types(sender: Any = None, **kwargs: Any) -> None:
    """post_migrate (also after a test flush): register the seed types if missing; never
    overwrite a type an admin has changed."""
    from .hashing import config_hash
    from .models import ConfigType

    if kwargs.get("using", "default") != "default":
        return
    for values in SEED_TYPES:
        ConfigType.objects.get_or_create(name=values["name"],
                                         defaults=dict(values, default_hash=config_hash(values["default_config"])))
