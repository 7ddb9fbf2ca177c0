"""Meridian's own score plugins (scheduling.md, "Placement algorithms"), registered next to the
upstream ones and called through the same ``filter_nodes``/``score_nodes``.

``ExtendedBalancedAllocation``
    args: ``resources: [{name, weight}]`` (weight 1..100), default cpu 1, memory 1,
    ``nvidia.com/gpu`` 3.  Balances requested/allocatable over *every* listed resource the node
    has, so a CPU-only pod sees that it would leave a GPU node's GPUs stranded (upstream leaves an
    extended resource out when the pod does not request it; that is the deliberate extension).
    Score = (1 - weighted population std of the capped fractions) * 100, with weights
    w_i: mean = sum(w f)/sum(w), var = sum(w (f - mean)^2)/sum(w).  With all weights 1 and the
    same resources it computes exactly upstream BalancedAllocation's float expression.  Uses the
    real requests and skips best-effort pods, like upstream.

``WaterLevelStackSpread``
    args: ``threshold`` (0..1, default 0.8), ``resources: [{name, weight}]`` (default cpu 1,
    memory 1).  The cluster water level is the weighted mean over the resources of
    sum(requested)/sum(allocatable) over *all* nodes of the cluster (for ``score_nodes``, the
    ``nodes`` argument), before the pod is placed.  Below the threshold it scores like
    NodeResourcesFit/LeastAllocated (spread), at or above like MostAllocated (stack), with the same
    resources and non-zero request rules, so leftover fragments consolidate when capacity is tight.

``MostAvailable``
    args: ``resources: [{name, weight}]`` (default cpu 1, memory 1).  Load-aware: the node's
    ``VirtualAvailable`` is allocatable minus the usage of its last report (see ``cluster.py``
    for the annotations), minus the ``VirtualRequest`` of the pods placed since that report; a
    node without a report counts the virtual request of all its pods.  Per resource
    ``max(0, VirtualAvailable - VirtualRequest(pod)) * 100 / allocatable``, then the weighted mean
    (integer arithmetic like LeastAllocated), no normalisation.  The seed's formula image is not
    in the text; this is the reading that matches its prose ("prefer the node with the most
    actual free resource, minus what was placed since the metric report").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from scheduling.args import DEFAULT_RESOURCES, ResourceSpec, as_mapping, check_fields, fraction, read_resources, validate_weights
from scheduling.cluster import ClusterState, NodeInfo, PodInfo
from scheduling.helpers import MAX_NODE_SCORE, go_div
from scheduling.plugins.base import Plugin, Scorer
from scheduling.plugins.noderesources import allocation_scorer, least_allocated, most_allocated
from scheduling.status import SKIP, ArgsError, Skip

__all__ = ["ExtendedBalancedAllocation", "MostAvailable", "WaterLevelStackSpread", "water_level", "weighted_balance"]

GPU = "nvidia.com/gpu"
DEFAULT_BALANCE_RESOURCES = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1), ResourceSpec(GPU, 3))
DEFAULT_THRESHOLD = 0.8


def _resources(raw: Mapping[str, Any], default: tuple[ResourceSpec, ...]) -> tuple[ResourceSpec, ...]:
    resources = read_resources(raw.get("resources"), "resources", default)
    errors = validate_weights(resources, "resources")
    if errors:
        raise ArgsError(errors)
    return resources


def weighted_balance(fractions: Sequence[float], weights: Sequence[int]) -> int:
    """(1 - weighted std) * 100; equal to upstream's expression when every weight is 1."""
    n = len(fractions)
    std = 0.0
    if n == 2:
        w0, w1 = weights
        std = abs(fractions[0] - fractions[1]) * math.sqrt(w0 * w1) / (w0 + w1) if (w0, w1) != (1, 1) else abs((fractions[0] - fractions[1]) / 2)
    elif n > 2:
        total_weight = sum(weights)
        total = 0.0
        for f, w in zip(fractions, weights, strict=True):
            total += f if w == 1 else f * w
        mean = total / total_weight
        acc = 0.0
        for f, w in zip(fractions, weights, strict=True):
            d = (f - mean) * (f - mean)
            acc = acc + (d if w == 1 else d * w)
        std = math.sqrt(acc / total_weight)
    return int((1 - std) * float(MAX_NODE_SCORE))


class _ResourcesScore(Plugin):
    """A score plugin whose one arg is ``resources`` (``default_resources`` where absent)."""

    has_score = True
    default_resources: ClassVar[tuple[ResourceSpec, ...]] = DEFAULT_RESOURCES

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        raw = as_mapping(args, "")
        check_fields(raw, ("resources",))
        self.resources = _resources(raw, self.default_resources)


class ExtendedBalancedAllocation(_ResourcesScore):
    name = "ExtendedBalancedAllocation"
    default_resources = DEFAULT_BALANCE_RESOURCES

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer | Skip:
        requests = [pod.plain_requests.get(r.name, 0) for r in self.resources]
        if not any(requests):
            return SKIP
        resources = [(r.name, r.weight, requests[i]) for i, r in enumerate(self.resources)]

        def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
            out = []
            for node in nodes:
                fractions: list[float] = []
                weights: list[int] = []
                for name, weight, request in resources:
                    alloc = node.alloc.get(name, 0)
                    if alloc == 0:
                        continue
                    f = float(node.requested(name) + request) / float(alloc)
                    fractions.append(1.0 if f > 1 else f)
                    weights.append(weight)
                out.append(weighted_balance(fractions, weights))
            return out

        return scorer


def water_level(cluster: ClusterState, resources: Sequence[ResourceSpec]) -> float:
    """Weighted mean of sum(requested)/sum(allocatable) over the cluster's nodes."""
    total = weight = 0.0
    for r in resources:
        alloc = cluster.total_alloc.get(r.name, 0)
        if alloc <= 0:
            continue
        total += r.weight * cluster.total_req.get(r.name, 0) / alloc
        weight += r.weight
    return total / weight if weight else 0.0


class WaterLevelStackSpread(Plugin):
    name = "WaterLevelStackSpread"
    has_score = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        raw = as_mapping(args, "")
        check_fields(raw, ("threshold", "resources"))
        self.threshold = fraction(raw.get("threshold"), "threshold", DEFAULT_THRESHOLD)
        self.resources = _resources(raw, DEFAULT_RESOURCES)
        self.spread = least_allocated(self.resources)
        self.stack = most_allocated(self.resources)

    def stacking(self, cluster: ClusterState) -> bool:
        return water_level(cluster, self.resources) >= self.threshold

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer:
        requests = [pod.score_request(r.name, non_zero=True) for r in self.resources]
        score = self.stack if self.stacking(cluster) else self.spread
        return allocation_scorer(self.resources, requests, score, use_requested=False)


class MostAvailable(_ResourcesScore):
    name = "MostAvailable"

    @staticmethod
    def virtual_available(node: NodeInfo, name: str) -> int:
        alloc = node.alloc.get(name, 0)
        used = node.usage.get(name, 0) if node.usage is not None else 0
        return alloc - used - node.virtual_since.get(name, 0)

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer:
        demand = [(r.name, r.weight, pod.virtual_request.get(r.name, 0)) for r in self.resources]

        def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
            out = []
            for node in nodes:
                total = weights = 0
                for name, weight, request in demand:
                    alloc = node.alloc.get(name, 0)
                    if alloc <= 0:
                        continue
                    free = self.virtual_available(node, name) - request
                    total += go_div(max(free, 0) * MAX_NODE_SCORE, alloc) * weight
                    weights += weight
                out.append(go_div(total, weights) if weights else 0)
            return out

        return scorer
