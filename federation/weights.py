"""Water-level based dynamic cluster weights (KubeAdmiral's ClusterCapacityWeight).

Static weights leave some clusters full and others idle. Instead each cluster
is weighted by its share of the fleet's free capacity, but never more than
``supply_limit_ratio`` times its share of the fleet's total capacity: a big
cluster that happens to be empty must not swallow every new workload. Weights
are per mille and, whenever any capacity is free, sum to exactly 1000.

The arithmetic (float order of operations, Go's round-half-away-from-zero,
which cluster absorbs the rounding remainder) follows ``kubewharf/kubeadmiral``
``pkg/controllers/scheduler/framework/plugins/rsp/rsp.go`` so Meridian shows
the same weights KubeAdmiral would compute. Standard library only.

Speed: a reschedule computes these for every workload, so the work is done on
one list of whole units per resource rather than on a dict per cluster; the
arithmetic, its order and every error are unchanged (the previous code is a
test oracle in ``tests/federation/_reference_weights.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DEFAULT_SUPPLY_LIMIT_RATIO",
    "GPU_RESOURCE",
    "TOTAL_WEIGHT",
    "available_to_weights",
    "dynamic_weights",
    "go_round",
    "reported_resources",
    "weight_limits",
]

#: SREs' empirical cap: a cluster's weight is at most 1.4 times its size share.
DEFAULT_SUPPLY_LIMIT_RATIO = 1.4
#: Weights are per mille.
TOTAL_WEIGHT = 1000
#: Resource used instead of CPU when a workload requests GPUs.
GPU_RESOURCE = "nvidia.com/gpu"
#: Resources every cluster reports, as 0 when its status lacks them.
_ALWAYS_REPORTED = ("cpu", "memory", GPU_RESOURCE)

ClusterCapacity = tuple[str, Mapping[str, int] | None, Mapping[str, int] | None]

#: Marks a resource a cluster does not report at all (an error once it matters).
_MISSING: Any = object()


def go_round(value: float) -> int:
    """Round half away from zero, like Go's ``math.Round`` (Python rounds half to even).

    Computed from the exact fractional part so values such as
    0.49999999999999994 are not pushed over the edge by adding 0.5.
    (``int`` truncates like ``math.trunc``; a fraction of at least one half
    can only come from a positive value, at most minus one half from a
    negative one.)
    """
    whole = int(value)
    fraction = value - whole
    if fraction >= 0.5:
        return whole + 1
    if fraction <= -0.5:
        return whole - 1
    return whole


def _whole_units(value: float) -> int:
    """A quantity as whole units rounded away from zero, like ``Quantity.Value()``.

    Upstream weighs whole CPU cores (and whole GPUs); fractional input is
    rounded the same way rather than rejected.
    """
    if isinstance(value, int):
        return value
    return math.ceil(value) if value > 0 else math.floor(value)


def _equal_split(names: Sequence[str]) -> dict[str, int]:
    """Everyone gets round(1000 / n): upstream's answer when nothing can be compared.

    Note this may sum to 999 or 1001 (e.g. three clusters get 333 each).
    """
    return {name: go_round(TOTAL_WEIGHT / len(names)) for name in names}


def _amounts(rows: Mapping[str, Mapping[str, int]], resource: str) -> list[Any]:
    """Each cluster's amount of ``resource`` in order, ``_MISSING`` where it is not reported."""
    return [resources.get(resource, _MISSING) for resources in rows.values()]


def _wholes(amounts: Sequence[Any]) -> list[int]:
    """Whole units per cluster, a missing resource counting as 0 (as upstream sums them)."""
    return [amount if type(amount) is int else _whole_units(0 if amount is _MISSING else amount) for amount in amounts]


def _missing(name: str, resource: str) -> ValueError:
    return ValueError(f"cluster {name!r} reports no {resource} resource")


def _limits(names: Sequence[str], amounts: Sequence[Any], resource: str, supply_limit_ratio: float) -> dict[str, int]:
    """:func:`weight_limits` over parallel lists (names, allocatable amounts)."""
    wholes = _wholes(amounts)
    total = 0.0
    for whole in wholes:
        total += float(whole)
    if total == 0:
        return _equal_split(names)
    limits: dict[str, int] = {}
    for name, amount, whole in zip(names, amounts, wholes):
        if amount is _MISSING:
            raise _missing(name, resource)
        limits[name] = go_round(float(whole) / total * TOTAL_WEIGHT * supply_limit_ratio)
    return limits


def weight_limits(
    allocatables: Mapping[str, Mapping[str, int]],
    resource: str = "cpu",
    supply_limit_ratio: float = DEFAULT_SUPPLY_LIMIT_RATIO,
) -> dict[str, int]:
    """Per-mille cap per cluster: its share of total allocatable times the ratio.

    Raises ``ValueError`` when a cluster does not report ``resource`` at all
    (and the fleet total is not zero), as upstream errors out.
    """
    return _limits(list(allocatables), _amounts(allocatables, resource), resource, supply_limit_ratio)


def _capped_shares(
    names: Sequence[str],
    amounts: Sequence[Any],
    wholes: Sequence[int],
    resource: str,
    limits: Mapping[str, int],
    total_available: float,
) -> dict[str, int]:
    """Each cluster's per-mille share of free capacity, clipped to its limit.

    Overcommitted clusters (negative available) count as having nothing free.
    """
    shares: dict[str, int] = {}
    limit_of = limits.get
    for name, amount, whole in zip(names, amounts, wholes):
        if amount is _MISSING:
            raise _missing(name, resource)
        free = max(float(whole), 0.0)
        shares[name] = min(go_round(free / total_available * TOTAL_WEIGHT), limit_of(name, 0))
    return shares


def _normalise(shares: Mapping[str, int]) -> dict[str, int]:
    """Rescale to 1000 and give the rounding remainder to the heaviest cluster.

    The heaviest cluster changes least in relative terms. Ties go to the
    first such cluster in input order (upstream iterates a Go map, so its
    choice among equals is random).
    """
    share_sum = float(sum(shares.values()))
    weights: dict[str, int] = {}
    heaviest, heaviest_weight = None, 0
    for name, share in shares.items():
        weight = go_round(float(share) / share_sum * TOTAL_WEIGHT)
        if weight > heaviest_weight:
            heaviest, heaviest_weight = name, weight
        weights[name] = weight
    if heaviest is not None:
        weights[heaviest] += TOTAL_WEIGHT - sum(weights.values())
    return weights


def _weights(names: Sequence[str], amounts: Sequence[Any], resource: str, limits: Mapping[str, int]) -> dict[str, int]:
    """:func:`available_to_weights` over parallel lists (names, available amounts)."""
    wholes = _wholes(amounts)
    total_available = 0.0
    for whole in wholes:
        if whole > 0:
            total_available += float(whole)
    if total_available == 0:
        return _equal_split(names)
    shares = _capped_shares(names, amounts, wholes, resource, limits, total_available)
    if sum(shares.values()) == 0:
        return _equal_split(names)
    return _normalise(shares)


def available_to_weights(
    availables: Mapping[str, Mapping[str, int]],
    resource: str,
    limits: Mapping[str, int],
) -> dict[str, int]:
    """Per-mille weights from free capacity, capped by ``limits``, summing to 1000.

    With no free capacity anywhere every cluster gets round(1000 / n). If the
    caps zero out every cluster that has free capacity, upstream divides 0 by
    0 and produces garbage; we fall back to the same equal split instead.
    """
    return _weights(list(availables), _amounts(availables, resource), resource, limits)


def reported_resources(resources: Mapping[str, int] | None) -> dict[str, int]:
    """A cluster's resource list as upstream reads it: cpu/memory/GPU default to 0.

    ``None`` means the cluster has not reported node-level status yet.
    """
    merged: dict[str, int] = {name: 0 for name in _ALWAYS_REPORTED}
    if resources:
        merged.update(resources)
    return merged


def dynamic_weights(
    clusters: Sequence[ClusterCapacity],
    resource: str = "cpu",
    supply_limit_ratio: float = DEFAULT_SUPPLY_LIMIT_RATIO,
) -> dict[str, int]:
    """Per-mille scheduling weights from each cluster's water level.

    ``clusters`` holds ``(name, allocatable, available)`` with available =
    allocatable minus pod requests (may be negative when overcommitted);
    either mapping may be ``None`` when the cluster reports no resources.
    Use ``resource=GPU_RESOURCE`` for workloads that request GPUs. Callers
    apply these only when no placement sets a static weight.
    """
    # What reported_resources(...).get(resource) gives, without a dict per cluster.
    unreported = 0 if resource in _ALWAYS_REPORTED else _MISSING
    names: list[str] = []
    seen: set[str] = set()
    allocated: list[Any] = []
    available: list[Any] = []
    for name, allocatable, free in clusters:
        if name in seen:
            raise ValueError(f"cluster {name!r} is listed twice")
        seen.add(name)
        names.append(name)
        allocated.append(allocatable[resource] if allocatable and resource in allocatable else unreported)
        available.append(free[resource] if free and resource in free else unreported)
    limits = _limits(names, allocated, resource, supply_limit_ratio)
    return _weights(names, available, resource, limits)
