"""Seed the node config demo: the machine-type example target, so the pages start non-empty."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from core.context import acting_as
from nodeconfig.models import ConfigTarget
from nodeconfig.services import import_manifests

#: Upstream's ``hybrid-for-disk-hdd`` on the models A1–A3 only: as written (``diskMode=hdd``)
#: it would already give the demo's A4 HDD nodes 20Gi and, at priority 0, refuse the A4 target
#: journey 2 creates (``machineModel`` unconstrained there overlaps ``machineModel=A4``).
DEMO_TARGETS = Path(__file__).resolve().parents[2] / "examples" / "demo-targets.yaml"


class Command(BaseCommand):
    help = "Import the demo's machine-type target (hybrid-for-disk-hdd on models A1-A3) unless targets exist."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="do nothing when any target exists")

    def handle(self, *args, **options) -> None:
        if options["if_empty"] and ConfigTarget.objects.exists():
            self.stdout.write("node config demo: targets already exist; nothing to seed")
            return
        with acting_as("system:seed-demo"):
            results = import_manifests(DEMO_TARGETS.read_text(), reason="demo: upstream machine-type example on models A1-A3")
        self.stdout.write(f"node config demo: {', '.join(t.name for t, _ in results)} imported")
