"""Write simulated water-level history for every member cluster (the capacity review's four
weeks, at once): hourly and daily averages for the range, raw samples for the last day."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from federation.water import simulate_history


class Command(BaseCommand):
    help = "Replace the clusters' water-level history with DAYS of simulated history ending now."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--days", type=int, default=28)
        parser.add_argument("--raw-minutes", type=int, default=5, help="minutes between raw samples of the last day")

    def handle(self, *args, **options) -> None:
        if not 1 <= options["days"] <= 400:
            raise CommandError("--days must be between 1 and 400")
        if not 1 <= options["raw_minutes"] <= 60:
            raise CommandError("--raw-minutes must be between 1 and 60")
        started = time.perf_counter()
        counts = simulate_history(days=options["days"], raw_minutes=options["raw_minutes"])
        self.stdout.write(f"{options['days']} days of water-level history for {counts['clusters']} clusters: "
                          f"{counts['hourly']} hourly, {counts['daily']} daily, {counts['raw']} raw points "
                          f"in {time.perf_counter() - started:.1f}s")
