"""Write the release baseline (config/release.py): the latest migration of every app, as shipped.

Run it when a release is cut, after its last migration is merged:

    python manage.py release_baseline 0.2.0

Every migration after the baseline belongs to the next release and must be an expand step
(docs/upgrades.md); tests/test_migrations_compat.py checks that against the baseline.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.migrations.loader import MigrationLoader

TEMPLATE = '''"""The release baseline: the last migration of every app in release {release}.

During a rolling upgrade the next release's migrations run while this release's pods still
serve, so every migration after these must be an expand step (docs/upgrades.md);
tests/test_migrations_compat.py checks them against this release's models. Written by
``python manage.py release_baseline <release>`` when a release is cut (which also empties
REVIEWED, the one part edited by hand).
"""

RELEASE = {release_literal}

#: app label → name of its last migration in the release.
BASELINE = {baseline}

#: Migrations after the baseline that live in a dependency (so cannot carry a marker),
#: reviewed: "app.migration" → {{"CONTRACT" | "DATA_STEP" | "LONG_LOCK": "why it is safe"}}.
REVIEWED: dict[str, dict[str, str]] = {{}}
'''


def latest_migrations() -> dict[str, str]:
    """Each app's one leaf migration; refused while an app has two (merge them first)."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    leaves: dict[str, list[str]] = {}
    for app_label, name in graph.leaf_nodes():
        leaves.setdefault(app_label, []).append(name)
    split = {app: names for app, names in leaves.items() if len(names) > 1}
    if split:
        raise CommandError(f"apps with more than one latest migration (run makemigrations --merge): {split}")
    return {app: names[0] for app, names in sorted(leaves.items())}


def render(release: str, baseline: dict[str, str]) -> str:
    lines = "".join(f"    {json.dumps(app)}: {json.dumps(name)},\n" for app, name in sorted(baseline.items()))
    return TEMPLATE.format(release=release, release_literal=json.dumps(release), baseline="{\n" + lines + "}")


class Command(BaseCommand):
    help = "Write config/release.py: every app's latest migration is the baseline of the next release."

    def add_arguments(self, parser) -> None:
        parser.add_argument("release", help="the release being cut, e.g. 0.2.0")
        parser.add_argument("--output", default=str(Path(settings.BASE_DIR) / "config" / "release.py"))

    def handle(self, *args, release: str, output: str, **options) -> None:
        baseline = latest_migrations()
        Path(output).write_text(render(release, baseline))
        self.stdout.write(f"{output}: release {release}, " + ", ".join(f"{a}.{n}" for a, n in baseline.items()))
