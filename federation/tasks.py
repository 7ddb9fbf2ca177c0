"""Federation reconciliation: one object per task on the object's shard (upstream shards its
controllers by object key the same way), a periodic pass over unsettled objects and due
retries, and the water-level history."""

from __future__ import annotations

import logging

from celery import shared_task
from redis.exceptions import LockError

from core.context import acting_as
from core.redis import get_redis
from core.sharding import sharded_task

from .models import FederatedObject
from .reconcile import needs_attention, reconcile_object, reschedule_all
from .water import record_samples

logger = logging.getLogger(__name__)
LOCK_SECONDS = 120


def object_shard_key(pk: int, key: str = "", **_: object) -> str:
    return f"federation/{key or pk}"


def queue_reconcile(ids) -> None:
    """Send each object to its shard (called after the change's transaction committed)."""
    for fed in FederatedObject.objects.filter(pk__in=list(ids)).only("pk", "namespace", "name"):
        reconcile_object_task.delay(fed.pk, fed.key)


@sharded_task(shard_key=object_shard_key, name="federation.reconcile_object", ignore_result=True)
def reconcile_object_task(pk: int, key: str = "") -> str | None:
    """One reconcile pass; a pass already running for the object makes this one come back later."""
    lock = get_redis().lock(f"meridian:lock:federation:{pk}", timeout=LOCK_SECONDS, blocking=False)
    if not lock.acquire():
        reconcile_object_task.apply_async((pk, key), countdown=1)
        return None
    try:
        with acting_as("system:federation"):
            return reconcile_object(pk)
    finally:
        try:
            lock.release()
        except LockError:
            logger.warning("federation lock of object %s expired before the pass ended", pk)


@shared_task(name="federation.resync", ignore_result=True)
def resync() -> int:
    """Beat (every few seconds): drive rollouts forward and retry failed members."""
    ids = needs_attention()
    queue_reconcile(ids)
    return len(ids)


@shared_task(name="federation.sample_water_levels", ignore_result=True)
def sample_water_levels() -> int:
    """Beat (every minute): one history point per cluster for the dashboard."""
    return record_samples()


@shared_task(name="federation.reschedule_all", ignore_result=True)
def reschedule_all_task() -> dict:
    """Beat (``MERIDIAN_FEDERATION_RESCHEDULE_SECONDS``, default 1800): a full rescheduling
    pass; objects whose placement would change are reconciled on their shards."""
    with acting_as("system:federation"):
        return reschedule_all()
