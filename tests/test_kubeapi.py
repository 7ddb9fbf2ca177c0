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


PENDING = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "shop"},
           "spec": {"schedulerName": "meridian", "containers": [{"name": "c", "image": "nginx"}]}}


def test_binding_assigns_a_pending_pod_once_as_the_registry_does(server):
    """``pods/binding``: 201 and the pod assigned (PodScheduled true), then 409 with upstream's
    words for a second bind, 404 for a missing pod, 409 for another pod of the same name (UID
    precondition), 400 when the names differ, 405 for another verb."""
    api, url, connector = server
    uid = api.put("v1/pods", PENDING)["metadata"]["uid"]
    version = connector.list("v1", "Pod").resource_version
    connector.bind("shop", "p1", "n1", uid=uid)
    pod = api.object("v1/pods", "p1", "shop")
    assert pod["spec"]["nodeName"] == "n1"
    assert [(c["type"], c["status"]) for c in pod["status"]["conditions"]] == [("PodScheduled", "True")]
    assert pod["status"]["conditions"][0]["lastTransitionTime"]
    events = list(connector.watch("v1", "Pod", resource_version=version, timeout_seconds=1))
    assert [(e.type, e.object["spec"].get("nodeName")) for e in events if e.type != "BOOKMARK"] == [("MODIFIED", "n1")]

    with pytest.raises(ConnectorError) as err:
        connector.bind("shop", "p1", "n2", uid=uid)
    assert err.value.status == 409 and err.value.reason == "conflict"
    assert 'Operation cannot be fulfilled on pods/binding "p1": pod p1 is already assigned to node "n1"' in str(err.value)
    with pytest.raises(ConnectorError) as err:
        connector.bind("shop", "gone", "n1")
    assert err.value.status == 404 and 'pods "gone" not found' in str(err.value)
    api.put("v1/pods", {**PENDING, "metadata": {"name": "p2", "namespace": "shop"}})
    with pytest.raises(ConnectorError) as err:
        connector.bind("shop", "p2", "n1", uid="another-pod")
    assert err.value.status == 409 and "Precondition failed: UID in precondition: another-pod" in str(err.value)
    assert api.bindings() == {("shop", "p1"): ["n1"]}

    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p3"}, "target": {"kind": "Node", "name": "n1"}}
    status, body = call(url, "POST", "/api/v1/namespaces/shop/pods/p2/binding", binding)
    assert status == 400 and body["message"] == "name in URL does not match name in Binding object"
    path = "/api/v1/namespaces/shop/pods/p2/binding"
    status, body = call(url, "POST", path, {**binding, "metadata": {"name": "p2"}, "target": {}})
    assert status == 422 and "target.name: Required value" in body["message"]
    assert call(url, "PUT", "/api/v1/namespaces/shop/pods/p2/binding", binding)[0] == 405
    assert call(url, "POST", "/api/v1/namespaces/shop/pods/p2/eviction", binding)[0] == 404, "a subresource it does not serve"
    status, body = call(url, "POST", f"{path}?fieldValidation=Strict", {**binding, "metadata": {"name": "p2"}, "extra": 1})
    assert status == 400 and 'unknown field "extra"' in body["message"]
    assert call(url, "POST", "/api/v1/namespaces/shop/pods/p2/binding", {**binding, "metadata": {"name": "p2"}})[0] == 201


def test_events_are_created_as_events_k8s_io_validates_them_and_patched(server):
    api, url, connector = server
    event = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "p1.17f0", "namespace": "shop"},
             "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "meridian", "reportingInstance": "meridian-host",
             "action": "Scheduling", "reason": "FailedScheduling", "type": "Warning", "note": "0/3 nodes are available.",
             "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "p1"}}
    connector.create(event)
    with pytest.raises(ConnectorError) as err:
        connector.create(event)
    assert err.value.status == 409
    with pytest.raises(ConnectorError) as err:
        connector.create({**event, "metadata": {"name": "p1.17f1", "namespace": "shop"}, "eventTime": None, "action": ""})
    assert err.value.status == 422 and "[eventTime: Required value, action: Required value]" in str(err.value)
    series = {"series": {"count": 2, "lastObservedTime": "2025-01-01T00:00:01.000000Z"}}
    connector.patch("events.k8s.io/v1", "Event", "p1.17f0", series, namespace="shop")
    assert api.object("events.k8s.io/v1/events", "p1.17f0", "shop")["series"]["count"] == 2


def test_node_metrics_are_served_read_only_as_metrics_server_serves_them(server):
    api, url, connector = server
    api.put("v1/nodes", {"metadata": {"name": "n1", "labels": {"pool": "a"}}})
    api.node_metrics("n1", {"cpu": "1500m", "memory": "2Gi"}, timestamp="2025-01-01T00:00:00Z")
    assert "metrics.k8s.io/v1beta1/nodes" in connector.server_info().api_resources
    [item] = connector.list("metrics.k8s.io/v1beta1", "NodeMetrics").items
    assert item["usage"] == {"cpu": "1500m", "memory": "2Gi"} and item["timestamp"] == "2025-01-01T00:00:00Z"
    assert connector.list("metrics.k8s.io/v1beta1", "NodeMetrics", label_selector="pool=b").items == []
    with pytest.raises(ConnectorError) as err:
        list(connector.watch("metrics.k8s.io/v1beta1", "NodeMetrics", timeout_seconds=1))
    assert err.value.status == 405
    assert call(url, "POST", "/apis/metrics.k8s.io/v1beta1/nodes", {"metadata": {"name": "n2"}})[0] == 405
    status, resources = call(url, "GET", "/apis/metrics.k8s.io/v1beta1", None)
    assert [(r["name"], r["verbs"]) for r in resources["resources"]] == [("nodes", ["get", "list"])]
