"""The placement simulator over a cluster's inventory (API), and the fleet simulator placing its pods
with the engine's default policy (deterministic under the seed)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.context import acting_as
from fleet.models import Cluster, Node, Pod
from scheduling import services, whatif_inventory

SIMULATE = "/api/v1/scheduling/simulate/"
POD = {"metadata": {"name": "web", "namespace": "web", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}]}}
STACK = {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 10}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}


@pytest.fixture
def inventory(db):
    """300 nodes: 120 small (8 CPUs) ones, 30 cordoned, 10 not ready; a busy node with running pods."""
    cluster = Cluster.objects.create(name="sim-1", connector="simulated", connector_config={"node_count": 1, "seed": 1})
    nodes = []
    for i in range(300):
        small = i < 120
        nodes.append(Node(cluster=cluster, name=f"n{i:03d}", labels={"pool": "A" if i % 2 else "B", "kubernetes.io/hostname": f"n{i:03d}"},
                          allocatable={"cpu": "8" if small else "32", "memory": "64Gi", "pods": "110"},
                          unschedulable=150 <= i < 180, ready=not 180 <= i < 190))
    Node.objects.bulk_create(nodes)
    Pod.objects.bulk_create(Pod(cluster=cluster, namespace="x", name=f"busy-{j}", uid=f"u{j}", node_name="n299", phase="Running",
                                requests={"cpu": "7", "memory": "8Gi"}) for j in range(4))
    return cluster


def test_snapshot_is_built_in_bulk(inventory):
    with CaptureQueriesContext(connection) as ctx:
        snapshot = whatif_inventory.cluster_snapshot(inventory)
    assert len(ctx) <= 3
    assert len(snapshot.nodes) == 300 and len(snapshot.pods) == 4
    cordoned = next(n for n in snapshot.nodes if n["metadata"]["name"] == "n150")
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in cordoned["spec"]["taints"]


def test_simulate_places_replicas_with_reasons(operator_api, inventory):
    response = operator_api.post(SIMULATE, {"cluster": "sim-1", "pod": POD, "replicas": 2000}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["nodes"] == 300 and body["existing_pods"] == 4
    run = body["results"][0]
    assert run["policy"] == "default"
    assert len(run["placements"]) == 2000 and run["placed"] + run["unschedulable"] == 2000
    assert run["unschedulable"] > 0
    reasons = run["failure_messages"][0]["message"]
    assert reasons.startswith("0/300 nodes are available:")
    assert "Insufficient cpu" in reasons and "node(s) had untolerated taint {node.kubernetes.io/unschedulable: }" in reasons
    assert "30 node(s) had untolerated taint {node.kubernetes.io/unschedulable: }" in reasons
    assert "10 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in reasons
    for name, usage in run["node_usage"].items():
        assert usage["requested"]["cpu"] <= usage["allocatable"]["cpu"]
    placed_on = {n for n in run["placements"] if n}
    assert not placed_on & {f"n{i}" for i in range(150, 190)}
    assert 0 < run["allocation_rate"]["cpu"] <= 1 and "cpu" in run["fragmentation"]
    assert run["chart"]["nodes"] and len(run["chart"]["nodes"]) == len(run["chart"]["cpu"])


def test_two_policies_side_by_side_and_hot_reload(operator_api, inventory):
    with acting_as("test"):
        stack, _ = services.save_policy(services.PolicySpec("stack", config=STACK))
    body = operator_api.post(SIMULATE, {"cluster": "sim-1", "pod": POD, "replicas": 20, "policy": "default",
                                        "compare_with": "stack"}, format="json").json()
    spread, packed = body["results"]
    assert (spread["policy"], packed["policy"]) == ("default", "stack")
    assert len(set(spread["placements"])) > len(set(packed["placements"]))  # spreading uses more nodes
    # the pod's own annotation picks the policy; a change is seen by the next simulation
    annotated = {**POD, "metadata": {**POD["metadata"], "annotations": {"sched.cloud.ctrip.com/policy": "stack"}}}
    first = operator_api.post(SIMULATE, {"cluster": "sim-1", "pod": annotated, "replicas": 20}, format="json").json()
    assert first["results"][0]["placements"] == packed["placements"]
    with acting_as("test"):
        services.save_policy(services.PolicySpec("stack", config={}), instance=stack)
    second = operator_api.post(SIMULATE, {"cluster": "sim-1", "pod": annotated, "replicas": 20}, format="json").json()
    assert second["results"][0]["placements"] == spread["placements"]


def test_simulate_refuses_bad_input(operator_api, viewer_api, inventory):
    unknown = operator_api.post(SIMULATE, {"cluster": "nope", "pod": POD}, format="json")
    assert unknown.status_code == 404 and unknown.json()["errors"].keys() == {"cluster"}
    policy = operator_api.post(SIMULATE, {"cluster": "sim-1", "pod": POD, "policy": "nope"}, format="json")
    assert policy.status_code == 400 and policy.json()["code"] == "unknown_policy"
    bad = operator_api.post(SIMULATE, {"cluster": "sim-1", "yaml": "spec: {containers: [{name: a, resources: "
                                                                     "{requests: {cpu: lots}}}]}"}, format="json")
    assert bad.status_code == 400 and bad.json()["errors"].keys() == {"pod"}
    assert operator_api.post(SIMULATE, {"cluster": "sim-1", "pod": POD, "replicas": 0}, format="json").status_code == 400
    assert viewer_api.post(SIMULATE, {"cluster": "sim-1", "pod": POD}, format="json").status_code == 403


def test_fleet_simulator_places_with_the_engine_deterministically():
    from fleet.simulator import ClusterSpec, SimulatedCluster

    spec = ClusterSpec(name="det", region="bj", node_count=120, seed=11)
    first, second = SimulatedCluster(spec).state(0), SimulatedCluster(spec).state(0)
    placements = [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in first.pods]
    assert placements == [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in second.pods]
    nodes = {n.name: n for n in first.nodes}
    for pod in first.pods:
        node = nodes.get(pod["spec"].get("nodeName"))
        if node is None or pod["status"]["phase"] != "Running":
            continue
        assert node.schedulable and node.ready
        selector = pod["spec"].get("nodeSelector") or {}
        assert all(node.labels.get(k) == v for k, v in selector.items())
        if node.taints:  # GPU nodes: only pods that tolerate the taint
            assert pod["spec"].get("tolerations")
    for node in first.nodes:
        assert node.used_cpu <= node.cpu_milli and node.used_memory <= node.memory_mi and node.used_gpus <= node.gpus


def test_fleet_simulator_spreads_like_the_default_policy():
    """The default policy's LeastAllocated/balanced scores spread replicas: no node takes a
    workload's replicas while equal empty nodes stay idle."""
    from fleet.simulator import Placer, SimNode, _node_object, MACHINE_MODELS, ClusterSpec

    spec = ClusterSpec(name="t", region="bj", node_count=4, seed=1)
    nodes = []
    for i in range(4):
        node = SimNode(f"t-{i}", {"kubernetes.io/hostname": f"t-{i}"}, [], 31_500, 126_000, 0, True, True)
        node.obj = _node_object(spec, i, MACHINE_MODELS[0], node)
        nodes.append(node)
    placer = Placer(nodes)
    pod_spec = {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    placed = [placer.place(f"ns/p-{i}", pod_spec, 1000, 1024, 0).name for i in range(8)]
    assert sorted(placed) == ["t-0", "t-0", "t-1", "t-1", "t-2", "t-2", "t-3", "t-3"]
