"""The indexes another index of the table serves, dropped (tests/test_indexes.py, ``DropIndex``)."""

import django.db.models.deletion
from django.db import migrations, models

from core import migration_ops


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0006_indexes_served_by_others'),
        ('nodeconfig', '0004_reconciled_selection'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migration_ops.DropIndex("nodeconfig_nodeconfig", "nodeconfig_nodeconfig_cluster_id_f6828b4d", '"cluster_id"'),
                migration_ops.DropIndex("nodeconfig_nodeconfig", "nodeconfig_nodeconfig_matched_target_id_d932c50d", '"matched_target_id"'),
                migration_ops.DropIndex("nodeconfig_nodeconfig", "nodeconfig_nodeconfig_node_id_dba337f3", '"node_id"'),
                migration_ops.DropIndex("nodeconfig_nodeconfig", "nodeconfig_nodeconfig_target_id_0f9a8c70", '"target_id"'),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='nodeconfig',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='fleet.cluster'),
                ),
                migrations.AlterField(
                    model_name='nodeconfig',
                    name='matched_target',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='nodeconfig.configtarget'),
                ),
                migrations.AlterField(
                    model_name='nodeconfig',
                    name='node',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='node_configs', to='fleet.node'),
                ),
                migrations.AlterField(
                    model_name='nodeconfig',
                    name='target',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='node_configs', to='nodeconfig.configtarget'),
                ),
            ],
        ),
    ]
