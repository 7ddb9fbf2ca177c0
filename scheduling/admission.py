"""What the mutating webhook decides with, and how: a per-process snapshot of templates, bindings
and policy names kept fresh by a version number, and ``decide_pod``, the decision for one pod.

Below ``services`` (which bump the version in every change's transaction and announce it when
it commits) and ``webhook`` (HTTP): both import from here, nothing here imports them.

The version is read from Redis (``VERSION_KEY``, set when a change commits); with Redis down,
or the key absent, from the database, so a change is never missed because Redis is down.
(Should Redis be reachable by the webhook but not by the process committing a change, the
key expires after ``VERSION_TTL`` seconds: that is the longest a cache can lag.)
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from . import manifests, schedconfig
from .models import NodeSchedulerConfig, PodSchedulerConfig, SchedulerConfigBinding, SchedulingConfigVersion, SchedulingPolicy

log = logging.getLogger(__name__)

VERSION_KEY = "meridian:scheduling:config-version"
VERSION_TTL = 5
POLICY_ANNOTATIONS = ("sched.cloud.ctrip.com/policy", "scheduling.meridian.io/policy")
TEMPLATE_MODELS: dict[str, Any] = {NodeSchedulerConfig.KIND: NodeSchedulerConfig, PodSchedulerConfig.KIND: PodSchedulerConfig}


def policy_name_of(pod: Mapping[str, Any]) -> str | None:
    """The policy a pod names in its annotations (Ctrip's first, then Meridian's), or None."""
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    for key in POLICY_ANNOTATIONS:
        value = annotations.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None



# ---------------------------------------------------------------------------- rows as the pure objects

def as_template(row: NodeSchedulerConfig | PodSchedulerConfig) -> schedconfig.SchedulerTemplate:
    return schedconfig.SchedulerTemplate(row.KIND, row.name, row.spec)


def as_binding(row: SchedulerConfigBinding) -> schedconfig.SchedulerBinding:
    """The pure binding of a row (read through the upstream shape, as imports are)."""
    return manifests.from_manifest(binding_manifest_of(row))  # type: ignore[return-value]


def template_manifest(kind: str, name: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": schedconfig.API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def binding_manifest(name: str, namespace: str, spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": schedconfig.API_VERSION, "kind": schedconfig.SCHEDULER_CONFIG_BINDING, "metadata": metadata,
            "spec": spec}


def binding_manifest_of(row: SchedulerConfigBinding) -> dict[str, Any]:
    return binding_manifest(row.name, row.namespace, row.spec)


def all_templates() -> list[schedconfig.SchedulerTemplate]:
    return [as_template(row) for model in TEMPLATE_MODELS.values() for row in model.objects.only("name", "spec")]



# ---------------------------------------------------------------------------- the snapshot

@dataclass(frozen=True)
class ConfigSnapshot:
    """What the webhook decides with, as of ``version``."""

    version: int
    templates: tuple[schedconfig.SchedulerTemplate, ...]
    bindings: tuple[schedconfig.SchedulerBinding, ...]
    policies: frozenset[str]
    broken_bindings: tuple[str, ...] = ()
    #: Each binding with its compiled selector (None: unreadable, left for ``resolve`` to warn about).
    selectors: tuple[tuple[schedconfig.SchedulerBinding, Any], ...] = ()


def read_version() -> int:
    return SchedulingConfigVersion.objects.filter(pk=1).values_list("number", flat=True).first() or 0


def load_snapshot(version: int | None = None) -> ConfigSnapshot:
    """Read the version first, then the rows: rows newer than the version only cause a reload."""
    number = read_version() if version is None else version
    bindings, broken = [], []
    for row in SchedulerConfigBinding.objects.all():
        try:
            bindings.append(as_binding(row))
        except schedconfig.SchedulingConfigError:
            broken.append(str(row))  # stored before a rule tightened: skipped, and named in warnings
    return ConfigSnapshot(number, tuple(all_templates()), tuple(bindings),
                          frozenset(SchedulingPolicy.objects.values_list("name", flat=True)), tuple(broken),
                          tuple((b, _compiled_selector(b.selector)) for b in bindings))


def _compiled_selector(selector: Any) -> Any:
    from kube.labels import SelectorError, selector_from_label_selector

    try:
        return selector_from_label_selector(selector)
    except (SelectorError, ValueError, TypeError):
        return None


# ---------------------------------------------------------------------------- the version and the cache

#: Set the version only when it is newer than what Redis holds (commits may announce out of order).
_SET_IF_NEWER = """
local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
if tonumber(ARGV[1]) > current then redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2]) return 1 end
return 0
"""


def _redis():
    from core.redis import get_redis

    return get_redis()


def announce_version(number: int) -> None:
    """After a change commits: tell every webhook process (through Redis) its cache is stale."""
    try:
        _redis().eval(_SET_IF_NEWER, 1, VERSION_KEY, number, VERSION_TTL)
    except (RedisError, OSError) as exc:
        log.warning("could not announce scheduling config version %s (%s); caches notice within %s s", number, exc,
                    VERSION_TTL)


def forget_version(**_: Any) -> None:
    """After the database was restored (``core.backup.database_restored``): the version Redis
    holds belongs to the replaced database (caches would also notice the mismatch themselves)."""
    _redis().delete(VERSION_KEY)


def current_version() -> int:
    """The config version: Redis first, the database when Redis is down or has no value."""
    try:
        raw = _redis().get(VERSION_KEY)
    except (RedisError, OSError):
        return read_version()
    if raw is not None:
        return int(raw)
    number = read_version()
    try:
        _redis().set(VERSION_KEY, number, ex=VERSION_TTL, nx=True)
    except (RedisError, OSError):
        pass
    return number


class SnapshotCache:
    """Templates, bindings and policy names of one process, reloaded when the version moves."""

    def __init__(self) -> None:
        self._snapshot = None
        self._lock = threading.Lock()

    def current(self):
        version = current_version()
        snapshot = self._snapshot
        if snapshot is not None and snapshot.version == version:
            return snapshot
        with self._lock:
            snapshot = self._snapshot
            if snapshot is not None and snapshot.version == version:
                return snapshot
            snapshot = load_snapshot()  # the database's version, then the rows
            if snapshot.version != version:
                try:  # Redis lagged (or ran ahead of a restored database): the database is the truth
                    _redis().set(VERSION_KEY, snapshot.version, ex=VERSION_TTL)
                except (RedisError, OSError):
                    pass
            self._snapshot = snapshot
            return snapshot

    def clear(self) -> None:
        self._snapshot = None


cache = SnapshotCache()

# ---------------------------------------------------------------------------- deciding one pod


def _candidate_bindings(pod: Mapping[str, Any], namespace: str | None, snapshot) -> list:
    """The bindings that may select ``pod``: its namespace's and cluster-wide ones whose
    (precompiled) selector matches its labels, plus any whose selector cannot be read (so
    ``resolve`` still warns about them). ``resolve`` applies the very same tests again to
    these few, so the outcome is the same as passing every binding, without parsing every
    binding's selector for every pod."""
    if namespace is None:
        metadata = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else {}
        namespace = str(metadata.get("namespace") or "")
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    labels = labels if isinstance(labels, Mapping) else {}
    return [binding for binding, selector in snapshot.selectors
            if (binding.namespace is None or binding.namespace == namespace)
            and (selector is None or selector.matches(labels))]


def decide_pod(pod: Any, *, namespace: str | None, snapshot, full: bool = True) -> dict[str, Any]:
    """What the webhook does to ``pod``: ``allowed``, the ``explanation`` (one line per applied
    template), the merged ``affinity`` (with ``full``), the JSON ``patch``, ``warnings``, and the
    ``denial`` body (``{"code", "detail", "errors"}``) when refused. Pure given ``snapshot``."""
    result: dict[str, Any] = {"allowed": True, "explanation": [], "affinity": None, "patch": [], "warnings": [],
                              "denial": None, "policy": None}
    if not isinstance(pod, Mapping):
        result.update(allowed=False, denial={"code": "invalid_pod", "detail": "the pod must be an object",
                                             "errors": {"object": ["the pod must be an object"]}})
        return result
    problems: list[schedconfig.Problem] = []
    policy = policy_name_of(pod)
    result["policy"] = policy
    if policy is not None and policy not in snapshot.policies:
        key = next(k for k in POLICY_ANNOTATIONS if (pod.get("metadata") or {}).get("annotations", {}).get(k))
        problems.append(schedconfig.Problem("unknown_policy", f"metadata.annotations[{key}]",
                                            f"SchedulingPolicy {json.dumps(policy)} does not exist"))
    try:
        resolution = schedconfig.resolve(pod, snapshot.templates, _candidate_bindings(pod, namespace, snapshot),
                                         namespace=namespace)
        operations = schedconfig.mutation_patch(pod, resolution)
        merged = schedconfig.merged_pod(pod, resolution) if full and resolution.affinity else {}
    except schedconfig.SchedulingConfigError as exc:
        problems.extend(exc.problems)
        resolution = operations = merged = None
    if problems:
        error = schedconfig.ResolutionError(problems)
        result.update(allowed=False, denial=error.body())
        return result
    result.update(explanation=resolution.explain(), patch=operations, warnings=list(resolution.warnings),
                  affinity=(merged.get("spec") or {}).get("affinity") if resolution.affinity else None)
    return result


