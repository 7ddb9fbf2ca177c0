"""Quota reconciliation: per-group refreshes on the group's shard, per-cluster ledger syncs
after inventory syncs, and the periodic full resync with cash accrual."""

from __future__ import annotations

from celery import shared_task

from core.context import acting_as
from core.sharding import sharded_task
from fleet.models import Cluster

from .reconcile import refresh_groups, resync_all, sync_ledger


def group_shard_key(name: str) -> str:
    return f"quota-group/{name}"


@sharded_task(shard_key=group_shard_key, name="quotas.reconcile_group", ignore_result=True)
def reconcile_group(name: str) -> int:
    """Recompute one group's status from its charges (event-driven, on the group's shard)."""
    with acting_as("system:quota-reconciler"):
        return refresh_groups([name])


@shared_task(name="quotas.sync_workloads", ignore_result=True)
def sync_workloads(cluster_name: str, keys: list[list[str]]) -> int:
    """After an inventory sync changed workloads: align their charges, refresh their groups."""
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None:
        return 0
    with acting_as("system:quota-reconciler"):
        touched = sync_ledger(cluster, [tuple(k) for k in keys])
    for name in sorted(touched):
        reconcile_group.delay(name)
    return len(touched)


@shared_task(name="quotas.resync", ignore_result=True, quiet=False)
def resync() -> dict:
    """Beat (``MERIDIAN_QUOTA_RESYNC_SECONDS``, default 300): repair any drift, accrue cash."""
    with acting_as("system:quota-reconciler"):
        return resync_all()
