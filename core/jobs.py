"""Job rows: create them where work is requested, drive them from the task that does it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.utils import timezone

from . import events
from .audit import record_change
from .context import current_actor
from .models import Job

logger = logging.getLogger(__name__)


class JobCanceled(Exception):
    """Raised inside a job's work when someone canceled it meanwhile."""


def create_job(kind: str, *, params: Mapping[str, Any] | None = None, obj: models.Model | None = None) -> Job:
    """A pending job attributed to the current actor."""
    actor = current_actor()
    job = Job.objects.create(
        kind=kind,
        params=dict(params or {}),
        triggered_by=actor.name,
        user=actor.user if getattr(actor.user, "pk", None) else None,
        object_type=ContentType.objects.get_for_model(obj) if obj is not None else None,
        object_id=str(obj.pk) if obj is not None else "",
    )
    _announce(job)
    return job


@contextlib.contextmanager
def running(job_id: int) -> Iterator[Job]:
    """Mark the job running for the block; succeeded on exit, failed with the error on exception.

    Safe to enter twice for one job (tasks are retried): a finished job is not reopened.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.status in Job.FINISHED:
            raise JobCanceled(f"job {job_id} already {job.status}")
        job.status, job.started = Job.Status.RUNNING, job.started or timezone.now()
        job.save(update_fields=["status", "started"])
    _announce(job)
    try:
        yield job
    except JobCanceled:
        raise
    except Exception as exc:
        _finish(job, Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    else:
        _finish(job, Job.Status.SUCCEEDED)


def _finish(job: Job, status: str, *, error: str = "") -> None:
    updated = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(
        status=status, finished=timezone.now(), error=error, result=job.result, log=job.log
    )
    if updated:
        job.refresh_from_db()
        _announce(job)


def cancel_job(job: Job) -> bool:
    """Cancel a job that has not finished; returns False when it already had."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.status in Job.FINISHED:
            return False
        before = {"status": locked.status}
        locked.status, locked.finished = Job.Status.CANCELED, timezone.now()
        locked.save(update_fields=["status", "finished"])
        record_change(locked, "action", verb="cancel", before=before, after={"status": locked.status})
        _announce(locked)
    if locked.task_id:
        from config.celery import app

        app.control.revoke(locked.task_id)
    job.refresh_from_db()
    return True


def reap_stale_jobs(max_age: timedelta) -> int:
    """Fail jobs stuck in running/pending longer than ``max_age`` (their worker died)."""
    cutoff = timezone.now() - max_age
    stale = Job.objects.filter(status__in=[Job.Status.RUNNING, Job.Status.PENDING], created__lt=cutoff)
    return stale.update(status=Job.Status.FAILED, finished=timezone.now(), error="reaped: no worker finished it in time")


def _announce(job: Job) -> None:
    events.publish(f"job-{job.pk}", "job.status", {"id": job.pk, "kind": job.kind, "status": job.status})
