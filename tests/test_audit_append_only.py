"""The audit log is append-only: no path changes or deletes an entry except the retention task.

The ORM's paths (an entry's ``save`` and ``delete``, the queryset's ``update``, ``delete`` and
``bulk_update``) are refused on both databases; on PostgreSQL a trigger refuses the same SQL
from any client, while the retention task's transaction (``SET LOCAL
meridian.audit_retention``) deletes what expired, and a deleted user's entries keep their
actor's name. No URL offers a write on the log (the REST resource is read-only, the Django
admin is read-only in the embedded mode and absent in production: ``tests/test_django_admin.py``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from core import audit
from core.models import AuditImmutable, ObjectChange
from core.tasks import expire_audit_log
from tests.conftest import token_client

POSTGRES = connection.vendor == "postgresql"
needs_postgres = pytest.mark.skipif(not POSTGRES, reason="the trigger is PostgreSQL's")

pytestmark = pytest.mark.django_db


def entry(days_old: int = 0, **fields) -> ObjectChange:
    return ObjectChange.objects.create(time=timezone.now() - timedelta(days=days_old), actor="test", action="action",
                                       object_repr="probe", **fields)


def test_an_entry_is_never_changed_through_the_orm():
    change = entry()
    change.reason = "rewritten"
    with pytest.raises(AuditImmutable):
        change.save()
    with pytest.raises(AuditImmutable):
        ObjectChange.objects.filter(pk=change.pk).update(reason="rewritten")
    with pytest.raises(AuditImmutable), transaction.atomic():  # bulk_update's own atomic has no savepoint
        ObjectChange.objects.bulk_update([change], ["reason"])
    assert ObjectChange.objects.get(pk=change.pk).reason == ""


def test_an_entry_is_never_deleted_through_the_orm_outside_retention():
    change = entry(days_old=400)
    with pytest.raises(AuditImmutable):
        change.delete()
    with pytest.raises(AuditImmutable):
        ObjectChange.objects.filter(pk=change.pk).delete()
    with pytest.raises(AuditImmutable):
        ObjectChange.objects.all().delete()
    assert ObjectChange.objects.filter(pk=change.pk).exists()


def test_retention_deletes_only_expired_entries(settings):
    settings.MERIDIAN_AUDIT_RETENTION_DAYS = 180
    old, young = entry(days_old=181), entry(days_old=179)
    assert expire_audit_log() == {"deleted": 1}
    assert list(ObjectChange.objects.values_list("pk", flat=True)) == [young.pk]
    with pytest.raises(AuditImmutable):  # the permission ended with the task
        ObjectChange.objects.filter(pk=young.pk).delete()
    assert not ObjectChange.objects.filter(pk=old.pk).exists()


def test_no_url_writes_the_log(admin_user):
    change = entry()
    api = token_client(admin_user)
    for method in ("put", "patch", "delete"):
        response = getattr(api, method)(f"/api/v1/core/audit-log/{change.pk}/", {"reason": "x"}, format="json")
        assert response.status_code == 405, (method, response.status_code)
    assert api.post("/api/v1/core/audit-log/", {"actor": "forged"}, format="json").status_code == 405
    page = Client()
    page.force_login(admin_user)
    assert page.post(f"/audit/{change.pk}/", {"reason": "x"}).status_code in (403, 405)
    assert ObjectChange.objects.get(pk=change.pk).reason == "" and ObjectChange.objects.count() == 1


def _raw(sql: str, params: tuple = ()) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@needs_postgres
def test_the_database_refuses_sql_that_goes_around_the_orm():
    change = entry(days_old=400)
    for sql in ("UPDATE core_objectchange SET reason = 'rewritten' WHERE id = %s",
                "DELETE FROM core_objectchange WHERE id = %s"):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            _raw(sql, (change.pk,))
    assert ObjectChange.objects.get(pk=change.pk).reason == ""


@needs_postgres
def test_the_retention_path_deletes_only_and_only_while_it_runs():
    """``audit.expire`` switches the setting on for its DELETE and off again, even inside an
    outer transaction (the test's own): nothing after it inherits the right."""
    old, young = entry(days_old=400), entry(days_old=1)
    assert audit.expire(timezone.now() - timedelta(days=180)) == 1
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _raw("DELETE FROM core_objectchange WHERE id = %s", (young.pk,))
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        _raw(f"SET LOCAL {audit.RETENTION_SETTING} = 'on'")
        _raw("UPDATE core_objectchange SET reason = 'x' WHERE id = %s", (young.pk,))  # retention deletes, never updates
    assert list(ObjectChange.objects.values_list("pk", flat=True)) == [young.pk] and old.pk != young.pk


@needs_postgres
def test_a_deleted_users_entries_stay_with_the_actors_name(django_user_model):
    gone = django_user_model.objects.create_user(username="gone", password="x")
    change = entry(user=gone)
    gone.delete()  # ON DELETE SET NULL: the one update the trigger lets through
    kept = ObjectChange.objects.get(pk=change.pk)
    assert kept.user_id is None and kept.actor == "test"


def test_the_rest_resource_is_read_only_for_every_role(viewer, operator):
    change = entry()
    for user in (viewer, operator):
        client: APIClient = token_client(user)
        assert client.delete(f"/api/v1/core/audit-log/{change.pk}/").status_code in (403, 405)
    assert ObjectChange.objects.filter(pk=change.pk).exists()
