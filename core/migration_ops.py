"""Migration operations for rolling upgrades (docs/upgrades.md).

``AddIndexConcurrently`` builds an index without blocking writes to the table: on PostgreSQL
``CREATE INDEX CONCURRENTLY`` (as ``django.contrib.postgres``'s operation of that name), so
the release still serving keeps writing to a fleet-scale table while the index is built.
Django's own operation fails on SQLite; this one builds a plain index there (the embedded
mode migrates before it serves, so nothing is blocked). A migration using it declares
``atomic = False``: PostgreSQL cannot build an index concurrently inside a transaction.

A concurrent build that fails (a duplicate in a unique index, a cancelled statement) leaves
an INVALID index behind: drop it (``DROP INDEX CONCURRENTLY <name>``) before migrating again.

``DropIndex`` drops an index the models' state does not name: the one Django makes for a
foreign key or a ``db_index`` column (and PostgreSQL's ``LIKE`` twin of a text one), when the
field stops asking for it (``db_index=False``, in ``SeparateDatabaseAndState``'s state). Django's
own ``AlterField`` would drop the foreign key's constraint with it and validate it again over
every row; this drops the index alone. Unapplied, it builds the index again.
"""

from __future__ import annotations

from django.contrib.postgres.operations import AddIndexConcurrently as PostgresAddIndexConcurrently
from django.db.migrations import AddIndex
from django.db.migrations.operations.base import Operation


class AddIndexConcurrently(PostgresAddIndexConcurrently):
    """``CREATE INDEX CONCURRENTLY`` on PostgreSQL, a plain ``CREATE INDEX`` elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


class DropIndex(Operation):
    """``DROP INDEX IF EXISTS`` of an index outside the models' state, on ``table`` over
    ``columns`` (SQL, with an operator class where it has one, for unapplying). An index with a
    PostgreSQL operator class (``varchar_pattern_ops``) exists only there."""

    reversible = True
    reduces_to_sql = True

    def __init__(self, table: str, name: str, columns: str) -> None:
        self.table, self.name, self.columns = table, name, columns

    def deconstruct(self) -> tuple[str, list, dict]:
        return type(self).__qualname__, [self.table, self.name, self.columns], {}

    def state_forwards(self, app_label, state) -> None:
        pass  # the state never named it

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{self.name}"')

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if "_ops" not in self.columns or schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{self.name}" ON "{self.table}" ({self.columns})')

    def describe(self) -> str:
        return f"Drop index {self.name} on {self.table}"
