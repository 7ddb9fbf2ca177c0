"""The reconciler against a synced simulated cluster: drift repair, bypassed workloads, cash."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import ObjectChange
from fleet.models import Cluster, Pod, Workload
from fleet.services import connector_for
from fleet.simulator import QUOTA_GROUPS
from fleet.sync import sync_cluster
from kube.quantity import parse_quantity
from kube.resources import quota_usage
from quotas import accounting as acc
from quotas import services
from quotas.models import CashSample, QuotaCharge, QuotaGroup
from quotas.reconcile import accrue_cash, refresh_groups, resync_all, sync_ledger

from .conftest import deployment, post_review, review

pytestmark = pytest.mark.django_db
BIG = {"limits.cpu": "100000", "requests.cpu": "100000", "requests.nvidia.com/gpu": "10000", "pods": "100000"}


@pytest.fixture
def synced(db) -> Cluster:
    cluster = Cluster.objects.create(name="sim-1", connector="simulated", connector_config={"node_count": 150, "seed": 11})
    with connector_for(cluster) as connector:
        assert sync_cluster(cluster, connector).ok
    cluster.refresh_from_db()
    return cluster


@pytest.fixture
def groups(db) -> None:
    for name in QUOTA_GROUPS:
        services.create_group(name=name, parent=None, hard=BIG)


def expected_limits_cpu(group: str) -> int:
    """Σ replicas × per-pod limits.cpu of the group's workloads, straight from the inventory rows."""
    total = 0
    for workload in Workload.objects.filter(labels__has_key=acc.GROUP_LABEL):
        if workload.labels[acc.GROUP_LABEL] != group:
            continue
        pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": workload.pod_limits,
                                                                  "requests": workload.pod_requests}}]}}
        total += quota_usage(pod)["limits.cpu"].milli_value() * workload.replicas
    return total


def test_resync_recomputes_usage_from_the_inventory(synced, groups):
    labelled = Workload.objects.filter(labels__has_key=acc.GROUP_LABEL).count()
    assert labelled > 5, "the simulator labels some workloads with quota groups"
    report = resync_all()
    assert report["groups_touched"] >= 1
    assert QuotaCharge.objects.count() == labelled
    assert set(QuotaCharge.objects.values_list("source", flat=True)) == {"inventory"}
    for name in QUOTA_GROUPS:
        used = parse_quantity(QuotaGroup.objects.get(name=name).used["limits.cpu"])
        assert used.milli_value() == expected_limits_cpu(name), name
    again = resync_all()
    assert again["groups_touched"] == 0 and again["groups_changed"] == 0, "a second pass changes nothing"


def test_a_charge_whose_workload_never_appeared_is_dropped_after_the_next_sync(client, synced, groups):
    resync_all()
    before = QuotaGroup.objects.get(name="search-core").used["limits.cpu"]
    ghost = deployment("ghost", group="search-core", cpu="8")
    token = webhook_token_for(synced)
    assert post_review(client, token, review(ghost))["allowed"] is True
    after_admit = parse_quantity(QuotaGroup.objects.get(name="search-core").used["limits.cpu"])
    assert after_admit == parse_quantity(before) + parse_quantity("8")
    resync_all()
    assert QuotaCharge.objects.filter(name="ghost").exists(), "the cluster has not synced since: keep it"
    Cluster.objects.filter(pk=synced.pk).update(last_sync=timezone.now() + timedelta(seconds=1))
    resync_all()
    assert not QuotaCharge.objects.filter(name="ghost").exists()
    assert QuotaGroup.objects.get(name="search-core").used["limits.cpu"] == before


def webhook_token_for(cluster: Cluster) -> str:
    from fleet.tokens import issue_token

    return issue_token(cluster, "webhook")[1]


def test_workloads_that_bypassed_the_webhook_are_charged(synced, groups):
    one = Workload.objects.filter(labels__has_key=acc.GROUP_LABEL).first()
    touched = sync_ledger(synced, [(one.namespace, one.kind, one.name)])
    assert touched == {one.labels[acc.GROUP_LABEL]}
    assert QuotaCharge.objects.get().observed is True
    assert refresh_groups(touched) == 1


def test_refresh_never_undoes_an_admission(client, synced, groups):
    token = webhook_token_for(synced)
    resync_all()
    post_review(client, token, review(deployment("fresh", group="ads-serving", cpu="3")))
    refreshed = QuotaGroup.objects.get(name="ads-serving").used["limits.cpu"]
    refresh_groups()
    assert QuotaGroup.objects.get(name="ads-serving").used["limits.cpu"] == refreshed, "the ledger has the admission"


def test_cash_accrues_from_pod_time_and_exhaustion_blocks_admission(client, synced):
    group = services.create_group(name="vision", parent=None,
                                  hard={**BIG, "cash/limits.cpu": "5"})
    resync_all()
    start = timezone.now() - timedelta(hours=2)
    QuotaGroup.objects.filter(pk=group.pk).update(last_reconcile_time=start)
    workload_ids = [w.pk for w in Workload.objects.filter(labels__has_key=acc.GROUP_LABEL) if w.labels[acc.GROUP_LABEL] == "vision"]
    pods = Pod.objects.filter(workload_id__in=workload_ids)
    assert pods.exists()
    pods.update(started_at=start - timedelta(hours=1), finished_at=None)
    expected = sum(quota_usage({"spec": {"containers": [{"name": "c", "resources": {"limits": p.limits, "requests": p.requests}}]}})
                   ["limits.cpu"].as_decimal() for p in pods) * 2
    now = start + timedelta(hours=2)
    assert accrue_cash(now) == 1
    group.refresh_from_db()
    spent = parse_quantity(group.used["cash/limits.cpu"]).as_decimal()
    assert abs(spent - expected) < 0.01, (spent, expected)
    assert CashSample.objects.filter(group=group).latest("time").used == {"cash/limits.cpu": group.used["cash/limits.cpu"]}
    assert expected > 5 and group.cash_exhausted == ["cash/limits.cpu"]
    assert ObjectChange.objects.filter(object_repr="vision", verb="cash_exhausted").exists()
    denied = post_review(client, webhook_token_for(synced), review(deployment("more", group="vision", cpu="1")))
    assert denied["allowed"] is False and "cash/limits.cpu" in denied["status"]["message"]
    assert Pod.objects.filter(workload_id__in=workload_ids, finished_at__isnull=True).count() == pods.count(), \
        "exhausted cash never stops running workloads"


def test_an_event_driven_sync_of_thousands_of_keys(synced, groups):
    """After a first sync every workload is new: thousands of keys in one task."""
    labelled = list(Workload.objects.filter(labels__has_key=acc.GROUP_LABEL).values_list("namespace", "kind", "name"))
    noise = [("ns", "Deployment", f"missing-{i}") for i in range(3000)]
    touched = sync_ledger(synced, labelled + noise)
    assert QuotaCharge.objects.count() == len(labelled) and touched
    assert sync_ledger(synced, labelled[:1]) == set(), "a second pass over the same key changes nothing"
