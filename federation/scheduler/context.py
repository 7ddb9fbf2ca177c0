"""A unit prepared once per ``schedule`` call (:class:`Context`), so plugins stay O(1) per cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from federation.planner import ClusterPreference
from kube.labels import Selector
from kube.taints import Toleration, parse_tolerations, prefer_no_schedule_tolerations

from .terms import Term, compile_preferred
from .types import (
    CPU,
    DEFAULT_RATIO,
    DIVIDE,
    DUPLICATE,
    EPHEMERAL_STORAGE,
    MEMORY,
    RESOURCE_WEIGHTS,
    ClusterAffinity,
    ClusterInfo,
    Placement,
    SchedulingUnit,
    UnitError,
)

if TYPE_CHECKING:
    from .profiles import Profile


def gvk_spellings(gvk: str) -> frozenset[str]:
    """Every way a cluster may list the unit's GVK (core group with or without a leading slash)."""
    parts = gvk.split("/")
    if len(parts) == 2:
        parts = ["", *parts]
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise UnitError(f"invalid GVK {gvk!r}: want group/version/Kind or version/Kind")
    group, version, kind = parts
    if group in ("", "core"):
        return frozenset({f"{version}/{kind}", f"/{version}/{kind}", f"core/{version}/{kind}"})
    return frozenset({f"{group}/{version}/{kind}"})


def placement_of(value: Any) -> Placement:
    """Normalise a placement given as Placement, ClusterPreference or dict."""
    if isinstance(value, Placement):
        return value
    if isinstance(value, ClusterPreference):
        return Placement(value.weight, value.min_replicas, value.max_replicas)
    if isinstance(value, Mapping):
        return Placement(
            weight=value.get("weight"),
            min_replicas=value.get("min_replicas", value.get("minReplicas", 0)) or 0,
            max_replicas=value.get("max_replicas", value.get("maxReplicas")),
        )
    if value is None:
        return Placement()
    raise TypeError(f"placement must be a Placement, ClusterPreference or mapping, not {type(value).__name__}")


def affinity_of(value: ClusterAffinity | Mapping[str, Any] | None) -> ClusterAffinity:
    if value is None:
        return ClusterAffinity()
    if isinstance(value, ClusterAffinity):
        return value
    return ClusterAffinity.from_dict(value)


@dataclass
class Context:
    """The unit prepared once per ``schedule`` call, so plugins stay O(1) per cluster."""

    unit: SchedulingUnit
    profile: Profile
    mode: str
    current: dict[str, int | None]
    scheduled: frozenset[str]
    gvk: frozenset[str] | None
    gvk_error: str | None
    selector: tuple[tuple[str, str], ...]
    required: tuple[Term, ...] | None
    preferred: tuple[tuple[int, Selector], ...]
    tolerations: tuple[Toleration, ...]
    prefer_tolerations: tuple[Toleration, ...]
    request: dict[str, int]
    score_resources: tuple[tuple[str, int], ...]
    placements: dict[str, Placement]

    @property
    def desired(self) -> int:
        return self.unit.desired_replicas or 0


def _merged_current(unit: SchedulingUnit, clusters: Sequence[ClusterInfo]) -> dict[str, int | None]:
    current: dict[str, int | None] = dict(unit.current_clusters)
    for cluster in clusters:
        if cluster.current_replicas and cluster.name not in current:
            current[cluster.name] = cluster.current_replicas
    return current


def score_resources(request: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """cpu, memory and every other requested resource, with upstream's ratio weights."""
    names = [CPU, MEMORY] + sorted(r for r in request if r not in (CPU, MEMORY, EPHEMERAL_STORAGE))
    return tuple((name, RESOURCE_WEIGHTS.get(name, DEFAULT_RATIO)) for name in names)


def prepare(unit: SchedulingUnit, profile: Profile, clusters: Sequence[ClusterInfo]) -> Context:
    mode = DUPLICATE if unit.scheduling_mode == DUPLICATE or unit.desired_replicas is None else DIVIDE
    current = _merged_current(unit, clusters)
    scheduled = frozenset(name for name, replicas in current.items() if replicas is None or replicas > 0)
    try:
        gvk, gvk_error = gvk_spellings(unit.gvk), None
    except UnitError as exc:
        gvk, gvk_error = None, str(exc)
    affinity = affinity_of(unit.cluster_affinity)
    required = None if affinity.required is None else tuple(Term.compile(t) for t in affinity.required)
    tolerations = parse_tolerations(unit.tolerations)
    return Context(
        unit=unit,
        profile=profile,
        mode=mode,
        current=current,
        scheduled=scheduled,
        gvk=gvk,
        gvk_error=gvk_error,
        selector=tuple(unit.cluster_selector.items()),
        required=required,
        preferred=compile_preferred(affinity.preferred),
        tolerations=tolerations,
        prefer_tolerations=prefer_no_schedule_tolerations(tolerations),
        request=dict(unit.resource_request),
        score_resources=score_resources(unit.resource_request),
        placements={name: placement_of(p) for name, p in unit.placements.items()},
    )
