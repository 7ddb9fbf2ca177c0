"""Federation's pure algorithms at fleet scale (the database-backed parts come with issue #7).

Prints figures and ratios (not pass/fail):

1. one placement over 500 clusters (goal ≤2 ms): the KubeAdmiral planner alone (static and
   water-level weights), against a naive proportional split measured in the same run;
2. one full scheduling decision (filter, score, select, replicas, explanation) over 500
   clusters;
3. rescheduling a sample of workloads over 500 clusters, extrapolated to 100,000 (goal ≤60 s
   on this 2-core machine) for one process, and the speed-up of a second worker process.

    python bench/bench_federation.py [--clusters 500] [--sample 2000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from federation.planner import ClusterPreference, plan  # noqa: E402
from federation.scheduler import ClusterInfo, SchedulingUnit, schedule  # noqa: E402
from federation.weights import dynamic_weights  # noqa: E402

CORE = 1000
GIB = 2**30


def fleet(count: int, seed: int = 1) -> list[ClusterInfo]:
    rng = random.Random(seed)
    clusters = []
    for i in range(count):
        cores = rng.choice((2_000, 5_000, 10_000, 20_000))
        used = rng.uniform(0.2, 0.9)
        clusters.append(ClusterInfo(
            name=f"cluster-{i:03d}", labels={"region": f"r{i % 7}", "zone": f"z{i % 21}"},
            taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}] if i % 50 == 0 else [],
            ready=i % 97 != 0, api_resources=frozenset({"apps/v1/Deployment", "v1/ConfigMap"}),
            allocatable={"cpu": cores * CORE, "memory": cores * 4 * GIB},
            requested={"cpu": int(cores * CORE * used), "memory": int(cores * 4 * GIB * used)}))
    return clusters


def timed(fn, repeat: int) -> float:
    """Median seconds per call."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def naive_split(weights: dict[str, int], total: int) -> dict[str, int]:
    whole = sum(weights.values()) or 1
    return {name: total * weight // whole for name, weight in weights.items()}


def bench_placement(clusters: list[ClusterInfo]) -> None:
    names = [c.name for c in clusters]
    static = {name: ClusterPreference(weight=1 + i % 5) for i, name in enumerate(names)}
    weights = dynamic_weights([(c.name, c.allocatable, c.available) for c in clusters])
    dynamic = {name: ClusterPreference(weight=w) for name, w in weights.items()}
    capacity = {c.name: c.available["cpu"] // (2 * CORE) for c in clusters}
    current = {name: 3 for name in names[:200]}
    static_s = timed(lambda: plan(static, 3000, names, {}, {}, {}, key="shop/web"), 50)
    dynamic_s = timed(lambda: plan(dynamic, 3000, names, current, capacity, {}, key="shop/web", avoid_migration=True), 50)
    weights_s = timed(lambda: dynamic_weights([(c.name, c.allocatable, c.available) for c in clusters]), 50)
    naive_s = timed(lambda: naive_split(weights, 3000), 50)
    print(f"one placement over {len(clusters)} clusters (goal ≤2 ms): planner, static weights {static_s * 1000:.2f} ms; "
          f"water-level weights {weights_s * 1000:.2f} ms + planner with current replicas, capacity and avoid_migration "
          f"{dynamic_s * 1000:.2f} ms; naive proportional split {naive_s * 1000:.3f} ms "
          f"(ratio {dynamic_s / naive_s:.0f}×, the price of min/max, capacity and migration avoidance)")


def unit(i: int, names: list[str]) -> SchedulingUnit:
    rng = random.Random(i)
    current = {name: rng.randint(1, 5) for name in rng.sample(names, 3)} if i % 3 else {}
    return SchedulingUnit(name=f"w{i}", namespace=f"ns{i % 40}", desired_replicas=rng.choice((3, 10, 30, 300)),
                          resource_request={"cpu": rng.choice((250, 500, 1000, 2000)), "memory": GIB},
                          cluster_selector={"region": f"r{i % 7}"} if i % 4 == 0 else {},
                          max_clusters=rng.choice((None, 3, 10)), current_clusters=current)


def reschedule(args: tuple[int, int, int]) -> int:
    start, stop, count = args
    clusters = fleet(count)
    names = [c.name for c in clusters]
    placed = 0
    for i in range(start, stop):
        placed += len(schedule(unit(i, names), clusters).clusters)
    return placed


def bench_scheduling(count: int, sample: int) -> None:
    clusters = fleet(count)
    names = [c.name for c in clusters]
    one = timed(lambda: schedule(unit(7, names), clusters), 20)
    print(f"one scheduling decision (filter, score, select, replicas, explanation) over {count} clusters: {one * 1000:.1f} ms")
    started = time.perf_counter()
    reschedule((0, sample, count))
    single = time.perf_counter() - started
    with multiprocessing.get_context("fork").Pool(2) as pool:
        started = time.perf_counter()
        pool.map(reschedule, [(0, sample // 2, count), (sample // 2, sample, count)])
        double = time.perf_counter() - started
    per_workload = single / sample
    print(f"rescheduling {sample:,} workloads over {count} clusters: {single:.1f} s in one process "
          f"({per_workload * 1000:.1f} ms each; 100,000 would take {per_workload * 100_000:.0f} s, goal ≤60 s); "
          f"two worker processes {double:.1f} s (speed-up {single / double:.2f}×)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--sample", type=int, default=2000)
    args = parser.parse_args()
    clusters = fleet(args.clusters)
    bench_placement(clusters)
    bench_scheduling(args.clusters, args.sample)


if __name__ == "__main__":
    main()
