"""The API server emulator (``tests.kubeapi``) behaves as a real API server where Meridian's
flows depend on it; checked over HTTP, through the official client where it can say it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from fleet.connectors.base import ConnectorError
from fleet.connectors.kubernetes import KubernetesConnector, KubernetesConnectorConfig
from tests.kubeapi import ApiServer, kubeconfig, serve

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


@pytest.fixture
def server(tmp_path):
    api = ApiServer(bookmark_seconds=0.3)
    with serve(api) as url:
        path = tmp_path / "kubeconfig"
        path.write_text(kubeconfig(url))
        with KubernetesConnector(KubernetesConnectorConfig(kubeconfig_path=str(path), request_timeout=5, page_size=2)) as connector:
            yield api, url, connector


def call(url: str, method: str, path: str, body: Any, content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{url}{path}", method=method, data=json.dumps(body).encode(), headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_stale_resource_version_is_a_conflict(server):
    api, url, connector = server
    stored = connector.apply(DEPLOYMENT)
    connector.patch("apps/v1", "Deployment", "web", {"spec": {"replicas": 4}}, namespace="shop")
    stale = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "resourceVersion": stored["metadata"]["resourceVersion"]}}
    with pytest.raises(ConnectorError) as err:
        connector.apply(stale)
    assert err.value.status == 409 and err.value.reason == "conflict"
    assert api.object("apps/v1/deployments", "web", "shop")["spec"]["replicas"] == 4


def test_server_side_apply_owns_fields_per_manager(server):
    api, url, _ = server
    path = "/apis/apps/v1/namespaces/shop/deployments/web"
    assert call(url, "PATCH", f"{path}?fieldManager=a", DEPLOYMENT, "application/apply-patch+yaml")[0] == 201
    taken = {**DEPLOYMENT, "spec": {"replicas": 5}}
    status, body = call(url, "PATCH", f"{path}?fieldManager=b", taken, "application/apply-patch+yaml")
    assert status == 409 and body["reason"] == "Conflict" and 'conflict with "a": .spec.replicas' in body["message"]
    assert call(url, "PATCH", f"{path}?fieldManager=b&force=true", taken, "application/apply-patch+yaml")[0] == 200
    # "a" no longer owns replicas; applying without the image drops the field "a" alone owned
    without_image = {**DEPLOYMENT, "spec": {"template": {"spec": {"containers": []}}}}
    assert call(url, "PATCH", f"{path}?fieldManager=a", without_image, "application/apply-patch+yaml")[0] == 200
    stored = api.object("apps/v1/deployments", "web", "shop")
    assert stored["spec"] == {"replicas": 5, "template": {"spec": {"containers": []}}}


def test_lists_page_at_one_version_and_an_old_continue_token_is_gone(server):
    api, url, connector = server
    for i in range(5):
        api.put("v1/nodes", {"metadata": {"name": f"n{i}", "labels": {"pool": "a" if i % 2 else "b"}}})
    listed = connector.list("v1", "Node")
    assert [n["metadata"]["name"] for n in listed.items] == [f"n{i}" for i in range(5)]
    assert [r.query.get("limit") for r in api.requests if r.path == "/api/v1/nodes"] == ["2", "2", "2"]
    assert [n["metadata"]["name"] for n in connector.list("v1", "Node", label_selector="pool=a").items] == ["n1", "n3"]
    status, page = call(url, "GET", "/api/v1/nodes?limit=2", None)
    api.put("v1/nodes", {"metadata": {"name": "n9"}})
    api.compact()  # etcd keeps no revision older than the last write
    status, gone = call(url, "GET", f"/api/v1/nodes?limit=2&continue={page['metadata']['continue']}", None)
    assert status == 410 and gone["reason"] == "Expired"


def test_watches_stream_changes_bookmarks_and_410_after_compaction(server):
    api, url, connector = server
    api.put("v1/nodes", {"metadata": {"name": "n1"}})
    version = connector.list("v1", "Node").resource_version
    api.put("v1/nodes", {"metadata": {"name": "n1", "labels": {"x": "1"}}})
    events = list(connector.watch("v1", "Node", resource_version=version, timeout_seconds=1))
    assert [e.type for e in events][:1] == ["MODIFIED"] and events[0].object["metadata"]["labels"] == {"x": "1"}
    assert "BOOKMARK" in [e.type for e in events], "bookmarks while nothing happens"
    api.compact()
    with pytest.raises(ConnectorError) as err:
        list(connector.watch("v1", "Node", resource_version=version, timeout_seconds=1))
    assert err.value.status == 410


def test_faults_on_demand(server):
    api, url, connector = server
    api.fail(500, times=1, match="/api/v1/nodes")
    with pytest.raises(ConnectorError) as err:
        connector.list("v1", "Node")
    assert err.value.status == 500 and err.value.transient
    assert connector.list("v1", "Node").items == []


def test_a_status_needs_its_object(server):
    api, url, connector = server
    cnc = {"apiVersion": "config.katalyst.kubewharf.io/v1alpha1", "kind": "CustomNodeConfig", "metadata": {"name": "n1"},
           "status": {"katalystCustomConfigList": []}}
    with pytest.raises(ConnectorError) as err:
        connector.apply_status(cnc)
    assert err.value.status == 404 and api.object("config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs", "n1") is None
