"""A group's status, derived and stored: the helpers every writer shares.

``used = self_used + Σ children's hard`` on the keys of ``hard``; writers hold the group's
row lock (``lock``) while they recompute and store it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import orjson
from django.db import connection
from django.utils import timezone

from core.sql import execute
from kube.quantity import Quantity

from . import accounting as acc
from .models import QuotaCharge, QuotaGroup


def parsed(resources: Mapping[str, str] | None) -> acc.ResourceList:
    """Stored canonical strings back to Quantities (they were validated on the way in)."""
    return {key: Quantity.parse(str(value)) for key, value in (resources or {}).items()}


def status_of(hard: acc.ResourceList, self_used: acc.ResourceList, children_hard: Iterable[acc.ResourceList]) -> tuple[dict, dict]:
    used, own = acc.group_status(hard, self_used, list(children_hard))
    return acc.canonical(used), acc.canonical(own)


def children_hard_of(group: QuotaGroup) -> list[acc.ResourceList]:
    return [parsed(hard) for hard in QuotaGroup.objects.filter(parent=group).values_list("hard", flat=True)]


def charge_sums(group_ids: Iterable[int]) -> dict[int, acc.ResourceList]:
    """Σ of each group's charges. Identical charges are counted, not added one by one: a
    group's thousands of workloads come in a handful of shapes."""
    ids = list(group_ids)
    shapes: Counter[tuple[int, tuple]] = Counter(
        (group_id, tuple(sorted(charge.items())))
        for group_id, charge in QuotaCharge.objects.filter(group_id__in=ids).values_list("group_id", "charge").iterator(5000))
    sums: dict[int, acc.ResourceList] = {pk: {} for pk in ids}
    for (group_id, shape), count in shapes.items():
        sums[group_id] = acc.add(sums[group_id], acc.scaled(_parsed_shape(shape), count))
    return sums


@lru_cache(maxsize=65536)
def _parsed_shape(shape: tuple[tuple[str, str], ...]) -> acc.ResourceList:
    return parsed(dict(shape))


def ledger_self_used(group: QuotaGroup) -> acc.ResourceList:
    """What the group's charges add up to, plus the cash it has spent (kept in its status)."""
    cash = {k: v for k, v in parsed(group.self_used).items() if acc.cash_base(k)}
    return charge_sums([group.pk])[group.pk] | cash


def write_status(group: QuotaGroup, self_used: acc.ResourceList, children_hard: list[acc.ResourceList] | None = None) -> None:
    """Recompute ``used``/``self_used`` for the keys of ``hard`` and store them with a new version."""
    children = children_hard_of(group) if children_hard is None else children_hard
    group.used, group.self_used = status_of(parsed(group.hard), self_used, children)
    group.version += 1
    group.level = acc.fill_level(parsed(group.hard), parsed(group.used))
    store_statuses([(group.pk, group.used, group.self_used, group.level)])


def lock(names_or_pks: Iterable[Any], *, by: str = "name") -> dict[Any, QuotaGroup]:
    """Lock the groups (ancestors first, then by pk) for the rest of the transaction."""
    wanted = [v for v in names_or_pks if v is not None]
    if not wanted:
        return {}
    rows = QuotaGroup.objects.select_for_update(no_key=True).filter(**{f"{by}__in": wanted}).order_by("depth", "pk")
    return {getattr(g, by): g for g in rows}


def store_statuses(rows: Sequence[tuple[int, dict[str, str], dict[str, str], float]]) -> None:
    """Write (pk, used, self_used, level) for many locked groups; callers hold the locks.

    ``bulk_update`` builds a CASE per row and costs more than an admission batch's whole
    decision; per-row ``update()`` costs a compiled query each.
    """
    if rows:
        execute(status_update(rows, timezone.now()))


def status_update(rows: Sequence[tuple[int, dict[str, str], dict[str, str], float]], now: datetime) -> list[tuple[str, list[Any]]]:
    """The statements that store (pk, used, self_used, level) of many groups and bump their
    ``version``, each map stored as ``JSONField`` stores it (``level``: ``accounting.fill_level``).

    PostgreSQL: one UPDATE joined to the rows passed as one JSON parameter, so the server
    plans one short statement whatever the number of groups; the ``id = ANY(…)`` condition
    makes it probe the primary key (the planner guesses 100 rows for any JSON array and
    would otherwise hash-join a scan of every group: 3 ms a batch at 5,000 groups). SQLite
    (in-process, nothing to save on round trips; ``UPDATE … FROM`` needs a newer SQLite than
    Django does): one single-row UPDATE per group.
    """
    quote = connection.ops.quote_name
    table, version = quote(QuotaGroup._meta.db_table), quote("version")
    stamp = connection.ops.adapt_datetimefield_value(now)
    if connection.vendor == "postgresql":
        id_column = f"{table}.{quote('id')}"
        sql = (f"WITH batch AS (SELECT value AS r FROM jsonb_array_elements(%s::jsonb)) "
               f"UPDATE {table} SET {quote('used')} = r->1, {quote('self_used')} = r->2, {quote('level')} = (r->>3)::double precision, "
               f"{version} = {table}.{version} + 1, "
               f"{quote('updated')} = %s FROM batch "
               f"WHERE {id_column} = ANY(ARRAY(SELECT (r->>0)::bigint FROM batch)) AND {id_column} = (r->>0)::bigint")
        return [(sql, [orjson.dumps([list(row) for row in rows]).decode(), stamp])]
    sql = (f"UPDATE {table} SET {quote('used')} = %s, {quote('self_used')} = %s, {quote('level')} = %s, "
           f"{version} = {version} + 1, {quote('updated')} = %s WHERE {quote('id')} = %s")
    return [(sql, [json.dumps(used), json.dumps(self_used), level, stamp, pk]) for pk, used, self_used, level in rows]
