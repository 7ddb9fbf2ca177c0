"""The Kubernetes connector: the official client's DynamicClient, one code path for every kind.

Each connector builds its own ``ApiClient`` from a kubeconfig (file or content) or the
in-cluster service account; the process-wide default configuration is never touched, so
500 clusters can be reached from one worker. Responses are read as raw JSON (plain dicts),
which is what the inventory consumes and what custom resources need anyway.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import urllib3
import yaml
from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic.exceptions import ApiException as DynamicApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from kube.labels import SelectorError, parse_selector

from .base import Connector, ConnectorError, ObjectList, ServerInfo, WatchEvent

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
REASONS = {401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict", 410: "conflict", 400: "invalid", 422: "invalid"}


@dataclass(frozen=True)
class KubernetesConnectorConfig:
    kubeconfig_path: str | None = None
    context: str | None = None
    in_cluster: bool = False
    kubeconfig_content: str | None = None
    request_timeout: float = 10.0


class KubernetesConnector(Connector):
    kind = "kubernetes"

    def __init__(self, settings: KubernetesConnectorConfig) -> None:
        self.settings = settings
        self.configuration = _configuration(settings)
        self.api_client = client.ApiClient(self.configuration)
        self._dynamic: dynamic.DynamicClient | None = None

    def describe(self) -> dict[str, str]:
        """Where and how this connector connects, without any credential."""
        c = self.configuration
        method = "client certificate" if c.cert_file else ("bearer token" if c.api_key else ("in-cluster" if self.settings.in_cluster else "none"))
        return {"server": c.host, "context": self.settings.context or "", "auth": method}

    # -- plumbing ------------------------------------------------------------------------------

    @property
    def dynamic(self) -> dynamic.DynamicClient:
        if self._dynamic is None:
            self._dynamic = self._call(lambda: dynamic.DynamicClient(self.api_client))
        return self._dynamic

    def _resource(self, api_version: str, kind: str):
        try:
            return self._call(lambda: self.dynamic.resources.get(api_version=api_version, kind=kind))
        except ResourceNotFoundError:
            raise ConnectorError(f"the cluster does not serve {kind} in {api_version}", reason="not_found", status=404) from None

    def _call(self, fn):
        try:
            return fn()
        except (ApiException, DynamicApiException) as exc:
            raise _api_error(exc) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ConnectorError(f"cannot reach {self.configuration.host}: {_root_cause(exc)}", reason="unreachable") from None

    def _raw(self, path: str) -> Any:
        response = self._call(lambda: self.api_client.call_api(
            path, "GET", auth_settings=["BearerToken"], _preload_content=False, _request_timeout=self.settings.request_timeout))
        return json.loads(response[0].data)

    # -- Connector -------------------------------------------------------------------------------

    def server_info(self) -> ServerInfo:
        version = self._raw("/version").get("gitVersion", "")
        resources = {f"v1/{r['name']}" for r in self._raw("/api/v1").get("resources", []) if "/" not in r["name"]}
        for group in self._raw("/apis").get("groups", []):
            group_version = (group.get("preferredVersion") or {}).get("groupVersion")
            if not group_version:
                continue
            try:
                listed = self._raw(f"/apis/{group_version}").get("resources", [])
            except ConnectorError as exc:
                if exc.reason == "unreachable":
                    raise
                continue
            resources.update(f"{group_version}/{r['name']}" for r in listed if "/" not in r["name"])
        return ServerInfo(version, tuple(sorted(resources)))

    def list(self, api_version: str, kind: str, *, namespace: str | None = None, label_selector: str = "") -> ObjectList:
        try:
            selector = parse_selector(label_selector)
        except SelectorError as exc:
            raise ConnectorError(f"invalid label selector: {exc}", reason="invalid", status=400) from exc
        resource = self._resource(api_version, kind)
        body = _json(self._call(lambda: resource.get(namespace=namespace, label_selector=label_selector or None, serialize=False,
                                                     _request_timeout=self.settings.request_timeout)))
        # Filtered again here: identical for a real API server, and exact for servers that ignore the parameter.
        items = [dict(item, apiVersion=item.get("apiVersion", api_version), kind=item.get("kind", kind))
                 for item in body.get("items") or [] if selector.matches((item.get("metadata") or {}).get("labels") or {})]
        return ObjectList(items=items, resource_version=str((body.get("metadata") or {}).get("resourceVersion", "")))

    def watch(self, api_version: str, kind: str, *, resource_version: str = "", timeout_seconds: int = 30) -> Iterator[WatchEvent]:
        """Stream watch events (newline-delimited JSON), read directly so the query is spelled as
        the API documents it (``watch=true``); a 410 Gone means: relist, then watch again."""
        path = self._resource(api_version, kind).path()
        query = [("watch", "true"), ("timeoutSeconds", str(timeout_seconds)), ("allowWatchBookmarks", "true")]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        response = self._call(lambda: self.api_client.call_api(
            path, "GET", query_params=query, auth_settings=["BearerToken"], _preload_content=False,
            _request_timeout=(self.settings.request_timeout, timeout_seconds + self.settings.request_timeout)))[0]
        try:
            for line in _lines(response):
                event = json.loads(line)
                raw = event.get("object") or {}
                if event.get("type") == "ERROR":
                    code = int(raw.get("code") or 500)
                    raise ConnectorError(raw.get("message", "watch failed"), reason=REASONS.get(code, "server"), status=code)
                yield WatchEvent(event["type"], raw)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ConnectorError(f"watch on {self.configuration.host} broke: {_root_cause(exc)}", reason="unreachable") from None
        finally:
            response.release_conn()

    def get(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        resource = self._resource(api_version, kind)
        try:
            return _json(self._call(lambda: resource.get(name=name, namespace=namespace, serialize=False)))
        except ConnectorError as exc:
            if exc.reason == "not_found":
                return None
            raise

    def apply(self, obj: Mapping[str, Any], *, field_manager: str = "meridian") -> dict[str, Any]:
        """Server-side apply (force) where served; else create, or merge-patch what exists.

        The fallback covers servers without apply patches (405/415) and emulators that answer
        an apply to a missing object with 404 instead of creating it.
        """
        api_version, kind, name, namespace = _identity(obj)
        resource = self._resource(api_version, kind)
        body = dict(obj)
        try:
            return _json(self._call(lambda: resource.server_side_apply(
                body=body, name=name, namespace=namespace, field_manager=field_manager, force_conflicts=True, serialize=False)))
        except ConnectorError as exc:
            if exc.status not in (404, 405, 415):
                raise
        if self.get(api_version, kind, name, namespace=namespace) is None:
            return _json(self._call(lambda: resource.create(body=body, namespace=namespace, serialize=False)))
        return self.patch(api_version, kind, name, body, namespace=namespace)

    def patch(self, api_version: str, kind: str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: Literal["merge", "json", "strategic"] = "merge") -> dict[str, Any]:
        resource = self._resource(api_version, kind)
        return _json(self._call(lambda: resource.patch(
            body=patch, name=name, namespace=namespace, content_type=PATCH_TYPES[patch_type], serialize=False)))

    def delete(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> bool:
        resource = self._resource(api_version, kind)
        try:
            self._call(lambda: resource.delete(name=name, namespace=namespace, serialize=False))
        except ConnectorError as exc:
            if exc.reason == "not_found":
                return False
            raise
        return True

    def close(self) -> None:
        self.api_client.close()


def _configuration(settings: KubernetesConnectorConfig) -> client.Configuration:
    """An isolated client configuration; every failure is a ConnectorError(reason="config")."""
    configuration = client.Configuration()
    try:
        if settings.in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        elif settings.kubeconfig_content:
            content = yaml.safe_load(settings.kubeconfig_content)
            if not isinstance(content, dict):
                raise ConfigException("the kubeconfig is not a YAML mapping")
            config.load_kube_config_from_dict(content, context=settings.context, client_configuration=configuration,
                                              temp_file_path=tempfile.gettempdir())
        elif settings.kubeconfig_path:
            config.load_kube_config(config_file=settings.kubeconfig_path, context=settings.context, client_configuration=configuration)
        else:
            raise ConfigException("give a kubeconfig (path or content) or choose in-cluster configuration")
    except (ConfigException, yaml.YAMLError, OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConnectorError(f"unusable cluster configuration: {_safe_config_message(exc)}", reason="config") from None
    configuration.retries = urllib3.Retry(total=1, connect=1, read=0, backoff_factor=0.2)
    return configuration


def _safe_config_message(exc: Exception) -> str:
    """The loader's message is about structure (missing context, bad file); YAML errors quote
    the document, so only their position is kept."""
    if isinstance(exc, yaml.YAMLError):
        mark = getattr(exc, "problem_mark", None)
        return f"the kubeconfig is not valid YAML (line {mark.line + 1})" if mark else "the kubeconfig is not valid YAML"
    if isinstance(exc, FileNotFoundError):
        return f"kubeconfig file not found: {exc.filename}"
    if isinstance(exc, OSError):
        return f"cannot read the kubeconfig: {exc.strerror}"
    return str(exc).split("\n")[0][:300]


def _api_error(exc: Exception) -> ConnectorError:
    status = int(getattr(exc, "status", 0) or 0)
    message = getattr(exc, "reason", "") or ""
    body = getattr(exc, "body", None)
    try:
        message = json.loads(body).get("message") or message
    except (TypeError, ValueError, AttributeError):
        pass
    reason = REASONS.get(status, "server" if status >= 500 or not status else "invalid")
    return ConnectorError(f"HTTP {status}: {message}".strip(), reason=reason, status=status or None)


def _root_cause(exc: BaseException) -> str:
    while getattr(exc, "reason", None) is not None and isinstance(exc.reason, BaseException):
        exc = exc.reason
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str | None]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not obj.get("apiVersion") or not obj.get("kind") or not meta.get("name"):
        raise ConnectorError("an object needs apiVersion, kind and metadata.name", reason="invalid", status=422)
    return obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")


def _lines(response: Any) -> Iterator[bytes]:
    buffer = b""
    for chunk in response.stream(4096, decode_content=True):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from (line for line in complete if line.strip())
    if buffer.strip():
        yield buffer


def _json(response: Any) -> dict[str, Any]:
    data = getattr(response, "data", response)
    return json.loads(data) if isinstance(data, (bytes, str)) and data else {}
