"""Inventory sync: one sharded task per cluster, and a periodic fan-out from beat."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from core import events
from core.context import acting_as
from core.locks import LockBusy, hold
from core.sharding import sharded_task

from kube.hashing import object_digest

from .connectors.base import ConnectorError
from .informer import informers_for
from .models import Cluster
from .queries import fleet_summary
from .services import connector_for
from .sync import mark_unreachable, sync_cluster

logger = logging.getLogger(__name__)


def cluster_shard_key(cluster_name: str) -> str:
    return f"cluster/{cluster_name}"


@sharded_task(shard_key=cluster_shard_key, name="fleet.sync_cluster", ignore_result=True)
def sync_cluster_task(cluster_name: str, requested: bool = False) -> dict | None:
    """Sync one cluster, one sync per cluster at a time.

    A periodic sync that finds one running is skipped (the running one does the work); a
    requested one (a user's "sync now", a registration) runs after it (``LockBusy`` retries).
    """
    try:
        with hold(f"fleet-sync-{cluster_name}"):
            cluster = Cluster.objects.filter(name=cluster_name).first()
            if cluster is None:
                return {"cluster": cluster_name, "ok": False, "message": "no such cluster"}
            with acting_as("system:fleet-sync"):
                return _sync(cluster, requested)
    except LockBusy:
        if requested:
            raise
        logger.info("sync of %s already running; skipped", cluster_name)
        return {"cluster": cluster_name, "skipped": "a sync of this cluster is running"}


def _sync(cluster: Cluster, requested: bool = False) -> dict:
    """One sync. A real cluster is read through this worker's informers of it (a list the
    first time, then watches); after a failure, periodic syncs back off (15 s doubling to
    5 min) while a requested one tries at once."""
    informers = informers_for(cluster.pk, _fingerprint(cluster)) if cluster.connector == Cluster.ConnectorKind.KUBERNETES else None
    if informers is not None and not requested and informers.backing_off():
        return {"cluster": cluster.name, "skipped": f"backing off after {informers.failures} failed syncs"}
    try:
        connector = connector_for(cluster)
    except ConnectorError as exc:
        mark_unreachable(cluster, exc, timezone.now())
        return {"cluster": cluster.name, "ok": False, "message": str(exc)}
    with connector:
        report = sync_cluster(cluster, connector, informers=informers)
    if informers is not None:
        informers.record(report.ok)
    return report.as_dict()


def _fingerprint(cluster: Cluster) -> str:
    """What the connection depends on: another kubeconfig or setting means other informers."""
    return object_digest([cluster.connector, cluster.connector_config or {}, str(cluster.credentials or "")])


@shared_task(name="fleet.resync_fleet", ignore_result=True)
def resync_fleet() -> dict:
    """Beat: queue a sync of every cluster on its shard, and publish the fleet's water level."""
    names = list(Cluster.objects.values_list("name", flat=True))
    for name in names:
        sync_cluster_task.delay(name)
    publish_fleet_summary()
    return {"clusters": len(names)}


def publish_fleet_summary() -> None:
    events.send_now("fleet", "fleet.summary", fleet_summary())
