"""What-if placement, the engine of the placement simulator page (``/scheduling/simulator/``, the
API's ``simulate/``): "if I deploy N replicas of this pod with policy P, where do they land, and
what are the fragmentation and water level after?" (scheduling.md, Meridian part). Named for the
question it answers (it was ``simulate.py``, easily taken for ``fleet/simulator.py``, the fleet
of simulated clusters, which it has nothing to do with); ``whatif_inventory`` runs it over a
cluster's stored inventory, ``fleet_placer`` is what places the fleet simulator's pods.

Pure: the snapshot's dicts are never modified; replicas are placed with the engine's
``Scheduler`` on its own copy of the cluster state.  Metrics:

* ``allocation_rate``: per resource, sum(requested) / sum(allocatable) over all nodes;
* ``fragmentation``: per resource, the free capacity stranded on nodes that can no longer fit
  the *largest pod shape* (by default the simulated pod's request; pass ``shape`` to measure
  against another), absolute and as a share of allocatable;
* ``largest_shape_fits``: how many more pods of that shape still fit, summed over nodes (free
  capacity divided by the shape in each resource it requests, and the free pod slots);
* ``node_usage``: every node's requests after the run (cpu in millicores), assumed pods included.

``compare(policy_a, policy_b, snapshot, pod, n)`` runs both and reports the two results side by side.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduling.cluster import NodeInfo, PodInfo, Res
from scheduling.engine import Policy, Scheduler, Snapshot

__all__ = ["Comparison", "Fragmentation", "SimulationResult", "compare", "simulate"]

DEFAULT_RESOURCES = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class Fragmentation:
    resource: str
    stranded: int
    stranded_ratio: float


@dataclass(frozen=True)
class SimulationResult:
    policy: str
    replicas: int
    placements: tuple[str | None, ...]
    unschedulable: int
    reasons: str
    first_unschedulable: int | None
    failure_messages: dict[str, int]
    node_usage: dict[str, dict[str, int]]
    allocation_rate: dict[str, float]
    fragmentation: dict[str, Fragmentation]
    largest_shape: dict[str, int]
    largest_shape_fits: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def placed(self) -> int:
        return self.replicas - self.unschedulable

    @property
    def placed_before_first_failure(self) -> int:
        return self.replicas if self.first_unschedulable is None else self.first_unschedulable


@dataclass(frozen=True)
class Comparison:
    a: SimulationResult
    b: SimulationResult

    def summary(self) -> dict[str, Any]:
        """The headline numbers of both runs, keyed by policy name (``a``/``b`` if they clash)."""
        names = (self.a.policy, self.b.policy) if self.a.policy != self.b.policy else ("a", "b")
        return {
            name: {
                "placed": r.placed,
                "unschedulable": r.unschedulable,
                "placed_before_first_failure": r.placed_before_first_failure,
                "allocation_rate": r.allocation_rate,
                "stranded_ratio": {k: f.stranded_ratio for k, f in r.fragmentation.items()},
                "largest_shape_fits": r.largest_shape_fits,
            }
            for name, r in zip(names, (self.a, self.b), strict=True)
        }


def _replica(pod: Mapping[str, Any], i: int) -> dict[str, Any]:
    out = copy.deepcopy(dict(pod))
    meta = out.setdefault("metadata", {})
    base = meta.get("name") or meta.get("generateName") or "replica"
    meta["name"] = f"{str(base).rstrip('-')}-{i}"
    out.setdefault("spec", {}).pop("nodeName", None)
    return out


def _shape(shape: Mapping[str, Any] | None, pod: Mapping[str, Any], resources: Sequence[str]) -> dict[str, int]:
    """The largest pod shape: a pod manifest's request, or a resource -> amount mapping."""
    source = shape if shape is not None else pod
    if "spec" in source or "metadata" in source:
        request: Res = PodInfo(source).fit_request
        return {name: request.get(name) for name in resources}
    return {name: int(source.get(name, 0)) for name in resources}


def _fits(node: NodeInfo, shape: Mapping[str, int]) -> int:
    slots = max(node.alloc_pods - len(node.pods), 0)
    fits = slots
    for name, demand in shape.items():
        if demand > 0:
            free = node.alloc.get(name, 0) - node.requested(name)
            fits = min(fits, max(free, 0) // demand)
    return fits


def simulate(
    policy: Policy,
    snapshot: Snapshot,
    pod: Mapping[str, Any],
    replicas: int,
    *,
    shape: Mapping[str, Any] | None = None,
    resources: Sequence[str] = DEFAULT_RESOURCES,
) -> SimulationResult:
    """Place ``replicas`` copies of ``pod`` one after another; nothing in ``snapshot`` changes."""
    if replicas < 0:
        raise ValueError("replicas must be >= 0")
    scheduler = Scheduler.from_snapshot(policy, snapshot)
    placements: list[str | None] = []
    failures: Counter[str] = Counter()
    first_failure: int | None = None
    first_reason = ""
    for i in range(replicas):
        placement = scheduler.schedule(_replica(pod, i))
        placements.append(placement.node)
        if placement.node is None:
            failures[placement.reasons] += 1
            if first_failure is None:
                first_failure, first_reason = i, placement.reasons
    cluster = scheduler.cluster
    largest = _shape(shape, pod, resources)
    stranded = dict.fromkeys(resources, 0)
    fits_total = 0
    for node in cluster.nodes:
        fits = _fits(node, largest)
        fits_total += fits
        if fits == 0:
            for name in resources:
                stranded[name] += max(node.alloc.get(name, 0) - node.requested(name), 0)
    allocation = {}
    fragmentation = {}
    for name in resources:
        total = cluster.total_alloc.get(name, 0)
        allocation[name] = cluster.total_req.get(name, 0) / total if total else 0.0
        fragmentation[name] = Fragmentation(name, stranded[name], stranded[name] / total if total else 0.0)
    return SimulationResult(
        policy=policy.name,
        replicas=replicas,
        placements=tuple(placements),
        unschedulable=sum(failures.values()),
        reasons=first_reason,
        first_unschedulable=first_failure,
        failure_messages=dict(failures),
        node_usage={n.name: scheduler.requested(n.name) for n in cluster.nodes},
        allocation_rate=allocation,
        fragmentation=fragmentation,
        largest_shape=largest,
        largest_shape_fits=fits_total,
    )


def compare(policy_a: Policy, policy_b: Policy, snapshot: Snapshot, pod: Mapping[str, Any], n: int, **kwargs: Any) -> Comparison:
    """Simulate the same deployment under two policies on the same snapshot."""
    return Comparison(simulate(policy_a, snapshot, pod, n, **kwargs), simulate(policy_b, snapshot, pod, n, **kwargs))
