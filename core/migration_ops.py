"""Migration operations for rolling upgrades (docs/upgrades.md).

``AddIndexConcurrently`` builds an index without blocking writes to the table: on PostgreSQL
``CREATE INDEX CONCURRENTLY`` (as ``django.contrib.postgres``'s operation of that name), so
the release still serving keeps writing to a fleet-scale table while the index is built.
Django's own operation fails on SQLite; this one builds a plain index there (the embedded
mode migrates before it serves, so nothing is blocked). A migration using it declares
``atomic = False``: PostgreSQL cannot build an index concurrently inside a transaction.

A concurrent build that fails (a duplicate in a unique index, a cancelled statement) leaves
an INVALID index behind: drop it (``DROP INDEX CONCURRENTLY <name>``) before migrating again.
"""

from __future__ import annotations

from django.contrib.postgres.operations import AddIndexConcurrently as PostgresAddIndexConcurrently
from django.db.migrations import AddIndex


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
