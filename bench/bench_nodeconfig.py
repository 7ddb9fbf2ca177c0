"""Node config at scale: matching, conflict checks, the reconciler on a database, agent polls.

Prints figures and ratios (not pass/fail):

1. full matching of 200,000 nodes × 1,000 targets over plain data (goal ≤3 s), against
   ``match_target`` over every target for each node (the contract, unindexed);
2. one target change (goal ≤150 ms): the plan (index and affected nodes) and the whole
   database reconcile of the nodes it touches;
3. conflict check of a new target against 1,000 (goal ≤50 ms);
4. the agent poll 304 path of 10,000 agents under concurrent load through uvicorn (goal
   ≥3,000 requests/s, p99 ≤20 ms, and ≥0.25 of a bare ASGI endpoint measured in the same run).

    python bench/bench_nodeconfig.py [--nodes 200000] [--targets 1000] [--seconds 5]

Runs on a fresh SQLite database under a temporary directory, or on ``BENCH_DATABASE_URL``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from django_setup import add_sizes, setup_from_command_line  # noqa: E402
from http_load import bare_baseline, load, serve  # noqa: E402

MODELS = ("A1", "A2", "A3", "A4")
POOLS = ("online", "offline", "mixed", "batch")


def node_labels(i: int) -> dict[str, str]:
    return {"kubernetes.io/hostname": f"node-{i:06d}", "machineModel": MODELS[i % 4], "pool": POOLS[(i // 4) % 4],
            "diskMode": "hdd" if i % 5 < 2 else "ssd", "rack": f"r{i % 1000}", "zone": f"z{i % 7}"}


def make_targets(count: int):
    """A conflict-free mix like a large fleet's: ~80% rack selectors at priority 0, pool×model
    selectors at priority 1, node lists, one global."""
    from nodeconfig.matching import TargetRef
    from nodeconfig.planning import ScopedTarget

    targets = [ScopedTarget(1, TargetRef(name="global"))]
    for pool in POOLS:
        for model in MODELS:
            targets.append(ScopedTarget(len(targets) + 1, TargetRef(name=f"{pool}-{model}",
                                        node_label_selector=f"pool={pool},machineModel={model}", priority=1)))
    lists = count // 10
    for j in range(lists):
        names = tuple(f"node-{(j * 97 + k * 1009) % 100_000:06d}" for k in range(10))
        targets.append(ScopedTarget(len(targets) + 1, TargetRef(name=f"gray-{j}", node_names=names, last_duration="72h")))
    rack = 0
    while len(targets) < count:
        targets.append(ScopedTarget(len(targets) + 1, TargetRef(name=f"rack-{rack}", node_label_selector=f"rack=r{rack},diskMode!=nvme")))
        rack += 1
    return targets


def bench_matching(nodes: int, targets_count: int) -> None:
    from nodeconfig.matching import match_target
    from nodeconfig.planning import TargetIndex

    labels = [node_labels(i) for i in range(nodes)]
    targets = make_targets(targets_count)
    started = time.perf_counter()
    index = TargetIndex(targets)
    outcome = [index.match("c1", f"node-{i:06d}", labels[i]) for i in range(nodes)]
    indexed = time.perf_counter() - started
    matched = sum(1 for m in outcome if m.matched is not None)
    refs = [t.ref for t in targets]
    sample = min(1000, nodes)
    started = time.perf_counter()
    for i in range(sample):
        match_target(f"node-{i:06d}", labels[i] | {"cluster": "c1"}, refs)
    naive = (time.perf_counter() - started) * nodes / sample
    print(f"full matching: {nodes:,} nodes × {len(targets)} targets in {indexed:.2f} s "
          f"({nodes / indexed:,.0f} nodes/s, {matched:,} matched; goal ≤3 s)")
    print(f"  unindexed match_target over all targets: {naive:.1f} s (extrapolated from {sample}); "
          f"ratio {naive / indexed:.0f}× faster")


def bench_conflicts(targets_count: int) -> None:
    from nodeconfig.matching import TargetRef
    from nodeconfig.validation import validate_target

    targets = make_targets(targets_count)
    others = [t.ref for t in targets]
    allowed = {0: ["rack", "diskMode", "cluster"], 1: ["pool", "machineModel", "cluster"]}
    new = TargetRef(name="new", node_label_selector="rack=r9999,diskMode=hdd")
    cold = time.perf_counter()
    problems = validate_target(new, allowed, others)
    cold = time.perf_counter() - cold
    best = min(_time(lambda: validate_target(new, allowed, others)) for _ in range(20))
    clash = validate_target(TargetRef(name="clash", node_label_selector="rack=r7"), allowed, others)
    print(f"conflict check of a new target against {len(others)}: {best * 1000:.2f} ms warm, {cold * 1000:.1f} ms cold "
          f"(goal ≤50 ms); clean={not problems}, a clash reports {clash[0].reason if clash else None!r}")


def _time(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def bench_database(nodes: int, targets_count: int) -> dict:
    """Store ``nodes`` nodes and the targets, then time the reconciler on the database."""
    from django.db import transaction

    from core.context import acting_as
    from fleet.models import Cluster, Node
    from nodeconfig.models import ConfigTarget, ConfigType
    from nodeconfig.reconcile import nodes_for_targets, reconcile
    from nodeconfig.rollout import reconcile_targets
    from nodeconfig.services import TargetSpec, save_config_type, save_target

    config_type = ConfigType.objects.get(name="AdminQoSConfiguration")
    with acting_as("bench"):
        save_config_type({"allowed_keys": [{"priority": 0, "keyList": ["rack", "diskMode"]},
                                           {"priority": 1, "keyList": ["pool", "machineModel"]}]}, instance=config_type)
    cluster = Cluster.objects.create(name="c1", connector="simulated")
    started = time.perf_counter()
    batch = []
    for i in range(nodes):
        batch.append(Node(cluster=cluster, name=f"node-{i:06d}", labels=node_labels(i), ready=True))
        if len(batch) == 5000:
            Node.objects.bulk_create(batch)
            batch = []
    Node.objects.bulk_create(batch)
    stored = time.perf_counter() - started
    refs = make_targets(targets_count)
    started = time.perf_counter()
    rows = []
    for scoped in refs:
        ref = scoped.ref
        rows.append(ConfigTarget(config_type=config_type, name=ref.name, node_label_selector=ref.node_label_selector,
                                 priority=ref.priority, node_names=list(ref.node_names), last_duration=ref.last_duration or "",
                                 config={"reclaimedResourceConfig": {"enableReclaim": bool(scoped.id % 2)}}))
    with transaction.atomic():
        ConfigTarget.objects.bulk_create(rows)
        for target in ConfigTarget.objects.filter(config_type=config_type):  # first revisions, as save_target would
            from nodeconfig.hashing import config_hash
            from nodeconfig.services import revise

            target.config_hash = config_hash(target.config)
            with acting_as("bench"):
                revise(target, "create", "bench")
    print(f"database: stored {nodes:,} nodes in {stored:.1f} s and {len(rows)} targets in {time.perf_counter() - started:.1f} s")
    full = _time(lambda: reconcile(config_type))
    again = _time(lambda: reconcile(config_type))
    print(f"  full reconcile (writes every node's config): {full:.2f} s; again with nothing to change: {again:.2f} s")
    target = ConfigTarget.objects.get(config_type=config_type, name="rack-5")
    plan = _time(lambda: nodes_for_targets(config_type, [target.pk]))
    with acting_as("bench"):
        change = _time(lambda: save_target(config_type, TargetSpec(name="rack-5", node_label_selector="rack=r5,diskMode!=nvme",
                                                                   config={"reclaimedResourceConfig": {"enableReclaim": False}}),
                                           reason="bench"))
        settle = _time(lambda: reconcile_targets(config_type, [target.pk]))
    print(f"  one target change (rack-5's body, ~{nodes // 1000} nodes): save {change * 1000:.0f} ms, affected-node plan "
          f"{plan * 1000:.0f} ms, reconcile {settle * 1000:.0f} ms; written and reconciled in "
          f"{(change + settle) * 1000:.0f} ms (goal ≤150 ms)")
    with acting_as("bench"):  # a new selection: the nodes it can reach are searched
        change = _time(lambda: save_target(config_type, TargetSpec(name="rack-5", node_label_selector="rack=r5,diskMode!=ssd",
                                                                   config={"reclaimedResourceConfig": {"enableReclaim": False}}),
                                           reason="bench"))
        searched = _time(lambda: nodes_for_targets(config_type, [target.pk]))
        settle = _time(lambda: reconcile_targets(config_type, [target.pk]))
    print(f"  one target change (rack-5's selector): save {change * 1000:.0f} ms, affected-node plan (searched) "
          f"{searched * 1000:.0f} ms, reconcile {settle * 1000:.0f} ms; written and reconciled in "
          f"{(change + settle) * 1000:.0f} ms (the baseline: every change searched before)")
    return {"cluster": cluster}


# ---------------------------------------------------------------------------- agent polls

def bench_polls(seconds: float, connections: int) -> None:
    from django.conf import settings

    from fleet.models import Cluster, Node
    from fleet.tokens import issue_token
    from nodeconfig.agent import effective_config
    from nodeconfig.etags import refresh_etags

    cluster = Cluster.objects.get(name="c1")
    _, token = issue_token(cluster, "agent")
    node_ids = list(Node.objects.filter(cluster=cluster).order_by("pk").values_list("pk", flat=True)[:10_000])
    refresh_etags(node_ids)
    nodes = list(Node.objects.filter(pk__in=node_ids).select_related("cluster"))
    env = dict(os.environ, REDIS_URL=settings.REDIS_URL)
    server, port = serve("config.asgi:application", env, str(ROOT))
    requests = []
    try:
        import httpx

        first = httpx.get(f"http://127.0.0.1:{port}/api/agent/v1/clusters/c1/nodes/{nodes[0].name}/config",
                          headers={"Authorization": f"Bearer {token}"})
        assert first.status_code == 200, first.text  # caches the token for the fast path
        for node in nodes:
            _, etag = effective_config(node)
            requests.append((f"GET /api/agent/v1/clusters/c1/nodes/{node.name}/config HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             f"Authorization: Bearer {token}\r\nIf-None-Match: {etag}\r\n\r\n").encode())
        random.Random(1).shuffle(requests)
        load(port, requests, 1.0, connections)  # warm up
        polls = load(port, requests, seconds, connections)
        changed = [r.replace(b"If-None-Match", b"X-Ignored") for r in requests[:500]]
        full = load(port, changed, seconds / 2, connections)
        django = load(port, [r.replace(b"\r\n\r\n", b"\r\nCache-Control: no-cache\r\n\r\n") for r in changed], seconds / 2,
                      connections)
    finally:
        server.terminate()
        server.wait()
    bare = bare_baseline(env, seconds, connections)
    print(f"agent poll 304 path, one uvicorn worker, {connections} keep-alive connections, {len(requests):,} nodes: "
          f"{polls.rps:,.0f} requests/s, p99 {polls.p99 * 1000:.1f} ms, statuses {polls.statuses} (goal ≥3,000/s, p99 ≤20 ms)")
    print(f"  bare ASGI endpoint, same server and client: {bare.rps:,.0f} requests/s, p99 {bare.p99 * 1000:.1f} ms; "
          f"ratio {polls.rps / bare.rps:.2f} (goal ≥0.25)")
    print(f"  changed-config poll (200, configs cached per ETag): {full.rps:,.0f} requests/s, p99 {full.p99 * 1000:.1f} ms, "
          f"statuses {full.statuses}")
    print(f"  the same through Django (Cache-Control: no-cache): {django.rps:,.0f} requests/s, "
          f"p99 {django.p99 * 1000:.1f} ms, statuses {django.statuses}")


def main() -> None:
    args = setup_from_command_line(add_sizes(argparse.ArgumentParser(), nodes=200_000, targets=1000, seconds=5.0,
                                             connections=32))
    bench_matching(args.nodes, args.targets)
    bench_conflicts(args.targets)
    bench_database(args.nodes, args.targets)
    bench_polls(args.seconds, args.connections)


if __name__ == "__main__":
    main()
