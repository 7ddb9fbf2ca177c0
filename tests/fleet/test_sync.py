"""Inventory sync from a simulated cluster into the database: incremental, faithful, robust."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker

from config.celery import app
from core.models import Job, ObjectChange
from fleet.connectors.base import ConnectorError
from fleet.connectors.simulated import SimulatedConnector
from fleet.models import Cluster, Node, Pod, Workload
from fleet.services import connector_for, request_sync
from fleet.simstore import DatabaseObjectStore, config_for
from fleet.simulator import CHURN_TICKS, ClusterSpec
from fleet.sync import sync_cluster

SPEC = ClusterSpec(name="gz-4", region="gz", node_count=150, seed=21, churn_rate=0.02)


class Clock:
    def __init__(self, tick: int) -> None:
        self.now = tick * SPEC.tick_seconds

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name=SPEC.name, connector="simulated", connector_config=config_for(SPEC))


def connector(cluster, clock):
    return SimulatedConnector(SPEC, store=DatabaseObjectStore(cluster), clock=clock)


@pytest.mark.django_db
def test_the_cyclic_collector_waits_while_a_sync_reads_and_comes_back_after(cluster):
    """A sync builds and keeps millions of objects: full collections walking them were a
    quarter of a 20,000-node cluster's sync."""
    import gc

    seen = []

    class WatchingClock(Clock):
        def __call__(self) -> float:
            seen.append(gc.isenabled())
            return super().__call__()

    assert gc.isenabled()
    assert sync_cluster(cluster, connector(cluster, WatchingClock(500))).ok
    assert seen and not any(seen), "the connector was read with the collector on"
    assert gc.isenabled()


@pytest.mark.django_db(transaction=True)
def test_a_sync_commits_its_follow_up_jobs_with_it_and_writes_nothing_after(cluster):
    """The jobs a sync fans out (node config's reconcile, quotas' ledger sync) are written in its
    transaction and sent after it together, with no write of their rows: each write after the
    commit waited for SQLite's write lock behind the other worker's sync, which had taken it at
    our commit (the two processes took turns at each other's heels: an eighth of the fleet
    bench). The sends are marked in Redis, for the reaper to record."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.workers import marked_sent, purge_queues

    try:
        with CaptureQueriesContext(connection) as queries:
            assert sync_cluster(cluster, connector(cluster, Clock(500))).ok
    finally:
        purge_queues()
    jobs = list(Job.objects.filter(task_name__in=["nodeconfig.reconcile_nodes", "quotas.sync_workloads"]))
    assert sorted(job.task_name for job in jobs) == ["nodeconfig.reconcile_nodes", "quotas.sync_workloads"]
    assert all(marked_sent(*jobs)), "both were sent"
    sql = [q["sql"].lstrip() for q in queries.captured_queries]
    commit = sql.index("COMMIT")
    inserted = [i for i, text in enumerate(sql) if text.startswith('INSERT INTO "core_job"')]
    written_after = [text for text in sql[commit + 1:] if not text.startswith("SELECT")]
    assert len(inserted) == 2 and max(inserted) < commit, "the jobs are written in the sync's transaction"
    assert written_after == [], written_after


@pytest.mark.django_db
def test_first_sync_mirrors_the_cluster_and_the_second_changes_nothing(cluster):
    clock = Clock(500)
    first = sync_cluster(cluster, connector(cluster, clock))
    nodes = connector(cluster, clock).list_nodes().items
    assert first.ok and first.created["nodes"] == len(nodes) == Node.objects.filter(cluster=cluster).count()
    assert Workload.objects.filter(cluster=cluster).count() == first.created["workloads"] > 0
    assert Pod.objects.filter(cluster=cluster).count() == first.created["pods"] > 0
    cluster.refresh_from_db()
    assert cluster.ready and cluster.node_count == len(nodes) and cluster.kubernetes_version == SPEC.kubernetes_version
    node_sum = sum(Node.objects.filter(cluster=cluster).values_list("cpu_requested_milli", flat=True))
    assert cluster.cpu_requested_milli == node_sum > 0
    assert cluster.requested["cpu"] and cluster.available["memory"]

    second = sync_cluster(cluster, connector(cluster, clock))
    assert sum(second.created.values()) + sum(second.updated.values()) + sum(second.deleted.values()) == 0


@pytest.mark.django_db
def test_churn_writes_only_the_difference_and_closes_vanished_pods(cluster):
    clock = Clock(CHURN_TICKS * 10)
    sync_cluster(cluster, connector(cluster, clock))
    before = set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
    clock.now = CHURN_TICKS * 17 * SPEC.tick_seconds
    report = sync_cluster(cluster, connector(cluster, clock))
    after = set(Node.objects.filter(cluster=cluster).values_list("name", flat=True))
    assert report.created["nodes"] == len(after - before) and report.deleted["nodes"] == len(before - after)
    assert 0 < report.created["nodes"] + report.deleted["nodes"] < len(before) / 10
    assert Pod.objects.filter(cluster=cluster, finished_at__isnull=False).exists(), "pods that vanished are kept, closed"


@pytest.mark.django_db
def test_a_deployment_applied_to_the_cluster_shows_up_with_its_pods(cluster):
    clock = Clock(800)
    sim = connector(cluster, clock)
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "checkout", "namespace": "shop"},
               "spec": {"replicas": 4, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}}}})
    sync_cluster(cluster, connector(cluster, clock))
    workload = Workload.objects.get(cluster=cluster, name="checkout")
    assert (workload.replicas, workload.ready_replicas, workload.cpu_request_milli) == (4, 4, 3000)
    assert workload.pods.filter(finished_at__isnull=True).count() == 4


@pytest.mark.django_db
def test_malformed_quantities_are_reported_on_the_cluster_not_fatal(cluster):
    clock = Clock(900)
    sim = connector(cluster, clock)
    name = sim.list_nodes().items[0]["metadata"]["name"]
    sim.patch("v1", "Node", name, {"status": {"allocatable": {"cpu": "twelve"}}})
    report = sync_cluster(cluster, connector(cluster, clock))
    cluster.refresh_from_db()
    assert report.ok and cluster.ready
    assert any(name in e and "twelve" in e for e in cluster.sync_errors)
    assert Node.objects.get(cluster=cluster, name=name).cpu_allocatable_milli == 0


class UnreachableCluster(SimulatedConnector):
    """The simulated cluster with its API server gone: what a network partition looks like."""

    def server_info(self):
        raise ConnectorError("connection refused by https://10.0.0.1:6443", reason="unreachable")


@pytest.mark.django_db
def test_an_unreachable_cluster_is_marked_not_ready_with_the_reason(cluster):
    sync_cluster(cluster, connector(cluster, Clock(100)))
    report = sync_cluster(cluster, UnreachableCluster(SPEC, store=DatabaseObjectStore(cluster), clock=Clock(100)))
    cluster.refresh_from_db()
    assert not report.ok and not cluster.ready and cluster.status_reason == "unreachable"
    assert "connection refused" in cluster.status_message
    assert Node.objects.filter(cluster=cluster).exists(), "the last known inventory is kept"
    assert ObjectChange.objects.filter(verb="became_unready", object_repr=cluster.name).exists()


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_sharded_sync_job(cluster):
    from core.sharding import shard_queue

    job = request_sync(cluster)
    with start_worker(app, queues=[shard_queue(f"cluster/{cluster.name}")], perform_ping_check=False, pool="solo", shutdown_timeout=10):
        for _ in range(200):
            job.refresh_from_db()
            if job.status in Job.FINISHED:
                break
            __import__("time").sleep(0.1)
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert job.result["created"]["nodes"] == Node.objects.filter(cluster=cluster).count() > 0
    assert connector_for(cluster).spec.seed == SPEC.seed


@pytest.mark.django_db
def test_a_requested_sync_waits_for_the_one_in_progress_and_then_goes_before_periodic_ones(cluster):
    """The requested job says it waits, for which lock and whom; periodic syncs give way to it
    even once the lock is free, so periodic work (12 s syncs every 15 s) cannot starve it — nor
    take the lock while its worker is dead and the reaper has not sent it again yet."""
    import contextlib

    from celery.exceptions import Retry

    from core.locks import hold, holding_as
    from core.redis import get_redis
    from core.sharding import shard_queue
    from fleet.tasks import sync_cluster_task

    queue = shard_queue(f"cluster/{cluster.name}")
    redis = get_redis()
    redis.delete(queue)
    periodic = contextlib.ExitStack()
    periodic.enter_context(holding_as("job 7 (fleet.sync_cluster)"))
    periodic.enter_context(hold(f"fleet-sync-{cluster.name}"))
    job = request_sync(cluster)  # the outbox's job (its message is never sent: no commit in this test)
    # As a worker delivers it (not a direct call): the busy lock makes the task retry itself.
    sync_cluster_task.push_request(id=job.task_id, hostname="test-worker", called_directly=False, delivery_info={},
                                   args=[cluster.name], kwargs={"requested": True, "job_id": job.pk})
    try:
        with pytest.raises(Retry):
            sync_cluster_task(cluster.name, requested=True, job_id=job.pk)
        assert redis.llen(queue) == 1, "requeued on the cluster's shard"
        job.refresh_from_db()
        assert job.status == Job.Status.WAITING, "the job says it waits, not that it runs"
        assert job.waiting_for == f"fleet-sync-{cluster.name} is busy (held by job 7 (fleet.sync_cluster))"
        assert sync_cluster_task(cluster.name) == {"cluster": cluster.name, "skipped": "a requested sync of this cluster goes first"}
        periodic.close()
        assert sync_cluster_task(cluster.name) == {"cluster": cluster.name, "skipped": "a requested sync of this cluster goes first"}, \
            "with the lock free, the next periodic sync still leaves it to the waiting request"
        assert redis.llen(queue) == 1 and not Node.objects.filter(cluster=cluster).exists()
        Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, worker="dead@nowhere:1")
        assert sync_cluster_task(cluster.name)["skipped"] == "a requested sync of this cluster goes first", \
            "its worker died: the cluster still waits for the reaper to send it again"
        Job.objects.filter(pk=job.pk).update(status=Job.Status.SUCCEEDED, worker="")
        assert sync_cluster_task(cluster.name)["ok"], "once it is done, periodic syncs go on"
    finally:
        periodic.close()
        sync_cluster_task.pop_request()
        redis.delete(queue)


@pytest.mark.django_db
def test_a_sync_request_met_by_a_later_sync_is_settled_without_syncing_again(cluster):
    """A sync asked for (and lost, or still queued) is done once any sync of the cluster ran
    after it was asked (the cluster's watcher writing, another request): its delivery succeeds
    as superseded, naming that sync, without a run."""
    from fleet.tasks import sync_cluster_task

    job = request_sync(cluster)
    assert sync_cluster_task.superseded(job) is None, "nothing synced the cluster since"
    sync_cluster(cluster, connector(cluster, Clock(500)))  # a sync after the request (a watcher's write, another request)
    cluster.refresh_from_db()
    reason = sync_cluster_task.superseded(job)
    assert reason and cluster.name in reason and "after this sync was asked for" in reason

    sync_cluster_task.push_request(id=job.task_id, hostname="test-worker", called_directly=False, delivery_info={},
                                   args=[cluster.name], kwargs={"requested": True, "job_id": job.pk})
    try:
        assert sync_cluster_task(cluster.name, requested=True, job_id=job.pk) is None
    finally:
        sync_cluster_task.pop_request()
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.result == {"superseded": reason}
    assert Cluster.objects.get(pk=cluster.pk).last_sync == cluster.last_sync, "no second sync ran"


@pytest.mark.django_db
def test_an_unreachable_cluster_does_not_supersede_a_sync_request(cluster):
    from fleet.tasks import sync_cluster_task

    job = request_sync(cluster)
    sync_cluster(cluster, UnreachableCluster(SPEC, store=DatabaseObjectStore(cluster), clock=Clock(100)))
    assert sync_cluster_task.superseded(job) is None, "a failed sync after the request did not do its work"


@pytest.mark.django_db
def test_the_reaper_settles_a_dead_workers_sync_job_by_what_happened_since(cluster):
    """kill -9 of a worker mid-sync: its job does not keep saying "running". Met by a later sync,
    it succeeds as superseded; otherwise it is sent again (and says so)."""
    from core import jobs
    from core.redis import get_redis
    from core.sharding import shard_queue
    from fleet.tasks import sync_cluster_task

    queue = shard_queue(f"cluster/{cluster.name}")
    met, unmet = request_sync(cluster), request_sync(cluster)
    Job.objects.filter(pk=met.pk).update(status=Job.Status.RUNNING, worker="gone@nowhere:4242", attempts=1)
    sync_cluster(cluster, connector(cluster, Clock(500)))  # a sync after the request (a watcher's write, another request)
    # attempts count deliveries (waiting for the lock made nine); only lost workers count against it
    Job.objects.filter(pk=unmet.pk).update(status=Job.Status.RUNNING, worker="gone@nowhere:4243", attempts=9,
                                          created=Cluster.objects.get(pk=cluster.pk).last_sync + timedelta(seconds=1))
    try:
        report = jobs.reap(heartbeats_after=0)  # this Redis may have started moments ago
        met.refresh_from_db()
        unmet.refresh_from_db()
        assert report["superseded"] == 1 and report["requeued"] == 1
        assert met.status == Job.Status.SUCCEEDED and met.worker == "" and met.error == ""
        assert met.result["superseded"] == sync_cluster_task.superseded(met) and met.result["worker_lost"] == "gone@nowhere:4242"
        assert unmet.status == Job.Status.PENDING and unmet.error == "worker gone@nowhere:4243 was lost; sent again"
        assert unmet.lost_workers == 1
        assert get_redis().llen(queue) == 1, "sent again on the cluster's shard"

        Job.objects.filter(pk=unmet.pk).update(status=Job.Status.RUNNING, worker="gone@nowhere:4244",
                                              lost_workers=jobs.MAX_LOST_WORKERS - 1)
        assert jobs.reap(heartbeats_after=float("inf"))["failed"] == 0, "a Redis just restarted lost the heartbeats"
        assert Job.objects.get(pk=unmet.pk).status == Job.Status.RUNNING
        assert jobs.reap(heartbeats_after=0)["failed"] == 1
        unmet.refresh_from_db()
        assert unmet.status == Job.Status.FAILED
        assert unmet.error == f"worker gone@nowhere:4244 was lost: {jobs.MAX_LOST_WORKERS} workers died running it; giving up"
    finally:
        get_redis().delete(queue)
