"""Seed the demo fleet.

The fleet simulator and inventory models arrive with the fleet issue; until then this
command only reports that there is nothing to seed, so ``make run`` stays one command.
"""

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Seed the demo fleet (clusters, nodes, workloads) when the inventory is empty."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="do nothing when a fleet already exists")

    def handle(self, *args, **options) -> None:
        self.stdout.write("demo fleet: no fleet simulator installed yet; nothing to seed")
