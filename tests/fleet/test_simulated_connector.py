"""The simulated connector behaves like an API server for what Meridian does to clusters."""

from __future__ import annotations

import pytest

from fleet.connectors.base import ConnectorError
from fleet.connectors.simulated import SimulatedConnector
from fleet.inventory import build_snapshot
from fleet.simulator import ClusterSpec

SPEC = ClusterSpec(name="sh-7", region="sh", node_count=120, seed=3)


@pytest.fixture
def connector():
    return SimulatedConnector(SPEC, clock=lambda: 10_000 * SPEC.tick_seconds)


def deployment(name="checkout", replicas=6, cpu="2"):
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}},
    }


def test_server_info_lists_the_resources_meridian_uses(connector):
    info = connector.server_info()
    assert info.kubernetes_version.startswith("v1.")
    assert {"v1/nodes", "apps/v1/deployments", "metrics.k8s.io/v1beta1/nodes"} <= set(info.api_resources)


def test_list_filters_by_label_selector_and_rejects_bad_ones(connector):
    a4 = connector.list("v1", "Node", label_selector="machineModel=A4,diskMode in (hdd)").items
    assert a4 and all(n["metadata"]["labels"]["machineModel"] == "A4" and n["metadata"]["labels"]["diskMode"] == "hdd" for n in a4)
    with pytest.raises(ConnectorError) as err:
        connector.list("v1", "Node", label_selector="machineModel in (A4")
    assert err.value.reason == "invalid"


def test_an_applied_deployment_runs_pods_and_raises_the_water_level(connector):
    before = build_snapshot(connector.list_nodes().items, connector.list_pods().items, connector.list_workloads())
    created = connector.apply(deployment())
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"] == "1" and created["metadata"]["generation"] == 1
    after = build_snapshot(connector.list_nodes().items, connector.list_pods().items, connector.list_workloads())
    pods = [p for p in after.pods.values() if p.owner_name == "checkout" and p.owner_kind == "Deployment"]
    assert len(pods) == 6 and all(p.node_name for p in pods)
    assert sum(n.cpu_requested_milli for n in after.nodes.values()) == sum(n.cpu_requested_milli for n in before.nodes.values()) + 12000
    assert after.workloads[("shop", "Deployment", "checkout")].ready_replicas == 6

    scaled = connector.patch("apps/v1", "Deployment", "checkout", {"spec": {"replicas": 2}}, namespace="shop")
    assert scaled["metadata"]["generation"] == 2 and scaled["metadata"]["resourceVersion"] == "2"
    assert len([p for p in connector.list_pods().items if p["metadata"]["name"].startswith("checkout-")]) == 2


def test_stale_resource_version_is_a_conflict(connector):
    connector.apply(deployment())
    connector.apply(deployment(replicas=3))
    stale = deployment(replicas=9)
    stale["metadata"]["resourceVersion"] = "1"
    with pytest.raises(ConnectorError) as err:
        connector.apply(stale)
    assert err.value.reason == "conflict"
    assert connector.get("apps/v1", "Deployment", "checkout", namespace="shop")["spec"]["replicas"] == 3


def test_custom_resources_round_trip_and_delete(connector):
    cnc = {"apiVersion": "config.katalyst.kubewharf.io/v1alpha1", "kind": "CustomNodeConfig",
           "metadata": {"name": "sh-7-a3-00001"}, "status": {"katalystCustomConfigList": []}}
    connector.apply(cnc)
    got = connector.get("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig", "sh-7-a3-00001")
    assert "status" not in got, "Katalyst kinds keep status behind the status subresource, as on an API server"
    connector.apply_status(cnc)
    got = connector.get("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig", "sh-7-a3-00001")
    assert got["status"] == {"katalystCustomConfigList": []}
    connector.apply({**cnc, "status": {"katalystCustomConfigList": [{"configName": "x"}]}})
    assert connector.get("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig", "sh-7-a3-00001")["status"] == \
        {"katalystCustomConfigList": []}
    patched = connector.patch("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig", "sh-7-a3-00001",
                              [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}], patch_type="json")
    assert patched["metadata"]["labels"] == {"a": "b"}
    assert connector.delete("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig", "sh-7-a3-00001") is True
    assert connector.delete("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig", "sh-7-a3-00001") is False
    assert connector.get("config.katalyst.kubewharf.io/v1alpha1", "CustomNodeConfig", "sh-7-a3-00001") is None


def test_cordoning_a_node_through_a_patch(connector):
    name = connector.list_nodes().items[0]["metadata"]["name"]
    connector.patch("v1", "Node", name, {"spec": {"unschedulable": True}, "metadata": {"labels": {"drained": "true"}}})
    node = connector.get("v1", "Node", name)
    assert node["spec"]["unschedulable"] is True and node["metadata"]["labels"]["drained"] == "true"
    assert not [p for p in connector.list_pods().items if p["spec"].get("nodeName") == name and p["status"]["phase"] == "Running"]


@pytest.mark.parametrize("bad", [{}, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, {"kind": "X", "metadata": {"name": "x"}}])
def test_malformed_objects_are_invalid(connector, bad):
    with pytest.raises(ConnectorError) as err:
        connector.apply(bad)
    assert err.value.reason == "invalid"


def test_missing_objects(connector):
    assert connector.get("apps/v1", "Deployment", "nope", namespace="shop") is None
    with pytest.raises(ConnectorError) as err:
        connector.patch("apps/v1", "Deployment", "nope", {"spec": {}}, namespace="shop")
    assert err.value.reason == "not_found"


def test_watch_reports_changes_between_ticks():
    now = [0.0]
    connector = SimulatedConnector(SPEC, clock=lambda: now[0])

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] < 2 * SPEC.tick_seconds:
            connector.apply(deployment(name=f"web-{int(now[0])}", replicas=1))

    events = list(connector.watch("apps/v1", "Deployment", timeout_seconds=int(3 * SPEC.tick_seconds), sleep=sleep))
    assert [e.type for e in events if e.object["metadata"]["name"].startswith("web-")] == ["ADDED"]


class SlowClock:
    """Time that moves a tick every time it is read: a cluster larger than a tick can build."""

    def __init__(self) -> None:
        self.now = 10_000 * SPEC.tick_seconds

    def __call__(self) -> float:
        self.now += SPEC.tick_seconds
        return self.now


def test_a_sync_reads_one_moment_of_the_simulation_and_builds_it_once(monkeypatch):
    from fleet.simulator import SimulatedCluster
    from fleet.sync import read_cluster

    builds = []
    build = SimulatedCluster._build
    monkeypatch.setattr(SimulatedCluster, "_build", lambda self, tick: builds.append(tick) or build(self, tick))
    connector = SimulatedConnector(SPEC, clock=SlowClock())
    snapshot, _, _ = read_cluster(connector)
    assert len(builds) == 1, f"built {len(builds)} times for ticks {builds}"
    placed = {pod.node_name for pod in snapshot.pods.values() if pod.node_name}
    assert placed and placed <= set(snapshot.nodes), "every pod is on a node of the same moment"
    later = connector.list("v1", "Node")  # outside a moment, reads follow the clock again
    assert later.resource_version.split(".")[0] != str(builds[0]) and len(builds) > 1


def test_a_read_lets_go_of_the_simulated_state_when_it_ends(monkeypatch):
    """What a sync read is the sync's: the connector keeps none of it for the writes that follow
    (a large cluster's objects, which the collector walked when the sync ended)."""
    import weakref

    from fleet.simulator import SimulatedCluster

    states = []
    build = SimulatedCluster._build
    monkeypatch.setattr(SimulatedCluster, "_build", lambda self, tick: states.append(weakref.ref(state := build(self, tick))) or state)
    connector = SimulatedConnector(SPEC, clock=lambda: 0.0)
    with connector.one_moment():
        nodes = connector.list("v1", "Node").items
        with connector.one_moment():  # an inner block keeps the outer one's moment and state
            assert connector.list("v1", "Node").items[0] is nodes[0]
        assert connector.list("v1", "Pod").items and len(states) == 1
    del nodes
    assert states[0]() is None, "the connector still holds the state it built for the read"


def test_a_read_takes_the_applied_objects_once_and_sees_its_own_writes(connector):
    """A sync's lists in one moment read the store once (it is the database's for a cluster of the
    inventory: a query per list); what the connector applies in the moment is seen by its next
    read, and another moment reads the store again."""
    reads = []
    store_all = connector.store.all
    connector.store.all = lambda: reads.append(1) or store_all()
    with connector.one_moment():
        connector.server_info()
        connector.list_nodes(), connector.list_pods(), connector.list_workloads()
        assert len(reads) == 1
        connector.apply(deployment(replicas=2))
        assert len([p for p in connector.list_pods().items if p["metadata"]["name"].startswith("checkout-")]) == 2
        assert len(reads) == 2
    connector.store.put(("apps/v1", "Deployment", "shop", "checkout"), deployment(replicas=3))  # written elsewhere
    with connector.one_moment():
        assert len([p for p in connector.list_pods().items if p["metadata"]["name"].startswith("checkout-")]) == 3
    assert len(reads) == 3
