"""Node selector terms with the semantics of ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``.

A ``v1.NodeSelector`` ORs its ``nodeSelectorTerms``; a term ANDs its ``matchExpressions`` (label
requirements: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``, validated by
``labels.NewRequirement`` through :func:`kube.labels.requirement_errors`) and its ``matchFields``
(``In``/``NotIn`` with exactly one value, compared with the object's fields, of which only
``metadata.name`` is known; a field the object lacks reads ``""``, and an object without a name
skips ``matchFields`` altogether, as ``extractNodeFields`` leaves the field set empty).  A term with
neither matches nothing, and a term that fails to parse matches nothing either: its errors are
kept (:class:`NodeSelectorTerm`), to be reported lazily (:func:`parse_node_selector`, upstream's
``NewLazyErrorNodeSelector``) or eagerly (:func:`parse_preferred_terms`,
``NewPreferredSchedulingTerms``).  Errors are :class:`kube.field.FieldError` with upstream's paths
and wording, so the scheduler can hand them on unchanged; the federation scheduler matches member
clusters with the same terms (by name and labels, like nodes) and words their errors as KubeAdmiral
does.

Input is decoded JSON, so shapes Kubernetes could not even decode are given one meaning here,
never an exception: a non-list where a list belongs reads as absent, a requirement that is not an
object as ``{}``, and a value that is not a string is an ``Invalid value: ...: must be a string``
error (``null`` reads as ``""``, as Go decodes it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

from kube.field import FieldError, child, index
from kube.labels import Operator, Requirement, Selector, requirement_errors

__all__ = [
    "FIELD_SELECTOR_OPERATORS",
    "NODE_NAME_FIELD",
    "NODE_SELECTOR_OPERATORS",
    "FieldRequirement",
    "NodeSelector",
    "NodeSelectorTerm",
    "PreferredTerm",
    "field_selector_requirement",
    "is_empty_term",
    "node_selector_requirement",
    "parse_node_selector",
    "parse_preferred_terms",
    "parse_term",
    "preferred_score",
    "requirements_as_selector",
]

#: The one field a node (or a member cluster) is matched on.
NODE_NAME_FIELD = "metadata.name"

#: ``v1.NodeSelectorOperator`` → label selection operator, in upstream's ``validSelectorOperators`` order.
NODE_SELECTOR_OPERATORS: Mapping[str, Operator] = MappingProxyType({
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
})

#: Upstream's ``validFieldSelectorOperators``.
FIELD_SELECTOR_OPERATORS = ("In", "NotIn")

_R = TypeVar("_R")


def _items(value: Any) -> list[Any]:
    """A JSON list as a list; anything else reads as absent."""
    return list(value) if isinstance(value, (list, tuple)) else []


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _strings(values: Any, path: str) -> tuple[list[str], list[FieldError]]:
    """``values`` as Go decodes a ``[]string``: ``null`` items are ``""``, other non-strings are errors."""
    strings: list[str] = []
    errors: list[FieldError] = []
    for i, value in enumerate(_items(values)):
        if value is None:
            value = ""
        if isinstance(value, str):
            strings.append(value)
        else:
            errors.append(FieldError.invalid(index(path, i), value, "must be a string"))
    return strings, errors


def is_empty_term(term: Any) -> bool:
    """``isEmptyNodeSelectorTerm``: no matchExpressions and no matchFields, so it matches nothing."""
    term = _object(term)
    return not _items(term.get("matchExpressions")) and not _items(term.get("matchFields"))


# ------------------------------------------------------------------------ requirements


def node_selector_requirement(expr: Any, path: str = "") -> tuple[Requirement | None, list[FieldError]]:
    """One ``NodeSelectorRequirement`` as a label requirement, or why it is not one.

    ``path`` is the requirement's own path; ``""`` gives ``labels.NewRequirement``'s bare wording
    (``values[0]: Invalid value: ...``), as callers without field paths print it.
    """
    expr = _object(expr)
    operator = expr.get("operator")
    op = NODE_SELECTOR_OPERATORS.get(operator) if isinstance(operator, str) else None
    if op is None:
        return None, [FieldError.not_supported(child(path, "operator"), operator, list(NODE_SELECTOR_OPERATORS))]
    key = expr.get("key")
    key = "" if key is None else key
    values, errors = _strings(expr.get("values"), child(path, "values"))
    if not errors:
        errors = requirement_errors(key, op, values, path)
    if errors:
        return None, errors
    return Requirement(key, op, tuple(values)), []


def _each_requirement(
    exprs: Sequence[Any], path: str, parse: Callable[[Any, str], tuple[_R | None, list[FieldError]]]
) -> tuple[list[_R], list[FieldError]]:
    """Every expression parsed under ``path[i]``: the requirements that parsed and all the errors found
    (upstream reports them all, not the first)."""
    requirements: list[_R] = []
    errors: list[FieldError] = []
    for i, expr in enumerate(exprs):
        requirement, problems = parse(expr, index(path, i))
        errors += problems
        if requirement is not None:
            requirements.append(requirement)
    return requirements, errors


def requirements_as_selector(exprs: Sequence[Any], path: str = "") -> tuple[Selector | None, list[FieldError]]:
    """``nodeSelectorRequirementsAsSelector``: the requirements ANDed (none select nothing), or
    None and every error found, each under ``path[i]``."""
    if not exprs:
        return Selector.nothing(), []
    requirements, errors = _each_requirement(exprs, path, node_selector_requirement)
    return (None, errors) if errors else (Selector(requirements), [])


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """``fields.OneTermEqualSelector`` (``In``) or ``OneTermNotEqualSelector`` (``NotIn``)."""

    key: str
    operator: str
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.key, "") == self.value) is (self.operator == "In")


def field_selector_requirement(expr: Any, path: str = "") -> tuple[FieldRequirement | None, list[FieldError]]:
    """One ``matchFields`` requirement: ``In``/``NotIn`` with exactly one value (no key check, as upstream)."""
    expr = _object(expr)
    operator = expr.get("operator")
    if not isinstance(operator, str) or operator not in FIELD_SELECTOR_OPERATORS:
        return None, [FieldError.not_supported(child(path, "operator"), operator, FIELD_SELECTOR_OPERATORS)]
    values, errors = _strings(expr.get("values"), child(path, "values"))
    if errors:
        return None, errors
    if len(values) != 1:
        return None, [FieldError.invalid(child(path, "values"), values, "must have one element")]
    key = expr.get("key")
    if not isinstance(key, str):
        key = "" if key is None else str(key)
    return FieldRequirement(key, operator, values[0]), []


def _field_selector(exprs: Sequence[Any], path: str) -> tuple[tuple[FieldRequirement, ...] | None, list[FieldError]]:
    """``nodeSelectorRequirementsAsFieldSelector``: the requirements ANDed, or every error found."""
    requirements, errors = _each_requirement(exprs, path, field_selector_requirement)
    return (None, errors) if errors else (tuple(requirements), [])


# ------------------------------------------------------------------------ terms


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One parsed ``v1.NodeSelectorTerm``.

    ``labels`` is None without matchExpressions, ``fields`` None without matchFields (or when
    they failed to parse: their errors are in ``label_errors`` / ``field_errors``, kept apart
    because KubeAdmiral only looks at a term's fields once its labels match).
    """

    labels: Selector | None = None
    fields: tuple[FieldRequirement, ...] | None = None
    label_errors: tuple[FieldError, ...] = ()
    field_errors: tuple[FieldError, ...] = ()

    @property
    def errors(self) -> tuple[FieldError, ...]:
        return self.label_errors + self.field_errors

    def labels_match(self, labels: Mapping[str, str]) -> bool:
        return self.labels is None or self.labels.matches(labels)

    def fields_match(self, name: str) -> bool:
        if self.fields is None:
            return True
        fields = {NODE_NAME_FIELD: name}
        return all(r.matches(fields) for r in self.fields)

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        """``nodeSelectorTerm.match``: a term with parse errors never matches; a nameless object skips matchFields."""
        if self.label_errors or self.field_errors:
            return False
        return self.labels_match(labels) and (not name or self.fields_match(name))


def parse_term(term: Any, path: str = "") -> NodeSelectorTerm:
    """``newNodeSelectorTerm``: both parts parsed, every error kept with its path."""
    term = _object(term)
    labels = fields = None
    label_errors: list[FieldError] = []
    field_errors: list[FieldError] = []
    exprs = _items(term.get("matchExpressions"))
    if exprs:
        labels, label_errors = requirements_as_selector(exprs, child(path, "matchExpressions"))
    field_exprs = _items(term.get("matchFields"))
    if field_exprs:
        fields, field_errors = _field_selector(field_exprs, child(path, "matchFields"))
    return NodeSelectorTerm(labels, fields, tuple(label_errors), tuple(field_errors))


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """``v1.NodeSelector``: terms ORed.  Broken terms are kept (they never match, their errors stay)."""

    terms: tuple[NodeSelectorTerm, ...]

    @property
    def errors(self) -> list[FieldError]:
        return [e for t in self.terms for e in t.errors]

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        return any(t.matches(labels, name) for t in self.terms)


def parse_node_selector(selector: Any, path: str = "") -> NodeSelector:
    """``NewLazyErrorNodeSelector``: empty terms dropped, broken ones kept with their errors."""
    base = child(path, "nodeSelectorTerms")
    terms = _items(_object(selector).get("nodeSelectorTerms"))
    return NodeSelector(tuple(parse_term(t, index(base, i)) for i, t in enumerate(terms) if not is_empty_term(t)))


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


def _weight(raw: Mapping[str, Any], path: str) -> tuple[int, list[FieldError]]:
    """An int32 weight; absent or ``null`` is 0, anything but an integer cannot be decoded."""
    weight = raw.get("weight")
    if weight is None:
        return 0, []
    if isinstance(weight, bool) or not isinstance(weight, int):
        return 0, [FieldError.invalid(child(path, "weight"), weight, "must be an integer")]
    return weight, []


def parse_preferred_terms(terms: Any, path: str = "") -> tuple[tuple[PreferredTerm, ...], list[FieldError]]:
    """``NewPreferredSchedulingTerms``: weight-0 and empty terms skipped, every error reported.

    As upstream, a term's errors are under ``path[i]`` directly (``[0].matchExpressions[0].key``),
    not under ``preference``.
    """
    parsed: list[PreferredTerm] = []
    errors: list[FieldError] = []
    for i, raw in enumerate(_items(terms)):
        raw = _object(raw)
        weight, problems = _weight(raw, index(path, i))
        preference = raw.get("preference")
        if problems:
            errors += problems
            continue
        if weight == 0 or is_empty_term(preference):
            continue
        term = parse_term(preference, index(path, i))
        if term.errors:
            errors.extend(term.errors)
        else:
            parsed.append(PreferredTerm(weight, term))
    return tuple(parsed), errors


def preferred_score(terms: Sequence[PreferredTerm], labels: Mapping[str, str], name: str) -> int:
    """``PreferredSchedulingTerms.Score``: the sum of the weights of the terms that match."""
    return sum(t.weight for t in terms if t.term.matches(labels, name))
