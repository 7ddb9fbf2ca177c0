"""What Meridian writes to a cluster that runs Katalyst's own agents: CNCs and target objects.

Upstream agents read ``CustomNodeConfig`` objects (one per node, its
``status.katalystCustomConfigList`` naming the target and hash per config type) and the
target objects themselves, so for such clusters the reconciler's outcome is mirrored there.
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


def target_object(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A target as upstream stores it: namespaced, without Meridian's status block."""
    body = {k: v for k, v in manifest.items() if k != "status"}
    body["metadata"] = dict(body["metadata"], namespace=TARGET_NAMESPACE)
    return body
