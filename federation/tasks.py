"""Federation reconciliation: one object per task on the object's shard (upstream shards its
controllers by object key the same way), a periodic pass over unsettled objects and due
retries, and the water-level history."""

from __future__ import annotations

import logging

from celery import shared_task

from core.context import acting_as
from core.locks import hold
from core.sharding import sharded_task
from core.taskbase import always_idle

from .models import FederatedObject
from .reconcile import needs_attention, queue_reconcile, reconcile_object, reschedule_all
from .water import record_samples

logger = logging.getLogger(__name__)


def object_shard_key(pk: int, key: str = "") -> str:
    return f"federation/{key or pk}"


@sharded_task(shard_key=object_shard_key, name="federation.reconcile_object", ignore_result=True)
def reconcile_object_task(pk: int, key: str = "") -> dict:
    """One reconcile pass; a pass already running for the object makes this one come back later
    (``LockBusy`` → retried in a few seconds)."""
    with hold(f"federation-object-{pk}"), acting_as("system:federation"):
        return {"phase": reconcile_object(pk)}


@shared_task(name="federation.resync", ignore_result=True, idle=staticmethod(always_idle))
def resync() -> dict:
    """Beat (every few seconds): drive rollouts forward and retry failed members."""
    ids = needs_attention()
    for fed in FederatedObject.objects.filter(pk__in=ids).only("pk", "namespace", "name"):
        reconcile_object_task.delay(fed.pk, fed.key)
    return {"objects": len(ids)}


@shared_task(name="federation.sample_water_levels", ignore_result=True)
def sample_water_levels() -> dict:
    """Beat (every minute): one history point per cluster for the dashboard."""
    return {"samples": record_samples()}


@shared_task(name="federation.reschedule_all", ignore_result=True, quiet=False)
def reschedule_all_task() -> dict:
    """Beat (``MERIDIAN_FEDERATION_RESCHEDULE_SECONDS``, default 1800): a full rescheduling
    pass; objects whose placement would change are reconciled on their shards."""
    with acting_as("system:federation"):
        counts, changed = reschedule_all()
        queue_reconcile(changed)
    return counts
