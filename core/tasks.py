"""Periodic housekeeping run by beat: system heartbeat events, audit retention, job reaper."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from . import events
from .jobs import reap_stale_jobs
from .models import Job, ObjectChange
from .worker_signals import live_workers


@shared_task(ignore_result=True)
def publish_system_status() -> None:
    """Tell every console which workers are alive; also proves beat → worker → websocket works."""
    running = Job.objects.filter(status=Job.Status.RUNNING).count()
    events.send_now("system", "system.status", {"workers": live_workers(), "jobs_running": running})


@shared_task(ignore_result=True)
def expire_audit_log() -> int:
    cutoff = timezone.now() - timedelta(days=settings.MERIDIAN_AUDIT_RETENTION_DAYS)
    deleted, _ = ObjectChange.objects.filter(time__lt=cutoff).delete()
    return deleted


@shared_task(ignore_result=True)
def reap_jobs() -> int:
    return reap_stale_jobs(timedelta(seconds=settings.MERIDIAN_JOB_TIMEOUT_SECONDS))
