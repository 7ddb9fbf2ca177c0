"""GIN index on node labels for PostgreSQL, so selector queries (@>, ?) over 200k nodes use it.

SQLite has no equivalent; there selector queries scan the cluster's or the fleet's nodes.
"""

from django.db import migrations

INDEX = "fleet_node_labels_gin"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON fleet_node USING gin (labels)")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [("fleet", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
