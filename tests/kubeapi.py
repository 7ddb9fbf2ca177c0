"""A Kubernetes API server emulator for end-to-end tests over HTTP.

The official client (and so ``fleet.connectors.kubernetes``) talks to it as to a real API
server; it behaves like one where Meridian's flows depend on it:

- **discovery**: ``/version``, ``/api``, ``/apis`` and each group version's resource list,
  subresources (``<plural>/status``) included;
- **status subresource**: for a resource that declares it (every Katalyst CRD does, as do the
  built-in kinds), writes to the main resource keep the stored ``status`` and writes to
  ``/status`` change only ``status`` — an agent reading a CNC written the wrong way reads an
  empty list, as it would on a real cluster;
- **resourceVersion**: one counter for every change; an update or patch naming a stale
  ``metadata.resourceVersion`` answers 409 Conflict;
- **lists**: label selectors (the project's upstream-exact parser), ``limit``/``continue``
  pages carrying the first page's resourceVersion (their items are read live, not from a
  snapshot), 410 Gone for a continue token older than the retained history;
- **watches**: events after ``resourceVersion``, ``BOOKMARK`` events when asked for, an
  ``ERROR`` event with a 410 Status for a version older than the retained history (as etcd
  compaction makes it), ``timeoutSeconds``;
- **server-side apply**: ``application/apply-patch+yaml`` with a ``fieldManager``; each
  manager owns the leaf fields it applied (lists are atomic), a field owned by another manager
  with a different value is a 409 conflict unless ``force=true``, and a field the manager no
  longer applies is removed;
- **binding**: ``POST …/pods/<name>/binding`` as the registry's ``BindingREST`` answers it:
  201 with a Success Status, the pod's ``spec.nodeName`` set, the Binding's annotations copied
  and the ``PodScheduled`` condition made True; 409 Conflict when the pod is already assigned
  ("pod <name> is already assigned to node \"<node>\""), is being deleted, has scheduling
  gates or its UID is not the Binding's; 404 for a missing pod; 400 when the names differ;
- **Events** (``events.k8s.io/v1`` as kube-scheduler's EventRecorder writes them, and
  ``v1``): created, patched (a series' count), listed;
- **metrics.k8s.io**: ``NodeMetrics`` read only (get and list; set by the test with
  ``node_metrics``), as metrics-server serves them: a watch or a write is 405;
- **verbs**: a verb a resource does not serve (a watch of metrics, a PUT of a binding) is 405
  MethodNotAllowed, and a subresource it does not have is 404;
- **faults on demand**: ``fail(status, times, match)`` (429 with ``Retry-After``, 5xx),
  ``slow(seconds, match)``;
- every request is recorded (``requests``), so tests can count the load Meridian puts on it.

State is guarded by one lock: tests may read and seed it from their own thread.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import yaml

from kube.jsonpatch import JsonPatchError, apply_patch, merge_patch
from kube.labels import parse_selector
from tests.servers import serve as serve_asgi


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    #: Subresources besides status, each with its verbs (``pods/binding``: create).
    extra_subresources: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        return f"{self.group_version}/{self.plural}"


KATALYST = "config.katalyst.kubewharf.io"
RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "nodes", "Node", False),
    ResourceType("", "v1", "pods", "Pod", True, extra_subresources=(("binding", "Binding", ("create",)),)),
    ResourceType("", "v1", "namespaces", "Namespace", False),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, status_subresource=False),
    ResourceType("", "v1", "events", "Event", True, status_subresource=False),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, status_subresource=False),
    ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False, status_subresource=False, verbs=("get", "list")),
    ResourceType("apps", "v1", "deployments", "Deployment", True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceType("batch", "v1", "jobs", "Job", True),
    ResourceType("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False,
                 status_subresource=False),
    ResourceType("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False,
                 status_subresource=False),
    ResourceType(KATALYST, "v1alpha1", "customnodeconfigs", "CustomNodeConfig", False),
    ResourceType(KATALYST, "v1alpha1", "katalystcustomconfigs", "KatalystCustomConfig", True),
    ResourceType(KATALYST, "v1alpha1", "adminqosconfigurations", "AdminQoSConfiguration", True),
    ResourceType(KATALYST, "v1alpha1", "authconfigurations", "AuthConfiguration", True),
)


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.headers = code, reason, message, headers or {}

    def status(self) -> dict[str, Any]:
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message,
                "reason": self.reason, "code": self.code}


@dataclass
class _Fault:
    match: str
    status: int = 0
    times: int | None = None
    retry_after: int = 1
    delay: float = 0.0


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]


@dataclass
class _Stored:
    obj: dict[str, Any]
    managers: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)  # field manager -> leaf paths it applied


class ApiServer:
    """The emulator's state and its ASGI app (``serve`` runs it on a free port)."""

    def __init__(self, *, token: str | None = None, history: int = 10_000, bookmark_seconds: float = 1.0,
                 version: str = "v1.30.2", poll_seconds: float = 0.02) -> None:
        self.types = {t.key: t for t in RESOURCES}
        self.token = token
        self.version = version
        self.bookmark_seconds = bookmark_seconds
        self.poll_seconds = poll_seconds  # how often a watch looks for new events
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str], _Stored] = {}
        self.revision = 1
        self.compacted_at = 0
        self.events: deque[tuple[int, str, str, dict[str, Any]]] = deque(maxlen=history)
        #: The same events per resource (a watch reads only its own, from the newest back).
        self.resource_events: dict[str, deque[tuple[int, str, dict[str, Any]]]] = {}
        self.history = history
        self.requests: list[Request] = []
        self.faults: list[_Fault] = []
        self.bound: dict[tuple[str, str], list[str]] = {}  # accepted bindings, per pod

    # -- test controls -----------------------------------------------------------------------

    def fail(self, status: int, *, times: int | None = None, match: str = "", retry_after: int = 1) -> None:
        """Answer ``status`` to the next ``times`` requests whose path contains ``match`` (all, without ``times``)."""
        with self.lock:
            self.faults.append(_Fault(match, status=status, times=times, retry_after=retry_after))

    def slow(self, seconds: float, *, match: str = "") -> None:
        with self.lock:
            self.faults.append(_Fault(match, delay=seconds))

    def heal(self) -> None:
        with self.lock:
            self.faults.clear()

    def compact(self) -> None:
        """Forget the history, as etcd compaction does: older versions answer 410 Gone."""
        with self.lock:
            self.events.clear()
            self.resource_events.clear()
            self.compacted_at = self.revision

    def object(self, resource: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        with self.lock:
            stored = self.objects.get((resource, namespace, name))
            return copy.deepcopy(stored.obj) if stored else None

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object as a controller on the cluster would (status included)."""
        rtype = self.types[resource]
        meta = obj.setdefault("metadata", {})
        with self.lock:
            key = (resource, meta.get("namespace", "") if rtype.namespaced else "", meta["name"])
            current = self.objects.get(key)
            body = self._stamp(rtype, copy.deepcopy(obj), current.obj if current else None)
            self._store(key, body, "MODIFIED" if current else "ADDED", current)
            return copy.deepcopy(body)

    def delete_object(self, resource: str, name: str, namespace: str = "") -> None:
        with self.lock:
            stored = self.objects.pop((resource, namespace, name))
            self._deleted(resource, stored.obj)

    def node_metrics(self, name: str, usage: dict[str, str], *, timestamp: str | None = None, window: str = "20s") -> None:
        """What metrics-server reports for node ``name`` (no watch events: the API has none)."""
        rtype = self.types["metrics.k8s.io/v1beta1/nodes"]
        with self.lock:
            node = self.objects.get(("v1/nodes", "", name))
            labels = dict((node.obj["metadata"].get("labels") or {}) if node else {})
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.objects[(rtype.key, "", name)] = _Stored({
                "kind": rtype.kind, "apiVersion": rtype.group_version,
                "metadata": {"name": name, "creationTimestamp": now, "labels": labels},
                "timestamp": timestamp or now, "window": window, "usage": dict(usage)})

    def bindings(self) -> dict[tuple[str, str], list[str]]:
        """(namespace, pod) -> the node of every binding the server accepted, in order."""
        with self.lock:
            return {key: list(nodes) for key, nodes in self.bound.items()}

    def count(self, method: str = "", path: str = "", **query: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if (not method or r.method == method) and path in r.path
                       and all(r.query.get(k) == v for k, v in query.items()))

    # -- ASGI ----------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode(), keep_blank_values=True).items()}
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        body = await read_body(receive)
        with self.lock:
            self.requests.append(Request(method, path, query))
            faults = [f for f in self.faults if f.match in path]
        try:
            for fault in faults:
                if fault.delay:
                    await asyncio.sleep(fault.delay)
                if fault.status and self._spend(fault):
                    raise ApiError(fault.status, "TooManyRequests" if fault.status == 429 else "InternalError",
                                   "the server is busy" if fault.status == 429 else "injected failure",
                                   {"retry-after": str(fault.retry_after)} if fault.status == 429 else None)
            if self.token and headers.get("authorization") != f"Bearer {self.token}":
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if method == "GET" and query.get("watch") in ("true", "1"):
                await self._watch(path, query, send)
                return
            status, answer = self._route(method, path, query, headers.get("content-type", ""), body)
        except ApiError as exc:
            await _respond(send, exc.code, exc.status(), exc.headers)
            return
        await _respond(send, status, answer)

    def _spend(self, fault: _Fault) -> bool:
        with self.lock:
            if fault.times is None:
                return True
            if fault.times <= 0:
                return False
            fault.times -= 1
            return True

    # -- routing -------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, str], content_type: str, body: bytes) -> tuple[int, Any]:
        if path == "/version":
            major, minor = self.version.lstrip("v").split(".")[:2]
            return 200, {"major": major, "minor": minor, "gitVersion": self.version, "platform": "linux/amd64"}
        if path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if path == "/apis":
            return 200, self._group_list()
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            return 200, self._resource_list("", parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return 200, self._resource_list(parts[1], parts[2])
        if parts[0] == "apis" and len(parts) == 2:
            group = next((g for g in self._group_list()["groups"] if g["name"] == parts[1]), None)
            if group is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return 200, {"kind": "APIGroup", "apiVersion": "v1", **group}
        rtype, namespace, name, sub = self._address(parts)
        _allow(rtype, sub, _VERBS.get((method, bool(name)), ""))
        if sub == "binding":
            return 201, self._bind(namespace, name, _decode(body, "application/json"), query)
        if method == "GET":
            return (200, self._get(rtype, namespace, name)) if name else (200, self._list(rtype, namespace, query))
        if method == "POST" and not name:
            return 201, self._create(rtype, namespace, _decode(body, "application/json"), query)
        if method == "PUT" and name:
            return 200, self._update(rtype, namespace, name, sub, _decode(body, "application/json"))
        if method == "PATCH" and name:
            return self._patch(rtype, namespace, name, sub, content_type.split(";")[0].strip(), body, query)
        if method == "DELETE" and name:
            return 200, self._delete(rtype, namespace, name)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _group_list(self) -> dict[str, Any]:
        groups: dict[str, list[str]] = {}
        for rtype in self.types.values():
            if rtype.group:
                groups.setdefault(rtype.group, [])
                if rtype.version not in groups[rtype.group]:
                    groups[rtype.group].append(rtype.version)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": name, "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
             "preferredVersion": {"groupVersion": f"{name}/{versions[0]}", "version": versions[0]}}
            for name, versions in sorted(groups.items())]}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        resources = []
        for rtype in self.types.values():
            if rtype.group == group and rtype.version == version:
                resources.append({"name": rtype.plural, "singularName": rtype.kind.lower(), "namespaced": rtype.namespaced,
                                  "kind": rtype.kind, "verbs": list(rtype.verbs)})
                if rtype.status_subresource:
                    resources.append({"name": f"{rtype.plural}/status", "singularName": "", "namespaced": rtype.namespaced,
                                      "kind": rtype.kind, "verbs": ["get", "patch", "update"]})
                for sub, kind, verbs in rtype.extra_subresources:
                    resources.append({"name": f"{rtype.plural}/{sub}", "singularName": "", "namespaced": rtype.namespaced,
                                      "kind": kind, "verbs": list(verbs)})
        if not resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
                "resources": resources}

    def _address(self, parts: list[str]) -> tuple[ResourceType, str, str, str]:
        """``(type, namespace, name, subresource)`` of a resource path."""
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        group_version = parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"
        namespace = ""
        if len(rest) >= 2 and rest[0] == "namespaces" and f"{group_version}/{rest[2] if len(rest) > 2 else ''}" in self.types:
            namespace, rest = rest[1], rest[2:]
        if not rest or f"{group_version}/{rest[0]}" not in self.types:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        rtype = self.types[f"{group_version}/{rest[0]}"]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and not (sub == "status" and rtype.status_subresource) and sub not in {s for s, _, _ in rtype.extra_subresources}:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rtype, namespace, name, sub

    # -- verbs ---------------------------------------------------------------------------------

    def _key(self, rtype: ResourceType, namespace: str, name: str) -> tuple[str, str, str]:
        return (rtype.key, namespace if rtype.namespaced else "", name)

    def _get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            stored = self.objects.get(self._key(rtype, namespace, name))
            if stored is None:
                raise _not_found(rtype, name)
            return copy.deepcopy(stored.obj)

    def _list(self, rtype: ResourceType, namespace: str, query: dict[str, str]) -> dict[str, Any]:
        try:
            selector = parse_selector(query.get("labelSelector", ""))
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {exc}") from None
        limit = int(query.get("limit") or 0)
        with self.lock:
            revision, after = self.revision, None
            if query.get("continue"):
                revision, after = self._continue(query["continue"])
            items = sorted(
                ((key, stored.obj) for key, stored in self.objects.items()
                 if key[0] == rtype.key and (not namespace or key[1] == namespace) and (after is None or (key[1], key[2]) > after)
                 and selector.matches(stored.obj["metadata"].get("labels") or {})),
                key=lambda item: (item[0][1], item[0][2]))
            metadata: dict[str, Any] = {"resourceVersion": str(self.revision if not query.get("continue") else revision)}
            if limit and len(items) > limit:
                last = items[limit - 1][0]
                items = items[:limit]
                token = json.dumps({"rv": int(metadata["resourceVersion"]), "start": [last[1], last[2]]})
                metadata["continue"] = base64.urlsafe_b64encode(token.encode()).decode()
                metadata["remainingItemCount"] = 0
            return {"kind": f"{rtype.kind}List", "apiVersion": rtype.group_version, "metadata": metadata,
                    "items": [_as_item(copy.deepcopy(obj)) for _, obj in items]}

    def _continue(self, token: str) -> tuple[int, tuple[str, str]]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            revision, start = int(decoded["rv"]), (str(decoded["start"][0]), str(decoded["start"][1]))
        except (ValueError, KeyError, TypeError, IndexError):
            raise ApiError(400, "BadRequest", "continue key is not valid") from None
        if revision < self._oldest():
            raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent list result. "
                                           "You can start a new list without the continue parameter.")
        return revision, start

    def _oldest(self) -> int:
        """The oldest resourceVersion a watch or continue token may still start from."""
        floor = self.compacted_at
        if len(self.events) == self.events.maxlen:
            floor = max(floor, self.events[0][0] - 1)
        return floor

    def _create(self, rtype: ResourceType, namespace: str, body: Any, query: dict[str, str]) -> dict[str, Any]:
        body = _object(body)
        meta = body.setdefault("metadata", {})
        if rtype.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        if not meta.get("name"):
            raise ApiError(422, "Invalid", f"{rtype.kind} is invalid: metadata.name: Required value: name or generateName is required")
        if rtype.key == "events.k8s.io/v1/events":
            _validate_event(body)
        with self.lock:
            key = self._key(rtype, meta.get("namespace", ""), meta["name"])
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{_qualified(rtype)} "{meta["name"]}" already exists')
            if rtype.status_subresource:
                body.pop("status", None)  # status is written through its subresource
            body = self._stamp(rtype, body, None)
            stored = self._store(key, body, "ADDED", None)
            if query.get("fieldManager"):
                stored.managers[query["fieldManager"]] = _leaves(_managed_part(body, ""))
            return copy.deepcopy(body)

    def _update(self, rtype: ResourceType, namespace: str, name: str, sub: str, body: Any) -> dict[str, Any]:
        body = _object(body)
        with self.lock:
            key = self._key(rtype, namespace, name)
            current = self.objects.get(key)
            if current is None:
                raise _not_found(rtype, name)
            self._check_version(rtype, name, body, current.obj)
            merged = _scoped(rtype, sub, current.obj, body)
            return copy.deepcopy(self._store(key, self._stamp(rtype, merged, current.obj), "MODIFIED", current).obj)

    def _patch(self, rtype: ResourceType, namespace: str, name: str, sub: str, content_type: str, body: bytes,
               query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            key = self._key(rtype, namespace, name)
            current = self.objects.get(key)
            if content_type == "application/apply-patch+yaml":
                return self._apply(rtype, key, sub, current, _object(_decode(body, content_type)), query)
            if current is None:
                raise _not_found(rtype, name)
            patch = _decode(body, content_type)
            try:
                if content_type == "application/merge-patch+json":
                    patched = merge_patch(copy.deepcopy(current.obj), patch)
                elif content_type == "application/json-patch+json":
                    patched = apply_patch(current.obj, patch)
                elif content_type == "application/strategic-merge-patch+json" and not rtype.group.endswith(KATALYST):
                    patched = merge_patch(copy.deepcopy(current.obj), patch)  # lists replaced: enough for these tests
                else:
                    raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                                                 "accepted media types include: application/json-patch+json, "
                                                                 "application/merge-patch+json, application/apply-patch+yaml")
            except JsonPatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
            patched = _object(patched)
            self._check_version(rtype, name, patched, current.obj)
            merged = _scoped(rtype, sub, current.obj, patched)
            return 200, copy.deepcopy(self._store(key, self._stamp(rtype, merged, current.obj), "MODIFIED", current).obj)

    def _apply(self, rtype: ResourceType, key: tuple[str, str, str], sub: str, current: _Stored | None, body: dict[str, Any],
               query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        manager = query.get("fieldManager")
        if not manager:
            raise ApiError(422, "Invalid", "PatchOptions.meta.k8s.io is invalid: fieldManager: Required value: "
                                           "is required for apply patch")
        force = query.get("force") in ("true", "1")
        if current is None and sub == "status":
            raise _not_found(rtype, key[2])  # a status is applied to an object that exists
        if current is not None:
            self._check_version(rtype, key[2], body, current.obj)
        part = _managed_part(body, sub if rtype.status_subresource else "")
        applied = _leaves(part)
        base = copy.deepcopy(current.obj) if current else {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
                                                           "metadata": dict(body.get("metadata") or {})}
        managers = {m: set(paths) for m, paths in (current.managers if current else {}).items()}
        conflicts = sorted(
            (other, path) for other, paths in managers.items() if other != manager
            for path in applied & paths if _value(base, path) != _value(part, path))
        if conflicts and not force:
            detail = "\n".join(f'conflict with "{other}": .{".".join(path)}' for other, path in conflicts)
            raise ApiError(409, "Conflict", f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: {detail}")
        for other, path in conflicts:
            managers[other].discard(path)
        owned_elsewhere = set().union(*(paths for m, paths in managers.items() if m != manager)) if managers else set()
        for path in managers.get(manager, set()) - applied - owned_elsewhere:
            _remove(base, path)
        merged = _deep_merge(base, part)
        managers[manager] = applied
        if rtype.status_subresource and current is not None:
            merged = _scoped(rtype, sub, current.obj, merged)
        elif rtype.status_subresource and not sub:
            merged.pop("status", None)
        stored = self._store(key, self._stamp(self.types[key[0]], merged, current.obj if current else None),
                             "MODIFIED" if current else "ADDED", current)
        stored.managers = managers
        return (200 if current else 201), copy.deepcopy(stored.obj)

    def _delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            key = self._key(rtype, namespace, name)
            stored = self.objects.pop(key, None)
            if stored is None:
                raise _not_found(rtype, name)
            self._deleted(rtype.key, stored.obj)
            return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name, "kind": rtype.plural}}

    def _bind(self, namespace: str, name: str, body: Any, query: dict[str, str]) -> dict[str, Any]:
        """``BindingREST.Create`` + ``assignPod``: the pod gets its node, or the reason it cannot."""
        binding = _object(body)
        unknown = sorted(set(binding) - {"apiVersion", "kind", "metadata", "target"})
        if unknown and query.get("fieldValidation") == "Strict":
            raise ApiError(400, "BadRequest", f'Binding in version "v1" cannot be handled as a Binding: strict decoding error: '
                                              f'unknown field "{unknown[0]}"')
        if binding.get("kind", "Binding") != "Binding" or binding.get("apiVersion", "v1") != "v1":
            raise ApiError(400, "BadRequest", f"the body of the request is not a v1 Binding: {binding.get('apiVersion')}/"
                                              f"{binding.get('kind')}")
        meta = binding.get("metadata") if isinstance(binding.get("metadata"), dict) else {}
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise ApiError(400, "BadRequest",
                           "the namespace of the provided object does not match the namespace sent on the request")
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Binding object")
        target = binding.get("target") if isinstance(binding.get("target"), dict) else {}
        if target.get("kind") not in (None, "", "Node"):
            raise ApiError(422, "Invalid", f'Binding "{name}" is invalid: target.kind: Unsupported value: '
                                           f'"{target.get("kind")}": supported values: "Node", "<empty>"')
        if not target.get("name"):
            raise ApiError(422, "Invalid", f'Binding "{name}" is invalid: target.name: Required value')
        pods = self.types["v1/pods"]
        with self.lock:
            key = self._key(pods, namespace, name)
            current = self.objects.get(key)
            if current is None:
                raise _not_found(pods, name)
            pod = current.obj
            uid = meta.get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                raise _binding_conflict(name, f'Precondition failed: UID in precondition: {uid}, UID in object meta: '
                                              f'{pod["metadata"]["uid"]}', resource="pods")
            spec = pod.get("spec") or {}
            if pod["metadata"].get("deletionTimestamp"):
                raise _binding_conflict(name, f"pod {name} is being deleted, cannot be assigned to a host")
            if spec.get("nodeName"):
                raise _binding_conflict(name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
            if spec.get("schedulingGates"):
                raise _binding_conflict(name, f"pod {name} has non-empty .spec.schedulingGates")
            bound = copy.deepcopy(pod)
            bound.setdefault("spec", {})["nodeName"] = target["name"]
            if meta.get("annotations"):
                bound["metadata"].setdefault("annotations", {}).update(meta["annotations"])
            conditions = bound.setdefault("status", {}).setdefault("conditions", [])
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
            if scheduled is None:
                conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
            elif scheduled.get("status") != "True":
                scheduled.update({"status": "True", "lastTransitionTime": now, "reason": None, "message": None})
                for field_name in ("reason", "message"):
                    scheduled.pop(field_name)
            self._store(key, self._stamp(pods, bound, pod), "MODIFIED", current)
            self.bound.setdefault((namespace, name), []).append(target["name"])
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # -- storage -------------------------------------------------------------------------------

    def _check_version(self, rtype: ResourceType, name: str, body: dict[str, Any], current: dict[str, Any]) -> None:
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {_qualified(rtype)} "{name}": '
                                            "the object has been modified; please apply your changes to the latest version and try again")

    def _stamp(self, rtype: ResourceType, body: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
        self.revision += 1
        meta = body.setdefault("metadata", {})
        old = (current or {}).get("metadata") or {}
        meta["uid"] = old.get("uid") or str(uuid.uuid4())
        meta["creationTimestamp"] = old.get("creationTimestamp") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        meta["resourceVersion"] = str(self.revision)
        spec_changed = current is None or current.get("spec") != body.get("spec")
        meta["generation"] = int(old.get("generation") or 0) + (1 if spec_changed else 0)
        body["apiVersion"], body["kind"] = rtype.group_version, rtype.kind
        return body

    def _store(self, key: tuple[str, str, str], body: dict[str, Any], kind: str, current: _Stored | None) -> _Stored:
        stored = _Stored(body, current.managers if current else {})
        self.objects[key] = stored
        self._event(key[0], kind, body)
        return stored

    def _deleted(self, resource: str, obj: dict[str, Any]) -> None:
        """A deletion is a new revision, which the DELETED event's object carries (as etcd's)."""
        self.revision += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self._event(resource, "DELETED", obj)

    def _event(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        copied = copy.deepcopy(obj)
        self.events.append((self.revision, resource, kind, copied))
        own = self.resource_events.get(resource)
        if own is None:
            own = self.resource_events[resource] = deque(maxlen=self.history)
        own.append((self.revision, kind, copied))

    def _since(self, resource: str, since: int, namespace: str) -> list[tuple[int, str, dict[str, Any]]]:
        """The resource's events after ``since`` (oldest first), read from the newest back."""
        found = []
        for rv, kind, obj in reversed(self.resource_events.get(resource, ())):
            if rv <= since:
                break
            if not namespace or obj["metadata"].get("namespace") == namespace:
                found.append((rv, kind, obj))
        found.reverse()
        return found

    # -- watch ---------------------------------------------------------------------------------

    async def _watch(self, path: str, query: dict[str, str], send: Any) -> None:
        rtype, namespace, _, sub = self._address(path.strip("/").split("/"))
        _allow(rtype, sub, "watch")
        selector = parse_selector(query.get("labelSelector", ""))
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        with self.lock:
            since = int(query.get("resourceVersion") or self.revision)
            gone = since < self._oldest()
        if gone:
            error = ApiError(410, "Expired", f"too old resource version: {since} ({self._oldest() + 1})").status()
            await _chunk(send, {"type": "ERROR", "object": error})
            await send({"type": "http.response.body", "body": b""})
            return
        deadline, next_bookmark = time.monotonic() + timeout, time.monotonic() + self.bookmark_seconds
        scanned = -1  # the revision the events were last scanned at: an idle watch costs no scan
        handle = self._watch_opened(rtype, timeout)
        try:
            while time.monotonic() < deadline and self._watch_goes_on(handle):
                with self.lock:
                    current = self.revision
                    pending = [] if current == scanned else self._since(rtype.key, since, namespace)
                    scanned = current
                for rv, kind, obj in pending:
                    since = rv
                    if selector.matches(obj["metadata"].get("labels") or {}):
                        await _chunk(send, {"type": kind, "object": obj})
                if bookmarks and time.monotonic() >= next_bookmark:
                    since = max(since, current)
                    await _chunk(send, {"type": "BOOKMARK", "object": {
                        "kind": rtype.kind, "apiVersion": rtype.group_version,
                        "metadata": {"resourceVersion": str(since), "annotations": {"k8s.io/initial-events-end": "true"}}}})
                    next_bookmark = time.monotonic() + self.bookmark_seconds
                await self._watch_idle(min(deadline, next_bookmark) if bookmarks else deadline)
        except OSError:
            return
        finally:
            self._watch_closed(handle)
        await send({"type": "http.response.body", "body": b""})

    # What a subclass may change about a watch (a benchmark's emulator wakes its watches on a
    # change instead of polling, and counts and cuts them).

    def _watch_opened(self, rtype: ResourceType, timeout: float) -> Any:
        """A watch of ``rtype`` started; returns what identifies it to the hooks below."""
        return None

    def _watch_goes_on(self, handle: Any) -> bool:
        return True

    async def _watch_idle(self, until: float) -> None:
        """Nothing to send: wait before looking again (``until``: the watch's next bookmark or its end)."""
        await asyncio.sleep(self.poll_seconds)

    def _watch_closed(self, handle: Any) -> None:
        pass


# -- helpers -----------------------------------------------------------------------------------


async def read_body(receive: Any) -> bytes:
    """An ASGI request's whole body."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def _qualified(rtype: ResourceType) -> str:
    """``schema.GroupResource.String()``: the core group's resources are named without a group."""
    return f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural


def _not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(rtype)} "{name}" not found')


def _binding_conflict(name: str, why: str, *, resource: str = "pods/binding") -> ApiError:
    """``errors.NewConflict``: the message upstream's binding storage gives a refused bind."""
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": {why}')


def _validate_event(event: dict[str, Any]) -> None:
    """``ValidateEventCreate`` for events.k8s.io/v1: what a recorder must fill in."""
    errors = []
    if not event.get("eventTime"):
        errors.append("eventTime: Required value")
    if event.get("type") not in ("Normal", "Warning"):
        errors.append(f'type: Invalid value: "": has invalid value: {event.get("type") or ""}')
    for field_name, limit in (("reportingController", 253), ("reportingInstance", 128), ("action", 128), ("reason", 128)):
        value = event.get(field_name)
        if not value:
            errors.append(f"{field_name}: Required value")
        elif len(str(value)) > limit:
            errors.append(f"{field_name}: Too long: may not be more than {limit} bytes")
    if len((event.get("note") or "").encode()) > 1024:
        errors.append("note: Too long: may not be more than 1024 bytes")
    if not isinstance(event.get("regarding"), dict):
        errors.append("regarding: Required value")
    if errors:
        detail = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        raise ApiError(422, "Invalid", f'Event.events.k8s.io "{event["metadata"]["name"]}" is invalid: {detail}')


#: (HTTP method, names an object) -> the verb it is, as the API server's request info says.
_VERBS = {("GET", True): "get", ("GET", False): "list", ("POST", False): "create", ("POST", True): "create",
          ("PUT", True): "update", ("PATCH", True): "patch", ("DELETE", True): "delete", ("DELETE", False): "deletecollection"}


def _allow(rtype: ResourceType, sub: str, verb: str) -> None:
    """405 for a verb the resource (or its subresource) does not serve, as the API server answers."""
    if sub == "status" and rtype.status_subresource:
        verbs: tuple[str, ...] = ("get", "patch", "update")
    else:
        verbs = next((v for s, _, v in rtype.extra_subresources if s == sub), ()) if sub else rtype.verbs
    if verb not in verbs:
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def _decode(body: bytes, content_type: str) -> Any:
    try:
        return yaml.safe_load(body) if content_type.endswith("yaml") else json.loads(body or b"null")
    except (ValueError, yaml.YAMLError) as exc:
        raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {exc}") from None


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the body of the request must be an object")
    return body


def _as_item(obj: dict[str, Any]) -> dict[str, Any]:
    """List items carry no apiVersion/kind on a real server."""
    obj.pop("apiVersion", None)
    obj.pop("kind", None)
    return obj


def _scoped(rtype: ResourceType, sub: str, current: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """A write to the main resource keeps the stored status; one to ``/status`` changes only status."""
    if not rtype.status_subresource:
        return body
    if sub == "status":
        merged = copy.deepcopy(current)
        merged["status"] = copy.deepcopy(body.get("status"))
        if merged["status"] is None:
            merged.pop("status")
        return merged
    merged = copy.deepcopy(body)
    if "status" in current:
        merged["status"] = copy.deepcopy(current["status"])
    else:
        merged.pop("status", None)
    return merged


_SERVER_FIELDS = {"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"}


def _managed_part(body: dict[str, Any], sub: str) -> dict[str, Any]:
    """What an apply manages: status alone through ``/status``, else everything but server-set metadata."""
    if sub == "status":
        return {"status": copy.deepcopy(body.get("status") or {})}
    part = {k: copy.deepcopy(v) for k, v in body.items() if k not in ("apiVersion", "kind")}
    part["metadata"] = {k: v for k, v in (part.get("metadata") or {}).items() if k not in _SERVER_FIELDS}
    return part


def _leaves(obj: Any, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(obj, dict) and obj:
        return set().union(*(_leaves(v, prefix + (str(k),)) for k, v in obj.items()))
    return {prefix} if prefix else set()


_MISSING = object()


def _value(obj: Any, path: tuple[str, ...]) -> Any:
    for token in path:
        if not isinstance(obj, dict) or token not in obj:
            return _MISSING
        obj = obj[token]
    return obj


def _remove(obj: dict[str, Any], path: tuple[str, ...]) -> None:
    for token in path[:-1]:
        obj = obj.get(token)
        if not isinstance(obj, dict):
            return
    obj.pop(path[-1], None)


def _deep_merge(base: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in part.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else copy.deepcopy(value)
    return out


async def _respond(send: Any, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    raw = json.dumps(body).encode()
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()), *extra]})
    await send({"type": "http.response.body", "body": raw})


async def _chunk(send: Any, event: dict[str, Any]) -> None:
    await send({"type": "http.response.body", "body": json.dumps(event).encode() + b"\n", "more_body": True})


def serve(api: ApiServer) -> Any:
    """Run the emulator on a free loopback port in a thread (``tests.servers.serve``); yields its URL."""
    return serve_asgi(api)


def kubeconfig(server: str, token: str | None = None) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "emulated",
        "clusters": [{"name": "emulated", "cluster": {"server": server}}],
        "users": [{"name": "meridian", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "meridian"}}],
    })


def registration(name: str, url: str, token: str | None = None) -> dict[str, Any]:
    """What ``fleet.services.register_cluster`` takes for a cluster served by the emulator at ``url``."""
    return {"name": name, "connector": "kubernetes", "kubeconfig": kubeconfig(url, token), "connector_config": {}}
