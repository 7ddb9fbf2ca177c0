"""The indexes another index of the table serves, dropped (tests/test_indexes.py, ``DropIndex``)."""

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
