"""Whether two same-priority label selectors could ever select the same node.

Reference: ``checkLabelSelectorOverlap`` and ``getMatchValueSet`` in
``kubewharf/katalyst-core`` ``pkg/controller/kcc/kcct.go``.  The check is deliberately
conservative: it may report a conflict that no real label set produces, but it must never
miss one, because two targets matching one node at the same priority leave that node
without a config.

Per key of the allowed-key list, each selector contributes an *equal set* (values of
``=``, ``==`` and ``in``) and a *not-equal set* (values of ``!=`` and ``notin``).  Upstream
gives up on a key when any requirement on it uses another operator (exists, ``!key``,
``gt``, ``lt``): both sets for that key are then empty, i.e. the selector is treated as
unconstrained there.  Keys outside the allowed list are ignored entirely, and an empty
allowed list means the selectors always may conflict.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from kube.labels import Operator, SelectorError, parse_selector

__all__ = ["SelectorError", "KeyConstraint", "key_constraints", "selectors_may_conflict"]

KeyConstraint = tuple[frozenset[str], frozenset[str]]
"""(equal values, not-equal values) of one selector for one key."""

_EMPTY: KeyConstraint = (frozenset(), frozenset())
_EQUAL_OPS = frozenset({Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN})
_NOT_EQUAL_OPS = frozenset({Operator.NOT_EQUALS, Operator.NOT_IN})


@functools.lru_cache(maxsize=8192)
def key_constraints(selector: str) -> Mapping[str, KeyConstraint]:
    """Equal / not-equal value sets per key of ``selector`` (parsed once, then cached).

    Keys whose requirements include an operator other than the equality family map to two
    empty sets, as upstream discards what it collected for such a key.  Raises
    :class:`~kube.labels.SelectorError` for text Kubernetes would not parse.
    """
    equal: dict[str, set[str]] = {}
    not_equal: dict[str, set[str]] = {}
    unsupported: set[str] = set()
    for req in parse_selector(selector).requirements:
        key = req.key
        if req.operator in _EQUAL_OPS:
            equal.setdefault(key, set()).update(req.values)
        elif req.operator in _NOT_EQUAL_OPS:
            not_equal.setdefault(key, set()).update(req.values)
        else:
            unsupported.add(key)
    result: dict[str, KeyConstraint] = {}
    for key in equal.keys() | not_equal.keys():
        if key not in unsupported:
            result[key] = (frozenset(equal.get(key, ())), frozenset(not_equal.get(key, ())))
    return MappingProxyType(result)  # shared through the cache, so read-only


def _key_may_overlap(a: KeyConstraint, b: KeyConstraint) -> bool:
    """One key's half of upstream's test: True unless this key alone keeps the selectors apart."""
    a_eq, a_ne = a
    b_eq, b_ne = b
    if a_eq and b_eq and not a_eq.isdisjoint(b_eq):
        return True
    if not a_eq and not b_eq:
        return True
    # "ne ∩ eq ≠ eq" with a non-empty ne: some wanted value of one side survives the other's exclusions.
    if a_ne and not b_eq <= a_ne:
        return True
    if b_ne and not a_eq <= b_ne:
        return True
    # One side pins values, the other says nothing about the key.
    if a_eq and not b_eq and not b_ne:
        return True
    if b_eq and not a_eq and not a_ne:
        return True
    return False


def selectors_may_conflict(a: str, b: str, allowed_keys: Iterable[str]) -> bool:
    """Katalyst's overlap test for two selectors at one priority, over that priority's allowed keys.

    True when, for every allowed key, the two selectors' value sets could agree; a single
    key on which they are disjoint proves no node can match both.  Symmetric in ``a``/``b``.
    Raises :class:`~kube.labels.SelectorError` if either selector does not parse.
    """
    constraints_a = key_constraints(a)
    constraints_b = key_constraints(b)
    for key in allowed_keys:
        if not _key_may_overlap(constraints_a.get(key, _EMPTY), constraints_b.get(key, _EMPTY)):
            return False
    return True
