"""Propagation and override policies as users write them (upstream KubeAdmiral field names),
their validation with field messages, and their translation into scheduler input.

Pure: no Django. The API, the UI forms and the YAML import all validate through here, so a
policy refused in one place is refused everywhere with the same message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kube.jsonpatch import validate_patch
from kube.labels import validate_label_key, validate_label_value
from kube.resources import PodSpecError, UnsupportedWorkloadError, pod_requests, workload_pod_template

from .scheduler import (
    DIVIDE,
    DUPLICATE,
    PROFILES,
    ClusterAffinity,
    Placement,
    SchedulingUnit,
    matches_terms,
    parse_resources,
    validate_unit,
)

__all__ = [
    "PROPAGATION_FIELDS",
    "OVERRIDE_FIELDS",
    "cluster_patches",
    "placements_of",
    "api_resource",
    "desired_replicas",
    "replicas_path",
    "resource_request",
    "scheduling_unit",
    "validate_override",
    "validate_propagation",
]

PROPAGATION_FIELDS = frozenset({
    "schedulingProfile", "schedulingMode", "stickyCluster", "clusterSelector", "clusterAffinity", "tolerations",
    "maxClusters", "placement", "disableFollowerScheduling", "replicaRescheduling", "autoMigration",
})
OVERRIDE_FIELDS = frozenset({"overrideRules"})
_PREFERENCE_FIELDS = frozenset({"minReplicas", "maxReplicas", "weight"})
_TARGET_FIELDS = frozenset({"clusters", "clusterSelector", "clusterAffinity"})

#: Kinds whose replicas the scheduler divides, and where they live.
_REPLICAS_PATHS = {
    "Deployment": "/spec/replicas", "StatefulSet": "/spec/replicas", "ReplicaSet": "/spec/replicas",
    "Rollout": "/spec/replicas", "Job": "/spec/parallelism",
}

# Scheduler validation keys → the policy's own field paths.
_UNIT_FIELDS = {
    "scheduling_mode": "schedulingMode", "cluster_selector": "clusterSelector", "max_clusters": "maxClusters",
    "profile": "schedulingProfile",
}


def replicas_path(kind: str) -> str | None:
    """JSON pointer of the replica count the scheduler divides, or None (copied whole)."""
    return _REPLICAS_PATHS.get(kind)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_type(spec: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str, errors: dict[str, str]) -> bool:
    value = spec.get(name)
    if value is None:
        return False
    if kind is int and not _is_int(value) or kind is not int and not isinstance(value, kind):
        errors[name] = f"must be {what}"
        return False
    return True


def _validate_placement_list(placement: Sequence[Any], errors: dict[str, str]) -> None:
    seen: set[str] = set()
    for i, entry in enumerate(placement):
        path = f"placement[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("cluster"), str) or not entry.get("cluster"):
            errors[path] = "each placement needs a cluster name"
            continue
        if entry["cluster"] in seen:
            errors[f"{path}.cluster"] = f"cluster {entry['cluster']!r} is listed twice"
        seen.add(entry["cluster"])
        prefs = entry.get("preferences") or {}
        if not isinstance(prefs, Mapping):
            errors[f"{path}.preferences"] = "must be an object"
            continue
        for field_name in sorted(set(prefs) - _PREFERENCE_FIELDS):
            errors[f"{path}.preferences.{field_name}"] = "unknown field"
        for field_name in ("minReplicas", "maxReplicas", "weight"):
            value = prefs.get(field_name)
            if value is not None and (not _is_int(value) or value < 0):
                errors[f"{path}.preferences.{field_name}"] = "must be a non-negative integer"
        low, high = prefs.get("minReplicas"), prefs.get("maxReplicas")
        if _is_int(low) and _is_int(high) and low > high >= 0:
            errors[f"{path}.preferences.minReplicas"] = f"minReplicas ({low}) exceeds maxReplicas ({high})"


def placements_of(spec: Mapping[str, Any]) -> dict[str, Placement]:
    """The policy's placement list as the scheduler's per-cluster preferences."""
    result: dict[str, Placement] = {}
    for entry in spec.get("placement") or ():
        prefs = entry.get("preferences") or {}
        result[entry["cluster"]] = Placement(weight=prefs.get("weight"), min_replicas=prefs.get("minReplicas") or 0,
                                             max_replicas=prefs.get("maxReplicas"))
    return result


def _affinity_of(spec: Mapping[str, Any]) -> ClusterAffinity | None:
    """Upstream's ``clusterAffinity`` is a list of required terms, ORed."""
    terms = spec.get("clusterAffinity")
    return None if terms is None else ClusterAffinity(required=list(terms))


def _avoid_migration(spec: Mapping[str, Any]) -> bool:
    rescheduling = spec.get("replicaRescheduling") or {}
    return bool(rescheduling.get("avoidDisruption", True))


def validate_propagation(spec: Any, known_profiles: Mapping[str, Any] | Sequence[str] = PROFILES) -> dict[str, str]:
    """Field path → message; empty when the policy is valid."""
    if not isinstance(spec, Mapping):
        return {"spec": "must be an object"}
    errors: dict[str, str] = {}
    for name in sorted(set(spec) - PROPAGATION_FIELDS):
        errors[name] = "unknown field"
    mode = spec.get("schedulingMode", DIVIDE)
    if mode not in (DIVIDE, DUPLICATE):
        errors["schedulingMode"] = f"must be {DIVIDE} or {DUPLICATE}"
    for name in ("stickyCluster", "disableFollowerScheduling"):
        _check_type(spec, name, bool, "true or false", errors)
    if _check_type(spec, "maxClusters", int, "an integer", errors) and spec["maxClusters"] < 0:
        errors["maxClusters"] = "must not be negative"
    selector_ok = _check_type(spec, "clusterSelector", Mapping, "a map of label keys to values", errors)
    if selector_ok:
        for key, value in spec["clusterSelector"].items():
            problems = validate_label_key(key) or (validate_label_value(value) if isinstance(value, str) else ["must be a string"])
            if problems:
                errors["clusterSelector"] = f"{key!r}: {'; '.join(problems)}"
                break
    if _check_type(spec, "placement", list, "a list", errors):
        _validate_placement_list(spec["placement"], errors)
    _check_type(spec, "tolerations", list, "a list", errors)
    _check_type(spec, "clusterAffinity", list, "a list of cluster selector terms", errors)
    rescheduling = spec.get("replicaRescheduling")
    if rescheduling is not None and (not isinstance(rescheduling, Mapping)
                                     or not isinstance(rescheduling.get("avoidDisruption", True), bool)):
        errors["replicaRescheduling"] = "must be an object with avoidDisruption true or false"
    profile = spec.get("schedulingProfile")
    if profile is not None and not isinstance(profile, str):
        errors["schedulingProfile"] = "must be the name of a scheduling profile"
    elif profile not in (None, "") and profile not in known_profiles:
        errors["schedulingProfile"] = f"unknown scheduling profile {profile!r}; known: {', '.join(sorted(known_profiles))}"
    if errors:
        return errors
    unit = scheduling_unit({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policy-check"}}, spec)
    for key, message in validate_unit(unit).items():
        errors.setdefault(_policy_path(key, spec), message)
    return errors


def _policy_path(key: str, spec: Mapping[str, Any]) -> str:
    """Scheduler validation keys (``cluster_affinity.required[0]``) → policy paths."""
    if key.startswith("cluster_affinity.required"):
        return "clusterAffinity" + key[len("cluster_affinity.required"):]
    if key.startswith("placements."):
        name = key.split(".", 1)[1]
        for i, entry in enumerate(spec.get("placement") or ()):
            if entry.get("cluster") == name:
                return f"placement[{i}]"
    return _UNIT_FIELDS.get(key, key)


def resource_request(template: Mapping[str, Any]) -> dict[str, int]:
    """Per-replica requests of a workload's pods in scheduler units; {} for non-workloads."""
    try:
        pod_template = workload_pod_template(template)
    except (UnsupportedWorkloadError, PodSpecError, KeyError, TypeError, ValueError):
        return {}
    try:
        requests = pod_requests({"spec": (pod_template or {}).get("spec") or {}})
    except (PodSpecError, TypeError, ValueError):
        return {}
    return parse_resources({name: str(q) for name, q in requests.items()})


def api_resource(api_version: str, kind: str) -> str:
    """``group/version/resource`` as clusters list what they serve (``apps/v1/deployments``).

    The plural is guessed the way Kubernetes guesses it when discovery is not consulted
    (``meta.UnsafeGuessKindToResource``): lower case, ``s``→``ses``, ``y``→``ies``, else ``+s``.
    """
    lower = kind.lower()
    if lower.endswith("s"):
        plural = lower + "es"
    elif lower.endswith("y"):
        plural = lower[:-1] + "ies"
    else:
        plural = lower + "s"
    return f"{api_version}/{plural}"


def desired_replicas(template: Mapping[str, Any]) -> int | None:
    path = replicas_path(str(template.get("kind", "")))
    if path is None:
        return None
    spec = template.get("spec") or {}
    value = spec.get(path.rsplit("/", 1)[1], 1)
    return value if _is_int(value) else 1


def scheduling_unit(
    template: Mapping[str, Any],
    spec: Mapping[str, Any],
    *,
    current: Mapping[str, int | None] | None = None,
    key: str = "",
) -> SchedulingUnit:
    """The scheduler's view of ``template`` under propagation policy ``spec``."""
    meta = template.get("metadata") or {}
    api_version = str(template.get("apiVersion", "v1"))
    return SchedulingUnit(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace") or ""),
        gvk=api_resource(api_version, str(template.get("kind", ""))),
        desired_replicas=desired_replicas(template),
        resource_request=resource_request(template),
        scheduling_mode=spec.get("schedulingMode", DIVIDE),
        cluster_selector=dict(spec.get("clusterSelector") or {}),
        cluster_affinity=_affinity_of(spec),
        tolerations=list(spec.get("tolerations") or []),
        max_clusters=spec.get("maxClusters"),
        placements=placements_of(spec),
        sticky_cluster=bool(spec.get("stickyCluster", False)),
        avoid_migration=_avoid_migration(spec),
        current_clusters=dict(current or {}),
        key=key,
    )


# --------------------------------------------------------------------------- overrides


def _validate_target(target: Any, path: str, errors: dict[str, str]) -> None:
    if target is None:
        return
    if not isinstance(target, Mapping):
        errors[path] = "must be an object with clusters, clusterSelector or clusterAffinity"
        return
    for name in sorted(set(target) - _TARGET_FIELDS):
        errors[f"{path}.{name}"] = "unknown field"
    clusters = target.get("clusters")
    if clusters is not None and (not isinstance(clusters, list) or not all(isinstance(c, str) and c for c in clusters)):
        errors[f"{path}.clusters"] = "must be a list of cluster names"
    selector = target.get("clusterSelector")
    if selector is not None:
        probe = validate_propagation({"clusterSelector": selector})
        if probe:
            errors[f"{path}.clusterSelector"] = next(iter(probe.values()))
    affinity = target.get("clusterAffinity")
    if affinity is not None:
        for key, message in validate_propagation({"clusterAffinity": affinity}).items():
            errors[f"{path}.{key}"] = message


def validate_override(spec: Any) -> dict[str, str]:
    """Field path → message; empty when the override policy is valid."""
    if not isinstance(spec, Mapping):
        return {"spec": "must be an object"}
    errors: dict[str, str] = {}
    for name in sorted(set(spec) - OVERRIDE_FIELDS):
        errors[name] = "unknown field"
    rules = spec.get("overrideRules", [])
    if not isinstance(rules, list):
        return {**errors, "overrideRules": "must be a list"}
    for i, rule in enumerate(rules):
        path = f"overrideRules[{i}]"
        if not isinstance(rule, Mapping):
            errors[path] = "must be an object with targetClusters and overriders"
            continue
        _validate_target(rule.get("targetClusters"), f"{path}.targetClusters", errors)
        overriders = rule.get("overriders")
        if not isinstance(overriders, Mapping) or set(overriders) - {"jsonpatch"}:
            errors[f"{path}.overriders"] = "must be an object with a jsonpatch list"
            continue
        patch = [{"op": op.get("operator", op.get("op")), **{k: v for k, v in op.items() if k not in ("operator", "op")}}
                 if isinstance(op, Mapping) else op for op in overriders.get("jsonpatch") or []]
        for index, problem in validate_patch(patch).items():
            errors[f"{path}.overriders.jsonpatch" + ("" if index is None else f"[{index}]")] = problem
    return errors


def _targets(target: Mapping[str, Any] | None, cluster: str, labels: Mapping[str, str]) -> bool:
    """Upstream: every given criterion must hold; no criteria selects every cluster."""
    if not target:
        return True
    clusters = target.get("clusters")
    if clusters and cluster not in clusters:
        return False
    selector = target.get("clusterSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    terms = target.get("clusterAffinity")
    return matches_terms(terms, cluster, labels) if terms else True


def cluster_patches(spec: Mapping[str, Any] | None, cluster: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The JSON patch operations every rule targeting ``cluster`` contributes, in rule order."""
    operations: list[dict[str, Any]] = []
    for rule in (spec or {}).get("overrideRules") or ():
        if _targets(rule.get("targetClusters"), cluster, labels):
            for op in (rule.get("overriders") or {}).get("jsonpatch") or ():
                entry = {"op": op.get("operator", op.get("op")), "path": op["path"]}
                if "value" in op:
                    entry["value"] = op["value"]
                if "from" in op:
                    entry["from"] = op["from"]
                operations.append(entry)
    return operations
