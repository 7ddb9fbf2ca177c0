"""Jobs can wait (for a lock) and say for what, and count the workers that died running them.

Expand-only for a rolling upgrade: the new column has a database default, so the release
before this one keeps inserting jobs without naming it; the old index goes last."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('core', '0003_consolidation'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='waiting_for',
            field=models.CharField(blank=True, db_default='', default='', max_length=300),
        ),
        migrations.AddField(
            model_name='job',
            name='lost_workers',
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name='job',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('waiting', 'Waiting'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('canceled', 'Canceled')], db_index=True, default='pending', max_length=16),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('status__in', ['pending', 'waiting', 'running'])), fields=['status', 'created'], name='core_job_unfinished_idx'),
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='core_job_open_idx',
        ),
    ]
