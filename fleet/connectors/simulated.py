"""The simulated connector: a ``SimulatedCluster`` behind the Connector interface.

Objects applied through it live in an ``ObjectStore`` (the database in the product, a dict
in tests): workloads join the simulation, custom resources are kept as they are, and a
merge patch on a Node is remembered as a ``NodePatch`` and laid over the generated node.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, Protocol

from kube.hashing import fnv32a, object_digest
from kube.labels import SelectorError, parse_selector

from ..simulator import WORKLOAD_API, ClusterSpec, SimulatedCluster, iso, merge_patch
from .base import Connector, ConnectorError, ObjectList, ServerInfo, WatchEvent

Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
NODE_PATCH = ("sim.meridian.io/v1", "NodePatch")
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

    def __init__(self, spec: ClusterSpec, store: ObjectStore | None = None, clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self.store = store if store is not None else MemoryObjectStore()
        self.clock = clock
        self._cache: tuple[str, SimulatedCluster] | None = None

    # -- reading ------------------------------------------------------------------------------

    def _cluster(self) -> SimulatedCluster:
        """One simulation per overlay content; it memoises its state per tick."""
        overlay = self.store.all()
        digest = object_digest(overlay)
        if self._cache is None or self._cache[0] != digest:
            self._cache = (digest, SimulatedCluster(self.spec, overlay=overlay))
        return self._cache[1]

    def server_info(self) -> ServerInfo:
        version, resources = self._cluster().server_info()
        return ServerInfo(version, resources)

    def _objects(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        tick = self.spec.tick(self.clock())
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
        items = [
            o for o in self._objects(api_version, kind)
            if (namespace is None or o.get("metadata", {}).get("namespace") == namespace)
            and selector.matches(o.get("metadata", {}).get("labels") or {})
        ]
        tick = self.spec.tick(self.clock())
        return ObjectList(items=items, resource_version=f"{tick}.{fnv32a((self._cache[0] if self._cache else '').encode())}")

    def get(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        for obj in self._objects(api_version, kind):
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
        if (api_version, kind) in GENERATED:
            if kind == "Node":
                return self.patch("v1", "Node", name, {k: v for k, v in obj.items() if k in ("metadata", "spec")})
            raise ConnectorError(f"{kind} objects are generated by the simulator and cannot be applied", reason="invalid", status=422)
        key = (api_version, kind, namespace, name)
        current = self.store.get(key)
        body = copy.deepcopy(dict(obj))
        meta = body.setdefault("metadata", {})
        wanted_version = meta.get("resourceVersion")
        if current is not None and wanted_version and wanted_version != current["metadata"]["resourceVersion"]:
            raise ConnectorError(f"{kind} {name}: the object has been modified; resourceVersion {wanted_version} is stale",
                                 reason="conflict", status=409)
        self._stamp(body, current, field_manager)
        self.store.put(key, body)
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

    def patch(self, api_version: str, kind: str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: Literal["merge", "json", "strategic"] = "merge") -> dict[str, Any]:
        """Merge (RFC 7386) and JSON (RFC 6902) patches; strategic is applied as a merge patch."""
        current = self.get(api_version, kind, name, namespace=namespace)
        if current is None:
            raise ConnectorError(f"{kind} {name} not found", reason="not_found", status=404)
        patched = apply_json_patch(current, patch) if patch_type == "json" else merge_patch(current, patch)
        if (api_version, kind) == ("v1", "Node"):
            key = (*NODE_PATCH, "", name)
            previous = (self.store.get(key) or {}).get("patch", {})
            delta = patch if patch_type != "json" else {"metadata": patched.get("metadata"), "spec": patched.get("spec")}
            self.store.put(key, {"apiVersion": NODE_PATCH[0], "kind": NODE_PATCH[1], "metadata": {"name": name},
                                 "patch": merge_patch(previous, delta) if patch_type != "json" else delta})
            return self.get("v1", "Node", name) or patched
        if (api_version, kind) in GENERATED:
            raise ConnectorError(f"{kind} objects are generated by the simulator and cannot be patched", reason="invalid", status=422)
        patched.setdefault("metadata", {}).pop("resourceVersion", None)
        current_version = current["metadata"].get("resourceVersion")
        return self.apply(dict(patched, metadata=dict(patched["metadata"], resourceVersion=current_version)))

    def delete(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> bool:
        if (api_version, kind) in GENERATED:
            raise ConnectorError(f"{kind} objects are generated by the simulator and cannot be deleted", reason="invalid", status=422)
        return self.store.delete((api_version, kind, namespace or "", name))


def _identity_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not all(isinstance(obj.get(f), str) and obj.get(f) for f in ("apiVersion", "kind")) \
            or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise ConnectorError("an object needs apiVersion, kind and metadata.name", reason="invalid", status=422)
    return obj["apiVersion"], obj["kind"], str(meta.get("namespace") or ""), meta["name"]


def apply_json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902 add / remove / replace / test, enough for what Meridian sends."""
    if not isinstance(operations, list):
        raise ConnectorError("a JSON patch is a list of operations", reason="invalid", status=422)
    result = copy.deepcopy(document)
    for op in operations:
        try:
            result = _apply_op(result, op)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ConnectorError(f"JSON patch operation {op!r} failed: {exc}", reason="invalid", status=422) from exc
    return result


def _apply_op(doc: Any, op: Mapping[str, Any]) -> Any:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    if not parts:
        return copy.deepcopy(op.get("value"))
    parent = doc
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last, action = parts[-1], op["op"]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if action == "add":
            parent.insert(index, op["value"])
        elif action == "remove":
            parent.pop(index)
        elif action == "replace":
            parent[index] = op["value"]
        elif action == "test" and parent[index] != op["value"]:
            raise ValueError("test failed")
        return doc
    if action in ("add", "replace"):
        if action == "replace" and last not in parent:
            raise KeyError(last)
        parent[last] = op["value"]
    elif action == "remove":
        del parent[last]
    elif action == "test" and parent.get(last) != op["value"]:
        raise ValueError("test failed")
    return doc
