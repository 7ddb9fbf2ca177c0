"""The annotations a node's rows call for, and their delivery to the cluster.

``deliver`` (the ``scheduling.cpu_deliver`` job) writes them through the cluster's connector,
from the committed rows, until they match the node's latest version: pods ``cpu-isolate-mode``,
``alloc-spec``, ``alloc-status``, ``custom-cgroup-info``, ``exclude-reserve-cpuset``,
``release-isolate-mode``; the node ``cpu-sharepool`` and the settings it was computed with.
A shared pod Meridian manages gets ``cpu-isolate-mode: shared`` and ``custom-cgroup-info:
{"<container>": {"cpuset": <share pool>, "cpuShares": n, "cfsQuotaUs": q}}``; when the share
pool changes, every shared pod on the node is re-annotated. A released instance's annotations
are removed, then its row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.audit import record_change
from core.models import Job

from ..models import NodeCPU
from . import state as cpustate
from .cpuset import format_cpuset
from .state import (
    ALLOC_SPEC,
    ALLOC_STATUS,
    CPU_ISOLATE_MODE,
    CPU_SHAREPOOL,
    CUSTOM_CGROUP_INFO,
    DEFAULT_CONTAINERS,
    EXCLUDE_RESERVE_CPUSET,
    OVERCOMMIT_RATIO_ANNOTATION,
    RELEASE_ISOLATE_MODE,
    RESERVED_CPUS_ANNOTATION,
    NodeCPUState,
    SharedInstance,
)
from .store import Row, canonical_json, content_digest, lock_node, request_delivery, state_of

SHARED = "shared"
#: Every annotation Meridian writes on a pod, removed when the instance is released.
POD_KEYS = (CPU_ISOLATE_MODE, ALLOC_SPEC, ALLOC_STATUS, CUSTOM_CGROUP_INFO, EXCLUDE_RESERVE_CPUSET, RELEASE_ISOLATE_MODE)
MAX_DELIVERY_PASSES = 5
#: ``delivered_share_pool`` of a managed node whose annotations must be written again.
STALE = "stale"


# ------------------------------------------------------------------------------ annotations


def node_annotations(node: NodeCPU, state: NodeCPUState) -> dict[str, str]:
    """The node annotations Meridian keeps: the share pool, and the settings it was computed with."""
    return {CPU_SHAREPOOL: cpustate.share_pool_annotation(state.share_pool), RESERVED_CPUS_ANNOTATION: node.reserved_cpus,
            OVERCOMMIT_RATIO_ANNOTATION: _ratio_text(node.overcommit_ratio)}


def _ratio_text(ratio: Any) -> str:
    text = format(Decimal(ratio or 1).normalize(), "f")
    return text


def shared_annotations(state: NodeCPUState, row: Row) -> dict[str, str]:
    """A shared pod's binding: the share pool, its CPU shares (request) and CFS quota (limit)."""
    instance = SharedInstance(row.instance, row.request_milli, row.limit_milli, row.app)
    pool = format_cpuset(state.share_pool)
    info = {name: {"cpuset": pool, "cpuShares": instance.cpu_shares, "cfsQuotaUs": instance.cfs_quota_us}
            for name in (row.containers or DEFAULT_CONTAINERS)}
    return {CPU_ISOLATE_MODE: SHARED, CUSTOM_CGROUP_INFO: canonical_json(info)}


def desired_pod_annotations(state: NodeCPUState, row: Row) -> dict[str, str | None] | None:
    """The annotation patch that puts the pod in line with its row (None: nothing to write)."""
    if row.delivery == Row.Delivery.RELEASING:
        return {key: None for key in POD_KEYS}
    if row.mode == Row.Mode.SHARED:
        return {**shared_annotations(state, row), ALLOC_STATUS: None, ALLOC_SPEC: None, RELEASE_ISOLATE_MODE: None}
    if row.disputed or row.instance not in state.exclusive:
        return None
    wanted: dict[str, str | None] = dict(cpustate.pod_annotations(state, row.instance))
    wanted.setdefault(RELEASE_ISOLATE_MODE, None)
    return wanted


def writes_shared(state: NodeCPUState, row: Row) -> bool:
    """Meridian binds the shared pods it placed, and every shared pod of a co-located node."""
    return row.source == Row.Source.ALLOCATED or bool(state.exclusive) or bool(row.delivered_digest)


def _colocated(node: NodeCPU, state: NodeCPUState, rows: Sequence[Row]) -> bool:
    """Whether Meridian manages the node's annotations: it holds exclusive instances, shared ones
    Meridian placed, or Meridian wrote them before. A node of plain pods is left alone."""
    return bool(state.exclusive or state.disputed or node.delivered_share_pool) or any(
        r.active and r.source == Row.Source.ALLOCATED for r in rows)


def _node_work(node: NodeCPU, state: NodeCPUState, rows: Sequence[Row]) -> tuple[dict[str, str] | None, str]:
    """The node annotations to write (None: nothing) and their canonical text ("" when unmanaged)."""
    if not _colocated(node, state, rows):
        return None, ""
    wanted = node_annotations(node, state)
    text = canonical_json(wanted)
    return (wanted if node.delivered_share_pool != text else None), text


def _pod_work(state: NodeCPUState, rows: Sequence[Row]) -> list[tuple[Row, dict[str, str | None], str]]:
    """(row, annotation patch, digest) of every pod whose annotations are not what its row says."""
    work = []
    for row in rows:
        patch = desired_pod_annotations(state, row)
        if patch is None or (row.mode == Row.Mode.SHARED and row.active and not writes_shared(state, row)):
            continue
        digest = content_digest(patch)
        if digest == row.delivered_digest and row.delivery == Row.Delivery.DELIVERED:
            continue
        work.append((row, patch, digest))
    return work


def delivery_needed(node: NodeCPU, state: NodeCPUState, rows: Sequence[Row]) -> bool:
    return _node_work(node, state, rows)[0] is not None or bool(_pod_work(state, rows))


# ----------------------------------------------------------------------------- writing them


@dataclass
class DeliveryReport:
    node: str
    version: int = 0
    pods: int = 0
    waiting: list[str] = field(default_factory=list)
    removed: int = 0
    errors: list[str] = field(default_factory=list)
    passes: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "version": self.version, "pods": self.pods, "waiting": self.waiting[:50],
                "removed": self.removed, "errors": self.errors[:50], "passes": self.passes}


def deliver(node_id: int, connector: Any = None) -> DeliveryReport | None:
    """Write the node's annotations from the committed rows until they match its latest version.

    Idempotent and incremental (each row remembers the digest of what was last written). A
    transient connector fault raises (the task retries it); a pod that does not exist yet is
    marked ``waiting`` (the reconciler delivers when it appears); other refusals are noted on
    the row and the node keeps going.
    """
    from fleet.connectors.base import ConnectorError
    from fleet.services import connector_for

    node = NodeCPU.objects.select_related("cluster").filter(pk=node_id).first()
    if node is None:
        return None
    report = DeliveryReport(node.name)
    own = connector is None
    connector = connector or connector_for(node.cluster)
    try:
        for _ in range(MAX_DELIVERY_PASSES):
            report.passes += 1
            version = node.version
            rows = list(node.allocations.all())
            state = state_of(node, rows)
            wanted_node, pool = _node_work(node, state, rows)
            if wanted_node is not None:
                connector.patch("v1", "Node", node.name, {"metadata": {"annotations": wanted_node}})
            outcomes: dict[int, tuple[str, str, str]] = {}  # row id -> (delivery, digest, error)
            for row, patch, digest in _pod_work(state, rows):
                try:
                    connector.patch("v1", "Pod", row.pod_name, {"metadata": {"annotations": patch}}, namespace=row.namespace)
                except ConnectorError as exc:
                    if exc.reason == "not_found":
                        outcomes[row.pk] = (Row.Delivery.RELEASING if not row.active else Row.Delivery.WAITING, "", "")
                        if row.active:
                            report.waiting.append(row.instance)
                        continue
                    if exc.transient:
                        raise
                    outcomes[row.pk] = (row.delivery, row.delivered_digest, str(exc)[:2000])
                    report.errors.append(f"{row.instance}: {exc}")
                    continue
                report.pods += 1
                outcomes[row.pk] = (Row.Delivery.RELEASING if not row.active else Row.Delivery.DELIVERED, digest, "")
            with transaction.atomic():
                locked = lock_node(node)
                now = timezone.now()
                for row in rows:
                    if row.pk not in outcomes:
                        continue
                    delivery, digest, error = outcomes[row.pk]
                    if delivery == Row.Delivery.RELEASING:
                        deleted, _ = Row.objects.filter(pk=row.pk, delivery=Row.Delivery.RELEASING).delete()
                        report.removed += 1 if deleted else 0
                        continue
                    # only the version this pass read: a row changed meanwhile is written again next pass
                    Row.objects.filter(pk=row.pk, updated=row.updated).exclude(delivery=Row.Delivery.RELEASING).update(
                        delivery=delivery, delivered_digest=digest, delivery_error=error,
                        delivered_at=now if delivery == Row.Delivery.DELIVERED else row.delivered_at)
                NodeCPU.objects.filter(pk=locked.pk).update(delivered_version=max(locked.delivered_version, version),
                                                            delivered_share_pool=pool or node.delivered_share_pool,
                                                            touched=F("touched") + 1)
                report.version = version
                if locked.version == version:
                    break
                locked.refresh_from_db(fields=["delivered_share_pool", "delivered_version", "touched"])  # as just written:
                node = locked  # a pass that wrote an older pool after a newer one's writes the newer again
        return report
    finally:
        if own:
            connector.close()


def refresh_share_pool(node: NodeCPU, *, reason: str = "") -> Job | None:
    """Write the node's share pool and every shared pod's cpuset again (after a manual cgroup change)."""
    with transaction.atomic():
        locked = lock_node(node)
        NodeCPU.objects.filter(pk=locked.pk).update(delivered_share_pool=STALE)
        locked.allocations.filter(mode=Row.Mode.SHARED).update(delivered_digest="")
        record_change(locked, "action", verb="refresh_share_pool", reason=reason)
        return request_delivery(locked)
