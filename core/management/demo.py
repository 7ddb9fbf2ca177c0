"""The base of every ``seed_*demo`` command (``make run`` runs them all, with ``--if-empty``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from core.context import acting_as


class DemoSeedCommand(BaseCommand):
    """Seed one area's demo. ``--if-empty`` makes a restart of ``make run`` seed nothing twice,
    and every change the seed makes is audited as ``system:seed-demo``."""

    #: The demo, as what the command prints names it ("node config demo").
    demo = ""
    #: What ``--if-empty`` looks for, plural ("targets").
    seeded = ""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--if-empty", action="store_true", help=f"do nothing when {self.seeded} already exist")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["if_empty"] and self.already_seeded():
            self.stdout.write(f"{self.demo}: {self.seeded} already exist; nothing to seed")
            return
        with acting_as("system:seed-demo"):
            self.seed(**options)

    def already_seeded(self) -> bool:
        """Whether the area has any of what the demo seeds."""
        raise NotImplementedError

    def seed(self, **options: Any) -> None:
        """Write the demo; runs acting as ``system:seed-demo``."""
        raise NotImplementedError
