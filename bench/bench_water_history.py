"""Four weeks of water-level history at 500 member clusters: the simulator's seed path and the
dashboard's reads at each grain.

Prints figures (not pass/fail):

1. ``water.simulate_history`` writing four weeks for 500 clusters (hourly and daily averages,
   a day of raw samples every 5 minutes), and the rows it holds against what a minute
   sample kept for four weeks would be (20M rows);
2. the dashboard's JSON for the last 4 weeks (daily), 7 days (hourly) and a 6-hour zoom into
   today (raw minutes), each thinned to the page's point budget: server time, points, size;
3. one rollup pass of the minute beat when nothing completed (what every sample costs) and
   when an hour completed (500 clusters' minutes averaged).

    python bench/bench_water_history.py [--clusters 500] [--days 28]

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_federation_console import timed  # noqa: E402  (best and median of warm runs)
from django_setup import setup_django  # noqa: E402


def make_fleet(clusters: int) -> None:
    from fleet.models import Cluster

    Cluster.objects.bulk_create([
        Cluster(name=f"c-{i:03d}", connector="simulated", ready=i % 50 != 0,
                cpu_allocatable_milli=400_000 * (1 + i % 5), cpu_requested_milli=300_000 * (1 + i % 5) * (50 + i % 40) // 100,
                memory_allocatable_bytes=2**40, memory_requested_bytes=2**39, gpu_allocatable=8 * (i % 3),
                gpu_requested=4 * (i % 3))
        for i in range(clusters)], batch_size=500)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--days", type=int, default=28)
    args = parser.parse_args()
    setup_django(os.environ.get("BENCH_DATABASE_URL"), redis_url=None)

    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from federation import water
    from federation.models import WaterLevelRollup, WaterLevelSample

    make_fleet(args.clusters)
    started = time.perf_counter()
    counts = water.simulate_history(days=args.days)
    elapsed = time.perf_counter() - started
    held = WaterLevelRollup.objects.count() + WaterLevelSample.objects.count()
    minutes = args.clusters * args.days * 24 * 60
    print(f"simulate_history: {args.days} days × {args.clusters} clusters in {elapsed:.1f} s "
          f"({counts['hourly']:,} hourly, {counts['daily']:,} daily, {counts['raw']:,} raw rows; "
          f"{held:,} rows against {minutes:,} minute samples, {minutes / held:.0f}× fewer)")

    user = get_user_model().objects.create_superuser("bench-admin", password="x")
    client = Client()
    client.force_login(user)
    now = timezone.now()
    ranges = {
        f"last {args.days} days": {"hours": 672 if args.days >= 28 else 168},
        "last 7 days": {"hours": 168},
        "zoom: 6 hours of today": {"start": int((now - timedelta(hours=6)).timestamp() * 1000), "end": int(now.timestamp() * 1000)},
    }
    for label, query in ranges.items():
        def fetch(query=query):
            with CaptureQueriesContext(connection) as queries:
                response = client.get("/federation/water-levels.json", query, HTTP_HOST="127.0.0.1")
            assert response.status_code == 200, response.content[:200]
            return response, len(queries)

        best, median, (response, queries) = timed(fetch, repeat=3)
        history = response.json()["history"]
        points = sum(len(s["t"]) for s in history["series"].values())
        print(f"JSON {label}: grain {history['grain']}, best {best * 1000:.0f} ms, median {median * 1000:.0f} ms, "
              f"{queries} queries, {points:,} points, {len(response.content) / 1024:.0f} KiB")

    best, _median, _ = timed(lambda: water.roll_up(timezone.now()), repeat=5)
    print(f"rollup pass with nothing completed: {best * 1000:.1f} ms")
    hour_start = water.floor_time(timezone.now(), timedelta(hours=1)) + timedelta(hours=1)
    clusters = list(water.Cluster.objects.values_list("pk", flat=True))
    WaterLevelSample.objects.bulk_create([WaterLevelSample(cluster_id=pk, at=hour_start + timedelta(minutes=m))
                                          for pk in clusters for m in range(60)], batch_size=5000)
    started = time.perf_counter()
    written = water.roll_up(hour_start + timedelta(hours=1, seconds=1))
    print(f"rollup pass with an hour of {len(clusters)} clusters' minutes completed: "
          f"{(time.perf_counter() - started) * 1000:.0f} ms ({written} rows)")


if __name__ == "__main__":
    main()
