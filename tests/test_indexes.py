"""Every index on a fleet-scale table earns its writes: each costs every sync of 10^6 pods and
200,000 nodes, so none may be served by another. Django's foreign-key index and its PostgreSQL
``LIKE`` twin of an indexed text column are made unasked: on pods and nodes they were
(``fleet/migrations/0006_unused_indexes.py``)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.migration_compat import LARGE_TABLES

pytestmark = pytest.mark.django_db


def indexes(table: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every index of the table, those behind a primary key or unique constraint too:
    name → (access method, columns)."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return {name: (info.get("type") or "idx", tuple(info["columns"])) for name, info in found.items()
            if info["index"] or info["unique"] or info["primary_key"]}


def served_by_another(table: str) -> list[str]:
    """Plain indexes whose columns lead another index of the same kind: that one serves their lookups."""
    found = indexes(table)
    with connection.cursor() as cursor:
        plain = {name for name, info in connection.introspection.get_constraints(cursor, table).items()
                 if info["index"] and not info["unique"] and not info["primary_key"]}
    return sorted(f"{name} {columns} (served by {other} {wider})" for name, (kind, columns) in found.items() if name in plain
                  for other, (other_kind, wider) in found.items()
                  if other != name and other_kind == kind and wider[: len(columns)] == columns
                  and (len(wider) > len(columns) or other not in plain or other < name))


@pytest.mark.parametrize("table", sorted(LARGE_TABLES))
def test_no_index_on_a_fleet_scale_table_is_served_by_another(table):
    assert served_by_another(table) == []
