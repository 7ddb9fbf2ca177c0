"""Periodic housekeeping run by beat: system heartbeat events, the job reaper, retention."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from . import audit, events, jobs, live
from .models import Job
from .taskbase import always_idle
from .worker_signals import live_workers


@shared_task(name="core.publish_system_status", ignore_result=True, idle=staticmethod(always_idle))
def publish_system_status() -> dict:
    """Tell every console which workers are alive; also proves beat → worker → websocket works
    (the event is the record: a run leaves no job)."""
    running = Job.objects.filter(status=Job.Status.RUNNING).count()
    workers = live_workers()
    events.send_now("system", "system.status", {"workers": len(workers), "jobs_running": running})
    return {"workers": len(workers), "jobs_running": running}


@shared_task(name="core.expire_audit_log", ignore_result=True)
def expire_audit_log() -> dict:
    """Retention: entries older than ``MERIDIAN_AUDIT_RETENTION_DAYS`` go (``audit.expire``,
    the one path the append-only log allows)."""
    cutoff = timezone.now() - timedelta(days=settings.MERIDIAN_AUDIT_RETENTION_DAYS)
    return {"deleted": audit.expire(cutoff)}


@shared_task(name="core.expire_jobs", ignore_result=True)
def expire_jobs() -> dict:
    deleted = jobs.expire(keep_system=timedelta(hours=settings.MERIDIAN_SYSTEM_JOB_RETENTION_HOURS),
                          keep=timedelta(days=settings.MERIDIAN_AUDIT_RETENTION_DAYS))
    return {"deleted": deleted}


@shared_task(name="core.publish_live", ignore_result=True)
def publish_live() -> dict:
    """Send one summary per changed thing since the last run (``core.live``), each kind at most
    about once a second however the ticks bunch up."""
    return live.publish_pending(spacing=live.TICK_SPACING_SECONDS)
