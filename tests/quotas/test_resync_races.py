"""A resync never undoes an admission the inventory has not seen yet.

The inventory is as old as the cluster's last successful sync. A charge admitted after it
(a scale from 2 to 8 that the inventory still shows at 2) must survive a resync until a sync
has read the cluster again; and an admission that commits while the resync is comparing the
ledger with the inventory must not be overwritten by the values it compared.
"""

from __future__ import annotations

import threading

import pytest

from fleet.models import Cluster
from fleet.services import connector_for
from fleet.sync import sync_cluster
from kube.admission import parse_admission_review
from quotas import reconcile, services
from quotas.models import QuotaCharge, QuotaGroup
from quotas.reconcile import refresh_groups, resync_all, sync_ledger

from .conftest import deployment, post_review, review, scale_review


def used_cpu(name: str = "ads") -> str:
    return QuotaGroup.objects.get(name=name).used["limits.cpu"]


def run_on_cluster(cluster: Cluster, *manifests: dict) -> None:
    """What really runs: the workloads as the member cluster has them, then an inventory sync."""
    with connector_for(cluster) as connector:
        for manifest in manifests:
            connector.apply(manifest)
        assert sync_cluster(cluster, connector).ok
    cluster.refresh_from_db()


@pytest.mark.django_db
def test_a_resync_before_the_next_inventory_sync_keeps_a_young_scale(client, cluster, webhook_token, ads):
    """The finding: used dropped from 8 to 2 and 8 more cores were admitted (16 against hard 10)."""
    run_on_cluster(cluster, deployment("web", cpu="1", replicas=2))
    resync_all()
    assert used_cpu() == "2" and QuotaCharge.objects.get(name="web").source == "inventory"

    assert post_review(client, webhook_token, scale_review("web", 8, 2))["allowed"] is True
    assert used_cpu() == "8"
    resync_all()
    assert used_cpu() == "8", "the inventory was read before the scale: it cannot overrule it"
    assert QuotaCharge.objects.get(name="web").spec_replicas == 8

    more = post_review(client, webhook_token, review(deployment("batch", cpu="8")))
    assert more["allowed"] is False and "limits.cpu requested 8, used 8, hard 10" in more["status"]["message"]
    assert post_review(client, webhook_token, review(deployment("small", cpu="2")))["allowed"] is True
    assert used_cpu() == "10"

    run_on_cluster(cluster, deployment("web", cpu="1", replicas=8), deployment("small", cpu="2"))
    resync_all()
    assert used_cpu() == "10", "once the cluster is read again, the inventory confirms both"
    assert set(QuotaCharge.objects.values_list("name", flat=True)) == {"web", "small"}


@pytest.mark.django_db
def test_an_inventory_read_after_the_admission_wins(client, cluster, webhook_token, ads):
    """The guard is about age, not about admissions always winning: a scale that never
    happened (the controller or a user put it back) is repaired by the next sync's read."""
    run_on_cluster(cluster, deployment("web", cpu="1", replicas=2))
    resync_all()
    assert post_review(client, webhook_token, scale_review("web", 8, 2))["allowed"] is True
    run_on_cluster(cluster)  # a sync that reads the cluster again: still 2 replicas
    resync_all()
    assert used_cpu() == "2" and QuotaCharge.objects.get(name="web").spec_replicas == 2


@pytest.mark.django_db
def test_after_a_failed_sync_the_inventory_overrules_nothing(client, cluster, webhook_token, ads):
    """A failed sync stamps last_sync without reading the cluster: the inventory is older than that."""
    run_on_cluster(cluster, deployment("web", cpu="1", replicas=2))
    resync_all()
    assert post_review(client, webhook_token, scale_review("web", 8, 2))["allowed"] is True
    assert post_review(client, webhook_token, review(deployment("fresh", cpu="1")))["allowed"] is True
    from django.utils import timezone

    Cluster.objects.filter(pk=cluster.pk).update(ready=False, status_reason="unreachable", last_sync=timezone.now())
    resync_all()
    assert used_cpu() == "9", "neither the young scale nor the unseen new workload is undone"
    assert set(QuotaCharge.objects.values_list("name", flat=True)) == {"web", "fresh"}


@pytest.mark.django_db(transaction=True)
def test_an_admission_committing_while_the_resync_compares_is_not_overwritten(cluster, ads):
    """Real threads: the resync has read the ledger and the inventory; before it writes, an
    admission on another connection scales the workload. The resync's write must skip it."""
    admit = lambda body: services.admit(cluster, parse_admission_review(body))  # noqa: E731
    assert admit(review(deployment("web", cpu="1", replicas=2))).allowed
    run_on_cluster(cluster, deployment("web", cpu="1", replicas=3))  # scaled to 3 behind the webhook's back
    assert QuotaCharge.objects.get(name="web").spec_replicas == 2

    write, outcome = reconcile._write_ledger, {}

    def admission_meanwhile(*args, **kwargs):
        def scale() -> None:
            try:
                outcome["decision"] = admit(scale_review("web", 8, 3))
            finally:
                from django.db import connection

                connection.close()

        other = threading.Thread(target=scale)
        other.start()
        other.join(timeout=30)
        return write(*args, **kwargs)

    reconcile._write_ledger = admission_meanwhile
    try:
        touched = sync_ledger(Cluster.objects.get(pk=cluster.pk))
    finally:
        reconcile._write_ledger = write
    assert outcome["decision"].allowed
    refresh_groups(touched)
    charge = QuotaCharge.objects.get(name="web")
    assert (charge.spec_replicas, charge.charge["limits.cpu"]) == (8, "8"), "the inventory's 3 replicas lost to the admission"
    assert used_cpu() == "8"
