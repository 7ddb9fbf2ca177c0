"""Frozen copy of federation/weights.py before the speed-up, only to prove results did not change.

Do not import this outside tests; do not "fix" it: it is the reference.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# Unchanged by the speed-up, so taken from the live module: the constants and the status reading.
from federation.weights import DEFAULT_SUPPLY_LIMIT_RATIO, GPU_RESOURCE, TOTAL_WEIGHT, reported_resources

__all__ = ["GPU_RESOURCE", "available_to_weights", "dynamic_weights", "go_round", "weight_limits"]

ClusterCapacity = tuple[str, Mapping[str, int] | None, Mapping[str, int] | None]


def go_round(value: float) -> int:
    """Round half away from zero, like Go's ``math.Round`` (Python rounds half to even).

    Computed from the exact fractional part so values such as
    0.49999999999999994 are not pushed over the edge by adding 0.5.
    """
    whole = math.trunc(value)
    if abs(value - whole) >= 0.5:
        whole += 1 if value > 0 else -1
    return int(whole)


def _whole_units(value: float) -> int:
    """See :func:`federation.weights._whole_units`."""
    if isinstance(value, int):
        return value
    return math.ceil(value) if value > 0 else math.floor(value)


def _equal_split(names: Sequence[str]) -> dict[str, int]:
    """See :func:`federation.weights._equal_split`."""
    return {name: go_round(TOTAL_WEIGHT / len(names)) for name in names}


def weight_limits(
    allocatables: Mapping[str, Mapping[str, int]],
    resource: str = "cpu",
    supply_limit_ratio: float = DEFAULT_SUPPLY_LIMIT_RATIO,
) -> dict[str, int]:
    """See :func:`federation.weights.weight_limits`."""
    total = 0.0
    for resources in allocatables.values():
        total += float(_whole_units(resources.get(resource, 0)))
    if total == 0:
        return _equal_split(list(allocatables))
    limits: dict[str, int] = {}
    for name, resources in allocatables.items():
        if resource not in resources:
            raise ValueError(f"cluster {name!r} reports no {resource} resource")
        share = float(_whole_units(resources[resource])) / total * TOTAL_WEIGHT * supply_limit_ratio
        limits[name] = go_round(share)
    return limits


def _capped_shares(
    availables: Mapping[str, Mapping[str, int]],
    resource: str,
    limits: Mapping[str, int],
    total_available: float,
) -> dict[str, int]:
    """See :func:`federation.weights._capped_shares`."""
    shares: dict[str, int] = {}
    for name, resources in availables.items():
        if resource not in resources:
            raise ValueError(f"cluster {name!r} reports no {resource} resource")
        free = max(float(_whole_units(resources[resource])), 0.0)
        shares[name] = min(go_round(free / total_available * TOTAL_WEIGHT), limits.get(name, 0))
    return shares


def _normalise(shares: Mapping[str, int]) -> dict[str, int]:
    """See :func:`federation.weights._normalise` (the first of the heaviest takes the remainder)."""
    share_sum = sum(shares.values())
    weights = {name: go_round(float(share) / float(share_sum) * TOTAL_WEIGHT) for name, share in shares.items()}
    heaviest = max(weights, key=weights.__getitem__, default=None)
    if heaviest is not None and weights[heaviest] > 0:
        weights[heaviest] += TOTAL_WEIGHT - sum(weights.values())
    return weights


def available_to_weights(
    availables: Mapping[str, Mapping[str, int]],
    resource: str,
    limits: Mapping[str, int],
) -> dict[str, int]:
    """See :func:`federation.weights.available_to_weights`."""
    total_available = 0.0
    for resources in availables.values():
        amount = _whole_units(resources.get(resource, 0))
        if amount > 0:
            total_available += float(amount)
    if total_available == 0:
        return _equal_split(list(availables))
    shares = _capped_shares(availables, resource, limits, total_available)
    if sum(shares.values()) == 0:
        return _equal_split(list(availables))
    return _normalise(shares)


def dynamic_weights(
    clusters: Sequence[ClusterCapacity],
    resource: str = "cpu",
    supply_limit_ratio: float = DEFAULT_SUPPLY_LIMIT_RATIO,
) -> dict[str, int]:
    """See :func:`federation.weights.dynamic_weights`."""
    allocatables: dict[str, dict[str, int]] = {}
    availables: dict[str, dict[str, int]] = {}
    for name, allocatable, available in clusters:
        if name in allocatables:
            raise ValueError(f"cluster {name!r} is listed twice")
        allocatables[name] = reported_resources(allocatable)
        availables[name] = reported_resources(available)
    limits = weight_limits(allocatables, resource, supply_limit_ratio)
    return available_to_weights(availables, resource, limits)
