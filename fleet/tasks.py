"""Inventory sync: one sharded task per cluster, and a periodic fan-out from beat."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone
from redis.exceptions import LockError

from core import events
from core.context import acting_as
from core.jobs import JobCanceled, create_job, running
from core.redis import get_redis
from core.sharding import sharded_task

from .connectors.base import ConnectorError
from .models import Cluster
from .queries import fleet_summary
from .services import connector_for
from .sync import mark_unreachable, sync_cluster

logger = logging.getLogger(__name__)
LOCK_SECONDS = 300
BUSY_RETRY_SECONDS = 5


def cluster_shard_key(cluster_name: str, **_: object) -> str:
    return f"cluster/{cluster_name}"


@sharded_task(shard_key=cluster_shard_key, name="fleet.sync_cluster", ignore_result=True)
def sync_cluster_task(cluster_name: str, job_id: int | None = None) -> dict | None:
    """Sync one cluster; a second sync of the same cluster while one runs is skipped."""
    lock = get_redis().lock(f"meridian:lock:fleet-sync:{cluster_name}", timeout=LOCK_SECONDS, blocking=False)
    if not lock.acquire():
        if job_id is not None:  # someone asked for this sync: run it after the one in progress
            sync_cluster_task.apply_async((cluster_name,), {"job_id": job_id}, countdown=BUSY_RETRY_SECONDS)
        logger.info("sync of %s already running; %s", cluster_name, "requeued" if job_id else "skipped")
        return None
    try:
        cluster = Cluster.objects.filter(name=cluster_name).first()
        if cluster is None:
            return None
        with acting_as("system:fleet-sync"):
            if job_id is None:
                return _sync(cluster)
            try:
                with running(job_id) as job:
                    job.result = _sync(cluster)
                    return job.result
            except JobCanceled:
                return None
    finally:
        try:
            lock.release()
        except LockError:  # it expired during a very long sync; nothing to release
            logger.warning("sync lock of %s expired before the sync ended", cluster_name)


def _sync(cluster: Cluster) -> dict:
    try:
        connector = connector_for(cluster)
    except ConnectorError as exc:
        mark_unreachable(cluster, exc, timezone.now())
        return {"cluster": cluster.name, "ok": False, "message": str(exc)}
    with connector:
        return sync_cluster(cluster, connector).as_dict()


@shared_task(name="fleet.resync_fleet", ignore_result=True)
def resync_fleet() -> int:
    """Beat: queue a sync of every cluster on its shard, and publish the fleet's water level."""
    names = list(Cluster.objects.values_list("name", flat=True))
    for name in names:
        sync_cluster_task.delay(name)
    publish_fleet_summary()
    return len(names)


def publish_fleet_summary() -> None:
    events.send_now("fleet", "fleet.summary", fleet_summary())


@shared_task(name="fleet.full_resync", ignore_result=True)
def full_resync() -> None:
    """A recorded full resync (job row), run less often than the incremental one."""
    with acting_as("system:fleet-sync"):
        job = create_job("fleet.full_resync")
        with running(job.pk) as job:
            job.result = {"clusters": resync_fleet()}
