"""Bulk SQL and raw transactions: the one place where Meridian steps around the ORM.

Everything else goes through the ORM. These helpers exist for the few paths where the ORM's
per-row cost is the bottleneck at fleet scale — inventory syncs inserting 10^5 rows, the
quota webhook running the same statements thousands of times a second — and they keep
rows exactly as the ORM writes them (same columns, JSON compact), so either path can read
what the other wrote.

* ``insert_rows``: many new rows of a model (PostgreSQL's COPY, else multi-row INSERTs);
* ``update_rows``: many rows' columns by primary key (PostgreSQL: one statement per batch
  joined to the rows passed as one JSON parameter; ``bulk_update``'s CASE per row is
  quadratic: 6,000 changed nodes took a minute);
* ``delete_in_batches``: many rows by primary key, a bounded ``IN`` list at a time;
* ``execute``: statements on the thread's Django connection, on PostgreSQL in one pipeline
  (one round trip, parameters bound on the server);
* ``batch_transaction``: one transaction for such a batch whose ``BEGIN``/``COMMIT`` ride in
  the pipelines (PostgreSQL in autocommit) or Django's ``atomic()`` (anywhere else);
* ``on_commit_together``: ``transaction.on_commit`` for work sent in batches (a commit's live
  events, its jobs' messages).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import orjson
from django.db import DatabaseError, connection, transaction
from django.db.models import DateTimeField, JSONField, Model

#: Rows per statement for batched writes and ``IN`` lists.
BATCH = 2000

Statement = tuple[str, Sequence[Any] | None]


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def dumps(value: Any) -> str:
    """JSON text, compact, as ``json.dumps(value, separators=(",", ":"))`` writes it (faster)."""
    return orjson.dumps(value).decode()


# ---------------------------------------------------------------------------- bulk rows

def insert_rows(model: type[Model], rows: Sequence[dict], now: datetime) -> None:
    """Insert ``rows`` (attname → value; ``created``/``updated`` stamped ``now``).

    The facts are already validated, so the ORM's per-field preparation (most of
    ``bulk_create``'s cost at 10^5 rows) is skipped: COPY on PostgreSQL (several times a
    multi-row INSERT), batched ``executemany`` elsewhere.
    """
    if not rows:
        return
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    if is_postgres():
        values = _row_values(fields, now, copy=True)
        with connection.cursor() as cursor, cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(values(row))
        return
    values = _row_values(fields, now, copy=False)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), BATCH):
            cursor.executemany(sql, [values(row) for row in rows[start : start + BATCH]])


_STAMPED = ("created", "updated")


def _row_values(fields: list, now: datetime, *, copy: bool) -> Any:
    """A row's column values in ``fields`` order, each through its ``_encoder`` where it has
    one, ``created``/``updated`` the stamp ``now`` (encoded once). Built per insert, called per
    row: a row is a dict lookup per column, with no copy of the dict and no call for the
    columns that need no encoding (most of them)."""
    names = [f.attname for f in fields]
    encoders = [_encoder(f, copy=copy) for f in fields]
    stamps = [i for i, name in enumerate(names) if name in _STAMPED]
    encoded = [(i, encode) for i, encode in enumerate(encoders) if encode is not None and i not in stamps]
    stamp = encoders[stamps[0]](now) if stamps and encoders[stamps[0]] is not None else now

    def values(row: dict) -> list:
        found = [row.get(name) for name in names]
        for i, encode in encoded:
            found[i] = encode(found[i])
        for i in stamps:
            found[i] = stamp
        return found

    return values


def _encoder(field, *, copy: bool = False) -> Any:
    """How a column's value is written through the driver (``copy``: PostgreSQL's COPY, which
    adapts datetimes itself); None when it is written as it is."""
    if isinstance(field, JSONField):
        return _json_text
    if isinstance(field, DateTimeField) and not copy:
        return _datetime_encoder()
    return None


def _json_text(value: Any) -> str | None:
    return None if value is None else dumps(value)


def _datetime_encoder() -> Any:
    """The backend's datetime adaptation, once per distinct value: a bulk insert repeats a few
    values (its ``created``/``updated`` stamp, pods started together) across 10^5 rows."""
    adapted: dict[Any, Any] = {}
    adapt = connection.ops.adapt_datetimefield_value

    def encode(value: Any) -> Any:
        if value is None:
            return None
        found = adapted.get(value)
        if found is None:
            found = adapted[value] = adapt(value)
        return found

    return encode


def update_rows(model: type[Model], rows: Sequence[dict], fields: Sequence[str]) -> None:
    """Set ``fields`` (attnames) of many existing rows, each row naming its primary key
    (``id``) and those fields. ``updated`` is not stamped, as ``bulk_update`` does not."""
    if not rows:
        return
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    columns = [by_attname[name] for name in fields]
    pk = model._meta.pk
    for start in range(0, len(rows), BATCH):
        batch = rows[start : start + BATCH]
        if is_postgres():
            _update_from_json(model, pk, columns, batch)
        else:
            _update_each(model, pk, columns, batch)


def _update_from_json(model: type[Model], pk, columns: list, rows: Sequence[dict]) -> None:
    """One UPDATE joined to ``jsonb_to_recordset`` of the rows; ``= ANY(ARRAY(…))`` makes the
    planner probe the primary key (it guesses 100 rows for any JSON document and would
    otherwise hash-join a scan of the whole table)."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    record = ", ".join(f"{quote(f.column)} {f.db_type(connection)}" for f in [pk, *columns])
    assignments = ", ".join(f"{quote(f.column)} = r.{quote(f.column)}" for f in columns)
    key = f"{table}.{quote(pk.column)}"
    sql = (f"WITH r AS (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS x({record})) "
           f"UPDATE {table} SET {assignments} FROM r "
           f"WHERE {key} = ANY(ARRAY(SELECT {quote(pk.column)} FROM r)) AND {key} = r.{quote(pk.column)}")
    document = orjson.dumps([{f.column: row[f.attname] for f in [pk, *columns]} for row in rows],
                            option=orjson.OPT_NAIVE_UTC).decode()
    with connection.cursor() as cursor:
        cursor.execute(sql, [document])


def _update_each(model: type[Model], pk, columns: list, rows: Sequence[dict]) -> None:
    """One prepared UPDATE executed per row (SQLite: in-process, no round trips to save)."""
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in columns)
    sql = f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE {quote(pk.column)} = %s"
    encoders = [_encoder(f) or _as_is for f in columns]
    with connection.cursor() as cursor:
        cursor.executemany(sql, [[encode(row[f.attname]) for f, encode in zip(columns, encoders)] + [row[pk.attname]]
                                 for row in rows])


def _as_is(value: Any) -> Any:
    return value


def delete_in_batches(model: type[Model], pks: Sequence[int]) -> None:
    """Delete rows by primary key through the ORM (cascades, signals), ``BATCH`` at a time."""
    for start in range(0, len(pks), BATCH):
        model.objects.filter(pk__in=pks[start : start + BATCH]).delete()


# ---------------------------------------------------------------------------- statements

def execute(statements: Sequence[Statement]) -> list[list[tuple]]:
    """Run the statements in order and return each one's rows.

    PostgreSQL: all of them in one psycopg pipeline, so the caller waits for the server
    once, with parameters bound on the server (Django's cursors quote every value into the
    statement text, which for a large JSON parameter costs more than the statement). SQLite
    is in-process, so a plain cursor is as good.
    """
    if not statements:
        return []
    if not is_postgres():
        results = []
        with connection.cursor() as cursor:
            for sql, params in statements:
                cursor.execute(sql, params)
                results.append(cursor.fetchall() if cursor.description else [])
        return results
    from psycopg import Cursor  # binds on the server: a JSON parameter is sent, not quoted into the text

    connection.ensure_connection()
    raw = connection.connection
    cursors = [Cursor(raw) for _ in statements]
    try:
        with connection.wrap_database_errors:
            with raw.pipeline():
                for cursor, (sql, params) in zip(cursors, statements, strict=True):
                    cursor.execute(sql, params)
            return [cursor.fetchall() if cursor.description else [] for cursor in cursors]
    finally:
        for cursor in cursors:
            cursor.close()


# ---------------------------------------------------------------------------- transactions

class BatchTransaction:
    """Where a batch's transaction starts and ends.

    On PostgreSQL, outside any ``atomic()`` block (e.g. the webhook's pool threads), ``BEGIN``
    travels in the same pipeline as the batch's first statements and ``COMMIT`` in the same
    one as its last, so row locks taken at the start are held for one round trip, not three.
    Anywhere else (SQLite, or inside a caller's ``atomic()`` as in tests) Django's
    ``atomic()`` runs the transaction, and these statement lists stay empty.
    """

    def __init__(self) -> None:
        self.explicit = is_postgres() and connection.get_autocommit() and not connection.in_atomic_block
        self.open = False

    def begin(self) -> list[Statement]:
        if not self.explicit or self.open:
            return []
        self.open = True
        return [("BEGIN", None)]

    def commit(self) -> list[Statement]:
        if not self.open:
            return []
        self.open = False
        return [("COMMIT", None)]


@contextmanager
def batch_transaction() -> Iterator[BatchTransaction]:
    """One transaction for a batch: put ``tx.begin()`` before the first statements and
    ``tx.commit()`` after the last; an exception rolls everything back."""
    tx = BatchTransaction()
    if not tx.explicit:
        with transaction.atomic():
            yield tx
        return
    try:
        yield tx
        if tx.open:  # nothing was written
            execute(tx.commit())
    except BaseException:
        rollback()
        raise


def on_commit_together(send: Callable[[list[Any]], None], item: Any) -> None:
    """``transaction.on_commit`` for work done in batches: once the transaction commits,
    ``send`` gets the items given with it in one call per run of them (at once outside a
    transaction). ``send`` is a module-level function: batches are kept per function.

    An item joins the last batch of its ``send`` while that batch's hook is still waiting in
    the same savepoint and nothing was rolled back since: a savepoint that rolls back then
    drops exactly its items with its hooks, as Django drops hooks, and each ``send`` gets its
    items in the order given. A sync's commit sent its live events one call each (a thread, an
    event loop and a Redis connection per call) and its jobs one read and one write each."""
    connection = transaction.get_connection()
    latest = _batches.setdefault(connection, {})
    batch = latest.get(send)
    hooks = connection.run_on_commit
    if batch is not None and not batch.done and batch.hooks is hooks and batch.savepoints == connection.savepoint_ids:
        batch.items.append(item)
        return
    batch = latest[send] = _Batch(send, item, hooks, list(connection.savepoint_ids))
    transaction.on_commit(batch.run, robust=True)  # a function: Django names it when it logs what it raised


class _Batch:
    """One ``on_commit_together`` hook: its items, and the hook list and savepoints it was
    registered in (Django puts a new list in place when a savepoint rolls back or the
    transaction ends)."""

    __slots__ = ("done", "hooks", "items", "savepoints", "send")

    def __init__(self, send: Callable[[list[Any]], None], item: Any, hooks: list, savepoints: list[str]) -> None:
        self.send, self.items, self.hooks, self.savepoints, self.done = send, [item], hooks, savepoints, False

    def run(self) -> None:
        self.done = True
        self.send(self.items)


#: Per connection (one per thread): the last batch of each ``send``.
_batches: weakref.WeakKeyDictionary[Any, dict[Any, _Batch]] = weakref.WeakKeyDictionary()


def rollback() -> None:
    """End a failed explicit transaction, wherever it failed (a pipeline skips the COMMIT
    queued after a failed statement); a connection that cannot even roll back is dropped."""
    from psycopg.pq import TransactionStatus

    raw = connection.connection
    if raw is None or raw.closed or raw.info.transaction_status == TransactionStatus.IDLE:
        return
    try:
        with connection.wrap_database_errors:
            raw.execute("ROLLBACK")
    except DatabaseError:
        connection.close()


__all__ = ["BATCH", "BatchTransaction", "Statement", "batch_transaction", "delete_in_batches", "dumps", "execute",
           "insert_rows", "is_postgres", "rollback"]
