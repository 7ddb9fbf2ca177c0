"""Node config reconciliation: sharded per config type, plus the beat-driven housekeeping."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from celery import shared_task
from django.db.models import Count, F, Q
from django.utils import timezone

from core.context import acting_as
from core.sharding import sharded_task
from core.taskbase import always_idle, idle_unless
from fleet.connectors.base import ConnectorError
from fleet.models import Cluster, Node
from fleet.services import connector_for
from fleet.simstore import spec_for
from fleet.simulator import agent_report

from . import etags, services
from .agent import record_reports
from .katalyst import (
    MANAGED_BY,
    TARGET_NAMESPACE,
    custom_node_config,
    katalyst_custom_config,
    runs_katalyst,
    target_object,
    target_status,
    without_status,
)
from .models import ConfigTarget, ConfigType, NodeConfig
from .reconcile import reconcile, reconcile_nodes
from .rollout import reconcile_targets, step_all

logger = logging.getLogger(__name__)
SIMULATED_REPORTS_PER_RUN = 50_000


def type_shard_key(type_id: int) -> str:
    return f"nodeconfig-type/{type_id}"


@sharded_task(shard_key=type_shard_key, name="nodeconfig.reconcile_type", ignore_result=True,
              idle=staticmethod(idle_unless("written", "removed", "conflicts")))
def reconcile_type_task(type_id: int, target_ids: list[int] | None = None) -> dict | None:
    """Reconcile a type: only what ``target_ids`` can affect, or every node when absent."""
    config_type = ConfigType.objects.filter(pk=type_id).first()
    if config_type is None:
        return None
    with acting_as("system:nodeconfig-reconciler"):
        if target_ids:
            return reconcile_targets(config_type, target_ids).as_dict()
        report = reconcile(config_type)
        etags.refresh_etags(etags.all_node_ids())  # the type's default is in every node's ETag
        return report.as_dict()


@shared_task(name="nodeconfig.refresh_etags", ignore_result=True)
def refresh_etags_task(node_ids: list[int]) -> dict:
    """Agents' ETags that could not be refreshed after a commit (Redis was down): retried until done."""
    etags.refresh_etags(node_ids)
    return {"nodes": len(node_ids)}


@shared_task(name="nodeconfig.reconcile_nodes", ignore_result=True)
def reconcile_nodes_task(cluster_name: str, names: list[str]) -> int:
    """After an inventory sync changed nodes (labels, new nodes): those nodes, every type."""
    ids = list(Node.objects.filter(cluster__name=cluster_name, name__in=names).values_list("pk", flat=True))
    with acting_as("system:nodeconfig-reconciler"):
        reconcile_nodes(ids)
    return len(ids)


@shared_task(name="nodeconfig.full_reconcile", ignore_result=True, idle=staticmethod(always_idle))
def full_reconcile() -> None:
    """Beat, rarely: a full pass catches anything an incremental one missed."""
    for type_id in ConfigType.objects.values_list("pk", flat=True):
        reconcile_type_task.delay(type_id)


@shared_task(name="nodeconfig.expire_targets", ignore_result=True)
def expire_targets(now: datetime | None = None) -> int:
    """Delete node-list targets whose lastDuration has elapsed (upstream's cleanup)."""
    now = now or timezone.now()
    expired = list(ConfigTarget.objects.filter(deleted=False, expires_at__lte=now).select_related("config_type"))
    with acting_as("system:nodeconfig-expiry"):
        for target in expired:
            services.delete_target(target, reason=f"lastDuration {target.last_duration} elapsed")
    return len(expired)


@shared_task(name="nodeconfig.rollouts", ignore_result=True)
def rollouts() -> dict:
    """Beat, every few seconds: advance paced rollouts (``core.publish_live`` sends their progress)."""
    return {"stepped": step_all()}


@shared_task(name="nodeconfig.simulate_agents", ignore_result=True)
def simulate_agents(now: float | None = None) -> int:
    """The simulated clusters' node agents: report what they applied, through ``record_reports``
    (the function behind the agent status API), after a per-node delay and with some failures."""
    now_ts = now if now is not None else timezone.now().timestamp()
    total = 0
    for cluster in Cluster.objects.filter(connector=Cluster.ConnectorKind.SIMULATED):
        spec = spec_for(cluster)
        pending = (NodeConfig.objects.filter(cluster=cluster).exclude(config_hash="").exclude(applied_hash=F("config_hash"))
                   .filter(error="", delivered_at__isnull=False)
                   .values_list("node__name", "config_type__name", "config_hash", "delivered_at")[:SIMULATED_REPORTS_PER_RUN])
        reports: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        for node, kind, digest, delivered in pending:
            report = agent_report(spec, node, kind, digest, delivered.timestamp(), now_ts)
            if report is None:
                continue
            applied, errors = reports.setdefault(node, ({}, {}))
            if report.error:
                errors[kind] = report.error
            else:
                applied[kind] = report.applied_hash or ""
        if reports:
            with acting_as(f"agent:{cluster.name}"):
                total += record_reports(cluster, reports)
    return total



def cluster_shard_key(cluster_name: str) -> str:
    return f"cluster/{cluster_name}"


@sharded_task(shard_key=cluster_shard_key, name="nodeconfig.push_to_cluster", ignore_result=True)
def push_to_cluster(cluster_name: str, node_names: list[str] | None = None) -> dict:
    """Mirror node configs into a cluster running Katalyst agents: the CNC of each named node
    (every node without names), then the targets those CNCs name, each with its status, and
    their config types' KatalystCustomConfigs. Objects first, status through the status
    subresource (``katalyst``): a real API server keeps a CRD's status nowhere else.

    An unreachable or failing API server raises a transient ``ConnectorError``: the job is
    retried with backoff until the cluster answers; every write is an idempotent apply.
    """
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None or not runs_katalyst(cluster.api_resources, cluster.connector, cluster.connector_config or {}):
        return {"written": 0, "removed": 0}
    rows = NodeConfig.objects.filter(cluster=cluster).exclude(config_hash="")
    nodes = Node.objects.filter(cluster=cluster)
    if node_names is not None:
        rows, nodes = rows.filter(node__name__in=node_names), nodes.filter(name__in=node_names)
    entries: dict[str, list[dict[str, str]]] = {}
    target_ids: set[int] = set()
    for node, group, version, resource, target_id, target, config_hash in rows.values_list(
            "node__name", "config_type__group", "config_type__version", "config_type__resource", "target_id", "target__name",
            "config_hash").iterator(chunk_size=5000):
        entries.setdefault(node, []).append({"group": group, "version": version, "resource": resource, "target": target or "",
                                             "hash": config_hash})
        if target_id:
            target_ids.add(target_id)
    written = 0
    with connector_for(cluster) as connector:
        for name, labels in nodes.values_list("name", "labels").iterator(chunk_size=5000):
            cnc = custom_node_config(name, labels or {}, entries.get(name, []))
            connector.apply(without_status(cnc), field_manager=FIELD_MANAGER)
            connector.apply_status(cnc, field_manager=FIELD_MANAGER)
            written += 1
        _push_targets(connector, cluster, target_ids)
        removed = _prune_targets(connector, cluster)
    return {"written": written, "removed": removed}


FIELD_MANAGER = "meridian-nodeconfig"


def _push_targets(connector: Any, cluster: Cluster, target_ids: set[int]) -> None:
    """The targets the pushed CNCs name, their status counted over this cluster's nodes, and
    their config types' KatalystCustomConfigs."""
    targets = ConfigTarget.objects.filter(pk__in=target_ids, deleted=False).select_related("config_type", "cluster", "revision")
    counts = {row["target_id"]: row for row in NodeConfig.objects.filter(cluster=cluster, target_id__in=target_ids).values(
        "target_id").annotate(released=Count("pk"), updated=Count("pk", filter=Q(config_hash=F("target__config_hash"))))}
    matched = dict(NodeConfig.objects.filter(cluster=cluster, matched_target_id__in=target_ids).values("matched_target_id").annotate(
        n=Count("pk")).values_list("matched_target_id", "n"))
    types = {}
    for target in targets:
        types[target.config_type_id] = target.config_type
        stored = connector.apply(without_status(target_object(services.manifest_of(target))), field_manager=FIELD_MANAGER)
        count = counts.get(target.pk, {"released": 0, "updated": 0})
        status = target_status(target.config_hash, int((stored.get("metadata") or {}).get("generation") or 1),
                               matched.get(target.pk, 0), count["released"], count["updated"])
        connector.apply_status(dict(stored, status=status), field_manager=FIELD_MANAGER)
    for config_type in types.values():
        connector.apply(katalyst_custom_config(config_type.group, config_type.version, config_type.resource,
                                               config_type.allowed_keys or []), field_manager=FIELD_MANAGER)


def _prune_targets(connector: Any, cluster: Cluster) -> int:
    """Remove the target objects Meridian wrote into the cluster whose targets are deleted or no
    longer reach it: left there, Katalyst's own controllers would still match nodes with them."""
    live: dict[int, set[str]] = {}
    for type_id, name in ConfigTarget.objects.filter(Q(cluster=None) | Q(cluster=cluster), deleted=False).values_list(
            "config_type_id", "name"):
        live.setdefault(type_id, set()).add(name)
    removed = 0
    for config_type in ConfigType.objects.filter(pk__in=ConfigTarget.objects.values("config_type")):  # none: none written
        try:
            listed = connector.list(config_type.api_version, config_type.name, namespace=TARGET_NAMESPACE,
                                    label_selector="=".join(MANAGED_BY))
        except ConnectorError as exc:
            if exc.reason == "not_found":  # the cluster does not serve this type: Meridian wrote none there
                continue
            raise
        for obj in listed.items:
            name = obj["metadata"]["name"]
            if name not in live.get(config_type.pk, ()):
                removed += connector.delete(config_type.api_version, config_type.name, name, namespace=TARGET_NAMESPACE)
    return removed
