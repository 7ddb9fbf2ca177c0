"""Kubernetes objects → inventory facts, including what a sync must survive."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.inventory import CPU_TOPOLOGY_ANNOTATION, FactsMemo, build_snapshot


def node(name="n1", allocatable=None, labels=None, annotations=None, ready="True"):
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {"zone": "a"}, "annotations": annotations or {}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "allocatable": allocatable or {"cpu": "63500m", "memory": "250Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}],
            "nodeInfo": {"kubeletVersion": "v1.31.4"},
        },
    }


def pod(name, node_name="n1", phase="Running", cpu="1", owner=None, uid=None, finished=None):
    status = {"phase": phase, "startTime": "2026-11-20T10:00:00Z"}
    if finished:
        status["containerStatuses"] = [{"name": "c", "state": {"terminated": {"finishedAt": finished, "exitCode": 0}}}]
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}", "ownerReferences": [owner] if owner else []},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": status,
    }


def deployment(name="web", replicas=3):
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns", "uid": "d1", "labels": {"app": name}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}},
        "status": {"readyReplicas": 2},
    }


def replica_set(name="web-7d4b9", owner="web"):
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [{"kind": "Deployment", "name": owner, "controller": True}]},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


def test_node_facts_parse_quantities_into_columns():
    snap = build_snapshot([node()], [], [])
    n = snap.nodes["n1"]
    assert (n.cpu_allocatable_milli, n.cpu_capacity_milli, n.memory_allocatable_bytes, n.gpu_allocatable, n.pods_allocatable) == (
        63500, 64000, 250 * 1024**3, 8, 110)
    assert n.allocatable["cpu"] == "63500m" and n.ready and n.kubelet_version == "v1.31.4"
    assert n.taints[0]["effect"] == "NoSchedule" and snap.errors == []


def test_a_malformed_quantity_is_reported_and_the_rest_of_the_node_kept():
    snap = build_snapshot([node(allocatable={"cpu": "lots", "memory": "1Gi"}), node("n2")], [], [])
    assert snap.nodes["n1"].memory_allocatable_bytes == 1024**3 and snap.nodes["n1"].cpu_allocatable_milli == 0
    assert "n2" in snap.nodes
    assert len(snap.errors) == 1 and "node n1" in snap.errors[0] and "cpu" in snap.errors[0] and "lots" in snap.errors[0]


def test_a_metrics_timestamp_that_is_not_a_string_leaves_the_usage_without_a_time():
    metrics = [{"metadata": {"name": "n1"}, "usage": {"cpu": "2", "memory": "1Gi"}, "timestamp": 1700000000},
               {"metadata": {"name": "n2"}, "usage": {"cpu": "1"}, "timestamp": {"seconds": 1}},
               {"metadata": {"name": "n3"}, "usage": {"cpu": "1"}, "timestamp": "2026-11-20T10:00:00Z"}]
    snap = build_snapshot([node("n1"), node("n2"), node("n3")], [], [], metrics)
    assert snap.nodes["n1"].cpu_usage_milli == 2000 and snap.nodes["n1"].usage_time is None
    assert snap.nodes["n2"].usage_time is None and snap.nodes["n3"].usage_time.isoformat() == "2026-11-20T10:00:00+00:00"


def test_objects_without_names_are_skipped_with_an_error():
    snap = build_snapshot([{"metadata": {}}, {"status": {}}], [{"metadata": {"name": "p"}}], [])
    assert snap.nodes == {} and snap.pods == {} and len(snap.errors) == 3


def test_requested_sums_only_pods_holding_resources():
    pods = [pod("a", cpu="2"), pod("b", cpu="500m"), pod("done", phase="Succeeded", finished="2026-11-20T11:00:00Z"),
            pod("pending", node_name="", phase="Pending"), pod("elsewhere", node_name="n9")]
    snap = build_snapshot([node()], pods, [])
    n = snap.nodes["n1"]
    assert (n.cpu_requested_milli, n.pod_count, n.requested["cpu"]) == (2500, 2, "2500m")
    assert n.memory_requested_bytes == 2 * 1024**3 and n.requested["memory"] == "2Gi"
    assert snap.pods["uid-done"].finished_at == "2026-11-20T11:00:00Z" and snap.pods["uid-a"].finished_at is None


def test_pods_of_a_deployment_belong_to_the_deployment_not_its_replica_set():
    owner = {"kind": "ReplicaSet", "name": "web-7d4b9", "controller": True}
    snap = build_snapshot([node()], [pod("web-7d4b9-abcde", owner=owner)], [deployment(), replica_set()])
    assert list(snap.workloads) == [("ns", "Deployment", "web")], "owned replica sets are not workloads of their own"
    w = snap.workloads[("ns", "Deployment", "web")]
    assert (w.replicas, w.ready_replicas, w.cpu_request_milli, w.status) == (3, 2, 500, "Degraded")
    p = snap.pods["uid-web-7d4b9-abcde"]
    assert (p.owner_kind, p.owner_name) == ("Deployment", "web")


def test_cpu_topology_annotation():
    rows = [[0, 0, 0, 0], [1, 0, 0, 1], [2, 0, 0, 0], [3, 0, 0, 1]]
    good = build_snapshot([node(annotations={CPU_TOPOLOGY_ANNOTATION: json.dumps({"cpus": rows})})], [], [])
    assert good.nodes["n1"].cpu_topology == rows
    bad = build_snapshot([node(annotations={CPU_TOPOLOGY_ANNOTATION: "{not json"})], [], [])
    assert bad.nodes["n1"].cpu_topology is None and CPU_TOPOLOGY_ANNOTATION in bad.errors[0]


def test_content_hash_ignores_usage_but_not_labels():
    a, b = build_snapshot([node()], [], []).nodes["n1"], build_snapshot([node()], [], []).nodes["n1"]
    b.cpu_usage_milli = 1234
    assert a.row()["content_hash"] == b.row()["content_hash"]
    c = build_snapshot([node(labels={"zone": "b"})], [], []).nodes["n1"]
    assert c.row()["content_hash"] != a.row()["content_hash"]


def _rows(snap) -> dict:
    """What a sync writes from a snapshot: every row, hash included."""
    return {"nodes": {k: f.row() for k, f in snap.nodes.items()}, "pods": {k: f.row() for k, f in snap.pods.items()},
            "workloads": {k: f.row() for k, f in snap.workloads.items()}, "errors": sorted(snap.errors)}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["relabel", "move", "cpu", "bad", "delete", "add", "reown", "none"]),
                          st.integers(0, 5)), min_size=1, max_size=8))
def test_a_memo_kept_across_builds_gives_what_a_fresh_build_gives(steps):
    """``FactsMemo`` against the oracle of building from scratch, over a cache whose objects
    change as an informer's do (a changed object is a new dict, an unchanged one the same):
    requests summed onto nodes never pile up across builds, an error is reported every time,
    a pod follows its ReplicaSet to another owner."""
    nodes = {f"n{i}": node(f"n{i}") for i in range(3)}
    pods = {f"p{i}": pod(f"p{i}", node_name=f"n{i % 3}", owner={"kind": "ReplicaSet", "name": "web-7d4b9", "controller": True})
            for i in range(6)}
    workloads = [deployment(), replica_set()]
    memo = FactsMemo()
    for action, i in [("none", 0), *steps]:
        key = f"p{i}"
        if action == "relabel":
            nodes[f"n{i % 3}"] = node(f"n{i % 3}", labels={"zone": f"z{i}"})
        elif action == "move" and key in pods:
            pods[key] = {**pods[key], "spec": {**pods[key]["spec"], "nodeName": f"n{(i + 1) % 3}"}}
        elif action == "cpu" and key in pods:
            pods[key] = pod(key, node_name=pods[key]["spec"]["nodeName"], cpu=f"{i + 1}")
        elif action == "bad":
            pods[key] = pod(key, cpu="lots")
        elif action == "delete":
            pods.pop(key, None)
        elif action == "add":
            pods[f"q{i}"] = pod(f"q{i}", node_name=f"n{i % 3}")
        elif action == "reown":
            workloads = [deployment(), replica_set(owner=f"web{i}")]
        remembered = build_snapshot(list(nodes.values()), list(pods.values()), workloads, memo=memo)
        assert _rows(remembered) == _rows(build_snapshot(list(nodes.values()), list(pods.values()), workloads))
