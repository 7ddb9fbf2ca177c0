"""Benchmark kube.labels: parse throughput and selector matching against 20-label nodes.

Run from the repository root: ``python bench/bench_labels.py``.  It takes a few seconds and
prints parses/s, matches/s for a compiled 3-term selector next to the 300k/s goal, and the
same workload through a naive evaluator that walks the parsed requirements on every call,
the way upstream Go's ``Requirement.Matches`` does, to show what compiling buys.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kube.labels import Operator, Requirement, Selector, parse_selector

SELECTOR = "region=bj,machineModel in (A3,A4),!drained"
GOAL_MATCHES_PER_SECOND = 300_000
NODE_COUNT = 1_000
LABELS_PER_NODE = 20
MIN_SECONDS = 0.3
REPEATS = 3


def make_nodes(count: int, seed: int = 7) -> list[dict[str, str]]:
    """Label sets shaped like real nodes, with the three selector keys varied so roughly a third match."""
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        labels = {f"node.meridian.io/attr-{j}": f"value-{rng.randrange(100)}" for j in range(LABELS_PER_NODE - 3)}
        labels["kubernetes.io/hostname"] = f"node-{i}"
        labels["region"] = rng.choice(["bj", "bj", "sh", "gz"])
        labels["machineModel"] = rng.choice(["A3", "A4", "H100", "A3"])
        if rng.random() < 0.2:
            labels["drained"] = "true"
        nodes.append(labels)
    return nodes


def naive_requirement_matches(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    """Upstream's switch-per-call evaluation, with a linear scan of the values like Go's ``hasValue``."""
    op, key, values = requirement.operator, requirement.key, requirement.values
    if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
        return key in labels and any(labels[key] == v for v in values)
    if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
        return key not in labels or not any(labels[key] == v for v in values)
    if op is Operator.EXISTS:
        return key in labels
    if op is Operator.DOES_NOT_EXIST:
        return key not in labels
    if key not in labels:
        return False
    try:
        number, bound = int(labels[key]), int(values[0])
    except ValueError:
        return False
    return number > bound if op is Operator.GREATER_THAN else number < bound


def naive_matches(selector: Selector, labels: Mapping[str, str]) -> bool:
    return all(naive_requirement_matches(r, labels) for r in selector.requirements)


def rate(work: Callable[[], int]) -> float:
    """Best-of-N operations per second; each round repeats ``work`` until it has run long enough to time."""
    best = 0.0
    for _ in range(REPEATS):
        done = 0
        start = time.perf_counter()
        elapsed = 0.0
        while elapsed < MIN_SECONDS:
            done += work()
            elapsed = time.perf_counter() - start
        best = max(best, done / elapsed)
    return best


def matching_work(match: Callable[[Mapping[str, str]], bool], nodes: Sequence[Mapping[str, str]]) -> Callable[[], int]:
    def work() -> int:
        for labels in nodes:
            match(labels)
        return len(nodes)

    return work


def uncached_parse_work(batch: int = 500) -> Callable[[], int]:
    """Distinct texts every round so the parse cache never answers; this times the parser itself."""
    counter = iter(range(10**12))

    def work() -> int:
        base = next(counter) * batch
        for i in range(base, base + batch):
            parse_selector(f"region=bj{i},machineModel in (A3,A4),!drained")
        return batch

    return work


def cached_parse_work(batch: int = 500) -> Callable[[], int]:
    def work() -> int:
        for _ in range(batch):
            parse_selector(SELECTOR)
        return batch

    return work


def main() -> None:
    selector = parse_selector(SELECTOR)
    nodes = make_nodes(NODE_COUNT)
    compiled = [selector.matches(n) for n in nodes]
    if compiled != [naive_matches(selector, n) for n in nodes]:
        raise SystemExit("compiled and naive matching disagree")

    parse_rate = rate(uncached_parse_work())
    cached_rate = rate(cached_parse_work())
    compiled_rate = rate(matching_work(selector.matches, nodes))
    naive_rate = rate(matching_work(lambda labels: naive_matches(selector, labels), nodes))

    print(f"python {sys.version.split()[0]}, selector {SELECTOR!r}, {NODE_COUNT} nodes x {LABELS_PER_NODE} labels")
    print(f"  nodes matching                   {sum(compiled)}/{NODE_COUNT}")
    print(f"  parses/s (uncached)              {parse_rate:>12,.0f}")
    print(f"  parses/s (cached)                {cached_rate:>12,.0f}")
    print(f"  matches/s (compiled)             {compiled_rate:>12,.0f}")
    print(f"  goal >={GOAL_MATCHES_PER_SECOND} matches/s        achieved/goal = {compiled_rate / GOAL_MATCHES_PER_SECOND:.2f}x")
    print(f"  matches/s (naive baseline)       {naive_rate:>12,.0f}")
    print(f"  speed-up compiled/naive          {compiled_rate / naive_rate:>12.2f}x")


if __name__ == "__main__":
    main()
