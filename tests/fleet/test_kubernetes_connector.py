"""The Kubernetes connector over HTTP against kmock's Kubernetes emulator (no client patching)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest
import yaml
from kmock._internal.apps import Server
from kmock._internal.k8s import KubernetesEmulator
from kmock._internal.references import ResourceInfo

from fleet.connectors.base import ConnectorError
from fleet.connectors.kubernetes import KubernetesConnector, KubernetesConnectorConfig
from fleet.inventory import build_snapshot

SECRET = "s3cr3t-token"
CNC = ("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig")


@pytest.fixture
def emulator():
    """kmock's emulator serving HTTP on a free loopback port, from its own event-loop thread."""
    state: dict = {}

    async def serve() -> None:
        async with KubernetesEmulator() as kmock, Server(kmock) as server:
            kmock.resources.load_bundled()
            kmock.resources["config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs"] = ResourceInfo(
                kind="CustomNodeConfig", namespaced=False, verbs={"get", "list", "create", "patch", "update", "delete", "watch"})
            state["stop"] = asyncio.Event()
            state["url"] = str(server.url).rstrip("/")
            await state["stop"].wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while "url" not in state and time.monotonic() < deadline:
        time.sleep(0.02)
    yield state["url"]
    loop.call_soon_threadsafe(state["stop"].set)
    thread.join(timeout=10)


def kubeconfig(server: str, context: str = "prod") -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": SECRET}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
    })


@pytest.fixture
def connector(emulator, tmp_path: Path):
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(emulator))
    with KubernetesConnector(KubernetesConnectorConfig(kubeconfig_path=str(path), context="prod")) as conn:
        yield conn


def node(name: str, labels: dict, cpu: str = "32") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": "128Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}


def test_server_info_reports_version_and_resources(connector):
    info = connector.server_info()
    assert info.kubernetes_version.startswith("v1.")
    assert {"v1/nodes", "v1/pods", "apps/v1/deployments", "config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs"} <= set(info.api_resources)


def test_inventory_reads_nodes_workloads_and_pods(connector):
    connector.apply(node("n1", {"machineModel": "A4", "diskMode": "hdd"}))
    connector.apply(node("n2", {"machineModel": "A3", "diskMode": "ssd"}, cpu="64"))
    connector.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                     "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}})
    connector.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop", "uid": "u1"},
                     "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                     "status": {"phase": "Running"}})
    selected = connector.list("v1", "Node", label_selector="machineModel=A4,diskMode in (hdd)").items
    assert [n["metadata"]["name"] for n in selected] == ["n1"] and selected[0]["kind"] == "Node"
    snap = build_snapshot(connector.list_nodes().items, connector.list_pods().items, connector.list_workloads())
    assert snap.errors == []
    assert snap.nodes["n2"].cpu_allocatable_milli == 64000 and snap.nodes["n1"].cpu_requested_milli == 1000
    assert snap.workloads[("shop", "Deployment", "web")].replicas == 2


def test_get_apply_patch_delete(connector):
    assert connector.get("apps/v1", "Deployment", "api", namespace="shop") is None
    connector.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "shop"}, "spec": {"replicas": 1}})
    connector.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "shop"}, "spec": {"replicas": 3}})
    assert connector.get("apps/v1", "Deployment", "api", namespace="shop")["spec"]["replicas"] == 3
    connector.patch("apps/v1", "Deployment", "api", {"spec": {"replicas": 5}}, namespace="shop")
    connector.patch("apps/v1", "Deployment", "api", [{"op": "add", "path": "/metadata/labels", "value": {"tier": "web"}}],
                    namespace="shop", patch_type="json")
    got = connector.get("apps/v1", "Deployment", "api", namespace="shop")
    assert got["spec"]["replicas"] == 5 and got["metadata"]["labels"] == {"tier": "web"}
    assert connector.delete("apps/v1", "Deployment", "api", namespace="shop") is True
    assert connector.delete("apps/v1", "Deployment", "api", namespace="shop") is False
    assert connector.get("apps/v1", "Deployment", "api", namespace="shop") is None


def test_custom_resources_through_the_same_path(connector):
    connector.apply({"apiVersion": CNC[0], "kind": CNC[1], "metadata": {"name": "n1"},
                     "spec": {}, "status": {"katalystCustomConfigList": [{"configType": "AdminQoSConfiguration", "hash": "abc"}]}})
    got = connector.get(*CNC, "n1")
    assert got["status"]["katalystCustomConfigList"][0]["hash"] == "abc"
    assert [o["metadata"]["name"] for o in connector.list(*CNC).items] == ["n1"]


def test_unknown_kind_and_bad_objects(connector):
    with pytest.raises(ConnectorError) as err:
        connector.list("example.com/v1", "Nothing")
    assert err.value.reason == "not_found" and "Nothing" in str(err.value)
    with pytest.raises(ConnectorError) as err:
        connector.apply({"kind": "Node", "metadata": {}})
    assert err.value.reason == "invalid"


def test_watch_reports_changes(connector):
    connector.apply(node("w0", {}))

    def later() -> None:
        time.sleep(0.5)
        connector.apply(node("w1", {}))

    threading.Thread(target=later, daemon=True).start()
    seen = []
    for event in connector.watch("v1", "Node", timeout_seconds=3):
        seen.append((event.type, event.object["metadata"]["name"]))
        if ("ADDED", "w1") in seen:
            break
    assert ("ADDED", "w1") in seen


@pytest.mark.parametrize("setup", ["missing", "garbage", "not-a-mapping", "unknown-context", "nothing"])
def test_bad_configuration_is_a_clear_config_error_without_secrets(tmp_path, setup):
    path = tmp_path / "kubeconfig"
    settings = {
        "missing": KubernetesConnectorConfig(kubeconfig_path=str(tmp_path / "absent")),
        "garbage": KubernetesConnectorConfig(kubeconfig_content=f"token: {SECRET}\n  : : [unbalanced"),
        "not-a-mapping": KubernetesConnectorConfig(kubeconfig_content=f"- {SECRET}"),
        "unknown-context": KubernetesConnectorConfig(kubeconfig_content=kubeconfig("https://127.0.0.1:6443"), context="staging"),
        "nothing": KubernetesConnectorConfig(),
    }[setup]
    path.write_text("")
    with pytest.raises(ConnectorError) as err:
        KubernetesConnector(settings)
    assert err.value.reason == "config" and str(err.value)
    assert SECRET not in str(err.value)


def test_describe_never_shows_the_token(emulator):
    conn = KubernetesConnector(KubernetesConnectorConfig(kubeconfig_content=kubeconfig(emulator)))
    summary = conn.describe()
    assert summary["server"] == emulator and summary["auth"] == "bearer token" and SECRET not in str(summary)


def test_an_unreachable_server_fails_fast():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    conn = KubernetesConnector(KubernetesConnectorConfig(kubeconfig_content=kubeconfig(f"http://127.0.0.1:{port}"), request_timeout=2))
    started = time.monotonic()
    with pytest.raises(ConnectorError) as err:
        conn.server_info()
    assert err.value.reason == "unreachable" and f"127.0.0.1:{port}" in str(err.value)
    assert time.monotonic() - started < 10
    assert SECRET not in str(err.value)


@pytest.mark.django_db
def test_registering_a_real_cluster_checks_the_connection_first(emulator, admin_api, django_capture_on_commit_callbacks):
    from core.models import ObjectChange
    from fleet.models import Cluster

    bad = admin_api.post("/api/v1/fleet/clusters/", {"name": "prod-1", "connector": "kubernetes", "kubeconfig": "::: not yaml"},
                         format="json")
    assert bad.status_code == 400 and "connection" in bad.json() and bad.json()["reason"] == ["config"]
    assert not Cluster.objects.exists()

    with django_capture_on_commit_callbacks() as callbacks:
        good = admin_api.post("/api/v1/fleet/clusters/", {"name": "prod-1", "connector": "kubernetes", "kubeconfig": kubeconfig(emulator),
                                                          "labels": {"region": "bj"}}, format="json")
    assert good.status_code == 201, good.content
    assert SECRET not in good.content.decode() and len(callbacks) >= 1, "the first sync is queued after commit"
    cluster = Cluster.objects.get(name="prod-1")
    assert SECRET in cluster.credentials
    assert all(SECRET not in str(c.after) for c in ObjectChange.objects.all())
