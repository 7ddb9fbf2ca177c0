"""The indexes another index of the table serves, dropped (tests/test_indexes.py, ``DropIndex``)."""

import django.db.models.deletion
from django.db import migrations, models

from core import migration_ops


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0005_node_usage_time'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migration_ops.DropIndex("fleet_node", "fleet_node_cluster_id_879febd5", '"cluster_id"'),
                migration_ops.DropIndex("fleet_pod", "fleet_pod_cluster_id_b32b8aab", '"cluster_id"'),
                migration_ops.DropIndex("fleet_pod", "fleet_pod_node_name_80f161b9_like", '"node_name" varchar_pattern_ops'),
                migration_ops.DropIndex("fleet_simulatedobject", "fleet_simulatedobject_cluster_id_ac1a2c4e", '"cluster_id"'),
                migration_ops.DropIndex("fleet_workload", "fleet_workload_cluster_id_9dd76b5a", '"cluster_id"'),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='node',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='fleet.cluster'),
                ),
                migrations.AlterField(
                    model_name='pod',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='pods', to='fleet.cluster'),
                ),
                migrations.AlterField(
                    model_name='pod',
                    name='node_name',
                    field=models.CharField(blank=True, max_length=253),
                ),
                migrations.AlterField(
                    model_name='simulatedobject',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='simulated_objects', to='fleet.cluster'),
                ),
                migrations.AlterField(
                    model_name='workload',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='workloads', to='fleet.cluster'),
                ),
                migrations.AddIndex(
                    model_name='pod',
                    index=models.Index(fields=['node_name'], name='fleet_pod_node_name_80f161b9'),
                ),
            ],
        ),
    ]
