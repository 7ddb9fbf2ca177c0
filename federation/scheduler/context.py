"""A unit prepared once per ``schedule`` call (:class:`_Context`), so plugins stay O(1) per cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from federation.planner import ClusterPreference
from kube.labels import Selector

from .terms import _compile_preferred, _Term
from .types import (
    _DEFAULT_RATIO,
    _RESOURCE_WEIGHTS,
    CPU,
    DIVIDE,
    DUPLICATE,
    EPHEMERAL_STORAGE,
    MEMORY,
    PREFER_NO_SCHEDULE,
    ClusterAffinity,
    ClusterInfo,
    Placement,
    SchedulingUnit,
    _UnitError,
)

if TYPE_CHECKING:
    from .profiles import Profile


def _gvk_spellings(gvk: str) -> frozenset[str]:
    """Every way a cluster may list the unit's GVK (core group with or without a leading slash)."""
    parts = gvk.split("/")
    if len(parts) == 2:
        parts = ["", *parts]
    if len(parts) != 3 or not parts[1] or not parts[2]:
        raise _UnitError(f"invalid GVK {gvk!r}: want group/version/Kind or version/Kind")
    group, version, kind = parts
    if group in ("", "core"):
        return frozenset({f"{version}/{kind}", f"/{version}/{kind}", f"core/{version}/{kind}"})
    return frozenset({f"{group}/{version}/{kind}"})


def _placement(value: Any) -> Placement:
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


def _affinity(value: ClusterAffinity | Mapping[str, Any] | None) -> ClusterAffinity:
    if value is None:
        return ClusterAffinity()
    if isinstance(value, ClusterAffinity):
        return value
    return ClusterAffinity.from_dict(value)


@dataclass
class _Context:
    """The unit prepared once per ``schedule`` call, so plugins stay O(1) per cluster."""

    unit: SchedulingUnit
    profile: Profile
    mode: str
    current: dict[str, int | None]
    scheduled: frozenset[str]
    gvk: frozenset[str] | None
    gvk_error: str | None
    selector: tuple[tuple[str, str], ...]
    required: tuple[_Term, ...] | None
    preferred: tuple[tuple[int, Selector], ...]
    tolerations: tuple[Mapping[str, str], ...]
    prefer_tolerations: tuple[Mapping[str, str], ...]
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


def _score_resources(request: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """cpu, memory and every other requested resource, with upstream's ratio weights."""
    names = [CPU, MEMORY] + sorted(r for r in request if r not in (CPU, MEMORY, EPHEMERAL_STORAGE))
    return tuple((name, _RESOURCE_WEIGHTS.get(name, _DEFAULT_RATIO)) for name in names)


def _prepare(unit: SchedulingUnit, profile: Profile, clusters: Sequence[ClusterInfo]) -> _Context:
    mode = DUPLICATE if unit.scheduling_mode == DUPLICATE or unit.desired_replicas is None else DIVIDE
    current = _merged_current(unit, clusters)
    scheduled = frozenset(name for name, replicas in current.items() if replicas is None or replicas > 0)
    try:
        gvk, gvk_error = _gvk_spellings(unit.gvk), None
    except _UnitError as exc:
        gvk, gvk_error = None, str(exc)
    affinity = _affinity(unit.cluster_affinity)
    required = None if affinity.required is None else tuple(_Term.compile(t) for t in affinity.required)
    tolerations = tuple(unit.tolerations)
    return _Context(
        unit=unit,
        profile=profile,
        mode=mode,
        current=current,
        scheduled=scheduled,
        gvk=gvk,
        gvk_error=gvk_error,
        selector=tuple(unit.cluster_selector.items()),
        required=required,
        preferred=_compile_preferred(affinity.preferred),
        tolerations=tolerations,
        prefer_tolerations=tuple(t for t in tolerations if (t.get("effect") or "") in ("", PREFER_NO_SCHEDULE)),
        request=dict(unit.resource_request),
        score_resources=_score_resources(unit.resource_request),
        placements={name: _placement(p) for name, p in unit.placements.items()},
    )
