"""Seed the demo fleet: simulated clusters registered and synced once, so pages are never empty."""

from __future__ import annotations

import time

from django.db import transaction

from core.audit import record_change, snapshot
from core.management.demo import DemoSeedCommand
from fleet.models import Cluster
from fleet.services import connector_for
from fleet.simstore import config_for
from fleet.simulator import demo_fleet
from fleet.sync import sync_cluster


class Command(DemoSeedCommand):
    help = "Seed the demo fleet (simulated clusters with nodes and workloads) and sync it once."

    demo, seeded = "demo fleet", "clusters"

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--clusters", type=int, default=5)
        parser.add_argument("--nodes", type=int, default=2000, help="nodes in the whole demo fleet")
        parser.add_argument("--tick-seconds", type=float, default=None,
                            help="simulated seconds per tick (rollouts move one step a tick; default the simulator's)")

    def already_seeded(self) -> bool:
        return Cluster.objects.exists()

    def seed(self, **options) -> None:
        started = time.perf_counter()
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
