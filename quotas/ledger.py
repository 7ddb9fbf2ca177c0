"""The admission batch's storage: groups locked, ledger rows read and written in plain SQL.

The webhook runs the same handful of statements thousands of times a second, and through
the ORM (query compilation, a model instance per row, ``bulk_update``'s CASE per row, COPY's
extra round trips) they cost more than the decisions themselves. These functions speak SQL
directly on the calling thread's Django connection, in one transaction per batch
(``core.sql.batch_transaction``; ``core.sql`` holds the generic executor), and:

* pass a whole batch as **one JSON parameter** (``jsonb_array_elements`` on PostgreSQL,
  ``json_each`` on SQLite): the statement text never changes, so the driver neither
  re-parses it for placeholders nor quotes hundreds of values one by one, and the server
  sees a short statement whatever the batch size;
* on PostgreSQL, send the statements of one step as one pipeline, i.e. one round trip: the
  batch holds its groups' row locks meanwhile, and every round trip then delays every batch
  queued behind those locks.

Rows end up exactly as the ORM wrote them (same columns and values, canonical quantity
strings); ``quotas.status.status_update`` stays the one definition of a status write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db import connection

from core.sql import BatchTransaction, Statement, dumps, execute, is_postgres

from .models import QuotaCharge, QuotaGroup
from .status import status_update

Key = tuple[int, str, str, str]  # cluster id, namespace, kind, name

_GROUPS = QuotaGroup._meta.db_table
_CHARGES = QuotaCharge._meta.db_table
_ADMISSION = QuotaCharge.Source.ADMISSION.value
_CHARGE_COLUMNS = ("group_id", "cluster_id", "namespace", "kind", "api_version", "name", "replicas", "spec_replicas",
                   "hpa_max_replicas", "per_replica", "charge")  # then source, admitted_at, observed, updated
_CHARGE_UPDATE = ("group_id", "api_version", "replicas", "spec_replicas", "hpa_max_replicas", "per_replica", "charge",
                  "source", "admitted_at", "updated")
_CHARGE_READ = ("c.id, c.cluster_id, c.namespace, c.kind, c.name, g.name, c.api_version, c.spec_replicas, "
                "c.hpa_max_replicas, c.per_replica, c.charge")


@dataclass(frozen=True)
class GroupRow:
    """A locked group as admission needs it: stored JSON already decoded."""

    pk: int
    name: str
    hard: dict[str, str]
    used: dict[str, str]
    self_used: dict[str, str]


@dataclass(frozen=True)
class ChargeRow:
    """A ledger row as admission needs it; quantities still as stored strings."""

    pk: int
    key: Key
    group: str
    api_version: str
    spec_replicas: int
    hpa_max_replicas: int | None
    per_replica: dict[str, str]
    charge: dict[str, str]


@dataclass(frozen=True)
class NewCharge:
    """A ledger row to insert (``pk`` None) or to overwrite (``pk`` set) with what was admitted."""

    pk: int | None
    group_id: int
    key: Key
    api_version: str
    replicas: int
    spec_replicas: int
    hpa_max_replicas: int | None
    per_replica: dict[str, str]
    charge: dict[str, str]


# ---------------------------------------------------------------------------- reading

def read_charges(keys: Iterable[Key]) -> list[ChargeRow]:
    """The ledger rows of these workloads, outside any lock (to learn which groups to lock)."""
    return [_charge(row) for row in execute([_charges_statement(keys)])[0]]


def lock_and_read(tx: BatchTransaction, names: Iterable[str], keys: Iterable[Key]) -> tuple[list[GroupRow], list[ChargeRow]]:
    """Lock the named groups (ancestors first, then by pk) and read the workloads' rows under
    the lock, in one round trip."""
    names = sorted(names)
    begin = tx.begin()
    results = execute(begin + ([_lock_statement(names)] if names else []) + [_charges_statement(keys)])
    charges = results[-1]
    groups = results[len(begin)] if names else []
    return [_group(row) for row in groups], [_charge(row) for row in charges]


def _lock_statement(names: Sequence[str]) -> Statement:
    """The groups by their unique names, locked in a fixed order so batches never deadlock.
    SQLite has no row locks: its IMMEDIATE transaction already excludes every other writer."""
    if is_postgres():
        sql = (f"SELECT id, name, hard, used, self_used FROM {_GROUPS} "
               f"WHERE name = ANY(ARRAY(SELECT jsonb_array_elements_text(%s::jsonb))) ORDER BY depth, id FOR NO KEY UPDATE")
    else:
        sql = (f"SELECT id, name, hard, used, self_used FROM {_GROUPS} "
               f"WHERE name IN (SELECT value FROM json_each(%s)) ORDER BY depth, id")
    return sql, [dumps(names)]


def _charges_statement(keys: Iterable[Key]) -> Statement:
    """One unique-index probe per workload, whatever the planner's statistics say.

    IN lists per column, or row values, let PostgreSQL filter the whole (cluster, namespace,
    kind) range of the index while the ledger has not been analysed (after a bulk load:
    milliseconds per batch, growing with the ledger); a LATERAL join always probes the
    index once per key (its ``LIMIT 1``, harmless on a unique key, keeps the planner from
    flattening it back into a hash join). SQLite has no LATERAL, but its CROSS JOIN keeps
    the listed keys as the outer loop, which gives the same plan.
    """
    param = dumps(sorted(keys))
    if is_postgres():
        sql = (f"SELECT {_CHARGE_READ} FROM jsonb_array_elements(%s::jsonb) AS k CROSS JOIN LATERAL "
               f"(SELECT * FROM {_CHARGES} c WHERE c.cluster_id = (k->>0)::bigint AND c.namespace = k->>1 "
               f"AND c.kind = k->>2 AND c.name = k->>3 LIMIT 1) c INNER JOIN {_GROUPS} g ON g.id = c.group_id")
        return sql, [param]
    match = " AND ".join(f"c.{column} = json_extract(k.value, '$[{i}]')"
                         for i, column in enumerate(("cluster_id", "namespace", "kind", "name")))
    sql = (f"SELECT {_CHARGE_READ} FROM json_each(%s) AS k CROSS JOIN {_CHARGES} c ON {match} "
           f"INNER JOIN {_GROUPS} g ON g.id = c.group_id")
    return sql, [param]


def _group(row: Sequence[Any]) -> GroupRow:
    pk, name, hard, used, self_used = row
    return GroupRow(pk, name, _loads(hard), _loads(used), _loads(self_used))


def _charge(row: Sequence[Any]) -> ChargeRow:
    pk, cluster_id, namespace, kind, name, group, api_version, spec, hpa, per_replica, charge = row
    return ChargeRow(pk, (cluster_id, namespace, kind, name), group, api_version, spec, hpa,
                     _loads(per_replica), _loads(charge))


def _loads(value: Any) -> dict[str, str]:
    """A JSON column's value: text on both backends (Django loads jsonb as text)."""
    if value is None:
        return {}
    return orjson.loads(value) if isinstance(value, (str, bytes)) else value


# ---------------------------------------------------------------------------- writing

def write(tx: BatchTransaction, statuses: Sequence[tuple[int, dict[str, str], dict[str, str], float]],
          charges: Sequence[NewCharge], deleted: Sequence[int], now: datetime) -> None:
    """Store the batch's outcome and commit, in one round trip: the changed groups' statuses
    (version bumped), new and changed ledger rows (source ``admission``, admitted now),
    released rows deleted."""
    stamp = connection.ops.adapt_datetimefield_value(now)
    statements: list[Statement] = []
    if statuses:
        statements += status_update(statuses, now)
    if deleted:
        statements.append((f"DELETE FROM {_CHARGES} WHERE id IN ({', '.join(['%s'] * len(deleted))})", list(deleted)))
    created = [c for c in charges if c.pk is None]
    if created:
        statements.append(_insert(created, stamp))
    statements += [_update(charge, stamp) for charge in charges if charge.pk is not None]
    execute(statements + tx.commit())


def _insert(charges: Sequence[NewCharge], stamp: Any) -> Statement:
    """All new rows in one INSERT … SELECT over the JSON parameter, in batch order.

    PostgreSQL takes the JSON maps as jsonb values; SQLite keeps text, so they travel as
    strings written compact, exactly as ``core.sql.insert_rows`` writes them.
    """
    postgres = is_postgres()
    rows = [[c.group_id, *c.key[:3], c.api_version, c.key[3], c.replicas, c.spec_replicas, c.hpa_max_replicas,
             c.per_replica if postgres else dumps(c.per_replica), c.charge if postgres else dumps(c.charge)]
            for c in charges]
    target = f"INSERT INTO {_CHARGES} ({', '.join(_CHARGE_COLUMNS)}, source, admitted_at, observed, updated)"
    if postgres:
        casts = ("::bigint", "::bigint", "", "", "", "", "::integer", "::integer", "::integer")
        picks = ", ".join([f"(r->>{i}){cast}" for i, cast in enumerate(casts)] + ["r->9", "r->10"])
        sql = (f"{target} SELECT {picks}, %s, %s, false, %s "
               f"FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(r, n) ORDER BY n")
    else:
        picks = ", ".join(f"json_extract(r.value, '$[{i}]')" for i in range(len(_CHARGE_COLUMNS)))
        sql = f"{target} SELECT {picks}, %s, %s, 0, %s FROM json_each(%s) AS r ORDER BY r.key"
    return sql, [_ADMISSION, stamp, stamp, dumps(rows)]


def _update(c: NewCharge, stamp: Any) -> Statement:
    """A changed row (updates, scales, HPAs: rare next to creates); JSON as the ORM writes it."""
    assignments = ", ".join(f"{column} = %s" for column in _CHARGE_UPDATE)
    return (f"UPDATE {_CHARGES} SET {assignments} WHERE id = %s",
            [c.group_id, c.api_version, c.replicas, c.spec_replicas, c.hpa_max_replicas, json.dumps(c.per_replica),
             json.dumps(c.charge), _ADMISSION, stamp, stamp, c.pk])

