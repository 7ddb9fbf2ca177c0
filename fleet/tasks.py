"""Inventory sync: one sharded task per cluster, and a periodic fan-out from beat."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from datetime import timedelta

from celery import shared_task
from django import db
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone
from redis.exceptions import RedisError

from core import events
from core.context import acting_as
from core.locks import HeldLock, LockBusy, hold, is_held
from core.models import Job
from core.sharding import sharded_task
from core.taskbase import always_idle

from kube.hashing import object_digest

from .connectors.base import ConnectorError
from .informer import ClusterInformers, WatchContext, Watcher, informers_for, start_companions
from .models import Cluster
from .queries import fleet_summary
from .services import connector_for, expire_finished_pods
from .sync import mark_unreachable, sync_cluster

logger = logging.getLogger(__name__)


def cluster_shard_key(cluster_name: str) -> str:
    return f"cluster/{cluster_name}"


#: Why a periodic sync leaves a watched cluster alone.
WATCHED = "watched: its watcher writes every change"
#: Why a periodic sync leaves a cluster to a sync someone asked for.
REQUESTED_FIRST = "a requested sync of this cluster goes first"


def _requested_sync_unfinished(cluster_name: str) -> bool:
    """A requested sync of the cluster is queued, waiting or running — its worker may even have
    died, its lock lapsing before the reaper sends it again: a periodic sync taking the lock in
    that gap kept it from the request for a whole sync (and the next, and the next)."""
    cluster = Cluster.objects.filter(name=cluster_name).values_list("pk", flat=True).first()
    return cluster is not None and Job.objects.filter(
        task_name="fleet.sync_cluster", status__in=Job.UNFINISHED, object_type=ContentType.objects.get_for_model(Cluster),
        object_id=str(cluster)).exists()


def synced_since_asked(job) -> str | None:
    """A sync job's work is done once the cluster was synced, by any run, after the job was
    created: a requested sync whose worker died is settled by the periodic sync that came
    after, instead of syncing again (``core.taskbase.MeridianTask.superseded``)."""
    name = (job.task_args or [None])[0]
    row = Cluster.objects.filter(name=name).values("ready", "last_sync").first() if isinstance(name, str) else None
    if row and row["ready"] and row["last_sync"] is not None and row["last_sync"] >= job.created:
        return f"cluster {name} was synced at {row['last_sync']:%Y-%m-%d %H:%M:%S} UTC, after this sync was asked for"
    return None


def nothing_synced(result: dict | None) -> bool:
    """A periodic sync that was skipped, or changed nothing, leaves no job (``MeridianTask.idle``)."""
    if not result or "skipped" in result:
        return True
    changes = [n for part in ("created", "updated", "deleted") for n in (result.get(part) or {}).values()]
    return bool(result.get("ok")) and not any(changes) and not result.get("errors")


@sharded_task(shard_key=cluster_shard_key, name="fleet.sync_cluster", ignore_result=True,
              superseded=staticmethod(synced_since_asked), idle=staticmethod(nothing_synced))
def sync_cluster_task(cluster_name: str, requested: bool = False) -> dict | None:
    """Sync one cluster, one sync per cluster at a time.

    A periodic sync that finds one running is skipped (the running one does the work), and so
    is one that finds a requested sync unfinished: a requested one (a user's "sync now", a
    registration) waits for a running one (``LockBusy`` retries, the job "waiting") and then
    goes first, unless a sync since the request already did its work.
    """
    if not requested and is_held(_watch_lease(cluster_name)):
        return {"cluster": cluster_name, "skipped": WATCHED}  # before the sync lock, which its writer takes now and then
    if not requested and _requested_sync_unfinished(cluster_name):
        return {"cluster": cluster_name, "skipped": REQUESTED_FIRST}
    try:
        with hold(_sync_lock(cluster_name)):
            cluster = Cluster.objects.filter(name=cluster_name).first()
            if cluster is None:
                return {"cluster": cluster_name, "ok": False, "message": "no such cluster"}
            with acting_as("system:fleet-sync"):
                return _sync(cluster, requested)
    except LockBusy as exc:
        if requested:
            raise
        logger.info("sync of %s skipped: %s", cluster_name, exc)
        return {"cluster": cluster_name, "skipped": "a sync of this cluster is running"}


def _sync(cluster: Cluster, requested: bool = False) -> dict:
    """One sync. A real cluster is read through this worker's informers of it (a list the
    first time, then watches); after a failure, periodic syncs back off (15 s doubling to
    5 min) while a requested one tries at once. A periodic sync that went well starts the
    cluster's watcher (``_watch``); while one runs, in this process or another, periodic syncs
    leave the cluster to it."""
    informers = informers_for(cluster.pk, _fingerprint(cluster)) if cluster.connector == Cluster.ConnectorKind.KUBERNETES else None
    if informers is not None and not requested:
        if informers.watching() or is_held(_watch_lease(cluster.name)):
            return {"cluster": cluster.name, "skipped": WATCHED}
        if informers.backing_off():
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
        if report.ok and not requested and settings.MERIDIAN_CLUSTER_WATCH:
            _watch(cluster, informers)
    return report.as_dict()


def _sync_lock(cluster_name: str) -> str:
    """One writer of a cluster's inventory at a time: sync tasks and its watcher hold this."""
    return f"fleet-sync-{cluster_name}"


def _watch_lease(cluster_name: str) -> str:
    return f"fleet-watch-{cluster_name}"


def _watch(cluster: Cluster, informers: ClusterInformers) -> None:
    """Start this process's watcher of ``cluster`` unless another holds its lease.

    The lease (a ``core.locks`` lock this process keeps extending) makes one worker process
    in the whole deployment the cluster's watcher; when that process dies the lease lapses
    within 15 s and the next periodic sync, in whichever worker runs it, takes over with a
    list. The watcher writes through ``sync_cluster`` under the cluster's sync lock, as a sync
    task does: one writer at a time. Its companions (``fleet.informer.register_companion``:
    the scheduling app's pod scheduler) start with it and end before the lease is released.
    """
    stack = contextlib.ExitStack()
    try:
        lease = stack.enter_context(hold(_watch_lease(cluster.name)))
        connector = stack.enter_context(connector_for(cluster))
    except (LockBusy, ConnectorError, RedisError, OSError):
        stack.close()
        return
    watcher = Watcher(informers, connector, write=functools.partial(_write_watched, cluster.pk, cluster.name, lease),
                      failed=functools.partial(_watch_failed, cluster.pk), on_stop=stack.close,
                      watch_seconds=settings.MERIDIAN_CLUSTER_WATCH_SECONDS)
    informers.watcher = watcher
    watcher.start(cluster.name)
    start_companions(watcher, WatchContext(cluster.pk, cluster.name, informers, lease_lost=lambda: lease.lost))


#: Watchers of one process writing at once: each write holds a database connection, and a
#: process watches many clusters (``MERIDIAN_DB_POOL_MAX`` bounds its connections).
_WATCHED_WRITES = threading.BoundedSemaphore(4)


def _write_watched(cluster_pk: int, cluster_name: str, lease: HeldLock, watcher: Watcher) -> None:
    """The watcher's write: the informers' objects into the inventory. The watcher stops when
    its lease was lost, the cluster is gone or its connection changed (a sync starts another)."""
    if lease.lost:
        watcher.stop()
        return
    informers = watcher.informers
    try:
        with _WATCHED_WRITES, hold(_sync_lock(cluster_name), wait=10):
            cluster = Cluster.objects.filter(pk=cluster_pk).first()
            if cluster is None or _fingerprint(cluster) != informers.fingerprint:
                watcher.stop()
                return
            with acting_as("system:fleet-sync"):
                informers.record(sync_cluster(cluster, watcher.connector, informers=informers).ok)
            informers.last_used = time.monotonic()
    finally:
        db.connection.close()  # the watcher's threads are not a request or a task: nobody else closes it


def _watch_failed(cluster_pk: int, exc: ConnectorError) -> None:
    """A watch failed: the cluster shows why (the watcher retries on its own)."""
    try:
        cluster = Cluster.objects.filter(pk=cluster_pk).first()
        if cluster is not None:
            with acting_as("system:fleet-sync"):
                mark_unreachable(cluster, exc, timezone.now())
    finally:
        db.connection.close()


def _fingerprint(cluster: Cluster) -> str:
    """What the connection depends on: another kubeconfig or setting means other informers."""
    return object_digest([cluster.connector, cluster.connector_config or {}, str(cluster.credentials or "")])


@shared_task(name="fleet.expire_pods", ignore_result=True)
def expire_pods() -> dict:
    """Beat, hourly: finished pods older than ``MERIDIAN_FINISHED_POD_RETENTION_HOURS`` go."""
    return {"deleted": expire_finished_pods(timedelta(hours=settings.MERIDIAN_FINISHED_POD_RETENTION_HOURS))}


@shared_task(name="fleet.resync_fleet", ignore_result=True, idle=staticmethod(always_idle))
def resync_fleet() -> dict:
    """Beat: queue a sync of every cluster on its shard, and publish the fleet's water level
    (a fan-out: each sync records its own job when it changed something)."""
    names = list(Cluster.objects.values_list("name", flat=True))
    for name in names:
        sync_cluster_task.delay(name)
    publish_fleet_summary()
    return {"clusters": len(names)}


def publish_fleet_summary() -> None:
    events.send_now("fleet", "fleet.summary", fleet_summary())
