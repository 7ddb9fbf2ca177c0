"""Taints and tolerations with the semantics of ``k8s.io/api/core/v1`` (``Toleration.ToleratesTaint``,
``Taint.ToString``) and ``k8s.io/component-helpers/scheduling/corev1`` (``TolerationsTolerateTaint``,
``FindMatchingUntoleratedTaint``).

A toleration tolerates a taint when its effect is empty or equal to the taint's, its key is empty
or equal to the taint's, and its operator is ``Exists`` (any value) or ``Equal`` / empty (the same
value, an absent value being ``""``).  Any other operator tolerates nothing: ``Gt``/``Lt`` are behind
the off-by-default ``TaintTolerationComparisonOperators`` gate, and operators are case-sensitive.
An empty key with ``Exists`` therefore tolerates every taint; validation forbids an empty key with
``Equal``, but matching does not (it tolerates every taint without a value), and ``Exists`` ignores
a value that validation would refuse.  Both the scheduler (pods on nodes) and the federation
scheduler (workloads on member clusters) match through here.

Taints and tolerations are decoded JSON.  A toleration Kubernetes could not decode (not an object,
or a field that is neither a string nor ``null``) tolerates nothing; taints are read leniently
(``.get(field) or ""``), since they come from node and cluster objects the API server stored.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EQUAL",
    "EXISTS",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "PREFER_NO_SCHEDULE",
    "TAINT_EFFECTS",
    "TOLERATION_OPERATORS",
    "Toleration",
    "count_intolerable_prefer_no_schedule",
    "find_untolerated_taint",
    "parse_toleration",
    "parse_tolerations",
    "prefer_no_schedule_tolerations",
    "taint_to_string",
    "tolerates_taint",
    "tolerations_tolerate",
]

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
#: The effects validation accepts (``validateTaintEffect``), in upstream's order.
TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

EQUAL = "Equal"
EXISTS = "Exists"
#: The operators validation accepts (an empty operator means ``Equal``).
TOLERATION_OPERATORS = (EQUAL, EXISTS)

_FIELDS = ("key", "operator", "value", "effect")


def _taint_field(taint: Mapping[str, Any], name: str) -> Any:
    return taint.get(name) or ""


@dataclass(frozen=True, slots=True)
class Toleration:
    """A ``v1.Toleration`` as matching reads it (``tolerationSeconds`` plays no part); hashable,
    so a pod's tolerations can key a cache."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        """``Toleration.ToleratesTaint`` (comparison operators off, as the feature gate is by default)."""
        if self.effect and self.effect != _taint_field(taint, "effect"):
            return False
        if self.key and self.key != _taint_field(taint, "key"):
            return False
        if self.operator in ("", EQUAL):
            return self.value == _taint_field(taint, "value")
        return self.operator == EXISTS


def parse_toleration(raw: Any) -> Toleration | None:
    """A decoded toleration, or None when Kubernetes could not decode it (it then tolerates nothing)."""
    if not isinstance(raw, Mapping):
        return None
    fields = {name: raw.get(name) for name in _FIELDS}
    if any(value is not None and not isinstance(value, str) for value in fields.values()):
        return None
    return Toleration(**{name: value or "" for name, value in fields.items()})


def parse_tolerations(raw: Any) -> tuple[Toleration, ...]:
    """A ``tolerations`` list (absent or not a list: none), leaving out what cannot be decoded."""
    if not isinstance(raw, (list, tuple)):
        return ()
    return tuple(t for t in map(parse_toleration, raw) if t is not None)


def tolerates_taint(toleration: Toleration | Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """:meth:`Toleration.tolerates` for a toleration given as decoded JSON too."""
    if not isinstance(toleration, Toleration):
        parsed = parse_toleration(toleration)
        if parsed is None:
            return False
        toleration = parsed
    return toleration.tolerates(taint)


def tolerations_tolerate(tolerations: Iterable[Toleration], taint: Mapping[str, Any]) -> bool:
    """``TolerationsTolerateTaint``: some toleration tolerates the taint."""
    return any(t.tolerates(taint) for t in tolerations)


def find_untolerated_taint(
    taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Toleration], effects: Collection[str]
) -> Mapping[str, Any] | None:
    """``FindMatchingUntoleratedTaint`` over the taints with one of ``effects``: the first one
    no toleration tolerates, or None."""
    for taint in taints:
        if taint.get("effect") in effects and not tolerations_tolerate(tolerations, taint):
            return taint
    return None


def prefer_no_schedule_tolerations(tolerations: Iterable[Toleration]) -> tuple[Toleration, ...]:
    """``getAllTolerationPreferNoSchedule``: an empty effect means every effect, PreferNoSchedule included."""
    return tuple(t for t in tolerations if t.effect in ("", PREFER_NO_SCHEDULE))


def count_intolerable_prefer_no_schedule(taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Toleration]) -> int:
    """``countIntolerableTaintsPreferNoSchedule``; pass :func:`prefer_no_schedule_tolerations`."""
    return sum(
        1 for taint in taints if taint.get("effect") == PREFER_NO_SCHEDULE and not tolerations_tolerate(tolerations, taint)
    )


def taint_to_string(taint: Mapping[str, Any]) -> str:
    """``Taint.ToString``: ``key=value:effect``, ``key=value:``, ``key:effect`` or ``key`` (as kubectl prints taints)."""
    key, value, effect = (str(_taint_field(taint, name)) for name in ("key", "value", "effect"))
    if not effect:
        return f"{key}={value}:" if value else key
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"
