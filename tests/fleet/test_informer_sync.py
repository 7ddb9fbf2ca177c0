"""Inventory sync of a real cluster, end to end over HTTP: registered from a kubeconfig, synced by
a real worker through the Kubernetes connector against ``tests.kubeapi``'s API server. The first
sync lists; later ones watch from the listed resourceVersion (one request per kind, whatever the
node count), a 410 Gone relists, and a failing server shows on the cluster and is backed off."""

from __future__ import annotations

import time
from typing import Any

import pytest

from core.jobs import enqueue
from core.models import Job
from fleet import informer
from fleet.connectors.base import ConnectorError
from fleet.connectors.kubernetes import KubernetesConnector, KubernetesConnectorConfig
from fleet.models import Cluster, Node, Pod
from fleet.services import SYNC_TASK, register_cluster, request_sync
from fleet.tasks import cluster_shard_key
from tests.kubeapi import ApiServer, kubeconfig, registration, serve
from tests.workers import shard_worker, wait_for_job

TOKEN = "emulated-cluster-token"
NODES = 2000


def node(i: int, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i:04d}", "labels": {"pool": "a", **labels}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}, "capacity": {"cpu": "32", "memory": "128Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]},
            "status": {"phase": "Running"}}


@pytest.fixture
def api_server():
    informer.forget()
    api = ApiServer(token=TOKEN)
    for i in range(NODES):
        api.put("v1/nodes", node(i))
    api.put("v1/pods", pod("web-1", "n0001"))
    with serve(api) as url:
        yield api, url
        informer.forget()  # watchers stop before their server does


def _discovery(path: str) -> bool:
    """``/version``, ``/api``, ``/apis``, ``/api/v1``, ``/apis/<group>/<version>``: not a resource."""
    return path in ("/version", "/api", "/apis") or (path.startswith("/api/") and path.count("/") == 2) or (
        path.startswith("/apis/") and path.count("/") == 3)


def sync(cluster: Cluster) -> Job:
    job = wait_for_job(request_sync(cluster))
    assert job.status == Job.Status.SUCCEEDED, job.error
    return job


@pytest.mark.django_db(transaction=True)
def test_a_real_cluster_is_listed_once_then_watched(api_server, purge_shard_queues):
    api, url = api_server
    with shard_worker(cluster_shard_key("k8s-1")):
        cluster = register_cluster(registration("k8s-1", url, TOKEN))
        first = wait_for_job(Job.objects.get(kind=SYNC_TASK, object_id=str(cluster.pk)))
        assert first.status == Job.Status.SUCCEEDED, first.error
        assert first.result["created"]["nodes"] == NODES
        assert Node.objects.filter(cluster=cluster).count() == NODES
        assert Node.objects.get(cluster=cluster, name="n0001").cpu_requested_milli == 2000
        lists = api.count("GET", "/api/v1/nodes", watch=None)
        assert lists == NODES // 500, "listed in pages of 500"

        api.put("v1/nodes", node(7, pool="b", diskMode="hdd"))
        api.put("v1/pods", pod("web-2", "n0007"))
        api.delete_object("v1/pods", "web-1", "shop")
        second = sync(cluster)
        assert second.result["updated"]["nodes"] == 2, "n0007 relabelled and holding a pod, n0001 freed"
        assert Node.objects.get(cluster=cluster, name="n0007").labels == {"pool": "b", "diskMode": "hdd"}
        assert Node.objects.get(cluster=cluster, name="n0007").cpu_requested_milli == 2000
        assert Node.objects.get(cluster=cluster, name="n0001").cpu_requested_milli == 0
        assert Pod.objects.get(cluster=cluster, name="web-1").finished_at is not None
        assert api.count("GET", "/api/v1/nodes", watch=None) == lists, "no list after the first sync"
        assert api.count("GET", "/api/v1/nodes", watch="true") >= 1

        quiet = sync(cluster)  # nothing changed: nothing written, one watch per kind
        assert sum(quiet.result["updated"].values()) == sum(quiet.result["created"].values()) == 0
        requests = len(api.requests)
        sync(cluster)
        quiet_requests = api.requests[requests:]
        watches = [r.path for r in quiet_requests if r.query.get("watch") == "true"]
        others = [r.path for r in quiet_requests if r.query.get("watch") != "true"]
        assert len(watches) == len(set(watches)) == len(informer.INFORMED_KINDS), "one watch per kind"
        assert all(_discovery(path) for path in others), f"no list of {NODES} nodes, only discovery: {others}"

        api.compact()  # etcd compaction: the versions the informers hold are gone
        api.put("v1/nodes", node(9, pool="c"))
        sync(cluster)
        assert Node.objects.get(cluster=cluster, name="n0009").labels == {"pool": "c"}
        assert api.count("GET", "/api/v1/nodes", watch=None) == 2 * lists, "410 Gone: relisted once (in the same pages)"


@pytest.mark.django_db(transaction=True)
def test_a_throttling_server_shows_on_the_cluster_and_is_backed_off(api_server, purge_shard_queues):
    api, url = api_server
    with shard_worker(cluster_shard_key("k8s-2")):
        cluster = register_cluster(registration("k8s-2", url, TOKEN))
        assert wait_for_job(Job.objects.get(kind=SYNC_TASK, object_id=str(cluster.pk))).status == Job.Status.SUCCEEDED
        api.fail(429, match="/api/v1/nodes")
        sync(cluster)
        cluster.refresh_from_db()
        assert not cluster.ready and cluster.status_reason == "throttled", cluster.status_message
        before = len(api.requests)
        skipped = wait_for_job(enqueue(SYNC_TASK, "k8s-2"))
        assert "backing off" in skipped.result["skipped"] and len(api.requests) == before, "a periodic sync waits"
        api.heal()
        sync(cluster)  # a requested sync tries at once
        cluster.refresh_from_db()
        assert cluster.ready and Node.objects.filter(cluster=cluster).count() == NODES


@pytest.mark.django_db(transaction=True)
def test_a_watched_cluster_shows_a_label_change_without_waiting_for_a_sync(api_server, purge_shard_queues, settings):
    """The periodic sync starts the cluster's watcher (holding its lease); from then on a
    relabelled node reaches the inventory with no sync run, and periodic syncs leave the
    cluster to the watcher. Before watchers, the change waited for the next sync."""
    from core.locks import hold, is_held
    from fleet.tasks import WATCHED

    settings.MERIDIAN_CLUSTER_WATCH_SECONDS = 2
    api, url = api_server
    with shard_worker(cluster_shard_key("k8s-3")):
        cluster = register_cluster(registration("k8s-3", url, TOKEN))
        assert wait_for_job(Job.objects.get(kind=SYNC_TASK, object_id=str(cluster.pk))).status == Job.Status.SUCCEEDED
        assert not is_held("fleet-watch-k8s-3"), "a requested sync starts no watcher"
        periodic = wait_for_job(enqueue(SYNC_TASK, "k8s-3"))
        assert periodic.result["ok"], periodic.result
        assert is_held("fleet-watch-k8s-3")

        api.put("v1/nodes", node(7, pool="b"))
        api.delete_object("v1/nodes", "n0008")
        _until(lambda: Node.objects.get(cluster=cluster, name="n0007").labels["pool"] == "b")
        _until(lambda: not Node.objects.filter(cluster=cluster, name="n0008").exists())
        lists = api.count("GET", "/api/v1/nodes", watch=None)
        skipped = wait_for_job(enqueue(SYNC_TASK, "k8s-3"))
        assert skipped.result["skipped"] == WATCHED
        with hold("fleet-sync-k8s-3", wait=10):  # as the watcher's writer does while it writes
            busy = wait_for_job(enqueue(SYNC_TASK, "k8s-3"))
        assert busy.result["skipped"] == WATCHED, "the watched cluster, not a sync said to be running"
        assert api.count("GET", "/api/v1/nodes", watch=None) == lists == NODES // 500, "listed once, at registration"

        api.fail(503, match="/api/v1/pods")  # a failing watch shows on the cluster
        _until(lambda: Cluster.objects.filter(pk=cluster.pk, ready=False).exists())
        api.heal()

        informer.forget()  # the watcher stops (as when its worker goes): the lease is freed ...
        _until(lambda: not is_held("fleet-watch-k8s-3"), timeout=10)
        again = wait_for_job(enqueue(SYNC_TASK, "k8s-3"))  # ... and the next periodic sync takes over
        assert again.result["ok"] and is_held("fleet-watch-k8s-3")
        assert api.count("GET", "/api/v1/nodes", watch=None) == 2 * lists, "a fresh watcher starts with a list"
        informer.forget()
    _until(lambda: not is_held("fleet-watch-k8s-3"), timeout=10)


@pytest.mark.django_db(transaction=True)
def test_a_slow_server_times_out_shows_on_its_cluster_and_holds_up_no_other(api_server, purge_shard_queues):
    """A member whose API server stalls (12 s per request) costs the worker one request
    timeout (2 s here), shows "timed out" on its cluster, and the other member on the same
    worker is synced meanwhile, long before the stalled server would have answered."""
    slow_api, slow_url = api_server
    fast_api = ApiServer(token=TOKEN)
    fast_api.put("v1/nodes", node(1))
    with serve(fast_api) as fast_url, shard_worker(cluster_shard_key("k8s-slow"), cluster_shard_key("k8s-fast")):
        slow = register_cluster(registration("k8s-slow", slow_url, TOKEN) | {"connector_config": {"request_timeout": 2}})
        fast = register_cluster(registration("k8s-fast", fast_url, TOKEN))
        for cluster in (slow, fast):
            assert wait_for_job(Job.objects.get(kind=SYNC_TASK, object_id=str(cluster.pk))).status == Job.Status.SUCCEEDED
        slow_api.slow(12)
        stalled_at = time.monotonic()
        slow_job, fast_job = request_sync(slow), request_sync(fast)
        assert wait_for_job(fast_job, timeout=25).status == Job.Status.SUCCEEDED
        assert wait_for_job(slow_job, timeout=25).status == Job.Status.SUCCEEDED
        assert time.monotonic() - stalled_at < 12, "both done before the stalled server would have answered once"
        slow.refresh_from_db()
        fast.refresh_from_db()
        assert not slow.ready and slow.status_reason == "unreachable" and "timed out" in slow.status_message, slow.status_message
        assert fast.ready
        slow_api.heal()


def test_informers_left_idle_are_dropped():
    """A deleted cluster's objects do not stay in a worker's memory for ever."""
    informer.forget()
    now = [0.0]
    kept = informer.informers_for(1, "a", clock=lambda: now[0])
    assert informer.informers_for(1, "a", clock=lambda: now[0]) is kept
    assert informer.informers_for(1, "b", clock=lambda: now[0]) is not kept, "another kubeconfig: fresh informers"
    now[0] = informer.IDLE_SECONDS / 2
    other = informer.informers_for(2, "x", clock=lambda: now[0])
    now[0] = informer.IDLE_SECONDS + 1
    informer.informers_for(3, "y", clock=lambda: now[0])
    assert set(informer._registry) == {2, 3}, "cluster 1 idle for an hour: dropped"
    assert informer.informers_for(2, "x", clock=lambda: now[0]) is other
    informer.forget()


def _until(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_a_watcher_hands_each_change_to_its_writer_and_survives_gone_versions_and_failures(tmp_path):
    """``Watcher`` over HTTP: a change is written without any sync asking for it; 410 Gone
    relists; a failing server is reported and the watch resumes when it heals; stop ends it."""
    api = ApiServer(token=TOKEN)
    for i in range(3):
        api.put("v1/nodes", node(i))
    with serve(api) as url:
        path = tmp_path / "kubeconfig"
        path.write_text(kubeconfig(url, TOKEN))
        with KubernetesConnector(KubernetesConnectorConfig(kubeconfig_path=str(path), request_timeout=5)) as connector:
            informers = informer.ClusterInformers()
            informers.refresh(connector)
            written: list[dict[str, str]] = []
            failures: list[ConnectorError] = []
            stopped = []

            def write(watcher: informer.Watcher) -> None:
                with informers.lock:
                    written.append({name: obj["metadata"]["labels"]["pool"] for (_, name), obj in
                                    informers.informers[("v1", "Node")].objects.items()})

            watcher = informer.Watcher(informers, connector, write=write, failed=failures.append, on_stop=lambda: stopped.append(1),
                                       watch_seconds=2, retry_seconds=0.2, write_every_seconds=3600)
            watcher.start("c1")
            assert informers.watched and watcher.alive()
            api.put("v1/nodes", node(1, pool="b"))
            _until(lambda: written and written[-1]["n0001"] == "b")
            writes = len(written)

            api.compact()  # the version the watch resumes from is gone: a list
            api.put("v1/nodes", node(2, pool="c"))
            _until(lambda: written[-1]["n0002"] == "c")

            api.fail(500, match="/api/v1/nodes")
            _until(lambda: failures, timeout=10)
            assert failures[0].status == 500
            api.heal()
            api.put("v1/nodes", node(0, pool="d"))
            _until(lambda: written[-1]["n0000"] == "d")
            assert len(written) > writes

            watcher.stop()
            _until(lambda: stopped == [1] and not any(t.is_alive() for t in watcher.threads))
            assert not informers.watched
