"""Consolidation: revisions on the shared base (number, action, reason, rollback_of), verbs
named ``<verb>_<model>``, and a cluster's cordon moved to the fleet (``Cluster.cordoned``)."""

from django.db import migrations, models


def copy_reasons(apps, schema_editor):
    Revision = apps.get_model("federation", "FederatedRevision")
    for revision in Revision.objects.all().only("pk", "number", "change_cause"):
        action = "create" if revision.number == 1 else "update"
        Revision.objects.filter(pk=revision.pk).update(reason=revision.change_cause, action=action)


def move_cordons(apps, schema_editor):
    Cordon = apps.get_model("federation", "ClusterCordon")
    Cluster = apps.get_model("fleet", "Cluster")
    for cordon in Cordon.objects.all():
        Cluster.objects.filter(pk=cordon.cluster_id).update(
            cordoned=True, drain=cordon.drain, cordon_reason=cordon.reason, cordoned_by=cordon.created_by,
            cordoned_at=cordon.created)


class Migration(migrations.Migration):

    dependencies = [
        ("federation", "0002_resync_backoff"),
        ("fleet", "0003_consolidation"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="federatedobject",
            options={"ordering": ["namespace", "kind", "name"], "permissions": [
                ("rollback_federatedobject", "Can roll a federated object back to an earlier template"),
                ("rollout_federatedobject", "Can pause and resume a federated object's rollout"),
                ("reschedule_federatedobject", "Can force a reschedule")]},
        ),
        migrations.AlterModelOptions(name="federatedrevision", options={"ordering": ["object_id", "-number"]}),
        migrations.RemoveConstraint(model_name="federatedrevision", name="federation_revision_identity"),
        migrations.RenameField(model_name="federatedrevision", old_name="revision", new_name="number"),
        migrations.AddField(
            model_name="federatedrevision",
            name="action",
            field=models.CharField(choices=[("create", "Created"), ("update", "Updated"), ("rollback", "Rolled back"),
                                            ("delete", "Deleted"), ("restore", "Restored")], default="update", max_length=16),
        ),
        migrations.AddField(model_name="federatedrevision", name="reason", field=models.TextField(blank=True)),
        migrations.AddField(model_name="federatedrevision", name="rollback_of",
                            field=models.PositiveIntegerField(blank=True, null=True)),
        migrations.RunPython(copy_reasons, migrations.RunPython.noop),
        migrations.RemoveField(model_name="federatedrevision", name="change_cause"),
        migrations.AddConstraint(
            model_name="federatedrevision",
            constraint=models.UniqueConstraint(fields=("object", "number"), name="federation_revision_identity"),
        ),
        migrations.RunPython(move_cordons, migrations.RunPython.noop),
        migrations.DeleteModel(name="ClusterCordon"),
    ]
