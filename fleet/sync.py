"""Mirror one member cluster into the inventory, writing only what changed.

The connector is read outside any transaction (it may be slow); the diff against the
database is written in one transaction per cluster, so readers never see half a sync.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from core import events
from core.audit import record_change
from core.jobs import checkpoint
from core.sql import BATCH, delete_in_batches, insert_rows, update_rows
from core.worker_signals import collector_paused

from kube.quantity import BINARY_SI, DECIMAL_SI, Quantity

from .connectors.base import Connector, ConnectorError
from .informer import ClusterInformers
from .inventory import USAGE_FIELDS, Snapshot, build_snapshot, parse_time
from .models import Cluster, Node, Pod, Workload
from .signals import nodes_changed, workloads_changed

logger = logging.getLogger(__name__)
METRICS_RESOURCE = "metrics.k8s.io/v1beta1/nodes"
#: A watched cluster's NodeMetrics are read again when the last list is this old.
METRICS_SECONDS = 10.0
MAX_REPORTED_ERRORS = 50


@dataclass
class SyncReport:
    cluster: str
    ok: bool = True
    message: str = ""
    created: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "cluster": self.cluster, "ok": self.ok, "message": self.message, "created": self.created,
            "updated": self.updated, "deleted": self.deleted, "errors": self.errors[:MAX_REPORTED_ERRORS],
        }


def read_cluster(connector: Connector) -> tuple[Snapshot, str, list[str]]:
    """Everything the inventory mirrors, read through the connector."""
    with connector.one_moment():
        info = connector.server_info()
        nodes = connector.list_nodes().items
        metrics = connector.list("metrics.k8s.io/v1beta1", "NodeMetrics").items if METRICS_RESOURCE in info.api_resources else []
        snapshot = build_snapshot(nodes, connector.list_pods().items, connector.list_workloads(), metrics, between=checkpoint)
    return snapshot, info.kubernetes_version, list(info.api_resources)


def read_informed(connector: Connector, informers: ClusterInformers) -> tuple[Snapshot, str, list[str]]:
    """The same as ``read_cluster``, from the cluster's informers (``fleet.informer``): after the
    first sync, one watch per kind returning only what changed (none while a ``Watcher`` keeps
    them current), and the NodeMetrics list when the last one is ``METRICS_SECONDS`` old (a
    watched cluster's writer runs a moment after every change; metrics-server reports every 15 s).
    The list is kept on the informers, where the pod scheduler reads it too."""
    info = connector.server_info()
    with informers.lock:
        if not (informers.watched and informers.listed()):
            informers.refresh(connector)
        nodes, pods, workloads = informers.items("v1", "Node"), informers.items("v1", "Pod"), informers.workloads()
    if METRICS_RESOURCE not in info.api_resources:
        metrics: list[dict] = []
    elif informers.metrics_due(METRICS_SECONDS):
        metrics = connector.list("metrics.k8s.io/v1beta1", "NodeMetrics").items
        informers.record_metrics(metrics)
    else:
        metrics = list(informers.metrics.values())
    snapshot = build_snapshot(nodes, pods, workloads, metrics, informers.facts, between=checkpoint)
    return snapshot, info.kubernetes_version, list(info.api_resources)


def sync_cluster(cluster: Cluster, connector: Connector, *, now: datetime | None = None,
                 informers: ClusterInformers | None = None) -> SyncReport:
    """Mirror the cluster into the inventory; through ``informers`` when given (watches instead
    of lists). The cyclic collector waits meanwhile: a sync builds and keeps millions of objects."""
    connector.between = checkpoint
    with collector_paused():
        return _sync_cluster(cluster, connector, now or timezone.now(), informers)


def _sync_cluster(cluster: Cluster, connector: Connector, now: datetime, informers: ClusterInformers | None) -> SyncReport:
    report = SyncReport(cluster=cluster.name)
    try:
        snapshot, version, api_resources = read_cluster(connector) if informers is None else read_informed(connector, informers)
    except ConnectorError as exc:
        mark_unreachable(cluster, exc, now)
        report.ok, report.message = False, str(exc)
        return report
    report.errors = snapshot.errors
    checkpoint()  # a canceled sync stops here, or between its writes, which it then rolls back
    with transaction.atomic():
        changed_nodes = _write_nodes(cluster, snapshot, report)
        if changed_nodes:  # listeners enqueue their work in this transaction: it commits with the sync
            nodes_changed.send(sender=Cluster, cluster=cluster, names=changed_nodes)
        checkpoint()
        workload_ids, changed_workloads = _write_workloads(cluster, snapshot, report)
        if changed_workloads:
            workloads_changed.send(sender=Cluster, cluster=cluster, keys=changed_workloads)
        checkpoint()
        _write_pods(cluster, snapshot, workload_ids, report, now)
        checkpoint()
        was_ready = cluster.ready
        _write_status(cluster, version, api_resources, snapshot.errors, now)
        if not was_ready:
            record_change(cluster, "update", verb="became_ready", before={"ready": False}, after={"ready": True})
        events.publish(f"cluster-{cluster.name}", "cluster.synced", water_level(cluster) | {"changes": _change_total(report)})
    changes = _change_total(report)
    logger.log(logging.INFO if changes else logging.DEBUG, "cluster %s synced: %d changes", cluster.name, changes,
               extra={"cluster": cluster.name, "changes": changes, "sync_errors": len(report.errors)})
    return report


def _change_total(report: SyncReport) -> int:
    return sum(report.created.values()) + sum(report.updated.values()) + sum(report.deleted.values())


def mark_unreachable(cluster: Cluster, exc: ConnectorError, now: datetime) -> None:
    with transaction.atomic():
        was_ready = cluster.ready
        Cluster.objects.filter(pk=cluster.pk).update(ready=False, status_reason=exc.reason, status_message=str(exc), last_sync=now)
        cluster.ready, cluster.status_reason, cluster.status_message = False, exc.reason, str(exc)
        if was_ready:
            record_change(cluster, "update", verb="became_unready", before={"ready": True}, after={"ready": False}, reason=str(exc))
        events.publish(f"cluster-{cluster.name}", "cluster.unreachable", {"cluster": cluster.name, "reason": exc.reason, "message": str(exc)})


def _diff(cluster: Cluster, existing: Mapping[Any, tuple], rows: Iterable[tuple[Any, dict]], *,
          unchanged: Callable[[tuple, dict], None] | None = None, skip: Container = ()) -> tuple[list[dict], list[dict]]:
    """A snapshot's rows against what is stored (key -> ``(pk, digest, ...)``): the new ones, with
    their cluster (keys in ``skip`` left out), and the changed ones, with their ``id``; each
    unchanged one goes to ``unchanged(stored, row)``. Rows are ``row()``'s new dicts, filled in
    place."""
    create, update = [], []
    for i, (key, row) in enumerate(rows):
        if i % BATCH == 0:
            checkpoint()
        current = existing.get(key)
        if current is None:
            if key not in skip:
                row["cluster_id"] = cluster.pk
                create.append(row)
        elif current[1] != row["content_hash"]:
            row["id"] = current[0]
            update.append(row)
        elif unchanged is not None:
            unchanged(current, row)
    return create, update


def _insert(model: type, rows: list[dict], now: datetime) -> None:
    """``insert_rows`` a few batches at a time, a cancel looked for between them: a large
    cluster's pods take seconds to write."""
    for start in range(0, len(rows), 5 * BATCH):
        checkpoint()
        insert_rows(model, rows[start : start + 5 * BATCH], now)


def _gone(existing: Mapping[Any, tuple], present: Container) -> list[int]:
    return [stored[0] for key, stored in existing.items() if key not in present]


def _write_nodes(cluster: Cluster, snapshot: Snapshot, report: SyncReport) -> list[str]:
    """Write node rows; returns the names of nodes created or changed (labels among them)."""
    existing = {name: (pk, digest, usage) for pk, name, digest, *usage in Node.objects.filter(cluster=cluster).values_list(
        "pk", "name", "content_hash", *USAGE_FIELDS)}
    usage_only: list[dict] = []

    def usage_changed(stored: tuple, row: dict) -> None:
        if tuple(stored[2]) != tuple(row[f] for f in USAGE_FIELDS):
            usage_only.append({"id": stored[0], **{f: row[f] for f in USAGE_FIELDS}})

    create, update = _diff(cluster, existing, ((name, facts.row()) for name, facts in snapshot.nodes.items()), unchanged=usage_changed)
    _insert(Node, create, timezone.now())
    update_rows(Node, update, [f for f in row_fields(Node) if f != "name"])
    update_rows(Node, usage_only, list(USAGE_FIELDS))
    gone = _gone(existing, snapshot.nodes)
    delete_in_batches(Node, gone)
    report.created["nodes"], report.updated["nodes"], report.deleted["nodes"] = len(create), len(update), len(gone)
    return [row["name"] for row in create] + [row["name"] for row in update]


def _write_workloads(cluster: Cluster, snapshot: Snapshot, report: SyncReport) -> tuple[dict[tuple[str, str, str], int], list]:
    """Write workload rows; returns their ids by key and the keys created, changed or gone."""
    existing = {(ns, kind, name): (pk, digest) for pk, ns, kind, name, digest in Workload.objects.filter(cluster=cluster).values_list(
        "pk", "namespace", "kind", "name", "content_hash")}
    create, update = _diff(cluster, existing, ((key, facts.row()) for key, facts in snapshot.workloads.items()))
    _insert(Workload, create, timezone.now())
    update_rows(Workload, update, [f for f in row_fields(Workload) if f not in {"namespace", "kind", "name"}])
    gone = _gone(existing, snapshot.workloads)
    delete_in_batches(Workload, gone)
    report.created["workloads"], report.updated["workloads"], report.deleted["workloads"] = len(create), len(update), len(gone)
    rows = Workload.objects.filter(cluster=cluster).values_list("pk", "namespace", "kind", "name")
    changed = [(row["namespace"], row["kind"], row["name"]) for row in create]
    changed += [(row["namespace"], row["kind"], row["name"]) for row in update] + [key for key in existing if key not in snapshot.workloads]
    return {(ns, kind, name): pk for pk, ns, kind, name in rows}, changed


def _write_pods(cluster: Cluster, snapshot: Snapshot, workload_ids: dict, report: SyncReport, now: datetime) -> None:
    """Pods that vanish are kept, closed with ``finished_at``: quota accounting needs their history."""
    existing = {uid: (pk, digest) for pk, uid, digest in Pod.objects.filter(cluster=cluster, finished_at__isnull=True).values_list(
        "pk", "uid", "content_hash")}
    known_finished = _finished_uids(cluster, [uid for uid in snapshot.pods if uid not in existing])

    def rows() -> Iterator[tuple[str, dict]]:
        for uid, facts in snapshot.pods.items():
            row = facts.row()
            row["started_at"], row["finished_at"] = parse_time(row["started_at"]), parse_time(row["finished_at"])
            row["workload_id"] = workload_ids.get((facts.namespace, facts.owner_kind, facts.owner_name))
            yield uid, row

    create, update = _diff(cluster, existing, rows(), skip=known_finished)
    _insert(Pod, create, now)
    update_rows(Pod, update, [f for f in row_fields(Pod) if f not in {"uid"}])
    gone = _gone(existing, snapshot.pods)
    for start in range(0, len(gone), BATCH):
        Pod.objects.filter(pk__in=gone[start : start + BATCH]).update(finished_at=now)
    report.created["pods"], report.updated["pods"], report.deleted["pods"] = len(create), len(update), len(gone)


def _finished_uids(cluster: Cluster, uids: list[str]) -> set[str]:
    """Those of ``uids`` the cluster's closed pods hold. Only pods not open here can be, and a
    cluster with no closed pod (its first sync) needs no lookup: an IN over every pod of a
    large cluster costs more than the rest of writing them."""
    if not uids or not Pod.objects.filter(cluster=cluster, finished_at__isnull=False).exists():
        return set()
    found: set[str] = set()
    for start in range(0, len(uids), BATCH):
        found.update(Pod.objects.filter(cluster=cluster, finished_at__isnull=False, uid__in=uids[start : start + BATCH]).values_list("uid", flat=True))
    return found


def _write_status(cluster: Cluster, version: str, api_resources: list[str], errors: list[str], now: datetime) -> None:
    totals = Node.objects.filter(cluster=cluster).aggregate(
        node_count=Count("pk"), ready_node_count=Count("pk", filter=Q(ready=True)),
        **{f: Sum(f) for f in WATER_LEVEL_FIELDS}, cpu_usage_milli=Sum("cpu_usage_milli"), memory_usage_bytes=Sum("memory_usage_bytes"),
    )
    values = {k: (v or 0) if k not in {"cpu_usage_milli", "memory_usage_bytes"} else v for k, v in totals.items()}
    values.update(
        ready=True, status_reason="", status_message="", sync_errors=errors[:MAX_REPORTED_ERRORS], last_sync=now,
        kubernetes_version=version, api_resources=api_resources, workload_count=Workload.objects.filter(cluster=cluster).count(),
    )
    values.update(resource_summary(values))
    Cluster.objects.filter(pk=cluster.pk).update(**values)
    for key, value in values.items():
        setattr(cluster, key, value)


WATER_LEVEL_FIELDS = (
    "cpu_allocatable_milli", "cpu_requested_milli", "memory_allocatable_bytes", "memory_requested_bytes",
    "gpu_allocatable", "gpu_requested", "pods_allocatable", "pod_count",
)


def resource_summary(values: dict) -> dict[str, dict[str, str]]:
    """allocatable / requested / available per resource as canonical quantity strings."""
    resources = {
        "cpu": ("cpu_allocatable_milli", "cpu_requested_milli"),
        "memory": ("memory_allocatable_bytes", "memory_requested_bytes"),
        "nvidia.com/gpu": ("gpu_allocatable", "gpu_requested"),
        "pods": ("pods_allocatable", "pod_count"),
    }
    allocatable = {r: int(values.get(a) or 0) for r, (a, _) in resources.items()}
    requested = {r: int(values.get(q) or 0) for r, (_, q) in resources.items()}
    available = {r: max(allocatable[r] - requested[r], 0) for r in resources}
    return {key: {r: _quantity_text(r, n) for r, n in amounts.items()}
            for key, amounts in (("allocatable", allocatable), ("requested", requested), ("available", available))}


def _quantity_text(resource: str, amount: int) -> str:
    if resource == "cpu":
        return str(Quantity.from_milli(amount))
    return str(Quantity.from_int(amount, BINARY_SI if resource == "memory" else DECIMAL_SI))


def water_level(cluster: Cluster) -> dict:
    return {
        "cluster": cluster.name, "ready": cluster.ready, "nodes": cluster.node_count, "ready_nodes": cluster.ready_node_count,
        "allocatable": cluster.allocatable, "requested": cluster.requested, "available": cluster.available,
    }


def row_fields(model) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if not f.primary_key and f.attname not in {"cluster_id", "created", "updated"}]
