"""Scheduling profiles: which plugins run in each phase, and the registries they come from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import types
from .filters import FILTER_PLUGINS
from .replicas import REPLICAS_PLUGINS
from .scores import SCORE_PLUGINS
from .select import SELECT_PLUGINS
from .types import UnitError

PHASES = ("filters", "scores", "select", "replicas")


@dataclass(frozen=True)
class Profile:
    """Which plugins run in each phase (upstream ``SchedulingProfile``).

    ``weights`` multiplies each score plugin's 0..100 score (default 1).
    ``dynamic_weights`` lets ``ClusterCapacityWeight`` use water-level
    weights when no placement sets a static weight (upstream always does;
    without it clusters weigh equally). ``estimate_capacity`` bounds each
    cluster by what its free resources can hold.
    """

    name: str
    filters: tuple[str, ...] = ()
    scores: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    replicas: tuple[str, ...] = ()
    weights: tuple[tuple[str, int], ...] | Mapping[str, int] = ()
    dynamic_weights: bool = True
    estimate_capacity: bool = True

    def __post_init__(self) -> None:
        for phase in PHASES:
            names = tuple(getattr(self, phase))
            registry = REGISTRIES[phase]
            for plugin in names:
                if plugin not in registry:
                    raise ValueError(f"profile {self.name!r}: unknown {phase} plugin {plugin!r}")
            if len(set(names)) != len(names):
                raise ValueError(f"profile {self.name!r}: a {phase} plugin is listed twice")
            object.__setattr__(self, phase, names)
        weights = self.weights.items() if isinstance(self.weights, Mapping) else self.weights
        object.__setattr__(self, "weights", tuple(sorted((str(k), int(v)) for k, v in weights)))

    def score_weight(self, plugin: str) -> int:
        for name, weight in self.weights:  # type: ignore[misc]
            if name == plugin:
                return weight
        return 1

    def derive(
        self,
        name: str,
        enabled: Mapping[str, Sequence[str]] | None = None,
        disabled: Mapping[str, Sequence[str]] | None = None,
        **changes: Any,
    ) -> Profile:
        """A new profile from this one, like upstream ``applyProfile``.

        Per phase, ``disabled`` removes plugins (``"*"`` removes them all) and
        ``enabled`` appends plugins after the remaining ones.
        """
        enabled = enabled or {}
        disabled = disabled or {}
        values: dict[str, Any] = {}
        for phase in PHASES:
            drop = set(disabled.get(phase, ()))
            kept = [] if "*" in drop else [p for p in getattr(self, phase) if p not in drop]
            values[phase] = tuple(kept) + tuple(enabled.get(phase, ()))
        values.update(weights=self.weights, dynamic_weights=self.dynamic_weights,
                      estimate_capacity=self.estimate_capacity)
        values.update(changes)
        return Profile(name=name, **values)


REGISTRIES: dict[str, Mapping[str, Any]] = {
    "filters": FILTER_PLUGINS,
    "scores": SCORE_PLUGINS,
    "select": SELECT_PLUGINS,
    "replicas": REPLICAS_PLUGINS,
}

#: Upstream's default plugins, plus ClusterReady (Meridian lists unready and cordoned clusters too).
DEFAULT_PROFILE = Profile(
    name="default",
    filters=(
        types.CLUSTER_READY, types.API_RESOURCES, types.TAINT_TOLERATION, types.CLUSTER_RESOURCES_FIT,
        types.PLACEMENT_FILTER, types.CLUSTER_AFFINITY,
    ),
    scores=(
        types.TAINT_TOLERATION, types.CLUSTER_RESOURCES_BALANCED_ALLOCATION, types.CLUSTER_RESOURCES_LEAST_ALLOCATED,
        types.CLUSTER_AFFINITY,
    ),
    select=(types.MAX_CLUSTER,),
    replicas=(types.CLUSTER_CAPACITY_WEIGHT,),
)

#: Profiles known by name (the API resolves a policy's ``schedulingProfile`` here).
PROFILES: dict[str, Profile] = {DEFAULT_PROFILE.name: DEFAULT_PROFILE}


def resolve_profile(profile: Profile | str) -> Profile:
    if isinstance(profile, Profile):
        return profile
    if profile in PROFILES:
        return PROFILES[profile]
    raise UnitError(f"unknown scheduling profile {profile!r}")
