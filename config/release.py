"""The release baseline: the last migration of every app in release 0.1.0.

During a rolling upgrade the next release's migrations run while this release's pods still
serve, so every migration after these must be an expand step (docs/upgrades.md);
tests/test_migrations_compat.py checks them against this release's models. Written by
``python manage.py release_baseline <release>`` when a release is cut (which also empties
REVIEWED, the one part edited by hand).
"""

RELEASE = "0.1.0"

#: app label → name of its last migration in the release.
BASELINE = {
    "admin": "0003_logentry_add_action_flag_choices",
    "auth": "0012_alter_user_first_name_max_length",
    "axes": "0010_accessattemptexpiration",
    "contenttypes": "0002_remove_content_type_name",
    "core": "0003_consolidation",
    "federation": "0004_water_level_rollups",
    "fleet": "0004_encrypted_credentials",
    "nodeconfig": "0003_restore_progress",
    "quotas": "0004_quotagroup_level",
    "scheduling": "0002_cpu_colocation",
    "sessions": "0001_initial",
}

#: Migrations after the baseline that live in a dependency (so cannot carry a marker),
#: reviewed: "app.migration" → {"CONTRACT" | "DATA_STEP" | "LONG_LOCK": "why it is safe"}.
REVIEWED: dict[str, dict[str, str]] = {}
