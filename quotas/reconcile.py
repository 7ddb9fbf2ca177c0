"""Repair drift between what admission charged and what the fleet really runs, and burn cash.

``sync_ledger`` brings the charge ledger in line with the inventory: workloads present get
their real charge (admission-time HPA maxima kept), workloads that bypassed the webhook are
added, and a charge whose workload never appeared is dropped once its cluster has synced
since it was admitted. Updates are guarded exactly like deletes: the inventory is as old as
the cluster's last successful sync, so a charge admitted after that (a scale from 2 to 8 the
inventory still shows at 2) is newer than what the inventory says and is kept until a sync
has read the cluster again. Both guards are re-checked in the writing transaction, so an
admission that commits while the inventory is being compared is never overwritten either.
``refresh_groups`` then recomputes each group's ``self_used``/``used`` from the ledger under
the group's row lock, so it can never undo an admission that commits meanwhile.
``accrue_cash`` integrates the resources of the groups' pods over time into ``cash/…``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from core import events
from core.jobs import checkpoint
from core.audit import record_change
from core.sql import insert_rows
from fleet.models import Cluster, Pod, Workload
from kube.quantity import QuantityError, parse_quantity
from kube.resources import quota_usage

from . import accounting as acc
from .models import CashSample, QuotaCharge, QuotaGroup
from .status import charge_sums, lock, parsed, status_of, store_statuses, write_status

CHUNK = 200
SAMPLES_KEPT = 500


def _pod_usage(requests: dict[str, str], limits: dict[str, str]) -> acc.ResourceList:
    """Quota usage of one replica from the inventory's per-pod effective requests and limits.

    A negative total comes from a template the API server refuses pods of (a custom
    resource's schema lets ``cpu: "-100"`` through; its pods never start): it is charged as
    nothing, never as negative usage that would free quota for others.
    """
    resources = {k: _non_negative(v) for k, v in (("requests", requests), ("limits", limits)) if v}
    return quota_usage({"spec": {"containers": [{"name": "pod", "resources": resources}]}})


def _non_negative(values: dict[str, str]) -> dict[str, str]:
    kept = {}
    for name, value in values.items():
        try:
            negative = parse_quantity(str(value)).sign() < 0
        except QuantityError:
            negative = False  # quota_usage reports it as it always did
        if not negative:
            kept[name] = value
    return kept


class ChargeCache:
    """Workloads of one shape share their charge: 100k workloads, a few hundred shapes."""

    def __init__(self) -> None:
        self._seen: dict[tuple, acc.ResourceList] = {}
        self._stored: dict[tuple, tuple[dict[str, str], dict[str, str]]] = {}

    @staticmethod
    def _key(requests: dict[str, str], limits: dict[str, str], labels: dict[str, str]) -> tuple:
        models = tuple(labels.get(label, "") for label in acc.MODEL_LABELS.values())
        return tuple(sorted(requests.items())), tuple(sorted(limits.items())), models

    def per_replica(self, requests: dict[str, str], limits: dict[str, str], labels: dict[str, str]) -> acc.ResourceList:
        key = self._key(requests, limits, labels)
        if key not in self._seen:
            self._seen[key] = acc.workload_charge(_pod_usage(requests, limits), labels)
        return self._seen[key]

    def stored(self, requests: dict[str, str], limits: dict[str, str], labels: dict[str, str],
               replicas: int) -> tuple[dict[str, str], dict[str, str]]:
        """(per-replica, total) charge as stored: canonical strings."""
        key = (self._key(requests, limits, labels), replicas)
        if key not in self._stored:
            per_replica = self.per_replica(requests, limits, labels)
            self._stored[key] = acc.canonical(per_replica), acc.canonical(acc.scaled(per_replica, replicas))
        return self._stored[key]


LEDGER_COLUMNS = ("pk", "namespace", "kind", "name", "group_id", "api_version", "spec_replicas", "replicas",
                  "hpa_max_replicas", "per_replica", "charge", "observed", "admitted_at")
COMPARED = LEDGER_COLUMNS[4:12]


def sync_ledger(cluster: Cluster, keys: Sequence[tuple[str, str, str]] | None = None, *,
                cache: ChargeCache | None = None) -> set[str]:
    """Align the cluster's charges with its inventory (all, or the given workload keys).

    Returns the names of the groups whose charges changed. Rows are compared as tuples, not
    model instances: at 100k workloads the ORM's per-object cost would be most of the work.
    """
    cache = cache or ChargeCache()
    groups = dict(QuotaGroup.objects.values_list("name", "pk"))
    names = {pk: name for name, pk in groups.items()}
    workloads = Workload.objects.filter(cluster=cluster, labels__has_key=acc.GROUP_LABEL)
    charges = QuotaCharge.objects.filter(cluster=cluster)
    wanted = None
    if keys is not None:  # IN lists (a superset, narrowed below): an OR per key would outgrow SQLite's parser
        wanted = {tuple(k) for k in keys}
        key_q = Q(namespace__in={k[0] for k in wanted}, kind__in={k[1] for k in wanted}, name__in={k[2] for k in wanted})
        workloads, charges = Workload.objects.filter(cluster=cluster).filter(key_q), charges.filter(key_q)
    synced = inventory_read_at(cluster)
    existing = {row[1:4]: dict(zip(LEDGER_COLUMNS, row, strict=True))
                for row in charges.values_list(*LEDGER_COLUMNS).iterator(chunk_size=5000)
                if wanted is None or row[1:4] in wanted}
    present: set[tuple[str, str, str]] = set()
    create, update = [], []
    touched: set[str] = set()
    now = timezone.now()
    rows = workloads.values_list("namespace", "kind", "api_version", "name", "labels", "replicas", "pod_requests", "pod_limits")
    for namespace, kind, api_version, name, labels, replicas, requests, limits in rows.iterator(chunk_size=5000):
        if wanted is not None and (namespace, kind, name) not in wanted:
            continue
        group = acc.group_of(labels)
        if group is None or group not in groups:
            continue
        key = (namespace, kind, name)
        present.add(key)
        current = existing.get(key)
        hpa_max = current["hpa_max_replicas"] if current is not None else None
        charged = max(replicas, hpa_max or 0)
        per_replica, charge = cache.stored(requests or {}, limits or {}, labels or {}, charged)
        values = {"group_id": groups[group], "api_version": api_version, "spec_replicas": replicas, "replicas": charged,
                  "hpa_max_replicas": hpa_max, "per_replica": per_replica, "charge": charge, "observed": True}
        if current is None:
            create.append(dict(values, cluster_id=cluster.pk, namespace=namespace, kind=kind, name=name, admitted_at=now,
                               source=QuotaCharge.Source.INVENTORY))
            touched.add(group)
        elif any(current[f] != values[f] for f in COMPARED) and older_than(current["admitted_at"], synced):
            touched.update({group, names[current["group_id"]]})
            update.append((QuotaCharge(pk=current["pk"], updated=now, **values), current["admitted_at"]))
    gone = [row for key, row in existing.items() if key not in present and older_than(row["admitted_at"], synced)]
    touched.update(names[row["group_id"]] for row in gone)
    _write_ledger(create, update, [(row["pk"], row["admitted_at"]) for row in gone], synced, now)
    return touched


def inventory_read_at(cluster: Cluster) -> datetime | None:
    """When the cluster's inventory was read: the start of its last sync, if that sync
    succeeded. A failed sync stamps ``last_sync`` without reading anything, so after one the
    inventory's age is unknown (None) and no admission is overwritten or dropped."""
    return cluster.last_sync if cluster.ready else None


def older_than(admitted_at: datetime, synced: datetime | None) -> bool:
    """May the inventory overrule a charge admitted then? Only if it was read afterwards."""
    return synced is not None and admitted_at < synced


def _write_ledger(create: list[dict], update: list[tuple[QuotaCharge, datetime]], gone: list[tuple[int, datetime]],
                  synced: datetime | None, now: datetime) -> None:
    """Insert, update and delete in one transaction, each update and delete only if the row
    still carries the admission time it was compared with (an admission meanwhile changes it).

    The rows to update are locked and re-read first (``SELECT … FOR UPDATE``: an admission
    committing meanwhile is waited for and then seen; on SQLite the transaction is exclusive
    anyway); the delete re-checks its guard in its own WHERE clause.
    """
    with transaction.atomic():
        _insert_charges(create, now)
        for start in range(0, len(update), 1000):
            chunk = dict((charge.pk, (charge, admitted)) for charge, admitted in update[start : start + 1000])
            current = dict(QuotaCharge.objects.select_for_update(no_key=True).filter(pk__in=list(chunk)).values_list("pk", "admitted_at"))
            still = [charge for pk, (charge, admitted) in chunk.items() if current.get(pk) == admitted]
            QuotaCharge.objects.bulk_update(still, [*COMPARED, "updated"], batch_size=1000)
        if gone and synced is not None:
            for start in range(0, len(gone), 1000):
                ids = [pk for pk, _ in gone[start : start + 1000]]
                QuotaCharge.objects.filter(pk__in=ids, admitted_at__lt=synced).delete()


def _insert_charges(rows: list[dict], now: datetime) -> None:
    """The inventory's plain multi-row insert; should an admission have created one of these
    workloads' rows meanwhile, the slower conflict-ignoring insert takes over."""
    try:
        with transaction.atomic():
            insert_rows(QuotaCharge, rows, now)
    except IntegrityError:
        QuotaCharge.objects.bulk_create([QuotaCharge(updated=now, **row) for row in rows], batch_size=1000, ignore_conflicts=True)


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
    """Recompute a chunk of groups under their locks; returns how many changed."""
    with transaction.atomic():
        groups = lock(ids, by="pk")
        sums = charge_sums(ids)
        children: dict[int, list[acc.ResourceList]] = defaultdict(list)
        for parent_id, hard in QuotaGroup.objects.filter(parent_id__in=ids).values_list("parent_id", "hard"):
            children[parent_id].append(parsed(hard))
        changed = []
        for group in groups.values():
            cash = {k: v for k, v in parsed(group.self_used).items() if acc.cash_base(k)}
            hard = parsed(group.hard)
            used, own = status_of(hard, sums[group.pk] | cash, children[group.pk])
            level = acc.fill_level(hard, parsed(used))
            if (used, own, level) != (group.used, group.self_used, group.level):
                changed.append((group.pk, used, own, level))
        store_statuses(changed)
    return len(changed)


# ---------------------------------------------------------------------------- cash

def _cash_groups() -> list[QuotaGroup]:
    return [g for g in QuotaGroup.objects.order_by("pk") if any(acc.cash_base(k) for k in g.hard)]


def cash_accrued_until() -> datetime | None:
    """The earliest moment a cash budget has not accrued past (None: no cash budgets)."""
    return min((g.last_reconcile_time or g.created for g in _cash_groups()), default=None)


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
        burned = {k: group.self_used.get(k, "0") for k in cash_used}
        CashSample.objects.create(group=group, time=now, used=cash_used, burned=burned)
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
        checkpoint()  # a canceled job stops between clusters
        touched |= sync_ledger(cluster, cache=cache)
    checkpoint()
    changed = refresh_groups()
    accrued = accrue_cash(now)
    return {"groups_touched": len(touched), "groups_changed": changed, "cash_groups": accrued}
