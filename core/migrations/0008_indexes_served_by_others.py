"""The indexes another index of the table serves, dropped (tests/test_indexes.py, ``DropIndex``)."""

import django.db.models.deletion
from django.db import migrations, models

from core import migration_ops


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('core', '0007_audit_filter_indexes'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migration_ops.DropIndex("core_objectchange", "core_objectchange_actor_652691ab", '"actor"'),
                migration_ops.DropIndex("core_objectchange", "core_objectchange_actor_652691ab_like", '"actor" varchar_pattern_ops'),
                migration_ops.DropIndex("core_objectchange", "core_objectchange_object_type_id_07ab74ff", '"object_type_id"'),
                migration_ops.DropIndex("core_objectchange", "core_objectchange_request_id_d9d160ac", '"request_id"'),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name='objectchange',
                    name='actor',
                    field=models.CharField(help_text='Kept when the user is deleted.', max_length=150),
                ),
                migrations.AlterField(
                    model_name='objectchange',
                    name='object_type',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='contenttypes.contenttype'),
                ),
                migrations.AlterField(
                    model_name='objectchange',
                    name='request_id',
                    field=models.UUIDField(blank=True, null=True),
                ),
            ],
        ),
    ]
