"""Targets as upstream YAML (``config.katalyst.kubewharf.io/v1alpha1`` objects), in and out.

Upstream fields map one to one: ``spec.nodeLabelSelector``, ``spec.priority``,
``spec.ephemeralSelector.{nodeNames,lastDuration}``, ``spec.config``, and the canary of
``spec.updateStrategy.rollingUpdate`` (Meridian's wave size). The member-cluster scope,
which upstream has no field for, travels as the annotation ``meridian.io/cluster``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from kube.manifests import dump_documents

CLUSTER_ANNOTATION = "meridian.io/cluster"


class ManifestError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def load_documents(text: str) -> list[dict[str, Any]]:
    """Every non-empty YAML document; a ``List`` kind is unpacked."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError("yaml", f"not valid YAML: {exc}") from exc
    objects: list[dict[str, Any]] = []
    for i, document in enumerate(documents):
        if not isinstance(document, Mapping):
            raise ManifestError(f"document {i + 1}", "must be a mapping")
        if document.get("kind") == "List" or str(document.get("kind", "")).endswith("List") and "items" in document:
            objects.extend(document.get("items") or [])
        else:
            objects.append(dict(document))
    return objects


def target_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The target fields of one upstream object: type (kind), name, cluster, selector, ..."""
    def need(condition: bool, path: str, message: str) -> None:
        if not condition:
            raise ManifestError(path, message)

    need(isinstance(obj, Mapping), "object", "must be a mapping")
    kind, metadata, spec = obj.get("kind"), obj.get("metadata") or {}, obj.get("spec") or {}
    need(isinstance(kind, str) and kind, "kind", "is required")
    need(isinstance(metadata, Mapping) and isinstance(metadata.get("name"), str), "metadata.name", "is required")
    need(isinstance(spec, Mapping), "spec", "must be a mapping")
    ephemeral = spec.get("ephemeralSelector") or {}
    need(isinstance(ephemeral, Mapping), "spec.ephemeralSelector", "must be a mapping")
    node_names = ephemeral.get("nodeNames") or []
    need(isinstance(node_names, list) and all(isinstance(n, str) for n in node_names), "spec.ephemeralSelector.nodeNames",
         "must be a list of node names")
    priority = spec.get("priority", 0)
    need(isinstance(priority, int) and not isinstance(priority, bool), "spec.priority", "must be an integer")
    selector = spec.get("nodeLabelSelector", "") or ""
    need(isinstance(selector, str), "spec.nodeLabelSelector", "must be a string")
    config = spec.get("config", {})
    need(isinstance(config, Mapping), "spec.config", "must be a mapping")
    canary = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("canary")
    annotations = metadata.get("annotations") or {}
    return {
        "type": kind, "name": metadata["name"], "cluster": annotations.get(CLUSTER_ANNOTATION) or None,
        "node_label_selector": selector, "priority": priority, "node_names": list(node_names),
        "last_duration": str(ephemeral.get("lastDuration") or ""), "config": dict(config),
        "wave_size": "" if canary is None else str(canary), "paused": bool(spec.get("paused", False)),
    }


def to_manifest(*, api_version: str, kind: str, name: str, cluster: str | None, node_label_selector: str, priority: int,
                node_names: list[str], last_duration: str, config: Mapping[str, Any], wave_size: str = "",
                config_hash: str = "", revision: int | None = None) -> dict[str, Any]:
    """An upstream object for a target (status carries Meridian's revision and the hash)."""
    metadata: dict[str, Any] = {"name": name}
    if cluster:
        metadata["annotations"] = {CLUSTER_ANNOTATION: cluster}
    spec: dict[str, Any] = {}
    if node_label_selector:
        spec["nodeLabelSelector"] = node_label_selector
    if priority:
        spec["priority"] = priority
    if node_names:
        spec["ephemeralSelector"] = {"nodeNames": list(node_names), "lastDuration": last_duration}
    if wave_size:
        spec["updateStrategy"] = {"rollingUpdate": {"canary": int(wave_size) if wave_size.isdigit() else wave_size}}
    spec["config"] = dict(config)
    manifest = {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}
    if config_hash:
        manifest["status"] = {"currentHash": config_hash, **({"observedGeneration": revision} if revision else {})}
    return manifest


def dump_manifests(manifests: list[dict[str, Any]]) -> str:
    return dump_documents(manifests)
