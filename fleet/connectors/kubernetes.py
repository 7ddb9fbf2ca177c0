"""The Kubernetes connector: the official client's DynamicClient, one code path for every kind.

Each connector builds its own ``ApiClient`` from a kubeconfig (file or content) or the
in-cluster service account, and keeps its discovery cache in a private temporary directory:
nothing process-wide is read or written, so one worker can reach hundreds of clusters with
different credentials. Every request carries a timeout and retries at most once, so an
unreachable cluster fails in seconds.

Objects are returned as the API server's JSON decoded into plain dicts, which is what the
inventory consumes and what custom resources need anyway.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import urllib3
import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError
from kubernetes.dynamic.resource import Resource, ResourceList, Subresource

from .base import Connector, ConnectorError, ObjectList, ServerInfo, WatchEvent

T = TypeVar("T")

PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
#: Answers to an apply patch after which create-or-merge-patch is tried instead.
APPLY_FALLBACK_STATUSES = frozenset({404, 405, 415})
#: Answers that prove the server has no server-side apply at all, so later applies skip it.
APPLY_UNSUPPORTED_STATUSES = frozenset({405, 415})

_REASONS = {400: "invalid", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict", 410: "conflict", 429: "throttled",
            422: "invalid"}
_QUERY_FLAGS = ("watch", "allow_watch_bookmarks", "force_conflicts")
_SECRET_FIELDS = frozenset({"token", "password", "client-key-data", "client-certificate-data", "id-token", "refresh-token",
                            "access-token", "client-secret", "secret", "value"})


@dataclass(frozen=True)
class KubernetesConnectorConfig:
    """Where a cluster is and how to authenticate: in-cluster if chosen, else the content, else the path."""

    kubeconfig_path: str | None = None
    context: str | None = None
    in_cluster: bool = False
    kubeconfig_content: str | None = field(default=None, repr=False)
    request_timeout: float = 10.0
    #: Objects per list request; larger lists are read in pages (``limit``/``continue``).
    page_size: int = 500


@dataclass(frozen=True)
class _LoadedConfig:
    configuration: client.Configuration
    context: str
    auth: str


class _DynamicClient(DynamicClient):
    """A DynamicClient that never waits forever and spells flags as the API documents them.

    The stock client sends no timeout unless each call passes one (discovery calls cannot),
    and renders booleans as ``True``: Kubernetes accepts that, but stricter servers and
    emulators only know ``watch=true``.
    """

    def __init__(self, api_client: client.ApiClient, *, timeout: float, cache_file: str) -> None:
        self._timeout = timeout
        super().__init__(api_client, cache_file=cache_file)

    def request(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        for flag in _QUERY_FLAGS:
            if isinstance(params.get(flag), bool):
                params[flag] = "true" if params[flag] else "false"
        params.setdefault("_request_timeout", self._timeouts(params))
        return super().request(method, path, body, **params)

    def _timeouts(self, params: Mapping[str, Any]) -> tuple[float, float]:
        """(connect, read); a watch may stay silent for its whole duration, so it reads longer."""
        read = self._timeout
        if params.get("watch") and params.get("timeout_seconds"):
            read += float(params["timeout_seconds"])
        return self._timeout, read


class KubernetesConnector(Connector):
    """One member cluster through the Kubernetes API; see the module docstring."""

    kind = "kubernetes"

    def __init__(self, settings: KubernetesConnectorConfig) -> None:
        self.settings = settings
        loaded = _load_configuration(settings)
        self._summary = {"server": _safe_url(loaded.configuration.host), "context": loaded.context, "auth": loaded.auth}
        self._api_client = client.ApiClient(loaded.configuration)
        self._discovery_dir: tempfile.TemporaryDirectory[str] | None = None
        self._dynamic: _DynamicClient | None = None
        self._client_lock = threading.Lock()
        self._server_side_apply = True

    def describe(self) -> dict[str, str]:
        """Server URL, context and authentication method, for the UI: never a credential."""
        return dict(self._summary)

    # -- Connector -------------------------------------------------------------------------------

    def server_info(self) -> ServerInfo:
        dynamic = self._client()
        version = str((dynamic.version.get("kubernetes") or {}).get("gitVersion", ""))
        resources = self._call(lambda: {_resource_id(r) for group in dynamic.resources for r in group if _is_primary(r)})
        return ServerInfo(version, tuple(sorted(resources)))

    def list(self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str = "") -> ObjectList:
        """Every page of the list; the selector is evaluated by the server."""
        resource = self._resource(api_version, kind)
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._json(lambda: self._client().get(
                resource, namespace=namespace, label_selector=label_selector or None, limit=self.settings.page_size,
                _continue=token, serialize=False))
            items.extend(_typed(item, api_version, kind) for item in page.get("items") or [])
            metadata = page.get("metadata") or {}
            token = metadata.get("continue") or None
            if token is None:
                return ObjectList(items=items, resource_version=str(metadata.get("resourceVersion") or ""))
            if self.between is not None:
                self.between()

    def watch(self, api_version: str, kind: str, *, resource_version: str = "", timeout_seconds: int = 30) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` for at most ``timeout_seconds``.

        A ``resource_version`` the server no longer keeps raises ConnectorError(reason="conflict",
        status=410): relist, then watch from the list's resource version. The stream also ends
        on time with servers that ignore ``timeoutSeconds``.
        """
        resource = self._resource(api_version, kind)
        deadline = time.monotonic() + timeout_seconds
        stream = watch.Watch().stream(
            self._client().get, resource, resource_version=resource_version or None, timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True, serialize=False)
        try:
            while time.monotonic() < deadline:
                event = self._next_event(stream, deadline)
                if event is None:
                    return
                yield _watch_event(event, api_version, kind)
        finally:
            stream.close()

    def get(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        resource = self._resource(api_version, kind)
        _check_address(resource, name, namespace)
        try:
            return self._json(lambda: self._client().get(resource, name=name, namespace=namespace, serialize=False))
        except ConnectorError as exc:
            if exc.reason == "not_found":
                return None
            raise

    def apply(self, obj: Mapping[str, Any], *, field_manager: str = "meridian") -> dict[str, Any]:
        """Server-side apply with ``force``; without it, create the object or merge-patch it whole.

        The fallback runs when the server answers the apply patch with 405/415 (no server-side
        apply; remembered for later calls) or 404 (emulators such as kmock that apply only to
        existing objects). It merges instead of applying, so fields left out of ``obj`` are
        kept rather than removed as a real apply would.
        """
        api_version, kind, name, namespace = _identity(obj)
        resource = self._resource(api_version, kind)
        _check_address(resource, name, namespace)
        body = dict(obj)
        applied = self._force_apply(resource, body, name, namespace, field_manager, APPLY_FALLBACK_STATUSES)
        return applied if applied is not None else self._create_or_merge(resource, body, name, namespace, field_manager)

    def apply_status(self, obj: Mapping[str, Any], *, field_manager: str = "meridian") -> dict[str, Any]:
        """Server-side apply of ``status`` alone to ``<resource>/status`` (a merge patch there when
        the server has no apply). A resource without a status subresource keeps its status on the
        main resource, so the whole object is applied instead."""
        api_version, kind, name, namespace = _identity(obj)
        resource = self._resource(api_version, kind)
        _check_address(resource, name, namespace)
        status_resource = getattr(resource, "subresources", {}).get("status")
        if status_resource is None:
            return self.apply(obj, field_manager=field_manager)
        meta = {"name": name} | ({"namespace": namespace} if namespace else {})
        body = {"apiVersion": api_version, "kind": kind, "metadata": meta, "status": obj.get("status") or {}}
        applied = self._force_apply(status_resource, body, name, namespace, field_manager, APPLY_UNSUPPORTED_STATUSES)
        if applied is not None:
            return applied
        return self._json(lambda: self._client().patch(
            status_resource, body={"status": body["status"]}, name=name, namespace=namespace,
            content_type=PATCH_CONTENT_TYPES["merge"], field_manager=field_manager, serialize=False))

    def patch(self, api_version: str, kind: str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: Literal["merge", "json", "strategic"] = "merge") -> dict[str, Any]:
        """Strategic merge patches work on built-in kinds only: servers answer 415 for custom resources."""
        resource = self._resource(api_version, kind)
        _check_address(resource, name, namespace)
        _check_patch(patch, patch_type)
        return self._json(lambda: self._client().patch(
            resource, body=patch, name=name, namespace=namespace, content_type=PATCH_CONTENT_TYPES[patch_type], serialize=False))

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        api_version, kind, name, namespace = _identity(obj)
        resource = self._resource(api_version, kind)
        _check_address(resource, name, namespace)
        return self._post(resource.path(namespace=namespace), obj)

    def bind(self, namespace: str, name: str, node: str, *, uid: str = "") -> None:
        """``POST /api/v1/namespaces/<ns>/pods/<name>/binding`` with a v1 Binding (201 on success)."""
        if not namespace or not name or not node:
            raise ConnectorError("a binding needs the pod's namespace and name and a node", reason="invalid", status=422)
        meta = {"name": name, "namespace": namespace} | ({"uid": uid} if uid else {})
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        self._post(f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/binding", body)

    def delete(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> bool:
        resource = self._resource(api_version, kind)
        _check_address(resource, name, namespace)
        try:
            self._json(lambda: self._client().delete(resource, name=name, namespace=namespace, serialize=False))
        except ConnectorError as exc:
            if exc.reason == "not_found":
                return False
            raise
        return True

    def close(self) -> None:
        self._api_client.close()
        if self._discovery_dir is not None:
            self._discovery_dir.cleanup()
            self._discovery_dir = None
        self._dynamic = None

    # -- plumbing --------------------------------------------------------------------------------

    def _client(self) -> _DynamicClient:
        """Created on first use: construction runs discovery, i.e. talks to the server. Once,
        under a lock: a cluster's watcher calls from a thread per kind, and clients made side
        by side would each discover the API and write the same cache file at once."""
        with self._client_lock:
            if self._dynamic is None:
                self._dynamic = self._discover()
            return self._dynamic

    def _discover(self) -> _DynamicClient:
        self._discovery_dir = self._discovery_dir or tempfile.TemporaryDirectory(prefix="meridian-discovery-")
        cache_file = os.path.join(self._discovery_dir.name, "discovery.json")
        try:
            return self._call(lambda: _DynamicClient(self._api_client, timeout=self.settings.request_timeout, cache_file=cache_file))
        except ValueError as exc:
            raise ConnectorError(f"{self._summary['server']} does not answer like a Kubernetes API: {exc}",
                                 reason="unreachable") from exc

    def _resource(self, api_version: str, kind: str) -> Resource:
        dynamic = self._client()
        try:
            with self._client_lock:  # the discoverer's cache is not thread-safe: a miss refetches it
                return self._call(lambda: dynamic.resources.get(api_version=api_version, kind=kind))
        except ResourceNotFoundError:
            raise ConnectorError(f"the cluster does not serve kind {kind} in {api_version}", reason="not_found",
                                 status=404) from None
        except ResourceNotUniqueError:
            raise ConnectorError(f"kind {kind} in {api_version} is ambiguous on this cluster", reason="invalid") from None

    def _call(self, fn: Callable[[], T]) -> T:
        """Run one client call, turning whatever it raises into a ConnectorError users can read."""
        try:
            return fn()
        except ApiException as exc:
            raise _api_error(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise self._unreachable(exc) from exc

    def _json(self, fn: Callable[[], Any]) -> dict[str, Any]:
        """Decode the response body ourselves: the API's JSON is already plain JSON types
        (timestamps stay RFC 3339 strings) and keeps every field, known to the client or not."""
        response = self._call(fn)
        try:
            data = response.data
        finally:
            response.release_conn()
        try:
            decoded = json.loads(data) if data else {}
        except ValueError:
            raise ConnectorError(f"{self._summary['server']} answered with something that is not JSON", reason="server") from None
        if not isinstance(decoded, dict):
            raise ConnectorError(f"{self._summary['server']} answered with JSON that is not an object", reason="server")
        return decoded

    def _post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A JSON POST through the client's connection pool and authentication, without the
        generated client's per-call work: the pod scheduler sends two a pod (bind and Event)."""
        self._client()  # discovery first, as every other call (a cluster that does not answer fails here)
        api = self._api_client
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": api.user_agent,
                   **api.default_headers}
        api.update_params_for_auth(headers, [], ["BearerToken"])
        timeout = urllib3.Timeout(connect=self.settings.request_timeout, read=self.settings.request_timeout)
        response = self._call(lambda: api.rest_client.pool_manager.request(
            "POST", api.configuration.host + path, body=json.dumps(body).encode(), headers=headers, timeout=timeout))
        if not 200 <= response.status < 300:
            raise _api_error(ApiException(http_resp=RESTResponse(response)))
        try:
            decoded = json.loads(response.data) if response.data else {}
        except ValueError:
            raise ConnectorError(f"{self._summary['server']} answered with something that is not JSON", reason="server") from None
        return decoded if isinstance(decoded, dict) else {}

    def _next_event(self, stream: Iterator[dict[str, Any]], deadline: float) -> dict[str, Any] | None:
        """The next raw event, or None once the watch is over (closed, or silent past its time)."""
        try:
            return next(stream)
        except StopIteration:
            return None
        except ApiException as exc:
            raise _api_error(exc) from exc
        except urllib3.exceptions.ReadTimeoutError:
            return None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if time.monotonic() >= deadline:
                return None
            raise self._unreachable(exc) from exc

    def _force_apply(self, resource: Any, body: dict[str, Any], name: str, namespace: str | None, field_manager: str,
                     fallback_statuses: frozenset[int]) -> dict[str, Any] | None:
        """Server-side apply with ``force``; None when the server has none (or answered one of
        ``fallback_statuses``): the caller falls back. A server without apply (405/415) is
        remembered, so later calls go straight to the fallback."""
        if not self._server_side_apply:
            return None
        try:
            return self._json(lambda: self._client().server_side_apply(
                resource, body=body, name=name, namespace=namespace, field_manager=field_manager, force_conflicts=True,
                serialize=False))
        except ConnectorError as exc:
            if exc.status not in fallback_statuses:
                raise
            self._server_side_apply = exc.status not in APPLY_UNSUPPORTED_STATUSES
            return None

    def _create_or_merge(self, resource: Resource, body: dict[str, Any], name: str, namespace: str | None,
                         field_manager: str) -> dict[str, Any]:
        dynamic = self._client()
        try:
            return self._json(lambda: dynamic.create(
                resource, body=body, namespace=namespace, field_manager=field_manager, serialize=False))
        except ConnectorError as exc:
            if exc.reason != "conflict":
                raise
        return self._json(lambda: dynamic.patch(
            resource, body=body, name=name, namespace=namespace, content_type=PATCH_CONTENT_TYPES["merge"],
            field_manager=field_manager, serialize=False))

    def _unreachable(self, exc: BaseException) -> ConnectorError:
        return ConnectorError(f"cannot reach {self._summary['server']}: {_root_cause(exc)}", reason="unreachable")


# -- configuration ---------------------------------------------------------------------------------


def _load_configuration(settings: KubernetesConnectorConfig) -> _LoadedConfig:
    """An isolated client configuration; any failure is ConnectorError(reason="config").

    YAML errors quote the document, so only their position is kept; the loader's own messages
    name keys and entries, and are redacted all the same in case one quotes a value.
    """
    secrets: set[str] = set()
    try:
        loaded = _load(settings, secrets)
    except ConnectorError:
        raise
    except yaml.YAMLError as exc:
        raise _config_error(_yaml_problem(exc)) from None
    except FileNotFoundError as exc:
        raise _config_error(f"file not found: {exc.filename}") from None
    except OSError as exc:
        raise _config_error(f"cannot read {exc.filename or 'the kubeconfig'}: {exc.strerror}") from None
    except (ConfigException, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _config_error(_redact(_first_line(exc), secrets)) from None
    # One retry of a failed connection. A 429 or 503 is answered, not slept on (urllib3 would wait
    # out its Retry-After inside the request): the caller backs off, other clusters go on.
    loaded.configuration.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0, backoff_factor=0.2,
                                                 respect_retry_after_header=False)
    return loaded


def _load(settings: KubernetesConnectorConfig, secrets: set[str]) -> _LoadedConfig:
    configuration = client.Configuration()
    if settings.in_cluster:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise _config_error(f"in-cluster configuration is unavailable (not running in a pod?): {_first_line(exc)}") from None
        return _LoadedConfig(configuration, "in-cluster", "service account token")
    text, base_path = _kubeconfig_text(settings)
    document = yaml.safe_load(text)
    if not isinstance(document, dict):
        raise _config_error("the kubeconfig is not a YAML mapping")
    secrets.update(_secret_values(document))
    context = _context_name(document, settings.context)
    loader = KubeConfigLoader(config_dict=document, active_context=context, config_base_path=base_path)
    refs = loader.current_context.get("context") or {}
    if not _entry(document, "clusters", refs.get("cluster")).get("server"):
        raise _config_error(f"the cluster of context {context!r} has no server URL")
    loader.load_and_set(configuration)
    return _LoadedConfig(configuration, context, _auth_method(_entry(document, "users", refs.get("user"))))


def _kubeconfig_text(settings: KubernetesConnectorConfig) -> tuple[str, str | None]:
    """The kubeconfig and the directory its relative certificate paths are resolved from."""
    if settings.kubeconfig_content:
        return settings.kubeconfig_content, None
    if settings.kubeconfig_path:
        path = os.path.abspath(os.path.expanduser(settings.kubeconfig_path))
        with open(path, encoding="utf-8") as handle:
            return handle.read(), os.path.dirname(path)
    raise _config_error("no kubeconfig given (neither a path nor content) and in-cluster configuration not chosen")


def _context_name(document: Mapping[str, Any], wanted: str | None) -> str:
    """Checked here so an unknown context is named in plain words, with the ones that exist."""
    contexts = document.get("contexts")
    names = [c.get("name") for c in contexts if isinstance(c, Mapping)] if isinstance(contexts, list) else []
    context = wanted or document.get("current-context")
    if not context:
        raise _config_error("no context chosen and the kubeconfig has no current-context")
    if context not in names:
        available = ", ".join(str(n) for n in names) or "none"
        raise _config_error(f"context {context!r} is not in the kubeconfig (contexts: {available})")
    return str(context)


def _auth_method(user: Mapping[str, Any]) -> str:
    methods = [label for label, keys in (
        ("client certificate", ("client-certificate", "client-certificate-data")),
        ("bearer token", ("token", "tokenFile")),
        ("exec plugin", ("exec",)),
        ("auth provider", ("auth-provider",)),
        ("basic auth", ("username",)),
    ) if any(key in user for key in keys)]
    return " + ".join(methods) or "none"


def _entry(document: Mapping[str, Any], section: str, name: Any) -> Mapping[str, Any]:
    """The body of the named cluster or user; an empty mapping when there is none."""
    entries = document.get(section)
    singular = section[:-1]
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, Mapping) and entry.get("name") == name and isinstance(entry.get(singular), Mapping):
            return entry[singular]
    return {}


def _secret_values(node: Any, parent_key: str = "") -> set[str]:
    if isinstance(node, Mapping):
        return set().union(*(_secret_values(value, str(key)) for key, value in node.items()))
    if isinstance(node, list):
        return set().union(*(_secret_values(item, parent_key) for item in node))
    if parent_key in _SECRET_FIELDS and isinstance(node, str) and len(node) >= 4:
        return {node}
    return set()


def _redact(message: str, secrets: set[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        message = message.replace(secret, "[redacted]")
    return message


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Only the position: YAML messages quote the offending text, which may be a credential."""
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"the kubeconfig is not valid YAML{where}"


def _config_error(detail: str) -> ConnectorError:
    return ConnectorError(f"unusable cluster configuration: {detail}", reason="config")


# -- helpers -----------------------------------------------------------------------------------------


def _api_error(exc: ApiException) -> ConnectorError:
    """Status 0 is the client's own refusal (it raises one for TLS errors when retries are off)."""
    status = int(exc.status or 0)
    message = _status_message(exc.body) or " ".join(str(exc.reason or "").split()) or "no message"
    if not status:
        return ConnectorError(message, reason="server")
    reason = _REASONS.get(status) or ("server" if status >= 500 else "invalid")
    return ConnectorError(f"HTTP {status}: {message}", reason=reason, status=status)


def _status_message(body: Any) -> str:
    """The ``message`` of a Kubernetes Status body; empty when the body is not one."""
    try:
        decoded = json.loads(body) if body else None
    except (TypeError, ValueError):
        return ""
    return str(decoded.get("message") or "") if isinstance(decoded, dict) else ""


def _root_cause(exc: BaseException) -> str:
    while isinstance(getattr(exc, "reason", None), BaseException):
        exc = exc.reason  # type: ignore[attr-defined]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _safe_url(url: str) -> str:
    """The server URL without any ``user:password@`` part."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{netloc}:{parts.port}" if parts.port else netloc))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not all(isinstance(obj.get(f), str) and obj.get(f) for f in ("apiVersion", "kind")) \
            or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise ConnectorError("an object needs apiVersion, kind and metadata.name", reason="invalid", status=422)
    return obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace") or None


def _check_address(resource: Resource, name: str, namespace: str | None) -> None:
    """Without a name the URL would address the whole collection; without a namespace a
    namespaced object has no URL at all."""
    if not name:
        raise ConnectorError(f"a {resource.kind} needs a name", reason="invalid", status=422)
    if resource.namespaced and not namespace:
        raise ConnectorError(f"{resource.kind} is namespaced: give a namespace", reason="invalid", status=422)


def _check_patch(patch: Any, patch_type: str) -> None:
    if patch_type not in PATCH_CONTENT_TYPES:
        raise ConnectorError(f"unknown patch type {patch_type!r} (merge, json or strategic)", reason="invalid")
    expected = list if patch_type == "json" else Mapping
    if not isinstance(patch, expected):
        raise ConnectorError(f"a {patch_type} patch must be a {'list' if patch_type == 'json' else 'mapping'}", reason="invalid")


def _typed(item: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """Items of a list carry no apiVersion/kind on a real server; the inventory needs both."""
    return {**item, "apiVersion": item.get("apiVersion") or api_version, "kind": item.get("kind") or kind}


def _watch_event(event: Mapping[str, Any], api_version: str, kind: str) -> WatchEvent:
    raw = event.get("raw_object") or event.get("object") or {}
    obj = _typed(raw, api_version, kind) if event["type"] in ("ADDED", "MODIFIED", "DELETED") else dict(raw)
    return WatchEvent(event["type"], obj)


def _is_primary(resource: Any) -> bool:
    return isinstance(resource, Resource) and not isinstance(resource, (ResourceList, Subresource)) and "/" not in resource.name


def _resource_id(resource: Resource) -> str:
    return f"{resource.group}/{resource.api_version}/{resource.name}" if resource.group else f"{resource.api_version}/{resource.name}"
