"""Drop the indexes another index or constraint of the table serves (its columns lead it):
Django's own for a foreign key or ``db_index`` column, and PostgreSQL's ``LIKE`` twin of a text
one, which nothing searches by prefix. Each cost every write of a fleet-scale table
(tests/test_indexes.py). The models stop asking for them; only the index goes (``DropIndex``:
Django's ``AlterField`` would also drop each foreign key and validate it again over every row)."""

import django.db.models.deletion
from django.db import migrations, models

from core import migration_ops


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0006_indexes_served_by_others'),
        ('quotas', '0005_charge_group_recent'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migration_ops.DropIndex("quotas_cashsample", "quotas_cashsample_group_id_59ebeddd", '"group_id"'),
                migration_ops.DropIndex("quotas_quotacharge", "quotas_quotacharge_cluster_id_96f93ca3", '"cluster_id"'),
                migration_ops.DropIndex("quotas_quotacharge", "quotas_quotacharge_group_id_2ca73093", '"group_id"'),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='cashsample',
                    name='group',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='cash_samples', to='quotas.quotagroup'),
                ),
                migrations.AlterField(
                    model_name='quotacharge',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='quota_charges', to='fleet.cluster'),
                ),
                migrations.AlterField(
                    model_name='quotacharge',
                    name='group',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='charges', to='quotas.quotagroup'),
                ),
            ],
        ),
    ]
