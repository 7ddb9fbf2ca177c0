"""Finished pods go after their retention, unless a quota cash budget has not charged them yet."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.models import Cluster, Pod
from fleet.services import expire_finished_pods
from fleet.tasks import expire_pods
from quotas import services as quotas
from quotas.models import QuotaGroup

pytestmark = pytest.mark.django_db
DAY = timedelta(hours=24)


@pytest.fixture
def pods():
    now = timezone.now()
    made = {}
    for index, name in enumerate(("retention-a", "retention-b")):
        cluster = Cluster.objects.create(name=name, connector="simulated")
        for label, finished in (("running", None), ("just-gone", now - timedelta(hours=1)),
                                ("gone-2d", now - timedelta(days=2)), ("gone-9d", now - timedelta(days=9))):
            made[(index, label)] = Pod.objects.create(cluster=cluster, namespace="ns", name=label, uid=f"{name}-{label}",
                                                      started_at=now - timedelta(days=10), finished_at=finished).pk
    return made


def left(pods) -> set[str]:
    names = dict(Pod.objects.filter(pk__in=pods.values()).values_list("pk", "name"))
    return {f"{index}:{label}" for (index, label), pk in pods.items() if pk in names}


def test_pods_finished_before_the_retention_go_in_every_cluster(pods):
    assert expire_finished_pods(DAY) == 4
    assert left(pods) == {"0:running", "0:just-gone", "1:running", "1:just-gone"}
    assert expire_finished_pods(DAY) == 0, "a second pass finds nothing"


def test_a_cash_budget_keeps_the_pods_it_has_not_charged_yet(pods):
    group = quotas.create_group(name="retention-cash", parent=None, hard={"cash/limits.cpu": "5"})
    QuotaGroup.objects.filter(pk=group.pk).update(last_reconcile_time=timezone.now() - timedelta(days=3))
    assert expire_finished_pods(DAY) == 2, "only what finished before the budget's last accrual"
    assert left(pods) == {"0:running", "0:just-gone", "0:gone-2d", "1:running", "1:just-gone", "1:gone-2d"}

    QuotaGroup.objects.filter(pk=group.pk).update(last_reconcile_time=timezone.now())  # accrued since
    assert expire_finished_pods(DAY) == 2
    assert left(pods) == {"0:running", "0:just-gone", "1:running", "1:just-gone"}


def test_the_hourly_task_uses_the_retention_setting(pods, settings):
    assert "fleet.expire_pods" in {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    settings.MERIDIAN_FINISHED_POD_RETENTION_HOURS = 24 * 5
    assert expire_pods() == {"deleted": 2}
    assert left(pods) == {"0:running", "0:just-gone", "0:gone-2d", "1:running", "1:just-gone", "1:gone-2d"}
