"""kill -9 of the worker scheduling a member cluster's pods, in the middle of a batch: the next
worker takes the cluster's watch lease over and binds the rest; every pod is bound exactly once
and no node holds more than it can (the new owner counts what the old one bound).

Meridian runs as the README says (web, beat, ``meridian_worker``), against ``tests.kubeapi``'s API
server in this process, whose bindings are slowed so the kill lands mid-batch."""

from __future__ import annotations

import time
from collections import Counter

import httpx

from tests.kubeapi import ApiServer, kubeconfig, serve

from .processes import wait_until

TOKEN = "fault-cluster-token"
NODES, PODS = 60, 1200


def node(i: int) -> dict:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {"metadata": {"name": f"n{i:03d}", "labels": {"kubernetes.io/hostname": f"n{i:03d}"}},
            "status": {"allocatable": resources, "capacity": resources, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i: int) -> dict:
    requests = {"cpu": "500m", "memory": "1Gi"}
    return {"metadata": {"name": f"batch-{i:05d}", "namespace": "jobs", "labels": {"app": "batch"}},
            "spec": {"schedulerName": "meridian",
                     "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}]},
            "status": {"phase": "Pending"}}


def test_a_worker_killed_mid_batch_leaves_every_pod_bound_exactly_once(meridian, admin_token):
    api = ApiServer(token=TOKEN, bookmark_seconds=1.0)
    for i in range(NODES):
        api.put("v1/nodes", node(i))
    with serve(api) as url:
        meridian.start_web()
        meridian.start_beat()
        meridian.start_worker("worker-0")
        client = httpx.Client(base_url=meridian.base, headers={"Authorization": f"Token {admin_token}"}, timeout=30)
        created = client.post("/api/v1/fleet/clusters/", json={"name": "member", "connector": "kubernetes",
                                                               "kubeconfig": kubeconfig(url, TOKEN)})
        assert created.status_code == 201, created.text
        wait_until(lambda: api.count("GET", "/api/v1/pods", watch="true", timeoutSeconds="60") >= 1, timeout=90,
                   what="a worker to watch (and schedule) the cluster")

        api.slow(0.05, match="/binding")  # at most ~160 binds a second: the kill lands mid-batch
        for i in range(PODS):
            api.put("v1/pods", pod(i))
        wait_until(lambda: sum(len(v) for v in api.bindings().values()) >= PODS // 5, timeout=60, interval=0.05,
                   what="a fifth of the pods bound")
        meridian.kill("worker-0")
        killed_at = time.monotonic()
        at_kill = sum(len(v) for v in api.bindings().values())
        assert at_kill < PODS, "killed mid-batch"
        meridian.start_worker("worker-1")

        wait_until(lambda: sum(len(v) for v in api.bindings().values()) >= PODS, timeout=120, interval=0.25,
                   what="every pod bound after the kill")
        took = time.monotonic() - killed_at
        time.sleep(2)  # anything still in flight would show now
        bindings = api.bindings()
        posts = api.count("POST", "/binding")
        print(f"{at_kill} of {PODS} pods bound when the worker was killed; all bound {took:.1f} s after the kill; "
              f"{posts} binding requests for {PODS} pods ({posts - PODS} refused as already bound)")
        assert len(bindings) == PODS and all(len(nodes) == 1 for nodes in bindings.values()), "every pod bound exactly once"
        per_node = Counter(nodes[0] for nodes in bindings.values())
        assert max(per_node.values()) * 0.5 <= 16, "no node given more CPU than it has: the new owner counted the old one's pods"
        for i in range(0, PODS, 97):
            assert api.object("v1/pods", f"batch-{i:05d}", "jobs")["spec"]["nodeName"] == bindings[("jobs", f"batch-{i:05d}")][0]
