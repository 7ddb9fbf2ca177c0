"""Throughput of kube.quantity and kube.resources; prints figures, asserts nothing.

Run from the repository root: ``python bench/bench_quantity.py`` (a few seconds).  The
baseline is a deliberately naive parser (regex + ``decimal.Decimal`` arithmetic, no cache,
no fast path) so the ratio shows what the fast path and the cache buy.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from decimal import ROUND_UP, Decimal, localcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kube import quantity
from kube.quantity import parse_quantity
from kube.resources import pod_requests, quota_usage

TYPICAL = ["500m", "4Gi", "2", "100m", "1Gi", "250m", "512Mi", "1", "1.5", "128Mi", "2Gi", "50m"]
SECONDS_PER_FIGURE = 0.4

_NAIVE_SCAN = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)")
_NAIVE_MULTIPLIERS = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{suffix: Decimal(1024**power) for power, suffix in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"], start=1)},
}
_NANO = Decimal("1e-9")


def naive_parse(text: str) -> Decimal:
    """What a first attempt looks like: correct for typical input, but every call does Decimal work."""
    match = _NAIVE_SCAN.fullmatch(text)
    if match is None:
        raise ValueError(text)
    number, suffix = match.groups()
    with localcontext() as ctx:
        ctx.prec = 100
        value = Decimal(number)
        if suffix in _NAIVE_MULTIPLIERS:
            value *= _NAIVE_MULTIPLIERS[suffix]
        else:
            value = value.scaleb(int(suffix[1:]))
        return value.quantize(_NANO, rounding=ROUND_UP)


def rate(batch: Callable[[], object], per_batch: int) -> float:
    """Operations per second: repeat ``batch`` for about SECONDS_PER_FIGURE seconds."""
    batch()
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < SECONDS_PER_FIGURE:
        for _ in range(50):
            batch()
        done += 50 * per_batch
    return done / elapsed


def parse_all(parse: Callable[[str], object]) -> Callable[[], None]:
    def batch() -> None:
        for text in TYPICAL:
            parse(text)

    return batch


def sample_pod() -> dict:
    """Three containers plus one restartable (sidecar) init container."""

    def container(name: str, cpu: str, memory: str, sidecar: bool = False) -> dict:
        spec = {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": "1", "memory": "1Gi"}}}
        return {**spec, "restartPolicy": "Always"} if sidecar else spec

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "initContainers": [container("istio-proxy", "100m", "128Mi", sidecar=True)],
            "containers": [
                container("app", "500m", "512Mi"),
                container("worker", "250m", "256Mi"),
                container("exporter", "50m", "64Mi"),
            ],
        },
    }


def main() -> None:
    naive = rate(parse_all(naive_parse), len(TYPICAL))
    uncached = rate(parse_all(quantity._parse_uncached), len(TYPICAL))
    cached = rate(parse_all(parse_quantity), len(TYPICAL))
    left, right = parse_quantity("500m"), parse_quantity("4Gi")
    additions = rate(lambda: left + right, 1)
    fresh = [parse_quantity(text) for text in TYPICAL]
    canonical = rate(lambda: [str(-q) for q in fresh], len(fresh))
    pod = sample_pod()
    requests = rate(lambda: pod_requests(pod), 1)
    usage = rate(lambda: quota_usage(pod), 1)

    print(f"typical quantities: {', '.join(TYPICAL)}")
    print(f"naive Decimal parse (baseline)   {naive:>12,.0f} parses/s")
    print(f"parse_quantity, cache bypassed   {uncached:>12,.0f} parses/s  ({uncached / naive:.1f}x baseline)")
    print(f"parse_quantity, as called        {cached:>12,.0f} parses/s  ({cached / naive:.1f}x baseline)")
    print(f"Quantity + Quantity              {additions:>12,.0f} additions/s")
    print(f"str(-Quantity), text not cached  {canonical:>12,.0f} negations+strs/s")
    print(f"pod_requests (3 containers + 1 sidecar) {requests:>9,.0f} calls/s")
    print(f"quota_usage  (same pod)                 {usage:>9,.0f} calls/s")


if __name__ == "__main__":
    main()
