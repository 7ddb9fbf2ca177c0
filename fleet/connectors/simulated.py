"""The simulated connector: a ``SimulatedCluster`` behind the Connector interface.

Objects applied through it live in an ``ObjectStore`` (the database in the product, a dict
in tests): workloads join the simulation, custom resources are kept as they are, and a
merge patch on a Node is remembered as a ``NodePatch`` and laid over the generated node.

The simulator keeps no state between ticks, so the connector is where a Deployment's history
is written down: when an apply (or a patch) changes its pod template, the stored object gets
the rollout annotations (``simulator.ROLLOUT_FROM`` …) from which every later tick computes
how far the rollout has come (see ``SimulatedConnector._record_rollout``).

Pods: a bare v1 Pod applied through the connector (an instance created by some controller,
bound to a node with ``spec.nodeName``) is kept in the store and runs on that node; it can be
patched and deleted like any stored object. The pods the simulator generates for workloads
cannot be created or deleted, but a merge patch of their ``metadata`` (annotations, labels:
what a controller such as the CPU co-location one writes) is remembered as a ``PodPatch`` and
laid over the generated pod, as Node patches are.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, Protocol

from kube.hashing import fnv32a, object_digest
from kube.jsonpatch import JsonPatchError, apply_patch, merge_patch
from kube.labels import SelectorError, parse_selector

from ..simulator import (
    REVISION,
    ROLLOUT_ANNOTATIONS,
    ROLLOUT_FROM,
    ROLLOUT_FROM_TEMPLATE,
    ROLLOUT_NEW_FLOOR,
    ROLLOUT_OLD_CAP,
    ROLLOUT_READY_BASE,
    ROLLOUT_START,
    WORKLOAD_API,
    REBASE_ANNOTATIONS,
    ClusterSpec,
    SimulatedCluster,
    deployment_strategy,
    iso,
    rebase_of,
    rollout_of,
    rollout_step,
    template_hash,
)
from .base import Connector, ConnectorError, ObjectList, ServerInfo, WatchEvent

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
NODE_PATCH = ("sim.meridian.io/v1", "NodePatch")
POD_PATCH = ("sim.meridian.io/v1", "PodPatch")
POD = ("v1", "Pod")
#: API groups whose kinds keep ``status`` behind the status subresource (Katalyst's CRDs declare it).
STATUS_SUBRESOURCE_GROUPS = ("config.katalyst.kubewharf.io/",)
GENERATED = {("v1", "Node"), ("v1", "Pod"), ("apps/v1", "ReplicaSet"), ("metrics.k8s.io/v1beta1", "NodeMetrics")}


class ObjectStore(Protocol):
    """Where applied objects persist; keys are (apiVersion, kind, namespace, name)."""

    def get(self, key: Key) -> dict[str, Any] | None: ...
    def put(self, key: Key, obj: dict[str, Any]) -> None: ...
    def delete(self, key: Key) -> bool: ...
    def all(self) -> list[dict[str, Any]]: ...


class MemoryObjectStore:
    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}

    def get(self, key: Key) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get(key))

    def put(self, key: Key, obj: dict[str, Any]) -> None:
        self.objects[key] = copy.deepcopy(obj)

    def delete(self, key: Key) -> bool:
        return self.objects.pop(key, None) is not None

    def all(self) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for o in self.objects.values()]


class SimulatedConnector(Connector):
    kind = "simulated"

    def __init__(self, spec: ClusterSpec, store: ObjectStore | None = None, clock: Callable[[], float] = time.time, *,
                 registered: bool = False) -> None:
        """``registered``: a cluster of the inventory, whose scheduling policy places its pods."""
        self.spec = spec
        self.registered = registered
        self.store = store if store is not None else MemoryObjectStore()
        self.clock = clock
        self._cache: tuple[str, SimulatedCluster] | None = None
        self._moment: int | None = None
        self._overlay: tuple[list[dict[str, Any]], str] | None = None  # ``_read_overlay``'s, in a moment

    # -- reading ------------------------------------------------------------------------------

    def _cluster(self) -> SimulatedCluster:
        """One simulation per overlay content; it memoises its state per tick."""
        overlay, digest = self._overlay or self._read_overlay()
        if self._cache is None or self._cache[0] != digest:
            self._cache = (digest, SimulatedCluster(self.spec, overlay=overlay, registered=self.registered))
        self._cache[1].between = self.between
        return self._cache[1]

    def server_info(self) -> ServerInfo:
        version, resources = self._cluster().server_info()
        return ServerInfo(version, resources)

    @contextlib.contextmanager
    def one_moment(self) -> Iterator[None]:
        """Every read in the block sees the tick it began at. A large cluster takes longer to
        build than a tick lasts (6,000 nodes: ~14 s on two cores), and each list of a sync
        rebuilt it for a newer tick: a build per list, and a sync that outran its minute.

        The outermost block lets go of the built state when it ends: what was read is the
        reader's now. Kept, a large cluster's objects outlived the read by the whole write, and
        the collector, back on when the sync ended (``collector_paused``), walked them all
        before the connector was dropped (0.4 s of a 20,000-node sync, 4% of 400-node ones)."""
        outer, self._moment = self._moment, self._tick()
        try:
            yield
        finally:
            self._moment = outer
            if outer is None:
                self._cache = self._overlay = None

    def _read_overlay(self) -> tuple[list[dict[str, Any]], str]:
        """The store's objects the simulation starts from, and their digest; in a moment, kept
        until it ends or this connector writes (a sync's lists each queried the store)."""
        overlay = self.store.all()
        read = (overlay, object_digest(overlay))
        if self._moment is not None:
            self._overlay = read
        return read

    def _put(self, key: Key, obj: dict[str, Any]) -> None:
        self.store.put(key, obj)
        self._overlay = None

    def _delete(self, key: Key) -> bool:
        deleted = self.store.delete(key)
        self._overlay = None
        return deleted

    def _tick(self) -> int:
        return self._moment if self._moment is not None else self.spec.tick(self.clock())

    def _objects(self, api_version: str, kind: str, tick: int) -> list[dict[str, Any]]:
        cluster = self._cluster()
        if (api_version, kind) == ("v1", "Node"):
            return cluster.nodes(tick)
        if (api_version, kind) == ("v1", "Pod"):
            return cluster.pods(tick)
        if (api_version, kind) == ("apps/v1", "ReplicaSet"):
            return cluster.replica_sets(tick)
        if (api_version, kind) == ("metrics.k8s.io/v1beta1", "NodeMetrics"):
            return cluster.node_metrics(tick)
        if WORKLOAD_API.get(kind) == api_version:
            return [w for w in cluster.workloads(tick) if w["kind"] == kind]
        return [o for o in self.store.all() if o.get("apiVersion") == api_version and o.get("kind") == kind]

    def list(self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str = "") -> ObjectList:
        try:
            selector = parse_selector(label_selector)
        except SelectorError as exc:
            raise ConnectorError(f"invalid label selector: {exc}", reason="invalid", status=400) from exc
        tick = self._tick()
        items = [
            o for o in self._objects(api_version, kind, tick)
            if (namespace is None or o.get("metadata", {}).get("namespace") == namespace)
            and selector.matches(o.get("metadata", {}).get("labels") or {})
        ]
        return ObjectList(items=items, resource_version=f"{tick}.{fnv32a((self._cache[0] if self._cache else '').encode())}")

    def get(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        for obj in self._objects(api_version, kind, self._tick()):
            meta = obj.get("metadata", {})
            if meta.get("name") == name and (namespace is None or meta.get("namespace") == namespace):
                return obj
        return None

    def watch(self, api_version: str, kind: str, *, resource_version: str = "", timeout_seconds: int = 30,
              sleep: Callable[[float], None] = time.sleep) -> Iterator[WatchEvent]:
        """Poll once per tick and report what changed; ends after ``timeout_seconds``."""
        seen = {self._identity(o): o for o in self.list(api_version, kind).items}
        deadline = self.clock() + timeout_seconds
        while self.clock() < deadline:
            sleep(min(self.spec.tick_seconds, max(0.0, deadline - self.clock())))
            current = {self._identity(o): o for o in self.list(api_version, kind).items}
            for key, obj in current.items():
                if key not in seen:
                    yield WatchEvent("ADDED", obj)
                elif seen[key] != obj:
                    yield WatchEvent("MODIFIED", obj)
            for key, obj in seen.items():
                if key not in current:
                    yield WatchEvent("DELETED", obj)
            seen = current

    @staticmethod
    def _identity(obj: Mapping[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata", {})
        return meta.get("namespace", ""), meta.get("name", "")

    # -- writing ------------------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], *, field_manager: str = "meridian") -> dict[str, Any]:
        api_version, kind, namespace, name = _identity_of(obj)
        if (api_version, kind) in GENERATED and (api_version, kind) != POD:
            if kind == "Node":
                return self.patch("v1", "Node", name, {k: v for k, v in obj.items() if k in ("metadata", "spec")})
            raise ConnectorError(f"{kind} objects are generated by the simulator and cannot be applied", reason="invalid", status=422)
        key = (api_version, kind, namespace, name)
        current = self.store.get(key)
        if (api_version, kind) == POD and current is None and self.get("v1", "Pod", name, namespace=namespace) is not None:
            raise ConnectorError(f"Pod {namespace}/{name} is generated by the simulator and cannot be applied", reason="invalid",
                                 status=422)
        body = copy.deepcopy(dict(obj))
        if (api_version, kind) == POD:
            body.pop("status", None)  # the simulator computes a stored pod's status
        elif api_version.startswith(STATUS_SUBRESOURCE_GROUPS):  # as an API server does: status only through /status
            body.pop("status", None)
            if current is not None and "status" in current:
                body["status"] = current["status"]
        meta = body.setdefault("metadata", {})
        wanted_version = meta.get("resourceVersion")
        if current is not None and wanted_version and wanted_version != current["metadata"]["resourceVersion"]:
            raise ConnectorError(f"{kind} {name}: the object has been modified; resourceVersion {wanted_version} is stale",
                                 reason="conflict", status=409)
        self._stamp(body, current, field_manager)
        self._put(key, body)
        return body

    def apply_status(self, obj: Mapping[str, Any], *, field_manager: str = "meridian") -> dict[str, Any]:
        api_version, kind, namespace, name = _identity_of(obj)
        if not api_version.startswith(STATUS_SUBRESOURCE_GROUPS):
            return self.apply(obj, field_manager=field_manager)
        key = (api_version, kind, namespace, name)
        current = self.store.get(key)
        if current is None:
            raise ConnectorError(f"{kind} {name} not found", reason="not_found", status=404)
        body = copy.deepcopy(current)
        body["status"] = copy.deepcopy(obj.get("status") or {})
        body["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
        self._put(key, body)
        return body

    def _stamp(self, body: dict[str, Any], current: dict[str, Any] | None, field_manager: str) -> None:
        meta = body["metadata"]
        if current is None:
            meta["uid"] = f"{fnv32a(repr(_identity_of(body)).encode()):08x}-sim"
            meta["creationTimestamp"] = iso(self.clock())
            meta["generation"] = 1
            meta["resourceVersion"] = "1"
        else:
            previous = current["metadata"]
            meta["uid"], meta["creationTimestamp"] = previous["uid"], previous["creationTimestamp"]
            changed = body.get("spec") != current.get("spec")
            meta["generation"] = previous.get("generation", 1) + (1 if changed else 0)
            meta["resourceVersion"] = str(int(previous["resourceVersion"]) + 1)
        meta["managedFields"] = [{"manager": field_manager, "operation": "Apply", "time": iso(self.clock())}]
        if (body.get("apiVersion"), body.get("kind")) == ("apps/v1", "Deployment"):
            self._record_rollout(body, current)

    def _record_rollout(self, body: dict[str, Any], current: dict[str, Any] | None) -> None:
        """Write a Deployment's rollout history into its annotations (the connector owns these
        keys; values a caller sends for them are dropped).

        - created: ``deployment.kubernetes.io/revision`` 1 and no rollout: every pod runs the
          template from the start;
        - pod template changed (``template_hash`` differs from the stored one): revision + 1,
          ``sim.meridian.io/rollout-from`` the stored template's hash,
          ``sim.meridian.io/rollout-from-template`` that template (compact sorted JSON, for the
          old pods' spec) and ``sim.meridian.io/rollout-start-tick`` the current tick. A change
          while a rollout is still going starts the new one from scratch: every pod counts as
          running the template just replaced;
        - anything else (a scale, a strategy or metadata change): the recorded rollout stays, so
          it keeps progressing with the current replicas and strategy.
        """
        meta = body["metadata"]
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in ROLLOUT_ANNOTATIONS}
        template = (body.get("spec") or {}).get("template")
        revision = 1
        if current is not None:
            previous = current["metadata"].get("annotations") or {}
            try:
                revision = int(previous.get(REVISION, 1))
            except (TypeError, ValueError):
                revision = 1
            before = (current.get("spec") or {}).get("template")
            if template_hash(before) != template_hash(template):
                revision += 1
                annotations[ROLLOUT_FROM] = template_hash(before)
                annotations[ROLLOUT_FROM_TEMPLATE] = json.dumps(before, sort_keys=True, separators=(",", ":"))
                annotations[ROLLOUT_START] = str(self.spec.tick(self.clock()))
            else:
                annotations.update(self._carried_rollout(current, body, previous))
        annotations[REVISION] = str(revision)
        meta["annotations"] = annotations

    def _carried_rollout(self, current: Mapping[str, Any], body: Mapping[str, Any],
                         previous: Mapping[str, Any]) -> dict[str, str]:
        """The rollout annotations after an apply that kept the template.

        A finished rollout is closed (a later strategy change must not reopen it). One still
        going whose size or strategy changed is re-based at this tick with the new pods that
        are available now, so its progress never goes backwards, as a real controller's would
        not; otherwise it is carried over unchanged.
        """
        rollout = rollout_of(previous, template_hash((current.get("spec") or {}).get("template")))
        if rollout is None:
            return {}
        tick = self.spec.tick(self.clock())
        old_spec, new_spec = current.get("spec") or {}, body.get("spec") or {}
        old_replicas = int(old_spec.get("replicas", 1))
        recreate, surge, unavailable = deployment_strategy(old_spec, old_replicas)
        step = rollout_step(old_replicas, surge, unavailable, tick - rollout[1], recreate=recreate, **rebase_of(previous))
        if step.done:
            return {}
        kept = {k: previous[k] for k in (ROLLOUT_FROM, ROLLOUT_FROM_TEMPLATE, ROLLOUT_START, *REBASE_ANNOTATIONS) if k in previous}
        if (new_spec.get("replicas", 1), new_spec.get("strategy")) != (old_spec.get("replicas", 1), old_spec.get("strategy")):
            kept.update({ROLLOUT_START: str(tick), ROLLOUT_READY_BASE: str(step.ready), ROLLOUT_OLD_CAP: str(step.old),
                         ROLLOUT_NEW_FLOOR: str(step.new)})
        return kept

    def patch(self, api_version: str, kind: str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: Literal["merge", "json", "strategic"] = "merge") -> dict[str, Any]:
        """Merge (RFC 7386) and JSON (RFC 6902) patches; strategic is applied as a merge patch."""
        current = self.get(api_version, kind, name, namespace=namespace)
        if current is None:
            raise ConnectorError(f"{kind} {name} not found", reason="not_found", status=404)
        if patch_type == "json":
            try:
                patched = apply_patch(current, patch)
            except JsonPatchError as exc:
                raise ConnectorError(f"JSON patch failed: {exc}", reason="invalid", status=422) from exc
        else:
            patched = merge_patch(current, patch)
        if (api_version, kind) == ("v1", "Node"):
            key = (*NODE_PATCH, "", name)
            previous = (self.store.get(key) or {}).get("patch", {})
            delta = patch if patch_type != "json" else {"metadata": patched.get("metadata"), "spec": patched.get("spec")}
            self._put(key, {"apiVersion": NODE_PATCH[0], "kind": NODE_PATCH[1], "metadata": {"name": name},
                            "patch": merge_patch(previous, delta) if patch_type != "json" else delta})
            return self.get("v1", "Node", name) or patched
        if (api_version, kind) == POD and self.store.get((*POD, namespace or "", name)) is None:
            return self._patch_generated_pod(current, patched, namespace or "", name)
        if (api_version, kind) in GENERATED and (api_version, kind) != POD:
            raise ConnectorError(f"{kind} objects are generated by the simulator and cannot be patched", reason="invalid", status=422)
        patched.setdefault("metadata", {}).pop("resourceVersion", None)
        current_version = current["metadata"].get("resourceVersion")
        return self.apply(dict(patched, metadata=dict(patched["metadata"], resourceVersion=current_version)))

    def _patch_generated_pod(self, current: dict[str, Any], patched: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
        """Only metadata of a generated pod can change: remember the change as a PodPatch."""
        if {k: v for k, v in patched.items() if k != "metadata"} != {k: v for k, v in current.items() if k != "metadata"}:
            raise ConnectorError(f"Pod {namespace}/{name} is generated by the simulator: only its metadata can be patched",
                                 reason="invalid", status=422)
        wanted = patched.get("metadata") or {}
        delta = {field: wanted.get(field) or {} for field in ("annotations", "labels")
                 if (wanted.get(field) or {}) != (current["metadata"].get(field) or {})}
        if not delta:
            return current
        key = (*POD_PATCH, namespace, name)
        stored = (self.store.get(key) or {}).get("patch", {})
        merged = dict(stored, **delta)  # each field is the whole wanted map: removals are kept
        self._put(key, {"apiVersion": POD_PATCH[0], "kind": POD_PATCH[1],
                        "metadata": {"name": name, "namespace": namespace}, "patch": merged})
        return self.get("v1", "Pod", name, namespace=namespace) or patched

    def delete(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> bool:
        if (api_version, kind) == POD and self.store.get((*POD, namespace or "", name)) is not None:
            self._delete((*POD_PATCH, namespace or "", name))
            return self._delete((*POD, namespace or "", name))
        if (api_version, kind) in GENERATED:
            raise ConnectorError(f"{kind} objects are generated by the simulator and cannot be deleted", reason="invalid", status=422)
        return self._delete((api_version, kind, namespace or "", name))


def _identity_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not all(isinstance(obj.get(f), str) and obj.get(f) for f in ("apiVersion", "kind")) \
            or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise ConnectorError("an object needs apiVersion, kind and metadata.name", reason="invalid", status=422)
    return obj["apiVersion"], obj["kind"], str(meta.get("namespace") or ""), meta["name"]
