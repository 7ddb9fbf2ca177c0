"""NodeResourcesFit and NodeResourcesBalancedAllocation (``framework/plugins/noderesources``).

Fit's filter: the pod count against ``allocatable.pods``, then cpu, memory, ephemeral-storage
and every non-zero scalar request against allocatable minus requested; a request larger than the
whole allocatable is ``UnschedulableAndUnresolvable`` (preemption cannot help).  Extended
resources named in ``ignoredResources``, or whose domain is in ``ignoredResourceGroups``, are not
checked.  Fit's score is the configured strategy over ``NonZeroRequested`` (the 100m/200Mi
defaults for containers that request nothing), ephemeral-storage and scalars over ``Requested``;
an extended resource the pod does not request is left out, as is any resource the node has none
of.  BalancedAllocation scores ``(1 - std) * 100`` of the requested/allocatable fractions with the
real requests, and skips best-effort pods.

Reasons follow upstream's order; several insufficient scalar resources are reported in the
pod's request order (upstream iterates a Go map, so its order there is random).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scheduling.args import LEAST_ALLOCATED, MOST_ALLOCATED, BalancedArgs, FitArgs, ResourceSpec
from scheduling.cluster import ClusterState, NodeColumns, NodeInfo, PodInfo, is_extended_resource_name, scalar
from scheduling.helpers import MAX_NODE_SCORE, ShapePoint, broken_linear, go_div
from scheduling.plugins.base import NodeCheck, Plugin, Scorer, node_local, per_node
from scheduling.status import SKIP, UNRESOLVABLE, UNSCHEDULABLE, Skip, Status

__all__ = [
    "BalancedAllocation",
    "Fit",
    "allocatable_requested",
    "balanced_score",
    "fused_value",
    "least_allocated",
    "most_allocated",
    "requested_to_capacity_ratio",
]

TOO_MANY_PODS = "Too many pods"
_MAX_UTILIZATION = 100

# ------------------------------------------------------------------------ filter


def _insufficient(name: str) -> str:
    return f"Insufficient {name}"


def fit_check(request: Any, ignored: frozenset[str], ignored_groups: frozenset[str]) -> NodeCheck:
    """``fitsRequest`` as a closure over the pod's request (``computePodResourceRequest``)."""
    cpu, mem, eph = request.cpu, request.mem, request.eph
    scalars = []
    for name, quantity in request.scalars.items():
        if quantity == 0:
            continue
        if is_extended_resource_name(name) and (name in ignored or (ignored_groups and name.split("/")[0] in ignored_groups)):
            continue
        scalars.append((name, quantity, _insufficient(name)))
    nothing_requested = request.is_zero()
    too_many = Status.of(UNSCHEDULABLE, TOO_MANY_PODS)
    simple = not scalars and eph <= 0  # cpu, memory and the pod count decide

    @node_local
    def check(node: NodeInfo) -> Status | None:
        if (simple and len(node.pods) < node.alloc_pods and (cpu <= node.alloc_cpu - node.req_cpu or cpu <= 0)
                and (mem <= node.alloc_mem - node.req_mem or mem <= 0)):
            return None  # the common case, decided without building a verdict
        too_many_pods = len(node.pods) + 1 > node.alloc_pods
        if nothing_requested:
            return too_many if too_many_pods else None
        reasons: list[str] = [TOO_MANY_PODS] if too_many_pods else []
        unresolvable = False
        if cpu > 0 and cpu > node.alloc_cpu - node.req_cpu:
            reasons.append("Insufficient cpu")
            unresolvable = unresolvable or cpu > node.alloc_cpu
        if mem > 0 and mem > node.alloc_mem - node.req_mem:
            reasons.append("Insufficient memory")
            unresolvable = unresolvable or mem > node.alloc_mem
        if eph > 0 and eph > node.alloc_eph - node.req_eph:
            reasons.append("Insufficient ephemeral-storage")
            unresolvable = unresolvable or eph > node.alloc_eph
        for name, quantity, reason in scalars:
            allocatable = node.alloc_scalars.get(name, 0)
            if quantity > allocatable - node.req_scalars.get(name, 0):
                reasons.append(reason)
                unresolvable = unresolvable or quantity > allocatable
        if not reasons:
            return None
        return Status(UNRESOLVABLE if unresolvable else UNSCHEDULABLE, tuple(reasons))

    if simple:
        check.fits_cpu_memory = (cpu, mem)  # type: ignore[attr-defined]  # what ``fused_value`` inlines
    return check


# ------------------------------------------------------------------------ scoring helpers


def allocatable_requested(node: NodeInfo, name: str, pod_request: int, use_requested: bool) -> tuple[int, int]:
    """``calculateResourceAllocatableRequest``: (allocatable, requested incl. the pod) or (0, 0)."""
    if name == "cpu":
        return node.alloc_cpu, (node.req_cpu if use_requested else node.nz_cpu) + pod_request
    if name == "memory":
        return node.alloc_mem, (node.req_mem if use_requested else node.nz_mem) + pod_request
    if name == "ephemeral-storage":
        return node.alloc_eph, node.req_eph + pod_request
    if pod_request == 0 and scalar(name):
        return 0, 0
    allocatable = node.alloc_scalars.get(name)
    if allocatable is None:
        return 0, 0
    return allocatable, node.req_scalars.get(name, 0) + pod_request


def _weighted_average(resources: Sequence[ResourceSpec], requested: Sequence[int], allocatable: Sequence[int], per: Callable[[int, int], int]) -> int:
    node_score = weight_sum = 0
    for i, alloc in enumerate(allocatable):
        if alloc == 0:
            continue
        weight = resources[i].weight
        node_score += per(requested[i], alloc) * weight
        weight_sum += weight
    return 0 if weight_sum == 0 else go_div(node_score, weight_sum)


def _least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - requested) * MAX_NODE_SCORE, capacity)


def _most_requested(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    requested = min(requested, capacity)
    return go_div(requested * MAX_NODE_SCORE, capacity)


class ResourceScorer:
    """A strategy's per-node function over (requested, allocatable) lists, tagged with its kind
    so ``allocation_scorer`` can take the inline cpu/memory fast path for the common case."""

    def __init__(self, kind: str, resources: Sequence[ResourceSpec], shape: Sequence[ShapePoint] = ()) -> None:
        self.kind = kind
        self.resources = tuple(resources)
        self.shape = tuple(shape)

    def __call__(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        if self.kind == "least":
            return _weighted_average(self.resources, requested, allocatable, _least_requested)
        if self.kind == "most":
            return _weighted_average(self.resources, requested, allocatable, _most_requested)
        if self.kind == "balanced":
            return balanced_score(requested, allocatable)
        return self._ratio(requested, allocatable)

    def _resource_ratio(self, requested: int, capacity: int) -> int:
        if capacity == 0 or requested > capacity:
            return broken_linear(self.shape, _MAX_UTILIZATION)
        return broken_linear(self.shape, go_div(requested * _MAX_UTILIZATION, capacity))

    def _ratio(self, requested: Sequence[int], allocatable: Sequence[int]) -> int:
        """``buildRequestedToCapacityRatioScorerFunction``: the shape at each utilization,
        resources scoring 0 left out of the mean, rounded half away from zero."""
        node_score = weight_sum = 0
        for i, alloc in enumerate(allocatable):
            if alloc == 0:
                continue
            score = self._resource_ratio(requested[i], alloc)
            if score > 0:
                node_score += score * self.resources[i].weight
                weight_sum += self.resources[i].weight
        if weight_sum == 0:
            return 0
        # math.Round(float64(a)/float64(b)) for non-negative ints, without float rounding traps
        return (2 * node_score + weight_sum) // (2 * weight_sum)


def least_allocated(resources: Sequence[ResourceSpec]) -> ResourceScorer:
    """``leastResourceScorer``: weighted mean of free/allocatable, spreading pods."""
    return ResourceScorer("least", resources)


def most_allocated(resources: Sequence[ResourceSpec]) -> ResourceScorer:
    """``mostResourceScorer``: weighted mean of requested/allocatable, stacking pods."""
    return ResourceScorer("most", resources)


def requested_to_capacity_ratio(resources: Sequence[ResourceSpec], shape: Sequence[ShapePoint]) -> ResourceScorer:
    """``requestedToCapacityRatioScorer`` with the shape already scaled to 0..MaxNodeScore."""
    return ResourceScorer("ratio", resources, shape)


def resource_scorer(args: FitArgs) -> ResourceScorer:
    if args.strategy == LEAST_ALLOCATED:
        return least_allocated(args.resources)
    if args.strategy == MOST_ALLOCATED:
        return most_allocated(args.resources)
    return requested_to_capacity_ratio(args.resources, args.shape)


def allocation_scorer(resources: Sequence[ResourceSpec], pod_requests: Sequence[int], score: ResourceScorer, use_requested: bool) -> Scorer:
    """``resourceAllocationScorer.score`` over a list of nodes."""
    names = [r.name for r in resources]
    if not names:
        raise ValueError("resources not found")
    fast = _cpu_memory_fast_path(resources, pod_requests, score, use_requested)
    if fast is not None:
        return fast

    def one(node: NodeInfo) -> int:
        requested = [0] * len(names)
        allocatable = [0] * len(names)
        for i, name in enumerate(names):
            alloc, req = allocatable_requested(node, name, pod_requests[i], use_requested)
            if alloc:
                allocatable[i] = alloc
                requested[i] = req
        return score(requested, allocatable)

    return per_node(one)


def _cpu_memory_fast_path(resources: Sequence[ResourceSpec], pod_requests: Sequence[int], score: ResourceScorer, use_requested: bool) -> Scorer | None:
    """The default configurations (cpu and memory, any weights) unrolled.

    Same arithmetic as the generic path: every term is non-negative there (requests are
    non-negative, and a free amount is only divided when requested <= capacity), so ``//`` is
    Go's truncating division.  The engine spends most of its time here.
    """
    if sorted(r.name for r in resources) != ["cpu", "memory"] or min(pod_requests) < 0:
        return None
    weights = {r.name: r.weight for r in resources}
    requests = dict(zip((r.name for r in resources), pod_requests, strict=True))
    wc, wm, pc, pm = weights["cpu"], weights["memory"], requests["cpu"], requests["memory"]
    if score.kind == "balanced" and use_requested:
        return _fast_balanced(pc, pm)
    if score.kind in ("least", "most") and not use_requested and wc > 0 and wm > 0:
        return _fast_allocated(wc, wm, pc, pm, least=score.kind == "least")
    return None


def _fast_allocated(wc: int, wm: int, pc: int, pm: int, *, least: bool) -> Scorer:
    """LeastAllocated (a resource scores its free share) or MostAllocated (its used share, at
    most all of it): a requested amount over capacity has no free share, and the used share is
    never negative, so a share that is not positive adds nothing in either."""
    def one(node: NodeInfo) -> int:
        total = weight = 0
        ac = node.alloc_cpu
        if ac:
            rc = node.nz_cpu + pc
            share = ac - rc if least else (rc if rc < ac else ac)
            if share > 0:
                total += share * MAX_NODE_SCORE // ac * wc
            weight = wc
        am = node.alloc_mem
        if am:
            rm = node.nz_mem + pm
            share = am - rm if least else (rm if rm < am else am)
            if share > 0:
                total += share * MAX_NODE_SCORE // am * wm
            weight += wm
        return total // weight if weight else 0

    if least:
        one.least_allocated = (wc, wm, pc, pm)  # type: ignore[attr-defined]  # what ``fused_value`` inlines
    return per_node(one)


def _fast_balanced(pc: int, pm: int) -> Scorer:
    def one(node: NodeInfo) -> int:
        ac = node.alloc_cpu
        am = node.alloc_mem
        if ac and am:
            fc = float(node.req_cpu + pc) / float(ac)
            fm = float(node.req_mem + pm) / float(am)
            if fc > 1:
                fc = 1.0
            if fm > 1:
                fm = 1.0
            return int((1 - abs((fc - fm) / 2)) * 100.0)
        return MAX_NODE_SCORE  # one fraction or none: the std is 0

    one.balanced = (pc, pm)  # type: ignore[attr-defined]  # what ``fused_value`` inlines
    return per_node(one)


def fused_value(check: Any, scores: Sequence[tuple[Any, int]], infeasible: int) -> Callable[[NodeInfo], int] | None:
    """The default policy's per-node work in one function: the cpu/memory fit check, then
    ``least_weight * LeastAllocated + balanced_weight * BalancedAllocation``, or ``infeasible``.

    Same arithmetic as ``fit_check`` (its common case), ``_fast_allocated`` and ``_fast_balanced``,
    inlined: the placement engine calls this once per node and pod shape, which at fleet scale
    is most of its time. None unless the check and the two per-node scores are exactly those.
    """
    fits = getattr(check, "fits_cpu_memory", None)
    least = next(((getattr(one, "least_allocated"), w) for one, w in scores if hasattr(one, "least_allocated")), None)
    balanced = next(((getattr(one, "balanced"), w) for one, w in scores if hasattr(one, "balanced")), None)
    if fits is None or least is None or balanced is None or len(scores) != 2:
        return None
    cpu, mem = fits
    (wc, wm, lc, lm), w_least = least
    (bc, bm), w_balanced = balanced
    least_weight = wc + wm

    def value(node: NodeInfo) -> int:
        ac, am = node.alloc_cpu, node.alloc_mem
        if not (len(node.pods) < node.alloc_pods and (cpu <= ac - node.req_cpu or cpu <= 0) and (mem <= am - node.req_mem or mem <= 0)):
            return infeasible
        total, weight = 0, least_weight
        if ac:
            rc = node.nz_cpu + lc
            if rc <= ac:
                total += (ac - rc) * MAX_NODE_SCORE // ac * wc
        else:
            weight -= wc
        if am:
            rm = node.nz_mem + lm
            if rm <= am:
                total += (am - rm) * MAX_NODE_SCORE // am * wm
        else:
            weight -= wm
        least_score = total // weight if weight else 0
        if ac and am:
            fc = float(node.req_cpu + bc) / float(ac)
            fm = float(node.req_mem + bm) / float(am)
            balanced_score = int((1 - abs(((fc if fc <= 1 else 1.0) - (fm if fm <= 1 else 1.0)) / 2)) * 100.0)
        else:
            balanced_score = MAX_NODE_SCORE
        return w_least * least_score + w_balanced * balanced_score

    if NodeColumns.representable((cpu, mem, wc, wm, lc, lm, bc, bm, w_least, w_balanced, least_weight)):
        value.vector = _fused_vector(cpu, mem, (wc, wm, lc, lm), (bc, bm), (w_least, w_balanced), infeasible)  # type: ignore[attr-defined]
    return value


def _fused_vector(cpu: int, mem: int, least: tuple[int, int, int, int], balanced: tuple[int, int], weights: tuple[int, int],
                  infeasible: int) -> Callable[[NodeColumns, Any], Any]:
    """``fused_value`` over many nodes at once (numpy arrays of ``NodeColumns``, at the node
    positions ``at``): the same operations in the same order, integer where Go's are (floor
    division of non-negative numbers is Go's truncation) and IEEE double where Go's are, so every
    value equals the per-node function's (a hypothesis test holds them equal). A window of new
    nodes then costs a few array operations instead of a Python call per node."""
    import numpy as np

    wc, wm, lc, lm = least
    bc, bm = balanced
    w_least, w_balanced = weights

    def vector(cols: NodeColumns, at: Any) -> Any:
        # NodeColumns.FIELDS; ``take`` gathers the rows in a quarter of a fancy index's time
        ac, am, alloc_pods, req_c, req_m, nz_c, nz_m, pods = cols.table.take(at, axis=0).T
        fits = pods < alloc_pods
        if cpu > 0:
            fits &= cpu <= ac - req_c
        if mem > 0:
            fits &= mem <= am - req_m
        if ac.all() and am.all():  # every node has both: fewer operations, the same values
            least_score = _least_part(ac, nz_c + lc, wc) + _least_part(am, nz_m + lm, wm)
            least_score = least_score // (wc + wm) if wc + wm else least_score * 0
            fc = np.minimum((req_c + bc) / ac, 1.0)  # int64 / int64: both as doubles, then divided
            fm = np.minimum((req_m + bm) / am, 1.0)
            balanced_score = ((1 - np.abs((fc - fm) / 2)) * 100.0).astype(np.int64)
        else:
            has_c, has_m = ac != 0, am != 0
            div_c, div_m = np.where(has_c, ac, 1), np.where(has_m, am, 1)
            rc, rm = nz_c + lc, nz_m + lm
            total = np.where(has_c & (rc <= ac), (ac - rc) * MAX_NODE_SCORE // div_c * wc, 0)
            total += np.where(has_m & (rm <= am), (am - rm) * MAX_NODE_SCORE // div_m * wm, 0)
            weight = (wc + wm) - np.where(has_c, 0, wc) - np.where(has_m, 0, wm)
            least_score = np.where(weight != 0, total // np.where(weight != 0, weight, 1), 0)
            fc = np.minimum((req_c + bc).astype(np.float64) / div_c.astype(np.float64), 1.0)
            fm = np.minimum((req_m + bm).astype(np.float64) / div_m.astype(np.float64), 1.0)
            balanced_score = np.where(has_c & has_m, ((1 - np.abs((fc - fm) / 2)) * 100.0).astype(np.int64), MAX_NODE_SCORE)
        if w_least != 1:
            least_score = least_score * w_least
        if w_balanced != 1:
            balanced_score = balanced_score * w_balanced
        return np.where(fits, least_score + balanced_score, infeasible)

    return vector


def _least_part(alloc: Any, requested: Any, weight: int) -> Any:
    """One resource's ``(alloc - requested) * 100 // alloc * weight``, 0 where the request
    exceeds it (numpy arrays; ``alloc`` nowhere 0)."""
    import numpy as np

    part = np.maximum(alloc - requested, 0) * MAX_NODE_SCORE // alloc
    return part if weight == 1 else part * weight


def balanced_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balancedResourceScorer``: (1 - population std of the capped fractions) * 100."""
    fractions = []
    total = 0.0
    for i, alloc in enumerate(allocatable):
        if alloc == 0:
            continue
        fraction = float(requested[i]) / float(alloc)
        if fraction > 1:
            fraction = 1.0
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        acc = 0.0
        for fraction in fractions:
            acc = acc + (fraction - mean) * (fraction - mean)
        std = math.sqrt(acc / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


# ------------------------------------------------------------------------ plugins


class Fit(Plugin):
    """``NodeResourcesFit``: resource filter plus the LeastAllocated/MostAllocated/
    RequestedToCapacityRatio score (args: ``ignoredResources``, ``ignoredResourceGroups``,
    ``scoringStrategy{type, resources[{name, weight}], requestedToCapacityRatio{shape}}``)."""

    name = "NodeResourcesFit"
    has_filter = True
    has_score = True
    pod_only = True
    parse_args = FitArgs.parse

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.scorer = resource_scorer(self.parsed)

    def prefilter(self, cluster: ClusterState, pod: PodInfo) -> NodeCheck:
        return fit_check(pod.fit_request, self.parsed.ignored_resources, self.parsed.ignored_resource_groups)

    def pod_requests(self, pod: PodInfo) -> list[int]:
        return [pod.score_request(r.name, non_zero=True) for r in self.parsed.resources]

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer:
        return allocation_scorer(self.parsed.resources, self.pod_requests(pod), self.scorer, use_requested=False)


class BalancedAllocation(Plugin):
    """``NodeResourcesBalancedAllocation`` (args: ``resources[{name, weight: 1}]``)."""

    name = "NodeResourcesBalancedAllocation"
    has_score = True
    pod_only = True
    parse_args = BalancedArgs.parse

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer | Skip:
        requests = [pod.score_request(r.name, non_zero=False) for r in self.parsed.resources]
        if not any(requests):
            return SKIP  # best-effort pods would all pile onto one node (kubernetes#129138)
        return allocation_scorer(self.parsed.resources, requests, ResourceScorer("balanced", self.parsed.resources), use_requested=True)
