"""A group's workloads, most recently admitted first, read from an index (the group page's table)."""

from django.db import migrations, models

from core.migration_ops import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False  # PostgreSQL builds an index concurrently outside a transaction

    dependencies = [
        ("quotas", "0004_quotagroup_level"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="quotacharge",
            index=models.Index(fields=["group", "-admitted_at", "-id"], name="quotas_charge_group_recent"),
        ),
    ]
