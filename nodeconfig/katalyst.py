"""What Meridian writes to a cluster that runs Katalyst's own agents: CNCs, the
KatalystCustomConfig of each config type, and the target objects with their status.

Upstream agents read ``CustomNodeConfig`` objects (one per node, its
``status.katalystCustomConfigList`` naming the target and hash per config type) and the
target objects themselves, so for such clusters the reconciler's outcome is mirrored there.
Every Katalyst CRD declares the status subresource: an API server drops ``status`` from a
write to the main resource, so the task writes each object (``without_status``) and then its
status (``Connector.apply_status``), as upstream's controllers do.
Plain data in, Kubernetes objects out; the task in ``tasks.py`` applies them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

API_VERSION = "config.katalyst.kubewharf.io/v1alpha1"
CNC_RESOURCE = f"{API_VERSION}/customnodeconfigs"
TARGET_NAMESPACE = "default"


def runs_katalyst(api_resources: Iterable[str], connector: str, connector_config: Mapping[str, Any]) -> bool:
    """A real cluster serving the CNC resource, or a simulated one told to act like it."""
    if connector == "simulated":
        return bool(connector_config.get("katalyst_agents"))
    return CNC_RESOURCE in set(api_resources)


def custom_node_config(node: str, labels: Mapping[str, str], entries: Iterable[Mapping[str, str]]) -> dict[str, Any]:
    """A node's CNC; ``entries`` carry group, version, resource, target and hash per config type."""
    configs = [{"configType": {"group": e["group"], "version": e["version"], "resource": e["resource"]},
                "configNamespace": TARGET_NAMESPACE, "configName": e["target"], "hash": e["hash"]}
               for e in sorted(entries, key=lambda e: e["resource"])]
    return {"apiVersion": API_VERSION, "kind": "CustomNodeConfig",
            "metadata": {"name": node, "labels": dict(labels)},
            "spec": {}, "status": {"katalystCustomConfigList": configs}}


#: The label on every target object Meridian writes into a member cluster, so that the objects
#: of targets deleted since can be found there and removed.
MANAGED_BY = ("app.kubernetes.io/managed-by", "meridian")


def target_object(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A target as upstream stores it: namespaced, without Meridian's status block, labelled as
    Meridian's (``MANAGED_BY``)."""
    body = {k: v for k, v in manifest.items() if k != "status"}
    metadata = body["metadata"]
    labels = {**(metadata.get("labels") or {}), MANAGED_BY[0]: MANAGED_BY[1]}
    body["metadata"] = dict(metadata, namespace=TARGET_NAMESPACE, labels=labels)
    return body


def katalyst_custom_config(group: str, version: str, resource: str, allowed_keys: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The KatalystCustomConfig registering a config type (upstream's KCC), named after the
    type's resource: its target type and the selector keys allowed per priority; Katalyst's
    controllers find it by target type and validate targets against it."""
    return {"apiVersion": API_VERSION, "kind": "KatalystCustomConfig",
            "metadata": {"name": resource, "namespace": TARGET_NAMESPACE},
            "spec": {"targetType": {"group": group, "version": version, "resource": resource},
                     "nodeLabelSelectorAllowedKeyList": [{"priority": int(e.get("priority", 0)), "keyList": list(e.get("keyList") or [])}
                                                         for e in allowed_keys]}}


def target_status(config_hash: str, generation: int, target_nodes: int, canary_nodes: int, updated_target_nodes: int) -> dict[str, Any]:
    """Upstream's ``GenericConfigStatus`` of a target in one cluster: the nodes it targets, those
    let onto it (a paced rollout holds back the rest), those whose CNC carries its hash."""
    return {"targetNodes": target_nodes, "canaryNodes": canary_nodes, "updatedTargetNodes": updated_target_nodes,
            "updatedNodes": updated_target_nodes, "currentHash": config_hash, "observedGeneration": generation,
            "conditions": [{"type": "Valid", "status": "True", "reason": "", "message": ""}]}


def without_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "status"}
