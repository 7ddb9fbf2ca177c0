"""Cluster selector terms (``ClusterAffinity``): compiled once per unit, matched per cluster."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.labels import Operator, Requirement, Selector, SelectorError

from .types import ClusterInfo, _UnitError

_SELECTOR_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}


def _expressions_selector(expressions: Sequence[Mapping[str, Any]]) -> Selector:
    """Upstream ``ClusterSelectorRequirementsAsSelector``: no expressions select nothing."""
    if not expressions:
        return Selector.nothing()
    requirements = []
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise _UnitError("a match expression must be an object with key, operator and values")
        operator = _SELECTOR_OPERATORS.get(expr.get("operator"))  # type: ignore[arg-type]
        if operator is None:
            raise _UnitError(f"{expr.get('operator')!r} is not a valid cluster selector operator")
        try:
            requirements.append(Requirement(expr.get("key"), operator, tuple(expr.get("values") or ())))
        except (SelectorError, TypeError) as exc:
            raise _UnitError(str(exc)) from exc
    return Selector(requirements)


def _fields_check(fields: Sequence[Mapping[str, Any]]) -> Callable[[str], bool]:
    """Upstream ``ClusterSelectorRequirementsAsFieldSelector`` over ``metadata.name``."""
    checks: list[tuple[str, str, bool]] = []
    for expr in fields:
        if not isinstance(expr, Mapping):
            raise _UnitError("a match field must be an object with key, operator and values")
        operator, values = expr.get("operator"), list(expr.get("values") or ())
        if operator not in ("In", "NotIn"):
            raise _UnitError(f"{operator!r} is not a valid cluster field selector operator")
        if len(values) != 1:
            raise _UnitError(f"unexpected number of value ({len(values)}) for cluster field selector operator {operator!r}")
        checks.append((str(expr.get("key")), values[0], operator == "In"))

    def matches(name: str) -> bool:
        known = {"metadata.name": name}
        return all((known.get(key, "") == value) == equal for key, value, equal in checks)

    return matches


@dataclass(frozen=True)
class _Term:
    """A compiled cluster selector term; ``error`` makes it (and later terms) fail like upstream."""

    selector: Selector | None = None
    fields: Callable[[str], bool] | None = None
    empty: bool = False
    error: str | None = None

    @classmethod
    def compile(cls, term: Mapping[str, Any] | None) -> _Term:
        term = term or {}
        expressions = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not expressions and not fields:
            return cls(empty=True)
        try:
            selector = _expressions_selector(expressions) if expressions else None
            checks = _fields_check(fields) if fields else None
        except _UnitError as exc:
            return cls(error=str(exc))
        return cls(selector=selector, fields=checks)


def _match_terms(terms: Sequence[_Term], cluster: ClusterInfo) -> tuple[bool, str | None]:
    """Upstream ``MatchClusterSelectorTerms``: terms are ORed, an invalid term stops the search."""
    for term in terms:
        if term.empty:
            continue
        if term.error is not None:
            return False, term.error
        if term.selector is not None and not term.selector.matches(cluster.labels):
            continue
        if term.fields is not None and not term.fields(cluster.name):
            continue
        return True, None
    return False, None


def _compile_preferred(preferred: Sequence[Mapping[str, Any]]) -> tuple[tuple[int, Selector], ...]:
    """Weighted preference selectors; an invalid one is an error for the whole unit, as upstream."""
    compiled = []
    for i, term in enumerate(preferred):
        weight = int(term.get("weight") or 0)
        if weight == 0:
            continue
        try:
            selector = _expressions_selector((term.get("preference") or {}).get("matchExpressions") or [])
        except _UnitError as exc:
            raise _UnitError(f"ClusterAffinity: preferred[{i}]: {exc}") from exc
        compiled.append((weight, selector))
    return tuple(compiled)


def matches_terms(terms: Sequence[Mapping[str, Any]], name: str, labels: Mapping[str, str]) -> bool:
    """Whether a cluster satisfies any of ``terms`` (ORed, as ``ClusterAffinity.required``);
    override policies target clusters with the same terms."""
    matched, _ = _match_terms([_Term.compile(t) for t in terms], ClusterInfo(name=name, labels=dict(labels)))
    return matched
