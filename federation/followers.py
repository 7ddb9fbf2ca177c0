"""Followers: the ConfigMaps and Secrets a workload's pods reference go where the workload
goes (upstream's follower controller), unless its policy disables follower scheduling. Pure."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kube.resources import PodSpecError, UnsupportedWorkloadError, workload_pod_template

__all__ = ["FOLLOWER_KINDS", "referenced"]

FOLLOWER_KINDS = ("ConfigMap", "Secret")


def _pod_spec(template: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        pod = workload_pod_template(template) or {}
    except (UnsupportedWorkloadError, PodSpecError, KeyError, TypeError, ValueError):
        return {}
    spec = pod.get("spec") if isinstance(pod, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _entries(value: Any) -> Iterator[Mapping[str, Any]]:
    """The objects of a list field; anything malformed is skipped (the member cluster's API
    server is the one to refuse it, with its own message)."""
    if isinstance(value, list):
        for entry in value:
            if isinstance(entry, Mapping):
                yield entry


def _name(value: Any, key: str = "name") -> str | None:
    name = value.get(key) if isinstance(value, Mapping) else None
    return name if isinstance(name, str) and name else None


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from _entries(spec.get(field))


def _from_volumes(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for volume in _entries(spec.get("volumes")):
        if name := _name(volume.get("configMap")):
            yield "ConfigMap", name
        if name := _name(volume.get("secret"), "secretName"):
            yield "Secret", name
        projected = volume.get("projected")
        for source in _entries(projected.get("sources") if isinstance(projected, Mapping) else None):
            if name := _name(source.get("configMap")):
                yield "ConfigMap", name
            if name := _name(source.get("secret")):
                yield "Secret", name


def _from_containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for container in _containers(spec):
        for source in _entries(container.get("envFrom")):
            if name := _name(source.get("configMapRef")):
                yield "ConfigMap", name
            if name := _name(source.get("secretRef")):
                yield "Secret", name
        for env in _entries(container.get("env")):
            value_from = env.get("valueFrom")
            if not isinstance(value_from, Mapping):
                continue
            if name := _name(value_from.get("configMapKeyRef")):
                yield "ConfigMap", name
            if name := _name(value_from.get("secretKeyRef")):
                yield "Secret", name


def referenced(template: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Sorted (kind, name) of every ConfigMap/Secret the workload's pods reference."""
    spec = _pod_spec(template)
    found = set(_from_volumes(spec)) | set(_from_containers(spec))
    for secret in _entries(spec.get("imagePullSecrets")):
        if name := _name(secret):
            found.add(("Secret", name))
    return sorted(found)
