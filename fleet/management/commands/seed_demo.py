"""Seed the demo fleet: simulated clusters registered and synced once, so pages are never empty."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand
from django.db import transaction

from core.audit import record_change, snapshot
from core.context import acting_as
from fleet.models import Cluster
from fleet.services import connector_for
from fleet.simstore import config_for
from fleet.simulator import demo_fleet
from fleet.sync import sync_cluster


class Command(BaseCommand):
    help = "Seed the demo fleet (simulated clusters with nodes and workloads) and sync it once."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="do nothing when clusters already exist")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--clusters", type=int, default=5)
        parser.add_argument("--nodes", type=int, default=2000, help="nodes in the whole demo fleet")
        parser.add_argument("--tick-seconds", type=float, default=None,
                            help="simulated seconds per tick (rollouts move one step a tick; default the simulator's)")

    def handle(self, *args, **options) -> None:
        if options["if_empty"] and Cluster.objects.exists():
            self.stdout.write(f"demo fleet: {Cluster.objects.count()} clusters already registered; nothing to seed")
            return
        started = time.perf_counter()
        with acting_as("system:seed-demo"):
            for spec in demo_fleet(options["seed"], options["clusters"], options["nodes"]):
                cluster = self._register(spec, options["tick_seconds"])
                with connector_for(cluster) as connector:
                    report = sync_cluster(cluster, connector)
                self.stdout.write(f"  {cluster.name}: {report.created.get('nodes', 0)} nodes, "
                                  f"{report.created.get('workloads', 0)} workloads, {report.created.get('pods', 0)} pods")
        self.stdout.write(f"demo fleet seeded in {time.perf_counter() - started:.1f}s")

    def _register(self, spec, tick_seconds: float | None = None) -> Cluster:
        config = config_for(spec) | ({"tick_seconds": tick_seconds} if tick_seconds else {})
        with transaction.atomic():
            cluster, created = Cluster.objects.get_or_create(
                name=spec.name,
                defaults={"connector": Cluster.ConnectorKind.SIMULATED, "connector_config": config,
                          "labels": {"topology.kubernetes.io/region": spec.region, "env": "demo"},
                          "display_name": f"Demo {spec.name}"},
            )
            if created:
                record_change(cluster, "create", after=snapshot(cluster), reason="demo fleet")
        return cluster
