"""What Meridian applies to one member cluster, and what it reads back.

Pure: the template (or the revision a waiting cluster still runs), the scheduled replicas,
the override patches and the rollout step's fence-posts go in; a native object comes out,
annotated with the federated object's key, revision and template hash, so reading the member
back tells whether it already runs the desired template.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

from kube.hashing import object_digest
from kube.jsonpatch import JsonPatchError, apply_patch

from .policy import replicas_path
from .rollout import RolloutPlan, RolloutTarget

__all__ = [
    "KEY_ANNOTATION",
    "REVISION_ANNOTATION",
    "TEMPLATE_HASH_ANNOTATION",
    "RenderError",
    "clean_template",
    "fenceposts",
    "member_object",
    "observe",
    "resolve_fencepost",
    "rollout_target",
    "template_hash",
]

KEY_ANNOTATION = "federation.meridian.io/object"
REVISION_ANNOTATION = "federation.meridian.io/revision"
TEMPLATE_HASH_ANNOTATION = "federation.meridian.io/template-hash"
MANAGED_LABEL = "kubeadmiral.io/managed"

_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp")


class RenderError(ValueError):
    """The overrides do not apply to this cluster's object; shown on the member."""


def clean_template(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as submitted minus what servers own (status, uid, resourceVersion, ...)."""
    template = copy.deepcopy(dict(obj))
    template.pop("status", None)
    meta = template.setdefault("metadata", {})
    for name in _SERVER_FIELDS:
        meta.pop(name, None)
    return template


def template_hash(template: Mapping[str, Any]) -> str:
    """Digest of what a rollout changes: the spec minus replicas (scaling is not an upgrade)."""
    spec = dict(template.get("spec") or {})
    spec.pop("replicas", None)
    spec.pop("parallelism", None)
    body = {k: v for k, v in template.items() if k not in ("metadata", "status", "spec")}
    return object_digest({"spec": spec, "rest": body})


def _set_pointer(obj: dict[str, Any], pointer: str, value: Any) -> None:
    node = obj
    parts = pointer.strip("/").split("/")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def member_object(
    template: Mapping[str, Any],
    *,
    key: str,
    revision: int,
    replicas: int | None,
    patches: Sequence[Mapping[str, Any]] = (),
    step: RolloutPlan | None = None,
) -> dict[str, Any]:
    """The object for one cluster.

    ``replicas`` is the scheduler's share (``None``: a full copy, as submitted); ``patches``
    the override policy's operations for this cluster, applied after replicas so an override
    may pin them; ``step`` this rollout step's replicas/maxSurge/maxUnavailable overrides.
    """
    body = clean_template(template)
    path = replicas_path(str(body.get("kind", "")))
    if path and replicas is not None:
        _set_pointer(body, path, replicas)
    if patches:
        try:
            body = apply_patch(body, list(patches))
        except JsonPatchError as exc:
            raise RenderError(f"override does not apply: {exc}") from exc
    if step is not None:
        if step.replicas is not None and path:
            _set_pointer(body, path, step.replicas)
        if step.max_surge is not None or step.max_unavailable is not None:
            rolling = body.setdefault("spec", {}).setdefault("strategy", {}).setdefault("rollingUpdate", {})
            body["spec"]["strategy"].setdefault("type", "RollingUpdate")
            if step.max_surge is not None:
                rolling["maxSurge"] = step.max_surge
            if step.max_unavailable is not None:
                rolling["maxUnavailable"] = step.max_unavailable
    meta = body.setdefault("metadata", {})
    meta.setdefault("labels", {})[MANAGED_LABEL] = "true"
    annotations = meta.setdefault("annotations", {})
    annotations[KEY_ANNOTATION] = key
    annotations[REVISION_ANNOTATION] = str(revision)
    annotations[TEMPLATE_HASH_ANNOTATION] = template_hash(template)
    return body


def resolve_fencepost(value: Any, replicas: int, *, round_up: bool, default: str = "25%") -> int:
    """maxSurge / maxUnavailable as Kubernetes resolves them against ``replicas``."""
    if value is None:
        value = default
    if isinstance(value, str) and value.endswith("%"):
        try:
            percent = int(value[:-1])
        except ValueError:
            return 0
        scaled = percent * replicas / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def fenceposts(obj: Mapping[str, Any], replicas: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) of a Deployment for ``replicas``, resolved as Kubernetes does
    (both 0 would stall it, so unavailable becomes 1; Recreate takes everything down)."""
    strategy = (obj.get("spec") or {}).get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0, replicas
    rolling = strategy.get("rollingUpdate") or {}
    surge = resolve_fencepost(rolling.get("maxSurge"), replicas, round_up=True)
    unavailable = resolve_fencepost(rolling.get("maxUnavailable"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def observe(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parts of a member object's state Meridian keeps (``MemberObject.observed``)."""
    if not obj:
        return {}
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    annotations = meta.get("annotations") or {}
    replicas = spec.get("replicas", spec.get("parallelism"))
    observed: dict[str, Any] = {
        "templateHash": annotations.get(TEMPLATE_HASH_ANNOTATION, ""),
        "revision": annotations.get(REVISION_ANNOTATION, ""),
        "generation": meta.get("generation"),
        "observedGeneration": status.get("observedGeneration"),
    }
    if replicas is not None:
        surge, unavailable = fenceposts(obj, int(replicas))
        observed.update(
            specReplicas=int(replicas),
            replicas=int(status.get("replicas", status.get("active", 0)) or 0),
            readyReplicas=int(status.get("readyReplicas", 0) or 0),
            availableReplicas=int(status.get("availableReplicas", status.get("active", 0)) or 0),
            updatedReplicas=int(status.get("updatedReplicas", status.get("active", 0)) or 0),
            maxSurge=surge,
            maxUnavailable=unavailable,
        )
        if "succeeded" in status:
            observed["succeeded"] = int(status["succeeded"] or 0)
    return observed


def rollout_target(cluster: str, desired: int, observed: Mapping[str, Any], desired_hash: str) -> RolloutTarget:
    """A member as the rollout planner sees it.

    A Deployment's status has no "available on the newest ReplicaSet" count, so it is
    estimated as available minus the old pods (old pods count as available, the way a
    rolling update keeps them until new ones are ready).
    """
    if not observed or "specReplicas" not in observed:
        return RolloutTarget(cluster=cluster, desired_replicas=desired)
    spec_replicas = observed["specReplicas"]
    actual = observed["replicas"]
    available = observed["availableReplicas"]
    newest = min(observed["updatedReplicas"], actual) if actual else observed["updatedReplicas"]
    newest_available = max(min(newest, available - max(actual - newest, 0)), 0)
    updated = observed.get("templateHash") == desired_hash
    return RolloutTarget(
        cluster=cluster,
        desired_replicas=desired,
        replicas=spec_replicas,
        actual_replicas=actual,
        available_replicas=available,
        updated_replicas=newest if updated else 0,
        updated_available_replicas=newest_available if updated else 0,
        current_new_replicas=newest,
        current_new_available_replicas=newest_available,
        updated=updated,
        max_surge=observed["maxSurge"],
        max_unavailable=observed["maxUnavailable"],
    )
