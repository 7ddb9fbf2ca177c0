"""The audit log filtered by request or actor, newest first, without walking the time index."""

from django.db import migrations, models

from core.migration_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False  # PostgreSQL builds an index concurrently outside a transaction

    dependencies = [
        ("core", "0006_identities_and_role_bindings"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="objectchange",
            index=models.Index(fields=["request_id", "time"], name="core_change_request_idx"),
        ),
        AddIndexConcurrently(
            model_name="objectchange",
            index=models.Index(fields=["actor", "time"], name="core_change_actor_idx"),
        ),
    ]
