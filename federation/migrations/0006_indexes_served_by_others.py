"""The indexes another index of the table serves, dropped (tests/test_indexes.py, ``DropIndex``)."""

import django.db.models.deletion
from django.db import migrations, models

from core import migration_ops


class Migration(migrations.Migration):

    dependencies = [
        ('federation', '0005_policy_names'),
        ('fleet', '0006_indexes_served_by_others'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migration_ops.DropIndex("federation_federatedrevision", "federation_federatedrevision_object_id_17197d18", '"object_id"'),
                migration_ops.DropIndex("federation_memberobject", "federation_memberobject_object_id_3fcd8e73", '"object_id"'),
                migration_ops.DropIndex("federation_waterlevelrollup", "federation_waterlevelrollup_cluster_id_9e710646", '"cluster_id"'),
                migration_ops.DropIndex("federation_waterlevelsample", "federation_waterlevelsample_cluster_id_a86d7e86", '"cluster_id"'),
                migration_ops.DropIndex("federation_federatedobject", "federation_federatedobject_phase_7f416d5f_like", '"phase" varchar_pattern_ops'),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='federatedrevision',
                    name='object',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='revisions', to='federation.federatedobject'),
                ),
                migrations.AlterField(
                    model_name='memberobject',
                    name='object',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='members', to='federation.federatedobject'),
                ),
                migrations.AlterField(
                    model_name='waterlevelrollup',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='water_level_rollups', to='fleet.cluster'),
                ),
                migrations.AlterField(
                    model_name='waterlevelsample',
                    name='cluster',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='water_levels', to='fleet.cluster'),
                ),
            ],
        ),
    ]
