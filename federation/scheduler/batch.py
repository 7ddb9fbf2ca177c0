"""Many units over the same clusters (a fleet-wide reschedule): :class:`ClusterSnapshot` and
:func:`schedule_many` give :func:`schedule`'s results field by field while sharing the work
of units with the same inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from federation.planner import ClusterPreference
from kube.labels import Selector
from kube.taints import Toleration, parse_tolerations, prefer_no_schedule_tolerations

from . import explain as narrative
from .context import Context, affinity_of, gvk_spellings, placement_of, score_resources
from .filters import filter_plugins, filter_reasons
from .framework import apply_replica_plan, keep_sticky, replicas_skipped, schedule
from .profiles import DEFAULT_PROFILE, PHASES, PROFILES, REGISTRIES, Profile
from .replicas import plan_replicas, replica_inputs
from .scores import SCORE_PLUGINS, default_normalize_score
from .select import run_select
from .terms import Term, compile_preferred
from .types import (
    DIVIDE,
    DUPLICATE,
    ClusterAffinity,
    ClusterInfo,
    Placement,
    ScheduleResult,
    SchedulingUnit,
    UnitError,
)

# --------------------------------------------------------------------------- batch scheduling
#
# A fleet-wide reschedule runs thousands of units over the same clusters, and most units
# share a policy: the same filters, selector, tolerations and request give the same
# filter and score results on every cluster. ClusterSnapshot computes each phase once per
# *signature* of exactly the unit inputs that phase reads, and does per unit only what
# depends on the unit alone (where it runs today, its replica count, its key).


class _Uncacheable(Exception):
    """A unit input has no canonical hashable form; such a unit takes the plain path."""


def _freeze_json(value: Any) -> tuple[Any, ...]:
    """Hashable canonical form of decoded JSON (affinity terms).

    Dict key order is ignored and lists equal tuples (the plugins only
    ``.get`` keys and iterate sequences); scalars keep their exact type, since
    1, 1.0 and True print differently. Anything else raises ``_Uncacheable``.
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return (kind, value)
    if kind is list or kind is tuple:
        return (list, tuple(_freeze_json(item) for item in value))
    if kind is dict:
        items = []
        for key, item in value.items():
            if type(key) is not str:
                raise _Uncacheable(key)
            items.append((key, _freeze_json(item)))
        items.sort(key=lambda pair: pair[0])
        return (dict, tuple(items))
    raise _Uncacheable(value)


def _typed(value: Any) -> tuple[type, Any]:
    """A value with its exact type: equal but differently typed numbers must not share results."""
    return (type(value), value)




def _request_key(request: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The resource request, order-free; only exact ``str -> int`` requests are cached."""
    for name, amount in request.items():
        if type(name) is not str or type(amount) is not int:
            raise _Uncacheable(name)
    return tuple(sorted(request.items()))


def _selector_key(selector: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The clusterSelector in its own order (the failure reason prints it in that order)."""
    items = tuple(selector.items())
    for key, value in items:
        if type(key) is not str or type(value) is not str:
            raise _Uncacheable(key)
    return items


def _placements_key(placements: Mapping[str, Placement]) -> frozenset[tuple[Any, ...]]:
    return frozenset(
        (name, _typed(p.weight), _typed(p.min_replicas), _typed(p.max_replicas)) for name, p in placements.items()
    )


@dataclass(frozen=True)
class _UnitKeys:
    """What each phase reads from a unit, as cache keys (see :class:`ClusterSnapshot`).

    ``filters``: GVK, tolerations, request, placement names, clusterSelector,
    required affinity. ``scores``: tolerations (PreferNoSchedule), request,
    preferred affinity. ``select``: maxClusters. ``replicas``: placements
    (weights, min, max), tolerations (NoSchedule), request. Per-unit inputs
    (current replicas, avoid_migration, replicas, key, mode) are in no key:
    they are applied per unit.
    """

    filters: tuple[Any, ...]
    scores: tuple[Any, ...]
    select: tuple[Any, ...]
    replicas: tuple[Any, ...]


# ------------------------------------------------------------------ the shapes the caches key
#
# The caches key a unit by canonical forms of its inputs. Whether an input has one is decided
# here, up front and by type, not by catching whatever building the context raises: a unit
# whose inputs are all of these shapes is prepared without any exception (an exception there
# is a bug and surfaces), and any other unit takes the plain path, where schedule() reports or
# raises exactly what it always does. The shapes are what policies produce (decoded JSON with
# string labels and integer amounts); tuples are accepted where lists are, as the keys treat
# them alike.

_SEQUENCES = (list, tuple)


def _sequence(value: Any, *, falsy_ok: bool = True) -> Sequence[Any]:
    """A list or tuple; also any falsy value when ``falsy_ok`` (the scheduler reads it ``or []``)."""
    if type(value) in _SEQUENCES:
        return value
    if falsy_ok and not value:
        return ()
    raise _Uncacheable(value)


def _check_expressions(expressions: Any) -> None:
    """``matchExpressions``/``matchFields`` entries: a non-object entry is a unit error the
    scheduler reports; an object needs a hashable operator and a list of values."""
    for expr in _sequence(expressions):
        if type(expr) is dict:
            if type(expr.get("operator")) in (list, dict):
                raise _Uncacheable(expr)
            _sequence(expr.get("values"))


def _check_term(term: Any) -> None:
    """A required cluster selector term: empty, or an object of expressions and fields."""
    if not term:
        return
    if type(term) is not dict:
        raise _Uncacheable(term)
    _check_expressions(term.get("matchExpressions"))
    _check_expressions(term.get("matchFields"))


def _check_preference(term: Any) -> None:
    """A preferred term: an object with an integer weight and a preference of expressions."""
    if type(term) is not dict or type(term.get("weight")) not in (int, type(None)):
        raise _Uncacheable(term)
    preference = term.get("preference")
    if preference and type(preference) is not dict:
        raise _Uncacheable(preference)
    _check_expressions((preference or {}).get("matchExpressions"))


def _shaped_affinity(value: Any) -> tuple[ClusterAffinity, Any, Any]:
    """The unit's affinity (None, a ``ClusterAffinity`` or a JSON object) whose terms have the
    shapes above, with the keys of its required and preferred terms."""
    if type(value) is dict:
        required = value.get("required", value.get("requiredDuringSchedulingIgnoredDuringExecution"))
        if type(required) is dict:
            _sequence(required.get("clusterSelectorTerms"))
        elif required is not None:
            _sequence(required, falsy_ok=False)
        _sequence(value.get("preferred", value.get("preferredDuringSchedulingIgnoredDuringExecution")))
    elif value is not None and type(value) is not ClusterAffinity:
        raise _Uncacheable(value)
    affinity = affinity_of(value)
    required_key = None if affinity.required is None else _freeze_json(_sequence(affinity.required, falsy_ok=False))
    preferred_key = _freeze_json(_sequence(affinity.preferred, falsy_ok=False))
    for term in affinity.required or ():
        _check_term(term)
    for term in affinity.preferred:
        _check_preference(term)
    return affinity, required_key, preferred_key


def _shaped_tolerations(tolerations: Any) -> tuple[Toleration, ...]:
    """Tolerations as objects whose key, operator, value and effect are strings (or absent), parsed
    as matching reads them: hashable, and two that parse equal tolerate the same taints, so the
    parsed tolerations are their own cache key."""
    shaped = tuple(_sequence(tolerations, falsy_ok=False))
    for toleration in shaped:
        if type(toleration) is not dict:
            raise _Uncacheable(toleration)
        for name in ("key", "operator", "value", "effect"):
            if type(toleration.get(name)) not in (str, type(None)):
                raise _Uncacheable(toleration)
    return parse_tolerations(shaped)


_PLACEMENT_TYPES = (Placement, ClusterPreference, dict, type(None))


def _shaped_placements(placements: Any) -> dict[str, Placement]:
    """Placements by cluster name, each with integer weight, min and max (or no weight/max)."""
    if type(placements) is not dict:
        raise _Uncacheable(placements)
    shaped = {}
    for name, value in placements.items():
        if type(name) is not str or type(value) not in _PLACEMENT_TYPES:
            raise _Uncacheable(name)
        placement = placement_of(value)
        if (type(placement.weight) not in (int, type(None)) or type(placement.min_replicas) is not int
                or type(placement.max_replicas) not in (int, type(None))):
            raise _Uncacheable(placement)
        shaped[name] = placement
    return shaped


@dataclass(frozen=True)
class _UnitInputs:
    """A unit's inputs in the shapes the caches key, and their keys."""

    affinity: ClusterAffinity
    tolerations: tuple[Toleration, ...]
    request: dict[str, int]
    selector: tuple[tuple[str, str], ...]
    placements: dict[str, Placement]
    required_key: Any
    preferred_key: Any
    keys: _UnitKeys


def _unit_inputs(unit: SchedulingUnit) -> _UnitInputs:
    """The unit's cacheable inputs and keys; ``_Uncacheable`` names the first input that has no
    canonical form (the unit then takes the plain path)."""
    if type(unit.gvk) is not str:
        raise _Uncacheable(unit.gvk)
    if type(unit.current_clusters) is not dict:
        raise _Uncacheable(unit.current_clusters)
    if type(unit.max_clusters) not in (int, type(None)):
        raise _Uncacheable(unit.max_clusters)
    if type(unit.resource_request) is not dict or type(unit.cluster_selector) is not dict:
        raise _Uncacheable(unit)
    affinity, required_key, preferred_key = _shaped_affinity(unit.cluster_affinity)
    tolerations = _shaped_tolerations(unit.tolerations)
    request = dict(unit.resource_request)
    request_key = _request_key(request)
    selector = _selector_key(unit.cluster_selector)
    placements = _shaped_placements(unit.placements)
    keys = _UnitKeys(
        filters=(unit.gvk, tolerations, request_key, frozenset(placements), selector, required_key),
        scores=(tolerations, request_key, preferred_key),
        select=_typed(unit.max_clusters),
        replicas=(_placements_key(placements), tolerations, request_key),
    )
    return _UnitInputs(affinity, tolerations, request, selector, placements, required_key, preferred_key, keys)


class _BoundedCache(dict):  # type: ignore[type-arg]
    """A dict that forgets its oldest entry beyond ``limit`` entries.

    Signatures are few in practice (policies × request shapes), but a stream
    of one-off units must not grow memory without bound.
    """

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: Any, value: Any) -> Any:
        if len(self) >= self.limit:
            del self[next(iter(self))]
        self[key] = value
        return value


@dataclass(frozen=True)
class _FilterBase:
    """Filter results for a unit that runs nowhere yet: ``reasons`` per cluster index (None = passes)."""

    reasons: tuple[tuple[str, ...] | None, ...]
    feasible: tuple[int, ...]
    filtered: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class _Phases:
    """Scores and selection over one feasible set; ``error`` is the select phase's unit error."""

    feasible: list[str]
    scores: dict[str, dict[str, int]]
    totals: dict[str, int]
    selected: list[str]
    not_selected: dict[str, str]
    error: str | None


class _ProfileCaches:
    """One profile's caches: phase results differ between profiles for the same unit."""

    def __init__(self, limit: int) -> None:
        self.filters = _BoundedCache(limit)
        self.raw_scores = _BoundedCache(limit)
        self.phases = _BoundedCache(limit)
        self.replicas = _BoundedCache(limit * 4)


#: The plugins whose inputs the snapshot's cache keys cover, as registered at import. A
#: profile using anything else (or a plugin replaced in a registry later) is scheduled
#: through plain :func:`schedule`, uncached.
_BUILTIN_PLUGINS: dict[str, dict[str, Any]] = {phase: dict(registry) for phase, registry in REGISTRIES.items()}


def _profile_plugins(profile: Profile) -> tuple[tuple[Mapping[str, Any], str, Any], ...] | None:
    """(registry, name, built-in plugin) for every plugin of the profile; None if one is not built in."""
    plugins = []
    for phase in PHASES:
        registry, builtin = REGISTRIES[phase], _BUILTIN_PLUGINS[phase]
        for name in getattr(profile, phase):
            if name not in builtin:
                return None
            plugins.append((registry, name, builtin[name]))
    return tuple(plugins)


class ClusterSnapshot:
    """The clusters prepared once for scheduling many units (a fleet-wide reschedule).

    ``snapshot.schedule(unit)`` returns exactly what ``schedule(unit,
    clusters, profile)`` returns, field by field, except that with
    ``explain=False`` the ``explanation`` is left empty (building ~one line
    per cluster per unit costs about as much as the scheduling itself).

    Why it is faster: filter, score and select results are cached per
    *signature*, the unit inputs those phases read (see :class:`_UnitKeys`),
    computed as if the unit ran nowhere. Clusters where the unit runs today
    are the only ones whose filter result can depend on the unit alone
    (ClusterReady with cordoning and avoid_migration, NoSchedule taints and
    resource fit are relaxed there), so they are re-filtered per unit; when
    that changes which clusters are feasible, the clusters that flipped become
    part of the score/select key (normalised scores depend on the feasible
    set). The replicas phase caches weights, min/max and free room per chosen
    cluster list and placements; caps from current replicas, capacities and
    the planner itself run per unit. A unit whose inputs have no canonical
    hashable form, or a profile with plugins the snapshot does not know, goes
    through plain :func:`schedule`.

    The snapshot is the cluster state when it was built: build a new one when
    clusters change, and do not mutate the ``ClusterInfo`` objects while using
    it. Not thread-safe; use one per worker (they are cheap to build).
    Duplicate cluster names raise ``ValueError`` here, as :func:`schedule` does.
    """

    def __init__(
        self,
        clusters: Sequence[ClusterInfo],
        profile: Profile | str = DEFAULT_PROFILE,
        *,
        explain: bool = True,
        cache_size: int = 1024,
    ) -> None:
        self.clusters: tuple[ClusterInfo, ...] = tuple(clusters)
        self.names: tuple[str, ...] = tuple(c.name for c in self.clusters)
        if len(set(self.names)) != len(self.names):
            raise ValueError("cluster names must be unique")
        self.profile = profile
        self.explain = explain
        self._index = {name: i for i, name in enumerate(self.names)}
        self._reported_current = [(c.name, c.current_replicas) for c in self.clusters if c.current_replicas]
        self._cache_size = cache_size
        self._profiles: dict[Profile, _ProfileCaches] = {}
        self._plugins: dict[Profile, tuple[tuple[Mapping[str, Any], str, Any], ...] | None] = {}
        self._gvks: dict[str, tuple[frozenset[str] | None, str | None]] = {}
        self._required: _BoundedCache = _BoundedCache(cache_size)
        self._preferred: _BoundedCache = _BoundedCache(cache_size)
        #: How units were served: "cached" (shared phase results) or "plain" (through schedule()).
        self.stats = {"cached": 0, "plain": 0}

    # ------------------------------------------------------------------ entry points

    def schedule(
        self,
        unit: SchedulingUnit,
        profile: Profile | str | None = None,
        *,
        explain: bool | None = None,
    ) -> ScheduleResult:
        """Schedule one unit; ``profile`` and ``explain`` default to the snapshot's."""
        profile = self.profile if profile is None else profile
        explain = self.explain if explain is None else explain
        prepared = self._prepare(unit, profile)
        if prepared is None:
            return self._plain(unit, profile, explain)
        self.stats["cached"] += 1
        ctx, keys, preferred_error = prepared
        result = ScheduleResult(profile=ctx.profile.name if isinstance(profile, Profile) else profile)
        if preferred_error is not None:
            return self._fail(result, preferred_error, explain)
        if explain:
            result.explanation.append(narrative.header_line(ctx, len(self.clusters)))
        if unit.sticky_cluster and ctx.current:
            keep_sticky(ctx, result)
            if explain:
                narrative.explain_sticky(result, self.clusters)
            return result
        try:
            self._schedule(ctx, keys, result, explain)
        except UnitError as exc:
            return self._fail(result, str(exc), explain)
        return result

    def schedule_many(
        self,
        units: Iterable[SchedulingUnit],
        profile: Profile | str | None = None,
        *,
        explain: bool | None = None,
    ) -> Iterator[ScheduleResult]:
        """Results in the order of ``units``, lazily (a reschedule can stream them to storage)."""
        for unit in units:
            yield self.schedule(unit, profile, explain=explain)

    # ------------------------------------------------------------------ unit preparation

    def _plain(self, unit: SchedulingUnit, profile: Profile | str, explain: bool) -> ScheduleResult:
        """The uncached reference path, for inputs the caches cannot key."""
        self.stats["plain"] += 1
        result = schedule(unit, self.clusters, profile)
        if not explain:
            result.explanation = []
        return result

    def _fail(self, result: ScheduleResult, message: str, explain: bool) -> ScheduleResult:
        if explain:
            return narrative.fail_result(result, message, self.clusters)
        result.error = message
        result.clusters = {}
        return result

    def _prepare(
        self, unit: SchedulingUnit, profile: Profile | str
    ) -> tuple[Context, _UnitKeys, str | None] | None:
        """The unit's context and cache keys, or None to take the plain path.

        Mirrors :func:`prepare` with cached compilation. The plain path serves
        exactly three cases, each named: a profile given by an unknown name, a
        profile with plugins the caches do not cover, and inputs outside the
        shapes the cache keys can key (:func:`_unit_inputs` says which, by
        raising ``_Uncacheable``); :func:`schedule` then reports or raises
        what it always does for them. Any other exception is a bug and
        surfaces. The third item is an invalid preferred affinity, which fails
        the unit like upstream.
        """
        if isinstance(profile, Profile):
            prof = profile
        elif isinstance(profile, str) and profile in PROFILES:
            prof = PROFILES[profile]
        else:
            return None
        if not self._builtin_plugins_only(prof):
            return None
        try:
            inputs = _unit_inputs(unit)
        except _Uncacheable:
            return None
        return self._context(unit, prof, inputs)

    def _context(self, unit: SchedulingUnit, prof: Profile, inputs: _UnitInputs) -> tuple[Context, _UnitKeys, str | None]:
        current: dict[str, int | None] = dict(unit.current_clusters)
        for name, replicas in self._reported_current:
            if name not in current:
                current[name] = replicas
        affinity, keys = inputs.affinity, inputs.keys
        preferred, preferred_error = self._compiled_preferred(inputs.preferred_key, affinity.preferred)
        gvk, gvk_error = self._gvk(unit.gvk)
        tolerations = inputs.tolerations
        ctx = Context(
            unit=unit,
            profile=prof,
            mode=DUPLICATE if unit.scheduling_mode == DUPLICATE or unit.desired_replicas is None else DIVIDE,
            current=current,
            scheduled=frozenset(name for name, replicas in current.items() if replicas is None or replicas > 0),
            gvk=gvk,
            gvk_error=gvk_error,
            selector=inputs.selector,
            required=None if affinity.required is None else self._compiled_required(inputs.required_key, affinity.required),
            preferred=preferred,
            tolerations=tolerations,
            prefer_tolerations=prefer_no_schedule_tolerations(tolerations),
            request=inputs.request,
            score_resources=score_resources(inputs.request),
            placements=inputs.placements,
        )
        return ctx, keys, preferred_error

    def _builtin_plugins_only(self, prof: Profile) -> bool:
        """Whether the registries still hold the built-in plugins this profile names (checked per unit)."""
        if prof not in self._plugins:
            self._plugins[prof] = _profile_plugins(prof)
        plugins = self._plugins[prof]
        return plugins is not None and all(registry.get(name) is plugin for registry, name, plugin in plugins)

    def _gvk(self, gvk: str) -> tuple[frozenset[str] | None, str | None]:
        known = self._gvks.get(gvk)
        if known is None:
            try:
                known = (gvk_spellings(gvk), None)
            except UnitError as exc:
                known = (None, str(exc))
            self._gvks[gvk] = known
        return known

    def _compiled_required(self, key: Any, terms: Sequence[Mapping[str, Any] | None]) -> tuple[Term, ...]:
        compiled = self._required.get(key)
        if compiled is None:
            compiled = self._required.remember(key, tuple(Term.compile(t) for t in terms))
        return compiled

    def _compiled_preferred(
        self, key: Any, preferred: Sequence[Mapping[str, Any]]
    ) -> tuple[tuple[tuple[int, Selector], ...], str | None]:
        compiled = self._preferred.get(key)
        if compiled is None:
            try:
                compiled = (compile_preferred(preferred), None)
            except UnitError as exc:
                compiled = ((), str(exc))
            self._preferred.remember(key, compiled)
        return compiled

    def _caches(self, prof: Profile) -> _ProfileCaches:
        caches = self._profiles.get(prof)
        if caches is None:
            caches = self._profiles[prof] = _ProfileCaches(self._cache_size)
        return caches

    # ------------------------------------------------------------------ phases

    def _schedule(self, ctx: Context, keys: _UnitKeys, result: ScheduleResult, explain: bool) -> None:
        """:func:`_schedule` over cached phase results (same order of fields and lines)."""
        prof = ctx.profile
        caches = self._caches(prof)
        base = self._filter_base(ctx, caches, keys)
        reasons, flipped = self._refilter_where_running(ctx, base)
        result.filtered = self._filtered(base, reasons)
        phases = self._phases(ctx, caches, keys, base, reasons, flipped)
        result.feasible = list(phases.feasible)
        if explain:
            narrative.explain_filters(result, self.clusters, prof)
        if not phases.feasible:
            if explain:
                narrative.explain_result(result)
            return
        result.share_scores(phases.scores)
        result.total_scores = dict(phases.totals)
        if explain:
            narrative.explain_scores(result, prof)
        if phases.error is not None:
            raise UnitError(phases.error)
        result.selected = list(phases.selected)
        result.not_selected = dict(phases.not_selected)
        if explain:
            narrative.explain_select(result, prof, ctx.unit.max_clusters)
        if ctx.mode == DUPLICATE:
            result.clusters = dict.fromkeys(result.selected)
            if explain:
                result.explanation.append(narrative.DUPLICATE_LINE)
        else:
            self._replicas(ctx, caches, keys, result, explain)
        if explain:
            narrative.explain_result(result)

    def _filter_base(self, ctx: Context, caches: _ProfileCaches, keys: _UnitKeys) -> _FilterBase:
        """Every cluster's filter reasons for a unit running nowhere, cached per filter key.

        With no current replicas the filter plugins read only the key's inputs
        and the cluster, so any unit with the same key gets the same reasons.
        """
        base = caches.filters.get(keys.filters)
        if base is not None:
            return base
        nowhere = replace(ctx, current={}, scheduled=frozenset())
        plugins = filter_plugins(ctx.profile)
        reasons = tuple(tuple(filter_reasons(nowhere, plugins, c)) or None for c in self.clusters)
        base = _FilterBase(
            reasons=reasons,
            feasible=tuple(i for i, why in enumerate(reasons) if why is None),
            filtered={self.names[i]: why for i, why in enumerate(reasons) if why is not None},
        )
        return caches.filters.remember(keys.filters, base)

    def _refilter_where_running(
        self, ctx: Context, base: _FilterBase
    ) -> tuple[dict[int, tuple[str, ...] | None], tuple[int, ...]]:
        """Filter the clusters the unit runs on with the real context.

        Returns the reasons that differ from the base (by cluster index) and
        the indices whose pass/fail flipped, which change the feasible set.
        """
        changed: dict[int, tuple[str, ...] | None] = {}
        plugins = None
        for name in ctx.scheduled:
            i = self._index.get(name)
            if i is None:
                continue
            plugins = plugins or filter_plugins(ctx.profile)
            reasons = tuple(filter_reasons(ctx, plugins, self.clusters[i])) or None
            if reasons != base.reasons[i]:
                changed[i] = reasons
        flipped = tuple(sorted(i for i, why in changed.items() if (why is None) != (base.reasons[i] is None)))
        return changed, flipped

    def _filtered(self, base: _FilterBase, changed: Mapping[int, tuple[str, ...] | None]) -> dict[str, list[str]]:
        """``ScheduleResult.filtered`` in cluster order, as fresh lists (results are mutable)."""
        if not changed:
            return dict(zip(base.filtered, map(list, base.filtered.values())))
        filtered: dict[str, list[str]] = {}
        for i, name in enumerate(self.names):
            why = changed[i] if i in changed else base.reasons[i]
            if why is not None:
                filtered[name] = list(why)
        return filtered

    def _phases(
        self,
        ctx: Context,
        caches: _ProfileCaches,
        keys: _UnitKeys,
        base: _FilterBase,
        changed: Mapping[int, tuple[str, ...] | None],
        flipped: tuple[int, ...],
    ) -> _Phases:
        """Scores and selection for the unit's feasible set, cached.

        The key is the filter key plus the flipped clusters (which, with the
        base, determine the feasible set), the score key and maxClusters.
        """
        key = (keys.filters, flipped, keys.scores, keys.select)
        phases = caches.phases.get(key)
        if phases is not None:
            return phases
        if flipped:
            feasible = [i for i, why in enumerate(base.reasons) if changed.get(i, why) is None]
        else:
            feasible = list(base.feasible)
        scores, totals = self._scores(ctx, caches, keys, feasible)
        names = [self.names[i] for i in feasible]
        selected: list[str] = []
        not_selected: dict[str, str] = {}
        error = None
        if feasible:
            try:
                selected, not_selected = run_select(ctx, names, totals)
            except UnitError as exc:
                error = str(exc)
        return caches.phases.remember(key, _Phases(names, scores, totals, selected, not_selected, error))

    def _scores(
        self, ctx: Context, caches: _ProfileCaches, keys: _UnitKeys, feasible: Sequence[int]
    ) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """:func:`run_scores` with each cluster's raw (unnormalised) scores cached per score key."""
        prof = ctx.profile
        plugins = [SCORE_PLUGINS[name] for name in prof.scores]
        raw = caches.raw_scores.get(keys.scores)
        if raw is None:
            raw = caches.raw_scores.remember(keys.scores, {})
        rows = []
        for i in feasible:
            row = raw.get(i)
            if row is None:
                row = raw[i] = tuple(plugin.score(ctx, self.clusters[i]) for plugin in plugins)
            rows.append(row)
        per_cluster: dict[str, dict[str, int]] = {self.names[i]: {} for i in feasible}
        totals = dict.fromkeys(per_cluster, 0)
        for column, (name, plugin) in enumerate(zip(prof.scores, plugins)):
            scores = {self.names[i]: row[column] for i, row in zip(feasible, rows)}
            if plugin.normalize:
                default_normalize_score(scores, plugin.reverse)
            weight = prof.score_weight(name)
            for cluster, score in scores.items():
                per_cluster[cluster][name] = score
                totals[cluster] += weight * score
        return per_cluster, totals

    def _replicas(
        self, ctx: Context, caches: _ProfileCaches, keys: _UnitKeys, result: ScheduleResult, explain: bool
    ) -> None:
        """:func:`_replicas_phase` with the unit-independent inputs cached per chosen clusters."""
        skipped = replicas_skipped(ctx, bool(result.selected))
        if skipped is not None:
            if explain:
                result.explanation.append(skipped)
            return
        key = (keys.replicas, tuple(result.selected))
        inputs = caches.replicas.get(key)
        if inputs is None:
            chosen = [self.clusters[self._index[name]] for name in result.selected]
            inputs = caches.replicas.remember(key, replica_inputs(ctx, chosen))
        plan_ = plan_replicas(ctx, inputs)
        apply_replica_plan(result, ctx, plan_)
        if explain:
            narrative.explain_replicas(result, ctx, plan_)


def schedule_many(
    units: Iterable[SchedulingUnit],
    clusters: Sequence[ClusterInfo],
    profile: Profile | str = DEFAULT_PROFILE,
    *,
    explain: bool = True,
) -> Iterator[ScheduleResult]:
    """``schedule(unit, clusters, profile)`` for every unit, sharing work between them.

    One :class:`ClusterSnapshot` serves the whole batch, so results equal
    :func:`schedule`'s field by field (``explanation`` is empty with
    ``explain=False``, the fast mode for reschedules that store placements
    only). Lazy: results come in the order of ``units`` as they are
    consumed; duplicate cluster names raise ``ValueError`` as soon as
    iteration starts (even with no units).
    """
    snapshot = ClusterSnapshot(clusters, profile, explain=explain)
    yield from snapshot.schedule_many(units)
