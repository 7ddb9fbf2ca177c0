"""Every index on a fleet-scale table earns its writes: each costs every sync of 10^6 pods and
200,000 nodes, so none may be one another index serves. Django makes such indexes unasked: its
own for a foreign key whose column leads a composite index or constraint, and PostgreSQL's
``LIKE`` twin of an indexed text column (dropped in the ``*_indexes_served_by_others``
migrations; ``core.migration_ops.DropIndex``)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.migration_compat import LARGE_TABLES

pytestmark = pytest.mark.django_db


def served_by_another(table: str) -> list[str]:
    """The table's plain indexes whose columns lead another index of the same kind (primary
    keys and unique constraints included), which serves their lookups; of two equal plain
    ones, the second by name."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    indexes = {name: (info.get("type") or "idx", tuple(info["columns"]), not (info["unique"] or info["primary_key"]))
               for name, info in found.items() if info["index"] or info["unique"] or info["primary_key"]}
    served = []
    for name, (kind, columns, plain) in indexes.items():
        for other, (other_kind, wider, other_plain) in indexes.items():
            leads = other != name and other_kind == kind and wider[: len(columns)] == columns
            if plain and leads and (len(wider) > len(columns) or not other_plain or other < name):
                served.append(f"{name} {columns} (served by {other} {wider})")
    return sorted(served)


@pytest.mark.parametrize("table", sorted(LARGE_TABLES))
def test_no_index_on_a_fleet_scale_table_is_served_by_another(table):
    assert served_by_another(table) == []
