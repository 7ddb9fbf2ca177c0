"""The CPU co-location plugins through the framework contract and the placement engine."""

from __future__ import annotations

import json

import pytest

from scheduling.cpu.cpuset import TOPOLOGY_ANNOTATION
from scheduling.cpu.state import RESERVED_CPUS_ANNOTATION
from scheduling.engine import PluginSpec, Policy, Scheduler
from scheduling.framework import PLUGINS, filter_nodes, score_nodes
from scheduling.plugins.cpuset import CPU_STATE_ANNOTATION, node_cpu_state

from .cpu_fixtures import SEED_RESERVED, SEED_TOPOLOGY


def host(name: str, **annotations: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                         "annotations": {TOPOLOGY_ANNOTATION: SEED_TOPOLOGY.to_annotation(),
                                         RESERVED_CPUS_ANNOTATION: SEED_RESERVED, **annotations}},
            "status": {"allocatable": {"cpu": "104", "memory": "512Gi", "pods": "110"}}}


def plain(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "104", "memory": "512Gi", "pods": "110"}}}


def pod(name: str, cpu: str, *, exclusive: bool = True, node: str = "", app: str = "", annotations: dict | None = None) -> dict:
    notes = {"cpu-isolate-mode": "exclusive", "alloc-spec": '{"cpu":"SameCoreFirst"}'} if exclusive else {}
    notes.update(annotations or {})
    spec: dict = {"containers": [{"name": "engine", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "db", "labels": {"app": app or name},
                                                             "annotations": notes}, "spec": spec}


def test_registered_in_the_framework():
    assert {"CPUSetExclusive", "CPUSetShared"} <= set(PLUGINS)


def test_exclusive_filter_reasons():
    nodes = [host("h1"), host("h2"), plain("p1")]
    running = [pod("a", "64", node="h2", annotations={"alloc-status": json.dumps({"cpu": list(range(4, 36)) + list(range(56, 88))})})]
    result = filter_nodes("CPUSetExclusive", pod("new", "48"), nodes, running)
    assert result["h1"].ok
    assert result["h2"].reasons == ["Insufficient exclusive cpu"] and result["h2"].code == "Unschedulable"
    assert result["p1"].reasons == ["node(s) had no CPU topology"] and result["p1"].code == "UnschedulableAndUnresolvable"
    over = filter_nodes("CPUSetExclusive", pod("big", "65"), nodes, [])
    assert over["h1"].reasons == ["request exceeds 2/3 of sellable CPUs (64)"]
    # not exclusive: Skip, every node passes
    assert all(r.ok for r in filter_nodes("CPUSetExclusive", pod("s", "8", exclusive=False), nodes, running).values())


def test_machine_max_list_from_args():
    nodes = [host("h1"), host("h2")]
    running = [pod("inv-0", "4", node="h1", app="inve", annotations={"alloc-status": '{"cpu":[4,5,56,57]}'})]
    args = {"machineMaxList": [{"key": "inve", "value": 1}]}
    result = filter_nodes("CPUSetExclusive", pod("inv-1", "4", app="inve"), nodes, running, args)
    assert result["h1"].reasons == ["app inve already has 1 instance(s) on this node (machineMaxList)"] and result["h2"].ok
    shared = filter_nodes("CPUSetShared", pod("inv-2", "2", exclusive=False, app="inve"), nodes, running, args)
    assert not shared["h1"].ok and shared["h2"].ok
    with pytest.raises(ValueError, match="machineMaxList"):
        filter_nodes("CPUSetExclusive", pod("x", "1"), nodes, [], {"machineMaxList": [{"key": "inve", "value": 0}]})


def test_shared_filter_protects_sold_exclusive_cpus():
    nodes = [host("h1")]
    running = [pod("e", "64", node="h1", annotations={"alloc-status": json.dumps({"cpu": list(range(4, 36)) + list(range(56, 88))})})]
    # a = 96 - 2*size; 64 sold exclusive: a shared instance of 17 CPUs makes a = 62 < 64
    assert filter_nodes("CPUSetShared", pod("s", "16", exclusive=False), nodes, running)["h1"].ok
    assert filter_nodes("CPUSetShared", pod("s", "17", exclusive=False), nodes, running)["h1"].reasons == ["Insufficient shared cpu"]


def test_score_prefers_the_best_fit_node():
    nodes = [host("empty"), host("busy")]
    running = [pod("a", "32", node="busy", annotations={"alloc-status": json.dumps({"cpu": list(range(4, 20)) + list(range(56, 72))})})]
    scores = score_nodes("CPUSetExclusive", pod("new", "32"), nodes, running)
    assert scores["busy"] > scores["empty"] > 0


def test_the_engine_assumes_exclusive_pods_and_runs_out_of_cpus():
    policy = Policy(filters=(PluginSpec("CPUSetExclusive"),), scores=(PluginSpec("CPUSetExclusive"),))
    scheduler = Scheduler(policy, [host("h1")])
    placed = [scheduler.schedule(pod(f"db-{i}", "32")) for i in range(4)]
    assert [p.node for p in placed] == ["h1", "h1", "h1", None]
    assert placed[3].reasons == "0/1 nodes are available: 1 Insufficient exclusive cpu."


def test_cpu_state_annotation_carries_the_databases_view():
    state_text = json.dumps({"exclusive": {"db/x": {"cpus": list(range(4, 36)) + list(range(56, 88)), "app": "x"}},
                             "shared": {"db/y": {"requestMilli": 8000, "limitMilli": 8000, "app": "y"}}})
    node = host("h1", **{CPU_STATE_ANNOTATION: state_text})
    state = node_cpu_state(node, [])
    assert set(state.exclusive) == {"db/x"} and set(state.shared) == {"db/y"}
    assert state.sellable.left == 96 - 2 * 8 - 64
    # a pod named in the state is not counted twice
    again = node_cpu_state(node, [pod("x", "64", node="h1", annotations={"alloc-status": json.dumps({"cpu": list(range(4, 36)) + list(range(56, 88))})})])
    assert again.sellable.sold == 64


@pytest.mark.django_db
def test_a_snapshot_from_the_database_carries_the_node_state():
    from fleet.models import Cluster
    from scheduling.cpu import allocation
    from scheduling.cpu.binding import scheduler_annotations

    from .cpu_fixtures import seed_node

    cluster = Cluster.objects.create(name="db-pool", connector=Cluster.ConnectorKind.SIMULATED)
    node_cpu = seed_node(cluster)
    allocation.allocate_exclusive(node_cpu, namespace="db", name="a", request=64)
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "db-host-1", "annotations": scheduler_annotations(node_cpu)},
            "status": {"allocatable": {"cpu": "104", "memory": "512Gi", "pods": "110"}}}
    result = filter_nodes("CPUSetExclusive", pod("b", "33"), [node], [])
    assert result["db-host-1"].reasons == ["Insufficient exclusive cpu"]
    assert filter_nodes("CPUSetExclusive", pod("b", "32"), [node], [])["db-host-1"].ok
