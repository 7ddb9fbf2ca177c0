"""Work nobody asked for (beat's periodic passes and what they fan out) records its Job only
when it did something or failed: housekeeping that found nothing to do writes nothing —
``core.publish_live`` used to write a row every second. Work a change asked for (the outbox's
job) is recorded from the start, as before."""

from __future__ import annotations

import pytest
from celery import shared_task

from core.jobs import enqueue
from core.models import Job
from core.taskbase import nothing_done


@shared_task(name="tests.periodic_pass")
def periodic_pass(stepped: int) -> dict:
    return {"stepped": stepped}


@shared_task(name="tests.failing_pass")
def failing_pass() -> dict:
    raise ValueError("the pass broke")


@pytest.mark.parametrize(("result", "idle"), [
    (None, True), ({}, True), (0, True), ({"stepped": 0, "errors": []}, True),
    ({"stepped": 2}, False), (3, False), ({"skipped": "busy"}, False),
])
def test_a_result_is_idle_when_it_holds_nothing(result, idle):
    assert nothing_done(result) is idle


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

    cluster = Cluster.objects.create(name="quiet-1", connector="simulated",
                                     connector_config=config_for(ClusterSpec(name="quiet-1", region="gz", node_count=20, seed=4)))
    sync_cluster_task.apply(args=(cluster.name,))
    first = list(Job.objects.filter(kind="fleet.sync_cluster"))
    assert len(first) == 1 and first[0].result["created"]["nodes"] >= 20, "the first sync wrote the inventory: recorded"
    sync_cluster_task.apply(args=(cluster.name,))
    assert Job.objects.filter(kind="fleet.sync_cluster").count() == 1, "the second found nothing to change"


@pytest.mark.django_db
def test_work_a_change_asked_for_that_fails_says_why():
    job = enqueue("tests.failing_pass")
    failing_pass.apply(kwargs={"job_id": job.pk}, task_id=job.task_id)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and job.error == "ValueError: the pass broke" and job.finished >= job.started
