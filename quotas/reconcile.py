"""Repair drift between what admission charged and what the fleet really runs, and burn cash.

``sync_ledger`` brings the charge ledger in line with the inventory: workloads present get
their real charge (admission-time HPA maxima kept), workloads that bypassed the webhook are
added, and a charge whose workload never appeared is dropped once its cluster has synced
since it was admitted (a younger one may simply not be in the inventory yet).
``refresh_groups`` then recomputes each group's ``self_used``/``used`` from the ledger under
the group's row lock, so it can never undo an admission that commits meanwhile.
``accrue_cash`` integrates the resources of the groups' pods over time into ``cash/…``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import events
from core.audit import record_change
from fleet.models import Cluster, Pod, Workload
from kube.resources import quota_usage

from . import accounting as acc
from .models import CashSample, QuotaCharge, QuotaGroup
from .services import write_status, lock, parsed

CHUNK = 200
SAMPLES_KEPT = 500


def _pod_usage(requests: dict[str, str], limits: dict[str, str]) -> acc.ResourceList:
    """Quota usage of one replica from the inventory's per-pod effective requests and limits."""
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return quota_usage({"spec": {"containers": [{"name": "pod", "resources": resources}]}})


class ChargeCache:
    """Workloads of one shape share their per-replica charge: 100k workloads, few shapes."""

    def __init__(self) -> None:
        self._seen: dict[tuple, acc.ResourceList] = {}

    def per_replica(self, requests: dict[str, str], limits: dict[str, str], labels: dict[str, str]) -> acc.ResourceList:
        models = tuple(labels.get(label, "") for label in acc.MODEL_LABELS.values())
        key = (tuple(sorted(requests.items())), tuple(sorted(limits.items())), models)
        if key not in self._seen:
            self._seen[key] = acc.workload_charge(_pod_usage(requests, limits), labels)
        return self._seen[key]


def sync_ledger(cluster: Cluster, keys: Sequence[tuple[str, str, str]] | None = None, *,
                cache: ChargeCache | None = None) -> set[str]:
    """Align the cluster's charges with its inventory (all, or the given workload keys).

    Returns the names of the groups whose charges changed.
    """
    cache = cache or ChargeCache()
    groups = dict(QuotaGroup.objects.values_list("name", "pk"))
    workloads = Workload.objects.filter(cluster=cluster, labels__has_key=acc.GROUP_LABEL)
    charges = QuotaCharge.objects.filter(cluster=cluster)
    if keys is not None:
        key_q = Q(pk__in=[])
        for namespace, kind, name in keys:
            key_q |= Q(namespace=namespace, kind=kind, name=name)
        workloads, charges = Workload.objects.filter(cluster=cluster).filter(key_q), charges.filter(key_q)
    existing = {(c.namespace, c.kind, c.name): c for c in charges.select_related("group")}
    present: set[tuple[str, str, str]] = set()
    create, update, delete = [], [], []
    touched: set[str] = set()
    now = timezone.now()
    rows = workloads.values_list("namespace", "kind", "api_version", "name", "labels", "replicas", "pod_requests", "pod_limits")
    for namespace, kind, api_version, name, labels, replicas, requests, limits in rows.iterator(chunk_size=2000):
        group = acc.group_of(labels)
        key = (namespace, kind, name)
        current = existing.get(key)
        if group is None or group not in groups:
            continue
        present.add(key)
        per_replica = cache.per_replica(requests or {}, limits or {}, labels or {})
        hpa_max = current.hpa_max_replicas if current is not None else None
        charged = max(replicas, hpa_max or 0)
        values = {"group_id": groups[group], "api_version": api_version, "spec_replicas": replicas, "replicas": charged,
                  "hpa_max_replicas": hpa_max, "per_replica": acc.canonical(per_replica),
                  "charge": acc.canonical(acc.scaled(per_replica, charged)), "observed": True}
        if current is None:
            create.append(QuotaCharge(cluster=cluster, namespace=namespace, kind=kind, name=name, admitted_at=now,
                                      source=QuotaCharge.Source.INVENTORY, **values))
            touched.add(group)
        elif any(getattr(current, f) != v for f, v in values.items()):
            touched.update({group, current.group.name})
            for f, v in values.items():
                setattr(current, f, v)
            update.append(current)
    synced = cluster.last_sync
    for key, charge in existing.items():
        if key not in present and (synced is None or charge.admitted_at < synced):
            delete.append(charge.pk)
            touched.add(charge.group.name)
    with transaction.atomic():
        QuotaCharge.objects.bulk_create(create, batch_size=1000, ignore_conflicts=True)
        QuotaCharge.objects.bulk_update(update, ["group", "api_version", "spec_replicas", "replicas", "hpa_max_replicas",
                                                 "per_replica", "charge", "observed", "updated"], batch_size=1000)
        QuotaCharge.objects.filter(pk__in=delete).delete()
    return touched


def refresh_groups(names: Iterable[str] | None = None) -> int:
    """Recompute ``self_used``/``used`` from the ledger, a chunk of groups per transaction.

    Returns how many groups changed. With ``names`` None, every group.
    """
    queryset = QuotaGroup.objects.order_by("pk")
    if names is not None:
        queryset = queryset.filter(name__in=list(names))
    ids = list(queryset.values_list("pk", flat=True))
    changed = 0
    for start in range(0, len(ids), CHUNK):
        changed += _refresh_chunk(ids[start : start + CHUNK])
    return changed


def _refresh_chunk(ids: list[int]) -> int:
    changed = 0
    with transaction.atomic():
        groups = lock(ids, by="pk")
        sums: dict[int, acc.ResourceList] = defaultdict(dict)
        for group_id, charge in QuotaCharge.objects.filter(group_id__in=ids).values_list("group_id", "charge").iterator(2000):
            sums[group_id] = acc.add(sums[group_id], parsed(charge))
        children: dict[int, list[acc.ResourceList]] = defaultdict(list)
        for parent_id, hard in QuotaGroup.objects.filter(parent_id__in=ids).values_list("parent_id", "hard"):
            children[parent_id].append(parsed(hard))
        for group in groups.values():
            cash = {k: v for k, v in parsed(group.self_used).items() if acc.cash_base(k)}
            before = (group.used, group.self_used)
            self_used = sums[group.pk] | cash
            used, own = acc.group_status(parsed(group.hard), self_used, children[group.pk])
            if (acc.canonical(used), acc.canonical(own)) != before:
                write_status(group, self_used, children[group.pk])
                changed += 1
    return changed


# ---------------------------------------------------------------------------- cash

def _cash_groups() -> list[QuotaGroup]:
    return [g for g in QuotaGroup.objects.order_by("pk") if any(acc.cash_base(k) for k in g.hard)]


def _pod_spans(group: QuotaGroup, since: datetime, until: datetime, cache: ChargeCache) -> list[acc.PodSpan]:
    """The pods of the group's charged workloads that held resources at some point in [since, until)."""
    keys = set(QuotaCharge.objects.filter(group=group).values_list("cluster_id", "namespace", "kind", "name"))
    if not keys:
        return []
    candidates = Workload.objects.filter(cluster_id__in={k[0] for k in keys}, name__in={k[3] for k in keys})
    labels = {pk: lab for pk, cid, ns, kind, name, lab in candidates.values_list("pk", "cluster_id", "namespace", "kind", "name",
                                                                                  "labels")
              if (cid, ns, kind, name) in keys}
    pods = (Pod.objects.filter(workload_id__in=list(labels), started_at__lt=until)
            .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since))
            .values_list("workload_id", "requests", "limits", "started_at", "finished_at"))
    return [acc.PodSpan(charge=cache.per_replica(requests or {}, limits or {}, labels.get(wid) or {}), started=started,
                        finished=finished) for wid, requests, limits, started, finished in pods.iterator(2000)]


def accrue_cash(now: datetime | None = None) -> int:
    """Add each cash group's resource-hours since its last reconcile; announce exhaustion.

    Exhausting a budget never stops a workload: admission refuses new usage, an event and
    an audit entry say so. Returns how many groups accrued.
    """
    now = now or timezone.now()
    cache = ChargeCache()
    accrued = 0
    for group in _cash_groups():
        since = group.last_reconcile_time or group.created
        if since >= now:
            continue
        cash_keys = [k for k in group.hard if acc.cash_base(k)]
        spent = acc.accrue_cash(_pod_spans(group, since, now, cache), cash_keys, since, now)
        _add_cash(group.pk, spent, now)
        accrued += 1
    return accrued


def _add_cash(group_id: int, spent: acc.ResourceList, now: datetime) -> None:
    with transaction.atomic():
        group = lock([group_id], by="pk")[group_id]
        self_used = acc.add(parsed(group.self_used), spent)
        group.last_reconcile_time = now
        QuotaGroup.objects.filter(pk=group.pk).update(last_reconcile_time=now)
        write_status(group, self_used)
        hard, used = parsed(group.hard), parsed(group.used)
        exhausted = sorted(k for k in hard if acc.cash_base(k) and used.get(k) is not None and used[k] >= hard[k])
        cash_used = {k: group.used[k] for k in hard if acc.cash_base(k)}
        CashSample.objects.create(group=group, time=now, used=cash_used)
        _trim_samples(group)
        if exhausted != list(group.cash_exhausted):
            _announce_exhaustion(group, exhausted)


def _trim_samples(group: QuotaGroup) -> None:
    old = CashSample.objects.filter(group=group).order_by("-time").values_list("pk", flat=True)[SAMPLES_KEPT:SAMPLES_KEPT + 1000]
    ids = list(old)
    if ids:
        CashSample.objects.filter(pk__in=ids).delete()


def _announce_exhaustion(group: QuotaGroup, exhausted: list[str]) -> None:
    newly = sorted(set(exhausted) - set(group.cash_exhausted))
    before = list(group.cash_exhausted)
    QuotaGroup.objects.filter(pk=group.pk).update(cash_exhausted=exhausted)
    group.cash_exhausted = exhausted
    record_change(group, "update", verb="cash_exhausted" if newly else "cash_replenished",
                  before={"cash_exhausted": before}, after={"cash_exhausted": exhausted})
    payload: dict[str, Any] = {"group": group.name, "exhausted": exhausted, "newly": newly,
                               "used": {k: group.used.get(k) for k in exhausted}, "hard": {k: group.hard.get(k) for k in exhausted}}
    events.publish("quotas", "quotas.cash_exhausted" if newly else "quotas.cash_replenished", payload)


def resync_all(now: datetime | None = None) -> dict[str, int]:
    """The periodic full resync: every cluster's ledger, every group's status, then cash."""
    cache = ChargeCache()
    touched: set[str] = set()
    for cluster in Cluster.objects.order_by("pk"):
        touched |= sync_ledger(cluster, cache=cache)
    changed = refresh_groups()
    accrued = accrue_cash(now)
    return {"groups_touched": len(touched), "groups_changed": changed, "cash_groups": accrued}
