from django.db import migrations


def seed(apps, schema_editor):
    from nodeconfig.hashing import config_hash
    from nodeconfig.seed_types import SEED_TYPES

    ConfigType = apps.get_model("nodeconfig", "ConfigType")
    for values in SEED_TYPES:
        values = dict(values, default_hash=config_hash(values["default_config"]))
        ConfigType.objects.get_or_create(name=values["name"], defaults=values)


class Migration(migrations.Migration):
    dependencies = [("nodeconfig", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
