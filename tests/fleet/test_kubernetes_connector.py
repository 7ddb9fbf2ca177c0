"""The Kubernetes connector end to end: the official client over HTTP against kmock's emulator.

Nothing in the client is patched. The emulator runs in its own event-loop thread on a free
loopback port and the connector reaches it through a kubeconfig file. kmock 0.8 ignores
``labelSelector``, ``limit``/``continue`` and ``resourceVersion``, which a real API server
honours, so :class:`ApiServer` adds exactly those (with the project's upstream-exact selector
parser) on top of it; everything else is kmock's own behaviour.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import yaml
from kmock import KubernetesEmulator, ResourceInfo, Server, headers
from kubernetes import client

from fleet.connectors.base import ConnectorError, WatchEvent
from fleet.connectors.kubernetes import KubernetesConnector, KubernetesConnectorConfig
from kube.labels import parse_selector

T = TypeVar("T")
SECRET = "s3cr3t-token"
CNC = ("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig")
APPLY_PATCH = "application/apply-patch+yaml"


@attrs.define(kw_only=True)
class ApiServer(KubernetesEmulator):
    """kmock's emulator plus the list and watch parameters a real API server honours."""

    expired_versions: set[str] = attrs.field(factory=set)

    async def _serve_list(self, request: Any) -> dict[str, Any]:
        payload = await super()._serve_list(request)
        selector = parse_selector(request.params.get("labelSelector", ""))
        items = [i for i in payload["items"] if selector.matches((i.get("metadata") or {}).get("labels") or {})]
        start, limit = int(request.params.get("continue") or 0), int(request.params.get("limit") or 0)
        end = start + limit if limit else len(items)
        metadata = {"resourceVersion": "42"} | ({"continue": str(end)} if end < len(items) else {})
        return {"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": items[start:end]}

    async def _serve_watch(self, request: Any) -> AsyncIterator[Any]:
        version = request.params.get("resourceVersion")
        if version in self.expired_versions:
            yield {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                                               "reason": "Expired", "message": f"too old resource version: {version} (42)"}}
            return
        async for event in super()._serve_watch(request):
            yield event


@dataclass
class Cluster:
    """The running emulator, and a way to touch it safely from the test's thread."""

    url: str
    api: ApiServer
    loop: asyncio.AbstractEventLoop

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the emulator's loop: its state is not thread-safe."""
        async def run() -> T:
            return fn()
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=5)

    def requests(self, *criteria: Any) -> list[Any]:
        return self.call(lambda: list(self.api[criteria] if criteria else self.api))

    def wait_for_watchers(self, count: int = 1) -> None:
        """kmock subscribes a watch to its event bus only after replaying the existing objects;
        changes made before that are never streamed, so tests wait for the subscription."""
        deadline = time.monotonic() + 5
        while self.call(lambda: sum(bus.consumer_count for bus in self.api._buses.values())) < count:
            assert time.monotonic() < deadline, "the watch never subscribed"
            time.sleep(0.02)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    ready: concurrent.futures.Future[Cluster] = concurrent.futures.Future()
    stop: dict[str, asyncio.Event] = {}

    async def serve() -> None:
        async with ApiServer() as api, Server(api) as server:
            api.resources.load_bundled()
            api.resources["config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs"] = ResourceInfo(
                kind="CustomNodeConfig", singular="customnodeconfig", namespaced=False,
                verbs={"get", "list", "watch", "create", "patch", "update", "delete"})
            stop["event"] = asyncio.Event()
            ready.set_result(Cluster(str(server.url).rstrip("/"), api, asyncio.get_running_loop()))
            await stop["event"].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    running = ready.result(timeout=10)
    yield running
    loop.call_soon_threadsafe(stop["event"].set)
    thread.join(timeout=10)


def kubeconfig(server: str, *, context: str = "prod", user: dict[str, Any] | None = None) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user or {"token": SECRET}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
    })


def connect(server: str, tmp_path: Path, **settings: Any) -> KubernetesConnector:
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server))
    return KubernetesConnector(KubernetesConnectorConfig(kubeconfig_path=str(path), context="prod", **settings))


@pytest.fixture
def connector(cluster: Cluster, tmp_path: Path) -> Iterator[KubernetesConnector]:
    with connect(cluster.url, tmp_path, request_timeout=2) as conn:
        yield conn


def node(name: str, labels: dict[str, str], cpu: str = "32") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "128Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}


def deployment(name: str, replicas: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "shop", "labels": labels or {}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}}


def names(items: list[dict[str, Any]]) -> list[str]:
    return sorted(i["metadata"]["name"] for i in items)


# -- discovery and reading ------------------------------------------------------------------------


def test_server_info_reports_version_and_discovered_resources(connector):
    info = connector.server_info()
    assert info.kubernetes_version == "v1.26.4+k3s1"
    assert {"v1/nodes", "v1/pods", "apps/v1/deployments", "config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs"} \
        <= set(info.api_resources)
    assert list(info.api_resources) == sorted(info.api_resources)
    assert not [r for r in info.api_resources if r.endswith(("/status", "/log", "List"))], "subresources and list kinds are left out"


def test_lists_are_filtered_by_label_on_the_server(connector, cluster):
    connector.apply(node("n1", {"machineModel": "A4", "diskMode": "hdd"}))
    connector.apply(node("n2", {"machineModel": "A3", "diskMode": "ssd"}))
    connector.apply(node("n3", {"machineModel": "A4", "diskMode": "ssd"}))
    connector.apply(deployment("web", 2, {"tier": "web"}))
    connector.apply(deployment("db", 1, {"tier": "db"}))

    selected = connector.list("v1", "Node", label_selector="machineModel=A4,diskMode in (hdd)")
    assert names(selected.items) == ["n1"] and selected.resource_version == "42"
    assert names(connector.list("apps/v1", "Deployment", label_selector="tier!=db").items) == ["web"]
    assert names(connector.list("v1", "Node").items) == ["n1", "n2", "n3"]
    sent = [r.params.get("labelSelector") for r in cluster.requests("list v1/nodes")]
    assert sent == ["machineModel=A4,diskMode in (hdd)", None]


def test_listed_items_carry_api_version_and_kind_and_plain_json(connector, cluster):
    """A real server leaves apiVersion/kind off list items; seeded here the same way."""
    cluster.call(lambda: cluster.api.objects.__setitem__(("v1/pods", "shop", "web-1"), {
        "metadata": {"name": "web-1", "namespace": "shop", "creationTimestamp": "2026-03-01T10:00:00Z"},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}))
    cluster.call(lambda: cluster.api.objects.__setitem__(("v1/pods", "other", "job-1"), {
        "metadata": {"name": "job-1", "namespace": "other"}}))

    pods = connector.list_pods().items
    assert names(pods) == ["job-1", "web-1"]
    assert all(p["apiVersion"] == "v1" and p["kind"] == "Pod" for p in pods)
    web = next(p for p in pods if p["metadata"]["name"] == "web-1")
    assert web["metadata"]["creationTimestamp"] == "2026-03-01T10:00:00Z"
    assert json.loads(json.dumps(pods)) == pods
    assert names(connector.list("v1", "Pod", namespace="shop").items) == ["web-1"]


def test_long_lists_are_read_page_by_page(cluster, tmp_path):
    with connect(cluster.url, tmp_path, page_size=2) as conn:
        for i in range(5):
            conn.apply(node(f"n{i}", {}))
        assert names(conn.list("v1", "Node").items) == [f"n{i}" for i in range(5)]
    pages = [(r.params.get("limit"), r.params.get("continue")) for r in cluster.requests("list v1/nodes")]
    assert pages == [("2", None), ("2", "2"), ("2", "4")]


def test_inventory_reads_nodes_workloads_and_pods(connector):
    from fleet.inventory import build_snapshot

    connector.apply(node("n1", {"machineModel": "A4"}))
    connector.apply(node("n2", {"machineModel": "A3"}, cpu="64"))
    connector.apply(deployment("web", 2))
    connector.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop", "uid": "u1"},
                     "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                     "status": {"phase": "Running"}})
    snap = build_snapshot(connector.list_nodes().items, connector.list_pods().items, connector.list_workloads())
    assert snap.errors == []
    assert snap.nodes["n2"].cpu_allocatable_milli == 64000 and snap.nodes["n1"].cpu_requested_milli == 1000
    assert snap.workloads[("shop", "Deployment", "web")].replicas == 2


# -- writing --------------------------------------------------------------------------------------


def test_get_apply_patch_delete(connector, cluster):
    assert connector.get("apps/v1", "Deployment", "api", namespace="shop") is None
    created = connector.apply(deployment("api", 1), field_manager="meridian-test")
    assert created["spec"]["replicas"] == 1
    connector.apply(deployment("api", 3), field_manager="meridian-test")
    assert connector.get("apps/v1", "Deployment", "api", namespace="shop")["spec"]["replicas"] == 3
    applies = cluster.requests("patch", headers({"Content-Type": APPLY_PATCH}))
    assert applies and all(r.params == {"fieldManager": "meridian-test", "force": "true"} for r in applies)

    merged = connector.patch("apps/v1", "Deployment", "api", {"spec": {"replicas": 5}}, namespace="shop")
    assert merged["spec"]["replicas"] == 5 and merged["spec"]["template"]["spec"]["containers"][0]["name"] == "c"
    connector.patch("apps/v1", "Deployment", "api", [{"op": "add", "path": "/metadata/labels/tier", "value": "web"}],
                    namespace="shop", patch_type="json")
    connector.patch("apps/v1", "Deployment", "api", {"metadata": {"annotations": {"a": "1"}}}, namespace="shop",
                    patch_type="strategic")
    got = connector.get("apps/v1", "Deployment", "api", namespace="shop")
    assert got["spec"]["replicas"] == 5 and got["metadata"]["labels"] == {"tier": "web"} and got["metadata"]["annotations"] == {"a": "1"}
    sent = [r.headers["Content-Type"] for r in cluster.requests("patch")][-3:]
    assert sent == ["application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json"]

    assert connector.delete("apps/v1", "Deployment", "api", namespace="shop") is True
    assert connector.delete("apps/v1", "Deployment", "api", namespace="shop") is False
    assert connector.get("apps/v1", "Deployment", "api", namespace="shop") is None


def test_patching_a_missing_object_is_not_found(connector):
    with pytest.raises(ConnectorError) as err:
        connector.patch("v1", "Node", "ghost", {"metadata": {"labels": {"a": "b"}}})
    assert err.value.reason == "not_found" and err.value.status == 404


def test_apply_falls_back_when_the_server_has_no_server_side_apply(connector, cluster):
    """kmock answers an apply to a missing object with 404 before any reaction runs, so the
    415 of a server without server-side apply is staged on an existing object."""
    connector.apply(deployment("api", 1))
    cluster.call(lambda: cluster.api["patch", headers({"Content-Type": APPLY_PATCH})] << 415 << {
        "kind": "Status", "apiVersion": "v1", "code": 415, "message": "the body of the request was in an unknown format"})
    before = len(cluster.requests())
    connector.apply(deployment("api", 4))
    connector.apply(deployment("api-2", 2))
    sent = [(r.method, r.headers.get("Content-Type"), r.url.path.rsplit("/", 1)[-1]) for r in cluster.requests()[before:]]
    assert sent == [("PATCH", APPLY_PATCH, "api"), ("POST", "application/json", "deployments"),
                    ("PATCH", "application/merge-patch+json", "api"), ("POST", "application/json", "deployments")]
    assert connector.get("apps/v1", "Deployment", "api", namespace="shop")["spec"]["replicas"] == 4
    assert connector.get("apps/v1", "Deployment", "api-2", namespace="shop")["spec"]["replicas"] == 2


def test_custom_resources_take_the_same_path(connector, cluster):
    connector.apply({"apiVersion": CNC[0], "kind": CNC[1], "metadata": {"name": "n1", "labels": {"pool": "a"}},
                     "spec": {"nodeSelector": "pool=a"},
                     "status": {"katalystCustomConfigList": [{"configType": "AdminQoSConfiguration", "hash": "abc"}]}})
    got = connector.get(*CNC, "n1")
    assert got["status"]["katalystCustomConfigList"][0]["hash"] == "abc" and got["kind"] == "CustomNodeConfig"
    connector.patch(*CNC, "n1", {"spec": {"nodeSelector": "pool=b"}})
    listed = connector.list(*CNC, label_selector="pool=a").items
    assert [(o["kind"], o["spec"]["nodeSelector"]) for o in listed] == [("CustomNodeConfig", "pool=b")]
    assert [r.url.path for r in cluster.requests("fetch")] == ["/apis/config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs/n1"]
    assert connector.delete(*CNC, "n1") is True and connector.get(*CNC, "n1") is None


def test_requests_that_cannot_be_addressed_are_refused_before_sending(connector):
    with pytest.raises(ConnectorError) as err:
        connector.list("example.com/v1", "Nothing")
    assert err.value.reason == "not_found" and "Nothing" in str(err.value) and "example.com/v1" in str(err.value)
    for call in (lambda: connector.apply({"kind": "Node", "metadata": {}}),
                 lambda: connector.get("v1", "Pod", "web-1"),
                 lambda: connector.patch("v1", "Node", "n1", {"op": "add"}, patch_type="json"),
                 lambda: connector.patch("v1", "Node", "n1", [], patch_type="yaml")):  # type: ignore[arg-type]
        with pytest.raises(ConnectorError) as err:
            call()
        assert err.value.reason == "invalid"


@pytest.mark.parametrize(("status", "reason"), [
    (400, "invalid"), (401, "unauthorized"), (403, "forbidden"), (409, "conflict"), (422, "invalid"), (500, "server"), (503, "server"),
])
def test_api_errors_keep_the_server_message(connector, cluster, status, reason):
    message = f'nodes "n1" refused with {status}'
    cluster.call(lambda: cluster.api["fetch v1/nodes"] << status << {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status, "message": message})
    with pytest.raises(ConnectorError) as err:
        connector.get("v1", "Node", "n1")
    assert (err.value.reason, err.value.status) == (reason, status)
    assert message in str(err.value)


# -- watching --------------------------------------------------------------------------------------


def test_watch_streams_changes_made_while_watching(connector, cluster):
    connector.apply(node("w0", {}))
    with closing(connector.watch("v1", "Node", timeout_seconds=10)) as events:
        replayed = next(events)
        assert (replayed.type, replayed.object["metadata"]["name"]) == ("ADDED", "w0"), "kmock replays what exists"
        cluster.wait_for_watchers()
        connector.apply(node("w1", {"pool": "a"}))
        connector.patch("v1", "Node", "w1", {"metadata": {"labels": {"pool": "b"}}})
        connector.delete("v1", "Node", "w1")
        seen: list[WatchEvent] = []
        for event in events:
            seen.append(event)
            if event.type == "DELETED":
                break
    assert [(e.type, e.object["metadata"]["name"]) for e in seen] == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    assert seen[1].object["metadata"]["labels"] == {"pool": "b"} and seen[1].object["kind"] == "Node"
    assert json.loads(json.dumps([e.object for e in seen])) == [e.object for e in seen]


def test_watch_ends_on_time_even_if_the_server_keeps_streaming(cluster, tmp_path):
    with connect(cluster.url, tmp_path, request_timeout=1) as conn:
        conn.apply(node("w0", {}))
        started = time.monotonic()
        events = list(conn.watch("v1", "Node", resource_version="7", timeout_seconds=1))
        elapsed = time.monotonic() - started
    assert [e.type for e in events] == ["ADDED"] and 1 <= elapsed < 5
    [request] = cluster.requests("watch v1/nodes")
    assert request.params == {"watch": "true", "resourceVersion": "7", "timeoutSeconds": "1", "allowWatchBookmarks": "true"}


def test_watch_from_an_expired_version_asks_for_a_relist(connector, cluster):
    cluster.call(lambda: cluster.api.expired_versions.add("3"))
    with pytest.raises(ConnectorError) as err:
        list(connector.watch("v1", "Node", resource_version="3", timeout_seconds=5))
    assert (err.value.reason, err.value.status) == ("conflict", 410) and "too old resource version" in str(err.value)


# -- configuration and reachability -----------------------------------------------------------------


def bad_settings(tmp_path: Path, case: str) -> KubernetesConnectorConfig:
    if case == "missing-file":
        return KubernetesConnectorConfig(kubeconfig_path=str(tmp_path / "absent"))
    if case == "directory":
        return KubernetesConnectorConfig(kubeconfig_path=str(tmp_path))
    if case == "garbage":
        (tmp_path / "kubeconfig").write_text(f"users:\n- token: {SECRET}\n  : : [unbalanced")
        return KubernetesConnectorConfig(kubeconfig_path=str(tmp_path / "kubeconfig"))
    if case == "not-a-mapping":
        return KubernetesConnectorConfig(kubeconfig_content=f"- {SECRET}")
    if case == "no-server":
        return KubernetesConnectorConfig(kubeconfig_content=kubeconfig("").replace("server: ''", f"token: {SECRET}"))
    if case == "unknown-context":
        return KubernetesConnectorConfig(kubeconfig_content=kubeconfig("https://127.0.0.1:6443"), context="staging")
    if case == "in-cluster":
        return KubernetesConnectorConfig(in_cluster=True)
    return KubernetesConnectorConfig()


@pytest.mark.parametrize(("case", "words"), [
    ("missing-file", "file not found"), ("directory", "cannot read"), ("garbage", "not valid YAML (line 3"),
    ("not-a-mapping", "not a YAML mapping"), ("no-server", "the cluster of context 'prod' has no server URL"), ("unknown-context", "'staging' is not in the kubeconfig (contexts: prod)"),
    ("in-cluster", "in-cluster configuration is unavailable"), ("nothing", "no kubeconfig given"),
])
def test_bad_configuration_is_a_clear_config_error_without_secrets(tmp_path, monkeypatch, case, words):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConnectorError) as err:
        KubernetesConnector(bad_settings(tmp_path, case))
    assert err.value.reason == "config"
    assert words in str(err.value)
    assert SECRET not in printed_chain(err.value), "a logged traceback must not quote the file either"


def printed_chain(exc: BaseException | None) -> str:
    """Every message a traceback of ``exc`` would print."""
    texts = []
    while exc is not None:
        texts.append(repr(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return "\n".join(texts)


def test_describe_shows_where_and_how_but_no_credential(cluster, tmp_path):
    with connect(cluster.url, tmp_path) as conn:
        assert conn.describe() == {"server": cluster.url, "context": "prod", "auth": "bearer token"}
    cert_user = {"client-certificate-data": "Y2VydA==", "client-key-data": "czNjcjN0LXRva2Vu", "password": SECRET}
    settings = KubernetesConnectorConfig(kubeconfig_content=kubeconfig(f"https://admin:{SECRET}@10.0.0.1:6443", user=cert_user))
    summary = KubernetesConnector(settings).describe()
    assert summary == {"server": "https://10.0.0.1:6443", "context": "prod", "auth": "client certificate"}
    assert SECRET not in repr(settings) and SECRET not in str(summary)


def test_connectors_leave_the_default_client_configuration_alone(cluster, tmp_path):
    with connect(cluster.url, tmp_path) as conn:
        conn.server_info()
    assert client.Configuration.get_default_copy().host == "http://localhost"
    assert not client.Configuration.get_default_copy().api_key


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fails_within(seconds: float, fn: Callable[[], Any]) -> ConnectorError:
    """Run ``fn`` in a thread so that a hang fails the test instead of stalling the suite."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        exc = pool.submit(fn).exception(timeout=seconds)
    finally:
        pool.shutdown(wait=False)
    assert isinstance(exc, ConnectorError), exc
    return exc


def test_a_closed_port_is_unreachable_within_seconds():
    port = free_port()
    conn = KubernetesConnector(KubernetesConnectorConfig(kubeconfig_content=kubeconfig(f"http://127.0.0.1:{port}"), request_timeout=2))
    err = fails_within(10, conn.server_info)
    assert err.reason == "unreachable" and f"127.0.0.1:{port}" in str(err) and "refused" in str(err).lower()
    assert SECRET not in str(err)


def test_a_server_that_never_answers_times_out():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        conn = KubernetesConnector(KubernetesConnectorConfig(kubeconfig_content=kubeconfig(f"http://127.0.0.1:{port}"),
                                                             request_timeout=1.0))
        started = time.monotonic()
        err = fails_within(10, conn.server_info)
    assert err.reason == "unreachable" and "timed out" in str(err).lower()
    assert time.monotonic() - started < 2.5, "one read timeout, no retries of the read"


def test_tls_to_a_plain_http_server_is_unreachable(cluster):
    server = cluster.url.replace("http://", "https://")
    conn = KubernetesConnector(KubernetesConnectorConfig(kubeconfig_content=kubeconfig(server), request_timeout=2))
    err = fails_within(10, lambda: conn.list("v1", "Node"))
    assert err.reason == "unreachable" and server in str(err) and "SSL" in str(err)


# -- registration through the API ---------------------------------------------------------------------


@pytest.mark.django_db
def test_registering_a_real_cluster_checks_the_connection_first(cluster, admin_api, django_capture_on_commit_callbacks):
    from core.models import ObjectChange
    from fleet.models import Cluster

    bad = admin_api.post("/api/v1/fleet/clusters/", {"name": "prod-1", "connector": "kubernetes", "kubeconfig": "::: not yaml"},
                         format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "connection_config", bad.content
    assert bad.json()["errors"]["connection"][0].startswith("unusable cluster configuration"), \
        "the connector's reason (config, not a network fault) is what the code and the message say"
    assert not Cluster.objects.exists()

    with django_capture_on_commit_callbacks() as callbacks:
        good = admin_api.post("/api/v1/fleet/clusters/", {"name": "prod-1", "connector": "kubernetes", "kubeconfig": kubeconfig(cluster.url),
                                                          "labels": {"region": "bj"}}, format="json")
    assert good.status_code == 201, good.content
    assert SECRET not in good.content.decode() and len(callbacks) >= 1, "the first sync is queued after commit"
    registered = Cluster.objects.get(name="prod-1")
    assert SECRET in registered.credentials
    assert all(SECRET not in str(c.after) for c in ObjectChange.objects.all())


def test_threads_of_one_connector_discover_the_api_once(tmp_path):
    """A cluster's watcher reads through one connector from a thread per kind: the first calls
    arrive together, and each used to run discovery (and write the same cache file at once)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.kubeapi import ApiServer, kubeconfig as emulated_kubeconfig, serve

    api = ApiServer()
    with serve(api) as url:
        path = tmp_path / "kubeconfig"
        path.write_text(emulated_kubeconfig(url))
        with KubernetesConnector(KubernetesConnectorConfig(kubeconfig_path=str(path), request_timeout=5)) as connector:
            kinds = [("v1", "Node"), ("v1", "Pod"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("batch/v1", "Job")] * 2
            with ThreadPoolExecutor(len(kinds)) as pool:
                assert all(items == [] for items in pool.map(lambda k: connector.list(*k).items, kinds))
    assert [r.path for r in api.requests if r.path == "/apis"] == ["/apis"], "one discovery for every thread"
