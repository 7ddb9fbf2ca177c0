"""Federation through Django at 500 member clusters: the water-level dashboard and its JSON.

Prints figures and ratios (not pass/fail):

1. the water-level page at 500 clusters (goal ≤300 ms server time), with a day of history
   sampled every 5 minutes (144,000 samples) in the database;
2. the page's JSON with the 24-hour history (fetched after load on a big fleet), against
   reading every sample of the window (the baseline the SQL thinning replaced);
3. one fleet snapshot for the scheduler (what every reconcile pass reads first).

    python bench/bench_federation_console.py [--clusters 500] [--hours 24] [--every 5]

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from django_setup import add_sizes, setup_from_command_line  # noqa: E402


def make_fleet(clusters: int, hours: int, every_minutes: int) -> int:
    from django.utils import timezone

    from federation.models import WaterLevelSample
    from fleet.models import Cluster

    Cluster.objects.bulk_create([
        Cluster(name=f"c-{i:03d}", connector="simulated", ready=i % 50 != 0, labels={"region": f"r{i % 8}"},
                cpu_allocatable_milli=400_000 * (1 + i % 5), cpu_requested_milli=300_000 * (1 + i % 5) * (50 + i % 40) // 100,
                memory_allocatable_bytes=2**40, memory_requested_bytes=2**39, gpu_allocatable=8 * (i % 3),
                gpu_requested=4 * (i % 3), pods_allocatable=11_000, pod_count=4_000)
        for i in range(clusters)], batch_size=500)
    now = timezone.now()
    rows = []
    ids = list(Cluster.objects.values_list("pk", "cpu_allocatable_milli"))
    for step in range(hours * 60 // every_minutes):
        at = now - timedelta(minutes=step * every_minutes)
        rows.extend(WaterLevelSample(cluster_id=pk, at=at, cpu_allocatable_milli=alloc,
                                     cpu_requested_milli=alloc * (40 + (step + pk) % 50) // 100, weight=2)
                    for pk, alloc in ids)
    WaterLevelSample.objects.bulk_create(rows, batch_size=5000)
    return len(rows)


def timed(fn, repeat: int = 5) -> tuple[float, float, object]:
    fn()
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times), result


def bench_pages(clusters: int, hours: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    user = get_user_model().objects.create_superuser("bench-admin", password="x")
    client = Client()
    client.force_login(user)

    def page():
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/federation/water-levels/", HTTP_HOST="127.0.0.1")
        assert response.status_code == 200
        return response, len(queries)

    best, median, (response, queries) = timed(page)
    print(f"water-level page, {clusters} clusters: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms server time "
          f"(goal ≤300 ms), {queries} queries, {len(response.content) / 1024:.0f} KiB")

    def data():
        response = client.get("/federation/water-levels.json", {"hours": hours}, HTTP_HOST="127.0.0.1")
        assert response.status_code == 200
        return response

    best_json, median_json, response = timed(data)
    print(f"  its JSON with {hours} h of history: best {best_json * 1000:.0f} ms, median {median_json * 1000:.0f} ms, "
          f"{len(response.content) / 1024:.0f} KiB")


def bench_history(hours: int) -> None:
    from django.utils import timezone

    from federation import water
    from federation.models import WaterLevelSample

    best, median, result = timed(lambda: water.history(hours=hours, max_points=60), repeat=3)
    points = sum(len(s["at"]) for s in result["series"].values())
    since = timezone.now() - timedelta(hours=hours)

    def read_all() -> int:
        return sum(1 for _ in WaterLevelSample.objects.filter(at__gte=since).values_list("cluster_id", "at", "weight",
                                                                                          "cpu_requested_milli"))

    base_best, _, rows = timed(read_all, repeat=3)
    print(f"history, {hours} h thinned to 60 points per cluster: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms "
          f"({points:,} points); reading all {rows:,} samples of the window: {base_best * 1000:.0f} ms "
          f"(ratio {base_best / best:.1f}×)")


def bench_snapshot(clusters: int) -> None:
    from federation.reconcile import fleet_snapshot

    best, median, snapshot = timed(fleet_snapshot)
    print(f"fleet snapshot for the scheduler, {len(snapshot.infos)} clusters: best {best * 1000:.1f} ms, "
          f"median {median * 1000:.1f} ms")


def main() -> None:
    args = setup_from_command_line(add_sizes(argparse.ArgumentParser(), clusters=500, hours=24,
                                             every=(5, "minutes between samples")))
    started = time.perf_counter()
    samples = make_fleet(args.clusters, args.hours, args.every)
    print(f"setup: {args.clusters} clusters, {samples:,} water-level samples in {time.perf_counter() - started:.1f} s")
    bench_pages(args.clusters, args.hours)
    bench_history(args.hours)
    bench_snapshot(args.clusters)


if __name__ == "__main__":
    main()
