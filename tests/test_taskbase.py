"""Work nobody asked for (beat's periodic passes and what they fan out) records its Job only
when it did something or failed: housekeeping that found nothing to do writes nothing —
``core.publish_live`` used to write a row every second. Work a change asked for (the outbox's
job) is recorded from the start, as before."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest
from celery import shared_task
from celery.exceptions import Reject, Retry
from django.utils import timezone
from redis.exceptions import ConnectionError as RedisConnectionError

from core.jobs import REDISPATCH_AFTER, broker_epoch, enqueue, reap
from core.locks import LockBusy
from core.models import Job
from core.taskbase import idle_unless, nothing_done

from .workers import marked_sent, purge_queues, waiting_messages


@shared_task(name="tests.periodic_pass")
def periodic_pass(stepped: int) -> dict:
    return {"stepped": stepped}


@shared_task(name="tests.failing_pass")
def failing_pass() -> dict:
    raise ValueError("the pass broke")


@shared_task(name="tests.redis_went_away")
def redis_went_away() -> None:
    raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


@shared_task(name="tests.lock_was_busy")
def lock_was_busy() -> None:
    raise LockBusy("tests", "job 1 (tests)")


@pytest.mark.parametrize(("result", "idle"), [
    (None, True), ({}, True), (0, True), ({"stepped": 0, "errors": []}, True),
    ({"stepped": 2}, False), (3, False), ({"skipped": "busy"}, False),
])
def test_a_result_is_idle_when_it_holds_nothing(result, idle):
    assert nothing_done(result) is idle


@pytest.mark.parametrize(("result", "idle"), [
    (None, True), ({"cluster": "bj-1", "nodes": 0, "skipped": 595, "released_count": 0, "errors": []}, True),
    ({"skipped": "busy: another pass holds the lock"}, True),
    ({"cluster": "bj-1", "nodes": 3, "skipped": 592}, False), ({"cluster": "bj-1", "errors": ["n1: refused"]}, False),
])
def test_a_pass_that_names_what_it_looked_at_is_idle_unless_it_did_something(result, idle):
    assert idle_unless("nodes", "released_count", "errors")(result) is idle


@pytest.mark.django_db
def test_a_periodic_pass_that_did_nothing_writes_no_job():
    periodic_pass.apply(args=(0,), headers={"celery_beat_task": True})
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_periodic_pass_that_did_something_is_recorded_once_finished():
    periodic_pass.apply(args=(4,), headers={"celery_beat_task": True})
    job = Job.objects.get()
    assert job.status == Job.Status.SUCCEEDED and job.result == {"stepped": 4}
    assert job.triggered_by == "system:beat" and job.started <= job.finished and job.worker == ""


@pytest.mark.django_db
def test_a_periodic_pass_that_failed_is_recorded_with_the_reason():
    failing_pass.apply()
    job = Job.objects.get()
    assert job.status == Job.Status.FAILED and job.error == "ValueError: the pass broke"


@pytest.mark.django_db
def test_work_a_change_asked_for_is_recorded_even_when_it_did_nothing():
    job = enqueue("tests.periodic_pass", 0)
    periodic_pass.apply(args=(0,), kwargs={"job_id": job.pk}, task_id=job.task_id)
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.result == {"stepped": 0} and job.attempts == 1


@pytest.mark.django_db
def test_a_periodic_sync_that_changed_nothing_writes_no_job():
    from fleet.models import Cluster
    from fleet.simstore import config_for
    from fleet.simulator import ClusterSpec
    from fleet.tasks import sync_cluster_task

    # No churn, and one tick an hour: a node leaving in this churn window (one in ~25 of them at
    # the default rates) made the first sync write 19 nodes, and a tick passing between the
    # two syncs would be a real change; neither is what this test is about.
    still = ClusterSpec(name="quiet-1", region="gz", node_count=20, seed=4, churn_rate=0, label_change_rate=0,
                        not_ready_rate=0, tick_seconds=3600)
    cluster = Cluster.objects.create(name="quiet-1", connector="simulated", connector_config=config_for(still))
    sync_cluster_task.apply(args=(cluster.name,))
    first = list(Job.objects.filter(kind="fleet.sync_cluster"))
    assert len(first) == 1 and first[0].result["created"]["nodes"] == 20, "the first sync wrote the inventory: recorded"
    sync_cluster_task.apply(args=(cluster.name,))
    assert Job.objects.filter(kind="fleet.sync_cluster").count() == 1, "the second found nothing to change"


@pytest.mark.django_db
def test_work_a_change_asked_for_that_fails_says_why():
    job = enqueue("tests.failing_pass")
    failing_pass.apply(kwargs={"job_id": job.pk}, task_id=job.task_id)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and job.error == "ValueError: the pass broke" and job.finished >= job.started


def sent_long_ago(*jobs: Job) -> None:
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(created=timezone.now() - timedelta(minutes=1))


@pytest.mark.django_db(transaction=True)
def test_the_jobs_a_transaction_enqueued_are_sent_together_after_it_commits():
    """One read of their rows after the commit, however many, and no write: on SQLite a write
    there waited for the write lock behind the other sync process, which had taken it at our
    commit, and the two took turns at each other's heels. The sends are marked in Redis, and
    the reaper records the marks in the rows instead of sending the jobs again."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    waiting = waiting_messages()  # what earlier tests left in the queues
    try:
        with CaptureQueriesContext(connection) as queries:
            with transaction.atomic():
                jobs = [enqueue("tests.periodic_pass", n) for n in range(3)]
                before_commit = len(queries)
        after = queries.captured_queries[before_commit:]
        assert [q["sql"].split()[0] for q in after] == ["COMMIT", "SELECT"], after
        sends = marked_sent(*jobs)
        assert all(sends), "each message is marked sent"
        sent_long_ago(*jobs)
        assert reap()["resent"] == 0, "marked sent: nothing to send again"
        assert waiting_messages() - waiting == 3, "each message was sent once"
    finally:
        purge_queues()
    for job, sent in zip(jobs, sends, strict=True):
        job.refresh_from_db()
        assert job.dispatched == sent and job.broker_epoch == broker_epoch(), "the reaper recorded the send"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lost", ["mark gone", "another broker", "sent long ago"])
def test_a_job_whose_send_is_not_marked_for_this_broker_is_sent_again(lost):
    """The mark dies with the message in a Redis restart; a mark of another broker's run, or of
    a send that never started in ``REDISPATCH_AFTER``, is no proof the message is still there."""
    from django.db import transaction

    from core.jobs import SENT_KEY, SENT_KEY_TTL
    from core.redis import get_redis

    try:
        with transaction.atomic():
            job = enqueue("tests.periodic_pass", 1)
        key = SENT_KEY.format(task_id=job.task_id)
        epoch, _, at = get_redis().get(key).decode().partition(" ")
        mark = {"mark gone": None, "another broker": f"{epoch}x {at}",
                "sent long ago": f"{epoch} {float(at) - REDISPATCH_AFTER.total_seconds() - 1:.6f}"}[lost]
        if mark is None:
            get_redis().delete(key)
        else:
            get_redis().set(key, mark, ex=SENT_KEY_TTL)
        assert marked_sent(job) == [None]
        sent_long_ago(job)
        assert reap()["resent"] == 1
        assert marked_sent(job) != [None], "sent again, and marked"
        assert reap()["resent"] == 0
    finally:
        purge_queues()
    job.refresh_from_db()
    assert job.dispatched == marked_sent(job)[0] and job.broker_epoch == broker_epoch()


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_savepoint_rolled_back_is_not_sent_with_those_of_its_commit():
    from django.db import transaction

    try:
        with transaction.atomic():
            first = enqueue("tests.periodic_pass", 1)
            with pytest.raises(RuntimeError), transaction.atomic():
                ghost = enqueue("tests.periodic_pass", 2)
                raise RuntimeError("rolled back")
            last = enqueue("tests.periodic_pass", 3)
    finally:
        purge_queues()
    assert not Job.objects.filter(task_id=ghost.task_id).exists()
    assert all(marked_sent(first, last)) and marked_sent(ghost) == [None]


@contextlib.contextmanager
def broker_unreachable() -> Iterator[None]:
    """Celery's connections go to a port nothing listens on (a Redis that went away), then back."""
    from config.celery import app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"redis://127.0.0.1:{probe.getsockname()[1]}/0"
    saved = app.conf.broker_url, app._pool, app.amqp._producer_pool
    app.conf.broker_url, app._pool, app.amqp._producer_pool = dead, None, None
    try:
        yield
    finally:
        if app._pool is not None:
            app._pool.force_close_all()
        app.conf.broker_url, app._pool, app.amqp._producer_pool = saved


@contextlib.contextmanager
def delivered(task, job: Job) -> Iterator[None]:
    """``task`` called as a worker runs the delivery of ``job``'s message (not called directly:
    its faults are retried through the broker)."""
    task.push_request(id=job.task_id, is_eager=False, called_directly=False, retries=0,
                      hostname="worker@test", args=[], kwargs={"job_id": job.pk})
    try:
        yield
    finally:
        task.pop_request()


@pytest.mark.django_db
def test_a_retry_the_broker_cannot_take_leaves_the_job_to_the_outbox_not_succeeded():
    """Redis went away during a task, so the transient fault's retry could not be sent either:
    Celery answers that with ``Reject``, which settled the job as succeeded with nothing done
    (an emergency downgrade's restore said "delivered" while 120 nodes kept the downgrade, in
    the Redis fault trial). The job stays pending and unsent, and the reaper sends it again."""
    job = enqueue("tests.redis_went_away")
    with broker_unreachable(), delivered(redis_went_away, job), pytest.raises(Reject):
        redis_went_away(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and job.dispatched is None and job.worker == ""
    assert job.error.startswith("retrying once the broker is back: ConnectionError"), job.error
    Job.objects.filter(pk=job.pk).update(created=job.created - timedelta(minutes=1))
    try:
        assert reap()["resent"] == 1, "the broker is back: the outbox sends the job again"
        assert reap()["resent"] == 0, "and not again"
    finally:
        purge_queues()
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and job.dispatched == marked_sent(job)[0] is not None


@pytest.mark.django_db
@pytest.mark.parametrize(("task", "status"), [(redis_went_away, Job.Status.PENDING), (lock_was_busy, Job.Status.WAITING)])
def test_a_retry_records_the_broker_it_was_sent_to_so_the_reaper_does_not_send_it_again(task, status):
    """A worker can start a job before its sender records where it sent it (``dispatch_many``
    updates only jobs still queued), leaving the job's broker epoch empty. Its retry then
    looked to the reaper like a message sent to a broker since restarted, and the reaper sent
    the job a second time. The retry records the run id of the broker it went to."""
    job = enqueue(task.name)
    assert job.broker_epoch == "" and job.dispatched is None
    with delivered(task, job), pytest.raises(Retry):
        task(job_id=job.pk)
    try:
        job.refresh_from_db()
        assert job.status == status and job.dispatched is not None
        assert job.broker_epoch == broker_epoch()
        assert reap()["resent"] == 0, "the retry is in the broker: nothing to send again"
    finally:
        purge_queues()
