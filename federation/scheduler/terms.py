"""Cluster selector terms (``ClusterAffinity``) as KubeAdmiral reads them (``pkg/util/clusterselector``).

The terms are Kubernetes' node selector terms (:mod:`kube.nodeaffinity`: the operators, the
requirement rules, ``metadata.name`` as the one field, terms ORed, an empty term matching nothing)
matched against a member cluster's name and labels.  What is KubeAdmiral's own lives here:

* an error is the unit's, in KubeAdmiral's words and without a field path (``"Sometimes" is not a
  valid cluster selector operator``, ``labels.NewRequirement``'s text for the rest), and the first
  broken term the search reaches stops it; a term's ``matchFields`` only count once its labels
  matched (``MatchClusterSelectorTerms``), where Kubernetes ignores broken terms when another one
  matches;
* preferred terms read only their ``matchExpressions``, and an empty one matches nothing
  (``ClusterAffinity.Score``), where Kubernetes skips empty terms and reads ``matchFields`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kube.field import FieldError, aggregate, go_quote
from kube.labels import Requirement, Selector
from kube.nodeaffinity import (
    FieldRequirement,
    NodeSelectorTerm,
    field_selector_requirement,
    is_empty_term,
    node_selector_requirement,
)

from .types import ClusterInfo, UnitError

__all__ = ["Term", "compile_preferred", "expressions_selector", "match_terms", "matches_terms", "preference_selector"]

_R = TypeVar("_R", Requirement, FieldRequirement)


def _quoted(value: Any) -> str:
    """Go's ``%q`` of an operator (a missing one is ``""``)."""
    return go_quote("" if value is None else str(value))


def _requirement(expr: Any) -> Requirement:
    return _parsed(expr, node_selector_requirement, fields=False)


def _parsed(expr: Any, parse: Callable[[Any], tuple[_R | None, list[FieldError]]], fields: bool) -> _R:
    """``parse`` one match expression (or field); a broken one raises KubeAdmiral's words for its first error."""
    noun, selector = ("field", "cluster field selector") if fields else ("expression", "cluster selector")
    if not isinstance(expr, Mapping):
        raise UnitError(f"a match {noun} must be an object with key, operator and values")
    requirement, errors = parse(expr)
    if requirement is not None:
        return requirement
    operator = _quoted(expr.get("operator"))
    if errors[0].field == "operator":
        raise UnitError(f"{operator} is not a valid {selector} operator")
    if fields and errors[0].field == "values":
        raise UnitError(f"unexpected number of value ({len(errors[0].bad_value)}) for {selector} operator {operator}")
    raise UnitError(aggregate(errors))


def expressions_selector(expressions: Sequence[Any]) -> Selector:
    """``ClusterSelectorRequirementsAsSelector``: the first error raised; no expressions select nothing."""
    if not expressions:
        return Selector.nothing()
    return Selector([_requirement(expr) for expr in expressions])


def _field_requirement(expr: Any) -> FieldRequirement:
    return _parsed(expr, field_selector_requirement, fields=True)


def _fields(expressions: Sequence[Any]) -> tuple[FieldRequirement, ...]:
    """``ClusterSelectorRequirementsAsFieldSelector`` over ``metadata.name``."""
    return tuple(_field_requirement(expr) for expr in expressions)


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _compiled(compile_part: Any, part: Sequence[Any]) -> tuple[Any, str | None]:
    """``compile_part(part)`` and no error, or no result and the unit error it raised."""
    try:
        return compile_part(part), None
    except UnitError as exc:
        return None, str(exc)


@dataclass(frozen=True)
class Term:
    """A compiled cluster selector term: ``selector`` is None for an empty term (it matches
    nothing); a part that failed to compile keeps its error and never matches."""

    selector: NodeSelectorTerm | None = None
    label_error: str | None = None
    field_error: str | None = None

    @property
    def error(self) -> str | None:
        return self.label_error or self.field_error

    @property
    def empty(self) -> bool:
        return self.selector is None and self.error is None

    @classmethod
    def compile(cls, term: Any) -> Term:
        if not isinstance(term, Mapping):
            return cls() if not term else cls(label_error="a cluster selector term must be an object")
        if is_empty_term(term):
            return cls()
        expressions, fields = _list(term.get("matchExpressions")), _list(term.get("matchFields"))
        labels, label_error = _compiled(expressions_selector, expressions) if expressions else (None, None)
        checks, field_error = _compiled(_fields, fields) if fields else (None, None)
        return cls(NodeSelectorTerm(labels, checks), label_error, field_error)

    def match(self, cluster: ClusterInfo) -> tuple[bool, str | None]:
        """One step of ``MatchClusterSelectorTerms``: (matched, error reached)."""
        if self.empty:
            return False, None
        if self.label_error is not None:
            return False, self.label_error
        assert self.selector is not None
        if not self.selector.labels_match(cluster.labels):
            return False, None
        if self.field_error is not None:
            return False, self.field_error
        return self.selector.fields_match(cluster.name), None


def match_terms(terms: Sequence[Term], cluster: ClusterInfo) -> tuple[bool, str | None]:
    """Upstream ``MatchClusterSelectorTerms``: terms are ORed, the first error reached stops the search."""
    for term in terms:
        matched, error = term.match(cluster)
        if error is not None or matched:
            return matched, error
    return False, None


def preference_selector(preference: Any) -> Selector:
    """A preferred term's ``preference`` as KubeAdmiral scores it: its matchExpressions only."""
    expressions = _list(preference.get("matchExpressions")) if isinstance(preference, Mapping) else []
    return expressions_selector(expressions)


def _preference(term: Any, i: int) -> tuple[int, Selector] | None:
    """One weighted preference (None when its weight is 0); an invalid one fails the whole unit."""
    if not isinstance(term, Mapping):
        raise UnitError(f"ClusterAffinity: preferred[{i}]: must be an object with weight and preference")
    weight = term.get("weight") or 0
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise UnitError(f"ClusterAffinity: preferred[{i}]: weight must be an integer")
    if weight == 0:
        return None
    try:
        return weight, preference_selector(term.get("preference"))
    except UnitError as exc:
        raise UnitError(f"ClusterAffinity: preferred[{i}]: {exc}") from exc


def compile_preferred(preferred: Sequence[Any]) -> tuple[tuple[int, Selector], ...]:
    """Weighted preference selectors, as ``ClusterAffinity.Score`` builds them per cluster."""
    compiled = (_preference(term, i) for i, term in enumerate(preferred))
    return tuple(pair for pair in compiled if pair is not None)


def matches_terms(terms: Sequence[Mapping[str, Any]], name: str, labels: Mapping[str, str]) -> bool:
    """Whether a cluster satisfies any of ``terms`` (ORed, as ``ClusterAffinity.required``);
    override policies target clusters with the same terms."""
    matched, _ = match_terms([Term.compile(t) for t in terms], ClusterInfo(name=name, labels=dict(labels)))
    return matched

