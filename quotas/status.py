"""A group's status, derived and stored: the helpers every writer shares.

``used = self_used + Σ children's hard`` on the keys of ``hard``; writers hold the group's
row lock (``lock``) while they recompute and store it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from django.db import connection
from django.utils import timezone

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
    store_statuses([(group.pk, group.used, group.self_used)])


def lock(names_or_pks: Iterable[Any], *, by: str = "name") -> dict[Any, QuotaGroup]:
    """Lock the groups (ancestors first, then by pk) for the rest of the transaction."""
    wanted = [v for v in names_or_pks if v is not None]
    if not wanted:
        return {}
    rows = QuotaGroup.objects.select_for_update().filter(**{f"{by}__in": wanted}).order_by("depth", "pk")
    return {getattr(g, by): g for g in rows}




def store_statuses(rows: Sequence[tuple[int, dict[str, str], dict[str, str]]]) -> None:
    """Write (pk, used, self_used) for many locked groups with one prepared UPDATE.

    ``bulk_update`` builds a CASE per row and costs more than an admission batch's whole
    decision; per-row ``update()`` costs a compiled query each. Callers hold the locks.
    """
    if not rows:
        return
    used, self_used = (QuotaGroup._meta.get_field(name) for name in ("used", "self_used"))
    quote = connection.ops.quote_name
    sql = (f"UPDATE {quote(QuotaGroup._meta.db_table)} SET {quote('used')} = %s, {quote('self_used')} = %s, "
           f"{quote('version')} = {quote('version')} + 1, {quote('updated')} = %s WHERE {quote('id')} = %s")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [(used.get_db_prep_save(u, connection), self_used.get_db_prep_save(s, connection), now, pk) for pk, u, s in rows]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
