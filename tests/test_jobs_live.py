"""Jobs you can watch and stop, through a real worker: a job's log lines reach the database and
its websocket topic while it runs (not only when it ends); cancel stops running work at its next
checkpoint and the job says so; the job's page shows its state and log, and offers cancel to
those who may."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from channels.testing.websocket import WebsocketCommunicator
from django.conf import settings
from django.test import Client
from redis.exceptions import ConnectionError as RedisConnectionError

from config.asgi import application
from core import jobs
from core.jobs import cancel_job, enqueue
from core.models import Job
from core.sharding import sharded_task

from .faults.processes import wait_until
from .workers import shard_worker, wait_for_job, worker_process

logger = logging.getLogger("tests.jobs")
logger.setLevel(logging.INFO)  # whatever level the test worker left the root logger at
#: Set by a test to let ``chatty`` finish.
release = threading.Event()


@sharded_task(shard_key=lambda key: f"tests/{key}", name="tests.chatty")
def chatty(key: str) -> dict:
    logger.info("first line of %s", key)
    release.wait(10)
    logger.info("second line of %s", key)
    return {"lines": 2}


@sharded_task(shard_key=lambda key: f"tests/{key}", name="tests.long_units")
def long_units(key: str, units: int) -> dict:
    done = 0
    for _ in range(units):
        jobs.checkpoint()
        time.sleep(0.05)
        done += 1
    return {"done": done}


@sharded_task(shard_key=lambda key: f"tests/{key}", name="tests.fault_after_release")
def fault_after_release(key: str) -> dict:
    release.wait(10)
    raise RedisConnectionError("the broker went away")  # a transient fault: the job would be retried


@pytest.fixture(autouse=True)
def reset_release():
    release.clear()
    yield
    release.set()


@pytest.fixture
async def close_executor_connections():
    """sync_to_async runs ORM calls on one executor thread; close its connection after the test."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    yield
    await sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
def test_a_jobs_log_is_written_while_it_runs():
    with shard_worker("tests/log-1"):
        job = enqueue("tests.chatty", "log-1")
        wait_until(lambda: "first line of log-1" in Job.objects.get(pk=job.pk).log, timeout=30, interval=0.05,
                   what="the job's first log line")
        running = Job.objects.get(pk=job.pk)
        assert running.status == Job.Status.RUNNING and "second line" not in running.log, "written before the job ended"
        release.set()
        done = wait_for_job(job)
    assert done.status == Job.Status.SUCCEEDED
    lines = [line for line in done.log.splitlines() if "tests.jobs" in line]
    assert len(lines) == 2 and lines[0].endswith("INFO tests.jobs first line of log-1"), done.log


@pytest.mark.django_db(transaction=True)
async def test_a_jobs_log_lines_arrive_on_its_topic(django_user_model, close_executor_connections):
    from asgiref.sync import sync_to_async

    user = await sync_to_async(django_user_model.objects.create_user)("watcher", is_superuser=True)
    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    job = await sync_to_async(Job.objects.create)(kind="tests.chatty", task_name="tests.chatty", task_args=["ws-1"])
    communicator = WebsocketCommunicator(application, "/ws/", headers=[
        (b"origin", b"http://127.0.0.1:8000"), (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())])
    assert (await communicator.connect(timeout=5))[0]
    assert (await communicator.receive_json_from(timeout=5))["type"] == "hello"
    await communicator.send_json_to({"type": "subscribe", "topic": f"job-{job.pk}"})
    assert (await communicator.receive_json_from(timeout=5))["type"] == "subscribed"

    done = threading.Event()

    def run_it():  # the job's thread, as a worker's pool process runs it
        with jobs.bound(job):
            logger.info("first line of ws-1")
            done.wait(10)
        from django.db import connection

        connection.close()

    runner = threading.Thread(target=run_it)
    runner.start()
    try:
        messages = []
        deadline = time.monotonic() + 15
        while not any(m.get("event") == "job.log" for m in messages) and time.monotonic() < deadline:
            message = await communicator.receive_json_from(timeout=15)
            messages.extend(message["events"] if message["type"] == "batch" else [message])
        log_events = [m for m in messages if m.get("event") == "job.log"]
        assert log_events and log_events[0]["data"]["lines"][0].endswith("INFO tests.jobs first line of ws-1")
        assert runner.is_alive(), "the line arrived while the job was still running"
    finally:
        done.set()
        await sync_to_async(runner.join)(30)
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_running_work_at_its_next_checkpoint():
    with shard_worker("tests/cancel-1"):
        job = enqueue("tests.long_units", "cancel-1", 400)  # 20 s of work if nobody stops it
        wait_until(lambda: Job.objects.get(pk=job.pk).status == Job.Status.RUNNING, timeout=30, interval=0.05,
                   what="the job running")
        time.sleep(0.5)
        canceled_at = time.monotonic()
        cancel_job(Job.objects.get(pk=job.pk))
        wait_until(lambda: Job.objects.get(pk=job.pk).worker == "", timeout=10, interval=0.05, what="the job let go")
        stopped_after = time.monotonic() - canceled_at
    job.refresh_from_db()
    assert stopped_after < 1.5, f"stopped {stopped_after:.2f} s after the cancel"
    assert job.status == Job.Status.CANCELED and job.result == {} and job.finished is not None
    assert job.log.endswith(" stopped: the job was canceled\n"), job.log


@pytest.mark.django_db
def test_the_job_page_shows_state_and_log_and_offers_cancel_to_those_who_may(django_user_model):
    from django.contrib.auth.models import Group

    job = Job.objects.create(kind="fleet.sync_cluster", task_name="fleet.sync_cluster", status=Job.Status.RUNNING,
                             log="2026-01-01 INFO fleet.sync cluster x synced\n", triggered_by="alice")
    viewer = django_user_model.objects.create_user("v")
    viewer.groups.add(Group.objects.get(name="viewer"))
    operator = django_user_model.objects.create_user("o")
    operator.groups.add(Group.objects.get(name="admin"))
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200 and "cluster x synced" in page.content.decode()
    assert f"/jobs/{job.pk}/cancel/" not in page.content.decode(), "a viewer is not offered cancel"
    assert client.post(f"/jobs/{job.pk}/cancel/").status_code == 403
    client.force_login(operator)
    assert f"/jobs/{job.pk}/cancel/" in client.get(f"/jobs/{job.pk}/").content.decode()
    answer = client.post(f"/jobs/{job.pk}/cancel/")
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{job.pk}/"
    assert Job.objects.get(pk=job.pk).status == Job.Status.CANCELED
    again = client.post(f"/jobs/{job.pk}/cancel/")
    assert again.status_code == 200 and "already canceled" in again.content.decode(), "a refusal on the page, not a 500"
    assert json.loads(client.get(f"/api/v1/core/jobs/{job.pk}/").content)["log"].startswith("2026-01-01")


@pytest.mark.django_db(transaction=True)
def test_a_job_canceled_before_its_work_hits_a_transient_fault_lets_go_of_its_worker():
    """The retry's delivery is dropped (the job is canceled), so the work stops where the fault
    struck: the job stays canceled, says it stopped, and holds no worker (it kept one for good)."""
    with shard_worker("tests/fault-1"):
        job = enqueue("tests.fault_after_release", "fault-1")
        wait_until(lambda: Job.objects.get(pk=job.pk).status == Job.Status.RUNNING, timeout=30, interval=0.05,
                   what="the job running")
        cancel_job(Job.objects.get(pk=job.pk))
        release.set()
        wait_until(lambda: Job.objects.get(pk=job.pk).worker == "", timeout=10, interval=0.05, what="the job let go")
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELED and job.log.endswith(" stopped: the job was canceled\n"), (job.status, job.log)


def _sync_cluster_of_20000_nodes(name: str):
    from fleet.models import Cluster

    return Cluster.objects.create(name=name, connector="simulated", connector_config={"node_count": 20_000, "seed": 3})


def _cancel_and_time(job: Job) -> tuple[float, Exception | None]:
    """Cancel ``job``; seconds until its worker let go of it, and the Conflict if it had finished."""
    from core.errors import Conflict

    canceled_at = time.monotonic()
    try:
        cancel_job(Job.objects.get(pk=job.pk))
    except Conflict as exc:
        refused: Exception | None = exc
    else:
        refused = None
    wait_until(lambda: Job.objects.get(pk=job.pk).worker == "", timeout=120, interval=0.05, what="the sync let go")
    return time.monotonic() - canceled_at, refused


@pytest.mark.django_db(transaction=True)
def test_a_sync_of_20000_nodes_canceled_while_it_reads_stops_within_a_second(tmp_path):
    """Canceled while the simulation builds its 100,000 pods (seconds of work with no write):
    the sync stops at its next checkpoint, writes nothing, and its job says it was canceled.

    The worker is the README's, a process of its own: one in a thread of this process took
    turns with the test's thread for the interpreter lock, and under CI's load the two took
    1.86 s between them."""
    from fleet.models import Node
    from fleet.services import request_sync

    cluster = _sync_cluster_of_20000_nodes("bj-cancel-read")
    with worker_process(tmp_path) as processes:
        job = request_sync(cluster)
        wait_until(lambda: Job.objects.get(pk=job.pk).status == Job.Status.RUNNING, timeout=90, interval=0.05,
                   what=lambda: f"the sync running; the worker's log:\n{processes.log('worker')}")
        time.sleep(1.0)
        stopped_after, refused = _cancel_and_time(job)
    job.refresh_from_db()
    assert refused is None and stopped_after < 1.5, f"stopped {stopped_after:.2f} s after the cancel"
    assert job.status == Job.Status.CANCELED and job.finished is not None
    assert job.log.endswith(" stopped: the job was canceled\n"), job.log
    cluster.refresh_from_db()
    assert not Node.objects.filter(cluster=cluster).exists() and cluster.last_sync is None


@pytest.mark.django_db(transaction=True)
def test_a_sync_of_20000_nodes_canceled_while_it_writes_stops_or_says_it_finished():
    """Canceled while the pods are written (after the workloads, the last write before them).
    PostgreSQL: the sync stops at its next checkpoint within a second, its transaction rolled
    back, and the job says canceled. SQLite has one writer at a time: the cancel itself waits
    for the sync's commit, so the work is done by then, and the job says so (succeeded, with
    a note that the cancel came too late) instead of "canceled" over a finished sync, and it
    lets go of its worker (it kept it for good before)."""
    from django.db import connection

    from fleet.models import Node, Pod
    from fleet.services import request_sync
    from fleet.signals import workloads_changed

    cluster = _sync_cluster_of_20000_nodes("bj-cancel-write")
    wrote_workloads = threading.Event()

    def on_workloads(**kwargs):
        wrote_workloads.set()

    workloads_changed.connect(on_workloads, weak=False)
    try:
        with shard_worker(f"cluster/{cluster.name}"):
            job = request_sync(cluster)
            assert wrote_workloads.wait(300), "the sync never wrote its workloads"
            time.sleep(0.3)  # into the pods: a 20,000-node cluster's take seconds to write
            stopped_after, refused = _cancel_and_time(job)
    finally:
        workloads_changed.disconnect(on_workloads)
    job.refresh_from_db()
    cluster.refresh_from_db()
    if connection.vendor == "postgresql":
        assert refused is None and stopped_after < 1.5, f"stopped {stopped_after:.2f} s after the cancel"
        assert job.status == Job.Status.CANCELED and job.log.endswith(" stopped: the job was canceled\n"), job.log
        assert not Pod.objects.filter(cluster=cluster).exists() and cluster.last_sync is None
    else:
        assert job.status == Job.Status.SUCCEEDED and job.worker == "", (job.status, job.worker, job.log)
        assert refused is not None or "the cancel came too late: the work had finished (succeeded)" in job.log, job.log
        assert Node.objects.filter(cluster=cluster).count() >= 20_000 and cluster.last_sync is not None
