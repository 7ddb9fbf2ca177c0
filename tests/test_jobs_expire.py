"""Job retention: the system's own succeeded runs go after an hour, an object's newest stays."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone

from core import jobs
from core.models import Job
from fleet.models import Cluster

pytestmark = pytest.mark.django_db
KEEP_SYSTEM, KEEP = timedelta(hours=1), timedelta(days=180)


def job(kind: str, *, age: timedelta, status: str = Job.Status.SUCCEEDED, triggered_by: str = "system:fleet-sync",
        obj=None, user=None) -> int:
    row = Job.objects.create(kind=kind, task_name=kind, status=status, triggered_by=triggered_by, user=user,
                             object_type=ContentType.objects.get_for_model(obj) if obj is not None else None,
                             object_id=str(obj.pk) if obj is not None else "")
    finished = timezone.now() - age
    Job.objects.filter(pk=row.pk).update(created=finished, started=finished, finished=finished)
    return row.pk


def test_system_runs_about_an_object_go_after_the_system_retention_but_the_newest_stays(admin_user):
    cluster = Cluster.objects.create(name="retention", connector="simulated")
    other = Cluster.objects.create(name="retention-2", connector="simulated")
    # made oldest first, as they would be (a job's primary key says which is newer)
    ancient = job("fleet.sync_cluster", age=timedelta(days=200), status=Job.Status.FAILED, triggered_by="admin",
                  user=admin_user, obj=cluster)
    failed = job("nodeconfig.reconcile_nodes", age=timedelta(hours=6), status=Job.Status.FAILED, obj=cluster)
    oldest = job("nodeconfig.reconcile_nodes", age=timedelta(hours=5), obj=cluster)
    other_object = job("nodeconfig.reconcile_nodes", age=timedelta(hours=4), obj=other)
    older = job("nodeconfig.reconcile_nodes", age=timedelta(hours=3), obj=cluster)
    other_kind = job("quotas.sync_workloads", age=timedelta(hours=3), obj=cluster)  # the newest of its kind there
    asked = job("fleet.sync_cluster", age=timedelta(hours=3), triggered_by="admin", user=admin_user, obj=cluster)
    newest = job("nodeconfig.reconcile_nodes", age=timedelta(hours=2), obj=cluster)  # the object's latest: kept
    periodic = job("core.publish_live", age=timedelta(hours=2), triggered_by="system:beat")
    recent = job("nodeconfig.reconcile_nodes", age=timedelta(minutes=10), obj=other)

    deleted = jobs.expire(keep_system=KEEP_SYSTEM, keep=KEEP)

    left = set(Job.objects.values_list("pk", flat=True))
    assert left == {newest, other_kind, failed, recent, asked}
    assert {oldest, older, other_object, periodic, ancient}.isdisjoint(left)
    assert deleted == 5


def test_the_only_run_about_an_object_is_kept_however_old():
    cluster = Cluster.objects.create(name="retention-lone", connector="simulated")
    lone = job("scheduling.cpu_reconcile_cluster", age=timedelta(days=3), obj=cluster)
    assert jobs.expire(keep_system=KEEP_SYSTEM, keep=KEEP) == 0
    assert Job.objects.filter(pk=lone).exists()
