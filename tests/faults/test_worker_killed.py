"""kill -9 a worker in the middle of work: after a new worker starts, the work completes,
nothing is lost or counted twice, and every job ends in the right state within a minute
(the reaper sends the dead worker's job again; a second delivery of a finished job is dropped)."""

from __future__ import annotations

import time

import httpx
from django.db.models import Count, Sum

from core.models import Job
from fleet.models import Cluster, Node
from nodeconfig.models import ConfigTarget, NodeConfig

from .processes import wait_until


def api(meridian, token: str) -> httpx.Client:
    return httpx.Client(base_url=meridian.base, headers={"Authorization": f"Token {token}"}, timeout=30)


def test_a_cluster_sync_survives_its_worker_being_killed(meridian, admin_token):
    meridian.start_web()
    meridian.start_beat()
    client = api(meridian, admin_token)
    created = client.post("/api/v1/fleet/clusters/", json={"name": "big", "connector": "simulated",
                                                           "connector_config": {"node_count": 5000, "seed": 11}})
    assert created.status_code == 201, created.text
    job = Job.objects.get(kind="fleet.sync_cluster", object_id=str(Cluster.objects.get(name="big").pk))

    meridian.start_worker("worker-1")
    wait_until(lambda: Job.objects.get(pk=job.pk).status == Job.Status.RUNNING, timeout=60, what="the sync to start")
    time.sleep(0.5)
    meridian.kill("worker-1")
    killed_at = time.monotonic()
    assert Job.objects.get(pk=job.pk).status == Job.Status.RUNNING, "killed mid-sync (the sync was not over yet)"

    meridian.start_worker("worker-2")
    done = wait_until(lambda: Job.objects.get(pk=job.pk).status in Job.FINISHED and Job.objects.get(pk=job.pk), timeout=90,
                      what="the sync job to finish after the restart")
    assert done.status == Job.Status.SUCCEEDED, (done.error, meridian.log("worker-2")[-3000:])
    assert done.attempts == 2, "run once by the dead worker, once by the new one"
    assert time.monotonic() - killed_at < 90

    cluster = Cluster.objects.get(name="big")
    nodes = Node.objects.filter(cluster=cluster)
    assert cluster.node_count == nodes.count() > 4750, "the sync completed"
    assert not nodes.values("name").annotate(n=Count("pk")).filter(n__gt=1).exists(), "no node counted twice"
    totals = nodes.aggregate(cpu=Sum("cpu_allocatable_milli"))
    assert cluster.cpu_allocatable_milli == totals["cpu"], "the cluster's totals are its nodes' sum"
    wait_until(lambda: not Job.objects.filter(status=Job.Status.RUNNING, worker__contains="worker-1").exists(),
               timeout=60, what="no job left running on the dead worker")


def test_a_paced_rollout_completes_after_its_worker_is_killed(meridian, admin_token):
    meridian.start_web()
    meridian.start_beat()
    meridian.start_worker("worker-1")
    client = api(meridian, admin_token)
    assert client.post("/api/v1/fleet/clusters/", json={"name": "small", "connector": "simulated",
                                                        "connector_config": {"node_count": 120, "seed": 5}}).status_code == 201
    wait_until(lambda: Cluster.objects.get(name="small").node_count >= 100, timeout=90, what="the cluster to sync")

    body = {"type": "AdminQoSConfiguration", "name": "paced", "config": {"reclaimedResourceConfig": {"enableReclaim": True}},
            "wave_size": "25%", "wave_interval_seconds": 1, "failure_threshold_percent": 100, "reason": "fault suite"}
    created = client.post("/api/v1/nodeconfig/targets/", json=body)
    assert created.status_code == 201, created.text
    target = ConfigTarget.objects.get(pk=created.json()["id"])

    def progress() -> dict:
        return client.get(f"/api/v1/nodeconfig/targets/{target.pk}/progress/").json()

    wait_until(lambda: progress()["delivered"] > 0, timeout=90, what="the first wave")
    assert ConfigTarget.objects.get(pk=target.pk).rollout_state != ConfigTarget.RolloutState.COMPLETE
    meridian.kill("worker-1")
    time.sleep(3)
    meridian.start_worker("worker-2")

    wait_until(lambda: ConfigTarget.objects.get(pk=target.pk).rollout_state == ConfigTarget.RolloutState.COMPLETE,
               timeout=240, interval=1, what="the rollout to complete after the restart")
    final = progress()
    assert final["held"] == 0 and final["delivered"] == final["targeted"] == Node.objects.filter(cluster__name="small").count()
    per_node = NodeConfig.objects.filter(config_type=target.config_type).values("node").annotate(n=Count("pk"))
    assert not per_node.filter(n__gt=1).exists(), "one node config per node and type, never two"
    wait_until(lambda: not Job.objects.filter(status=Job.Status.RUNNING, worker__contains="worker-1").exists(),
               timeout=60, what="the dead worker's jobs to end")
    stuck = Job.objects.filter(status__in=[Job.Status.RUNNING, Job.Status.PENDING], worker__contains="worker-1")
    assert not stuck.exists()
