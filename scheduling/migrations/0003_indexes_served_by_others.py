"""The indexes another index of the table serves, dropped (tests/test_indexes.py, ``DropIndex``)."""

import django.db.models.deletion
from django.db import migrations, models

from core import migration_ops


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0006_indexes_served_by_others'),
        ('scheduling', '0002_cpu_colocation'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migration_ops.DropIndex("scheduling_cpuallocation", "scheduling_cpuallocation_node_cpu_id_0084acfd", '"node_cpu_id"'),
                migration_ops.DropIndex("scheduling_cpuclaim", "scheduling_cpuclaim_node_cpu_id_a7cd00ed", '"node_cpu_id"'),
                migration_ops.DropIndex("scheduling_nodecpu", "scheduling_nodecpu_cluster_id_814661df", '"cluster_id"'),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='cpuallocation',
                    name='node_cpu',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='allocations', to='scheduling.nodecpu'),
                ),
                migrations.AlterField(
                    model_name='cpuclaim',
                    name='node_cpu',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='claims', to='scheduling.nodecpu'),
                ),
                migrations.AlterField(
                    model_name='nodecpu',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='node_cpus', to='fleet.cluster'),
                ),
            ],
        ),
    ]
