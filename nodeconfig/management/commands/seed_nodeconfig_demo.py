"""Seed the node config demo: the machine-type example target, so the pages start non-empty."""

from __future__ import annotations

from pathlib import Path

from core.management.demo import DemoSeedCommand
from nodeconfig.models import ConfigTarget
from nodeconfig.services import import_manifests

#: Upstream's ``hybrid-for-disk-hdd`` on the models A1–A3 only: as written (``diskMode=hdd``)
#: it would already give the demo's A4 HDD nodes 20Gi and, at priority 0, refuse the A4 target
#: journey 2 creates (``machineModel`` unconstrained there overlaps ``machineModel=A4``).
DEMO_TARGETS = Path(__file__).resolve().parents[2] / "examples" / "demo-targets.yaml"


class Command(DemoSeedCommand):
    help = "Import the demo's machine-type target (hybrid-for-disk-hdd on models A1-A3) unless targets exist."

    demo, seeded = "node config demo", "targets"

    def already_seeded(self) -> bool:
        return ConfigTarget.objects.exists()

    def seed(self, **options) -> None:
        results = import_manifests(DEMO_TARGETS.read_text(), reason="demo: upstream machine-type example on models A1-A3")
        self.stdout.write(f"node config demo: {', '.join(t.name for t, _ in results)} imported")
