"""``core.sql.insert_rows`` and ``update_rows``: many new rows of a model as the ORM would write them; many rows' columns by primary key, as ``bulk_update`` would leave
them (JSON, datetimes, NULLs, foreign keys), on SQLite and PostgreSQL alike — in one statement
per batch on PostgreSQL, whose plan probes the primary key instead of evaluating a CASE per row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.sql import BATCH, insert_rows, update_rows
from fleet.models import Cluster, Pod, Workload


@pytest.fixture
def pods(db):
    cluster = Cluster.objects.create(name="sql-1", connector="simulated")
    workload = Workload.objects.create(cluster=cluster, namespace="ns", kind="Deployment", name="web")
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    return workload, [Pod.objects.create(cluster=cluster, namespace="ns", name=f"p{i}", uid=f"u{i}", labels={"i": str(i)},
                                         started_at=started, cpu_request_milli=i) for i in range(5)]


def test_rows_are_updated_as_bulk_update_would_leave_them(pods):
    workload, rows = pods
    later = datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    changes = [{"id": rows[0].pk, "labels": {"app": "web", "nested": {"x": [1, "two", None]}}, "started_at": later,
                "finished_at": None, "workload_id": workload.pk, "cpu_request_milli": 2**40, "phase": "Running"},
               {"id": rows[1].pk, "labels": {}, "started_at": None, "finished_at": later + timedelta(hours=1),
                "workload_id": None, "cpu_request_milli": 0, "phase": ""}]
    update_rows(Pod, changes, ["labels", "started_at", "finished_at", "workload_id", "cpu_request_milli", "phase"])
    first, second = Pod.objects.get(pk=rows[0].pk), Pod.objects.get(pk=rows[1].pk)
    assert first.labels == {"app": "web", "nested": {"x": [1, "two", None]}} and first.started_at == later
    assert first.finished_at is None and first.workload_id == workload.pk and first.cpu_request_milli == 2**40
    assert first.phase == "Running"
    assert second.labels == {} and second.started_at is None and second.finished_at == later + timedelta(hours=1)
    assert second.workload_id is None and second.cpu_request_milli == 0
    untouched = Pod.objects.get(pk=rows[2].pk)
    assert untouched.labels == {"i": "2"} and untouched.cpu_request_milli == 2, "rows not named keep their values"


def test_one_statement_per_batch_on_postgresql(pods):
    _, rows = pods
    with CaptureQueriesContext(connection) as queries:
        update_rows(Pod, [{"id": row.pk, "phase": "Failed"} for row in rows], ["phase"])
    assert set(Pod.objects.values_list("phase", flat=True)) == {"Failed"}
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == 1 and "jsonb_to_recordset" in queries.captured_queries[0]["sql"]
    assert BATCH >= len(rows)


def test_nothing_to_update_sends_nothing(db):
    with CaptureQueriesContext(connection) as queries:
        update_rows(Pod, [], ["phase"])
    assert queries.captured_queries == []


def test_rows_are_inserted_as_the_orm_would_write_them(pods):
    workload, _ = pods
    cluster = workload.cluster
    now = datetime(2026, 7, 8, 9, 10, 11, 654321, tzinfo=UTC)
    started = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    columns = {"node_name": "n", "owner_kind": "ReplicaSet", "owner_name": "web-1", "memory_request_bytes": 1, "gpu_request": 0,
               "content_hash": "h"}  # a sync's rows name every column
    rows = [{**columns, "cluster_id": cluster.pk, "namespace": "ns", "name": "new-0", "uid": "n0", "workload_id": workload.pk,
             "labels": {"app": "web", "nested": {"x": [1, "two", None]}}, "requests": {"cpu": "100m"}, "limits": {},
             "phase": "Running", "cpu_request_milli": 2**40, "started_at": started, "finished_at": None,
             "created": datetime(2000, 1, 1, tzinfo=UTC)},  # the stamp wins, as it always did
            {**columns, "cluster_id": cluster.pk, "namespace": "ns", "name": "new-1", "uid": "n1", "workload_id": None,
             "labels": {}, "requests": {}, "limits": {}, "phase": "", "cpu_request_milli": 0, "started_at": None,
             "finished_at": started + timedelta(hours=1)}]
    insert_rows(Pod, rows, now)
    first, second = Pod.objects.get(uid="n0"), Pod.objects.get(uid="n1")
    assert first.labels == {"app": "web", "nested": {"x": [1, "two", None]}} and first.requests == {"cpu": "100m"}
    assert first.started_at == started and first.finished_at is None and first.workload_id == workload.pk
    assert first.cpu_request_milli == 2**40 and first.phase == "Running" and first.created == first.updated == now
    assert second.labels == {} and second.started_at is None and second.finished_at == started + timedelta(hours=1)
    assert second.workload_id is None and second.created == second.updated == now
    assert Pod.objects.filter(cluster=cluster).count() == 7


def _failing_send(items: list) -> None:
    raise RuntimeError(f"cannot send {items}")


_sent: list[list] = []


def _recording_send(items: list) -> None:
    _sent.append(list(items))


@pytest.mark.django_db(transaction=True)
def test_a_batch_that_fails_to_send_is_logged_as_any_hook_and_the_commit_stands(caplog):
    """Django names a robust hook that raised in its log line: the batch's hook must be a function
    (an object without ``__qualname__`` turned the logged failure into an AttributeError out of
    the commit: live events sent from a thread running an event loop)."""
    from django.db import transaction

    from core.sql import on_commit_together

    _sent.clear()
    with transaction.atomic():
        on_commit_together(_failing_send, "a")
        on_commit_together(_recording_send, "b")
        on_commit_together(_recording_send, "c")
        Cluster.objects.create(name="kept", connector="simulated")
    assert Cluster.objects.filter(name="kept").exists()
    assert _sent == [["b", "c"]], "the other send's batch still ran, once, in order"
    assert any("cannot send ['a']" in str(record.exc_info[1]) for record in caplog.records if record.exc_info)
