"""Seed the node config demo: the machine-type example target, so the pages start non-empty."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from core.context import acting_as
from nodeconfig.models import ConfigTarget
from nodeconfig.services import import_manifests

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "seed-targets.yaml"


class Command(BaseCommand):
    help = "Import the upstream machine-type example (hybrid-for-disk-hdd) unless targets exist."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="do nothing when any target exists")

    def handle(self, *args, **options) -> None:
        if options["if_empty"] and ConfigTarget.objects.exists():
            self.stdout.write("node config demo: targets already exist; nothing to seed")
            return
        documents = EXAMPLES.read_text().split("\n---\n")
        hdd = next(d for d in documents if "name: hybrid-for-disk-hdd" in d)
        with acting_as("system:seed-demo"):
            results = import_manifests(hdd, reason="demo: upstream machine-type example")
        self.stdout.write(f"node config demo: {', '.join(t.name for t, _ in results)} imported")
