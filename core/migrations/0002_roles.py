"""Create the viewer, operator and admin groups.

Their permissions are (re)granted by core.roles after every migrate, so models added by
later migrations are covered too.
"""

from django.db import migrations

ROLES = ("viewer", "operator", "admin")


def create_roles(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for role in ROLES:
        Group.objects.get_or_create(name=role)


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [("core", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_roles, remove_roles)]
