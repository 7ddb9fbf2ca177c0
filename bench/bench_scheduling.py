"""Scheduling plugins and the placement engine at the seed's scale and beyond.

Prints figures and ratios (not pass/fail):

1. the seed's test set (Ctrip, scheduling.md): 300 nodes, 15,000 existing pods, then a 1,000-pod
   app with inter-pod affinity and anti-affinity placed by the engine.  On a sample of the
   cycles (``--naive-sample``) InterPodAffinity's scoring is computed both ways over the same
   candidate nodes -- two-phase (topology-pair sums once, then a lookup per candidate) and naive
   (nodes x pods x terms x candidates) -- the scores are asserted identical and the time ratio is
   printed (goal >= 10x).  The end-to-end placement rate of the 1,000 pods is printed too;
2. throughput of the default policy (TaintToleration, NodeAffinity, NodeResourcesFit,
   InterPodAffinity, BalancedAllocation, upstream weights, adaptive percentageOfNodesToScore)
   placing 10,000 pods of a realistic deployment mix over 5,000 nodes already holding 20,000
   pods, in one process (goal >= 200 pods/s);
3. a nearly full cluster (fragmented, ~75% allocated) fed a stream of mixed pod shapes until the
   first pod does not fit: WaterLevelStackSpread (stack above the water level) against pure
   spreading (NodeResourcesFit LeastAllocated) -- allocation rate reached and pods placed.

    python bench/bench_scheduling.py [--quick] [--naive-sample 100] [--nodes 5000] [--pods 10000]

``--quick`` runs 2,000 pods over 1,000 nodes for (2) and samples 20 cycles for (1).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scheduling.args import InterPodAffinityArgs
from scheduling.cluster import PodInfo
from scheduling.engine import PluginSpec, Policy, Scheduler
from scheduling.plugins.interpodaffinity import InterPodAffinity, naive_scores
from scheduling.status import SKIP

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RACK = "rack"


def make_node(name: str, cpu: int, mem_gi: int, labels: dict[str, str], taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    resources = {"cpu": str(cpu), "memory": f"{mem_gi}Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": {HOST: name, **labels}},
        "spec": {"taints": taints or []},
        "status": {"capacity": resources, "allocatable": resources},
    }


def make_pod(name: str, labels: dict[str, str], cpu_m: int, mem_mi: int, node: str | None = None, **spec: Any) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "app", "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}}}], **spec}
    if node:
        pod_spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": pod_spec}


def spread_terms(app: str, weight: int, key: str) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}}


# --------------------------------------------------------------------------- (1) the seed's set


def seed_cluster(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(f"node-{i:03d}", 96, 384, {ZONE: f"zone-{i % 3}", RACK: f"rack-{i // 10:02d}"}) for i in range(300)]
    pods = []
    for i in range(15_000):
        app = f"app-{i % 150:03d}"
        affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [spread_terms(app, 100, HOST)]}} if i % 3 == 0 else None
        if app == "app-007":  # a client that wants to sit next to the new app (the symmetric part)
            affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [spread_terms("seed-app", 30, RACK)]}}
        spec = {"affinity": affinity} if affinity else {}
        pods.append(make_pod(f"p-{i}", {"app": app, "tier": "web" if i % 2 else "cache"}, rng.choice((100, 250, 500, 1000)), rng.choice((256, 512, 1024)), f"node-{rng.randrange(300):03d}", **spec))
    return nodes, pods


def seed_app_pod(i: int) -> dict[str, Any]:
    affinity = {
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [spread_terms("seed-app", 100, HOST), spread_terms("seed-app", 50, ZONE)]},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [spread_terms("app-042", 20, RACK)]},
    }
    return make_pod(f"seed-app-{i}", {"app": "seed-app"}, 500, 1024, affinity=affinity)


def bench_seed(naive_sample: int) -> None:
    rng = random.Random(3)
    nodes, pods = seed_cluster(rng)
    started = time.perf_counter()
    scheduler = Scheduler(Policy.default(), nodes, pods)
    built = time.perf_counter() - started
    plugin = InterPodAffinity({"hardPodAffinityWeight": 1})
    args = InterPodAffinityArgs.parse(None)
    every = max(1, 1000 // max(naive_sample, 1))
    two_phase_s = naive_s = 0.0
    compared = candidates = 0
    placed = 0
    started = time.perf_counter()
    for i in range(1000):
        pod = seed_app_pod(i)
        if naive_sample and i % every == 0 and compared < naive_sample:
            info = PodInfo(pod)
            pre = scheduler._prefilter(info)
            assert not isinstance(pre, str)
            saved = scheduler.next_start  # the same candidates this pod's cycle will score
            feasible, _, _ = scheduler._find_feasible(pre)
            scheduler.next_start = saved
            candidates += len(feasible)
            t0 = time.perf_counter()
            scorer = plugin.prescore(scheduler.cluster, info)
            fast = [0] * len(feasible) if scorer is SKIP else scorer(feasible)  # type: ignore[operator]
            t1 = time.perf_counter()
            slow = naive_scores(scheduler.cluster, info, feasible, args)
            t2 = time.perf_counter()
            assert fast == slow, f"two-phase and naive scores differ at pod {i}"
            two_phase_s += t1 - t0
            naive_s += t2 - t1
            compared += 1
        placed += scheduler.schedule(pod).node is not None
    elapsed = time.perf_counter() - started
    print(f"(1) seed set: 300 nodes, 15,000 existing pods (state built in {built:.2f} s); "
          f"1,000-pod app with preferred (anti-)affinity placed by the default policy: {placed} placed in {elapsed:.2f} s "
          f"({1000 / elapsed:.0f} pods/s with the sampled comparisons, "
          f"{1000 / max(elapsed - naive_s - two_phase_s, 1e-9):.0f} pods/s without them)")
    if compared:
        ratio = naive_s / two_phase_s if two_phase_s else float("inf")
        print(f"    InterPodAffinity scoring on {compared} sampled cycles (~{candidates // compared} feasible candidates each): two-phase "
              f"{two_phase_s / compared * 1000:.2f} ms, naive {naive_s / compared * 1000:.1f} ms per cycle; "
              f"ratio {ratio:.0f}x (goal >= 10x: {'meets' if ratio >= 10 else 'misses'}); scores identical on every sample")


# --------------------------------------------------------------------------- (2) throughput

DEPLOYMENT_SHAPES = ((100, 128), (250, 512), (500, 1024), (1000, 2048), (2000, 4096), (4000, 8192))


def fleet(count: int, rng: random.Random) -> list[dict[str, Any]]:
    nodes = []
    for i in range(count):
        pool = "gpu" if i % 25 == 0 else ("highmem" if i % 7 == 0 else "general")
        cpu, mem = {"gpu": (64, 512), "highmem": (32, 512), "general": (rng.choice((32, 64, 96)), 0)}[pool]
        mem = mem or cpu * 4
        taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}] if pool == "gpu" else None
        if i % 40 == 1:
            taints = [{"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}]
        nodes.append(make_node(f"n{i:05d}", cpu, mem, {ZONE: f"zone-{i % 5}", "pool": pool}, taints))
    return nodes


def deployments(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """Pod templates of a realistic mix: most plain, some pinned to a pool, some tolerating the
    GPU taint, a quarter spreading their replicas over hosts with preferred anti-affinity."""
    templates = []
    for d in range(count):
        cpu, mem = rng.choice(DEPLOYMENT_SHAPES)
        spec: dict[str, Any] = {}
        kind = rng.random()
        if kind < 0.15:
            spec["nodeSelector"] = {"pool": "highmem"}
        elif kind < 0.20:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
            spec["nodeSelector"] = {"pool": "gpu"}
        if rng.random() < 0.25:
            spec["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [spread_terms(f"dep-{d}", 100, HOST)]}}
        elif rng.random() < 0.1:
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone-1", "zone-2"]}]}}]}}
        templates.append({"app": f"dep-{d}", "cpu": cpu, "mem": mem, "spec": spec})
    return templates


def bench_throughput(nodes_count: int, pods_count: int) -> None:
    rng = random.Random(7)
    nodes = fleet(nodes_count, rng)
    existing = [make_pod(f"old-{i}", {"app": f"old-{i % 300}"}, rng.choice((250, 500, 1000)), rng.choice((512, 1024)), f"n{rng.randrange(nodes_count):05d}")
                for i in range(nodes_count * 4)]
    started = time.perf_counter()
    scheduler = Scheduler(Policy.default(), nodes, existing)
    built = time.perf_counter() - started
    templates = deployments(max(10, pods_count // 250), rng)
    pods = []
    for i in range(pods_count):
        t = templates[i % len(templates)]
        pods.append(make_pod(f"{t['app']}-{i}", {"app": t["app"]}, t["cpu"], t["mem"], **t["spec"]))
    placed = evaluated = 0
    started = time.perf_counter()
    for pod in pods:
        result = scheduler.schedule(pod)
        placed += result.node is not None
        evaluated += result.evaluated
    elapsed = time.perf_counter() - started
    rate = pods_count / elapsed
    print(f"(2) default policy, {pods_count:,} pods ({len(templates)} deployments) over {nodes_count:,} nodes holding "
          f"{len(existing):,} pods (state built in {built:.1f} s): {elapsed:.1f} s, {rate:.0f} pods/s "
          f"(goal >= 200 pods/s: {'meets' if rate >= 200 else 'misses'}); {placed:,} placed, "
          f"{evaluated / pods_count:.0f} nodes examined per pod on average (scan length)")


# --------------------------------------------------------------------------- (3) stacking vs spreading

SHAPES = ((1000, 4096), (1000, 4096), (1000, 4096), (1000, 4096), (2000, 8192), (2000, 8192), (4000, 16384), (8000, 32768))


def nearly_full(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [make_node(f"n{i:03d}", 32, 128, {ZONE: f"zone-{i % 3}"}) for i in range(200)]
    pods = []
    for i, node in enumerate(nodes):
        used = 0
        target = rng.randint(18_000, 28_000)  # 56-88% of 32 cores, uneven on purpose
        j = 0
        while used < target:
            cpu = rng.choice((500, 1000, 1500, 2000, 3000))
            pods.append(make_pod(f"old-{i}-{j}", {"app": "old"}, cpu, cpu * 4, node["metadata"]["name"]))
            used += cpu
            j += 1
    return nodes, pods


def fill(policy: Policy, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[int, float, float, float]:
    scheduler = Scheduler(policy, nodes, pods)
    rng = random.Random(11)
    cluster = scheduler.cluster
    start_rate = cluster.total_req["cpu"] / cluster.total_alloc["cpu"]
    placed = 0
    while True:
        cpu, mem = rng.choice(SHAPES)
        if scheduler.schedule(make_pod(f"new-{placed}", {"app": "new"}, cpu, mem)).node is None:
            break
        placed += 1
    return placed, start_rate, cluster.total_req["cpu"] / cluster.total_alloc["cpu"], cluster.total_req["memory"] / cluster.total_alloc["memory"]


def bench_stacking() -> None:
    nodes, pods = nearly_full(random.Random(5))
    spread = Policy(filters=(PluginSpec("NodeResourcesFit"),), scores=(PluginSpec("NodeResourcesFit", 1),), percentage_of_nodes_to_score=100, name="spread")
    water = Policy(filters=(PluginSpec("NodeResourcesFit"),), scores=(PluginSpec("WaterLevelStackSpread", 1, {"threshold": 0.7}),),
                   percentage_of_nodes_to_score=100, name="water")
    results = {p.name: fill(p, nodes, pods) for p in (spread, water)}
    start = results["spread"][1]
    print(f"(3) nearly full cluster: 200 nodes x 32 cores, {start:.1%} of cpu allocated, a stream of 1-8 core pods until the first does not fit:")
    for name, label in (("spread", "LeastAllocated (spread)"), ("water", "WaterLevelStackSpread, threshold 0.7 (stack)")):
        placed, _, cpu_rate, mem_rate = results[name]
        print(f"    {label:<46} {placed:>4} pods placed before the first unschedulable, allocation rate cpu {cpu_rate:.1%}, memory {mem_rate:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--naive-sample", type=int, default=100, help="cycles of (1) whose scoring is also run the naive way")
    parser.add_argument("--quick", action="store_true", help="2,000 pods over 1,000 nodes; 20 naive samples")
    parser.add_argument("--only", choices=("seed", "throughput", "stacking"), help="run one part")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.pods, args.naive_sample = 1000, 2000, 20
    if args.only in (None, "seed"):
        bench_seed(args.naive_sample)
    if args.only in (None, "throughput"):
        bench_throughput(args.nodes, args.pods)
    if args.only in (None, "stacking"):
        bench_stacking()


if __name__ == "__main__":
    main()
