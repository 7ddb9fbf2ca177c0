"""Node selectors, tolerations and pod (anti-)affinity terms over plain v1 dicts.

Semantics follow ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` (node selector
terms ORed, requirements ANDed, an empty term matches nothing, ``matchFields`` only knows
``metadata.name`` and one value, parse errors are reported lazily for a pod's required affinity
and eagerly for preferred terms and scheduler args), ``k8s.io/api/core/v1/toleration.go``
(``ToleratesTaint``) and the scheduler's ``AffinityTerm`` (namespaces + label selector +
namespace selector + topology key).  Label requirements are ``kube.labels`` requirements, so key
and value validation is apimachinery's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.labels import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    selector_from_label_selector,
    validate_label_key,
    validate_label_value,
)
from scheduling.status import FieldError, aggregate_message, child, index

__all__ = [
    "AffinityTerm",
    "NodeSelector",
    "NodeSelectorTerm",
    "PodTerms",
    "Toleration",
    "WeightedTerm",
    "merge_namespace_selector",
    "parse_node_selector",
    "parse_pod_terms",
    "parse_preferred_terms",
    "parse_tolerations",
    "tolerations_tolerate",
]

EVERYTHING = Selector.everything()
NOTHING = Selector.nothing()

_NODE_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}
_INT64_DIGITS = frozenset("0123456789")


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# ------------------------------------------------------------------------ label requirements


def _is_int64(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    if not body or not set(body) <= _INT64_DIGITS:
        return False
    return -(2**63) <= int(text) <= 2**63 - 1


def _requirement_errors(key: Any, op: Operator, values: Sequence[Any], path: str) -> list[FieldError]:
    """``labels.NewRequirement``'s complaints with field paths, in upstream order.

    ``kube.labels.Requirement`` validates too, but reports no field path; scheduler args and
    pod parse errors must name the exact field (``...matchExpressions[0].key``).
    """
    errors: list[FieldError] = []
    key_problems = validate_label_key(key)
    if key_problems:
        errors.append(FieldError.invalid(child(path, "key"), key, "; ".join(key_problems)))
    values_path = child(path, "values")
    if op in (Operator.IN, Operator.NOT_IN) and not values:
        errors.append(FieldError.invalid(values_path, list(values), "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        errors.append(FieldError.invalid(values_path, list(values), "values set must be empty for exists and does not exist"))
    elif op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        if len(values) != 1:
            errors.append(FieldError.invalid(values_path, list(values), "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, value in enumerate(values):
            if not isinstance(value, str) or not _is_int64(value):
                errors.append(FieldError.invalid(index(values_path, i), value, "for 'Gt', 'Lt' operators, the value must be an integer"))
    for i, value in enumerate(values):
        problems = validate_label_value(value)
        if problems:
            errors.append(FieldError.invalid(f"{index(values_path, i)}[{key}]", value, "; ".join(problems)))
    return errors


def _node_requirements(exprs: Sequence[Any], path: str) -> tuple[Selector | None, list[FieldError]]:
    """``nodeSelectorRequirementsAsSelector``: matchExpressions as one ANDed label selector."""
    errors: list[FieldError] = []
    requirements: list[Requirement] = []
    for i, expr in enumerate(exprs):
        p = index(path, i)
        expr = _as_map(expr)
        op = _NODE_OPERATORS.get(expr.get("operator"))  # type: ignore[arg-type]
        if op is None:
            errors.append(FieldError.not_supported(child(p, "operator"), expr.get("operator"), list(_NODE_OPERATORS)))
            continue
        values = [str(v) if not isinstance(v, str) else v for v in _as_list(expr.get("values"))]
        problems = _requirement_errors(expr.get("key"), op, values, p)
        if problems:
            errors.extend(problems)
            continue
        requirements.append(Requirement(expr["key"], op, tuple(values)))
    if errors:
        return None, errors
    return Selector(requirements), []


@dataclass(frozen=True, slots=True)
class _FieldRequirement:
    key: str
    equal: bool
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        return (fields.get(self.key, "") == self.value) is self.equal


def _field_requirements(exprs: Sequence[Any], path: str) -> tuple[tuple[_FieldRequirement, ...] | None, list[FieldError]]:
    """``nodeSelectorRequirementsAsFieldSelector``: In/NotIn with exactly one value each."""
    errors: list[FieldError] = []
    out: list[_FieldRequirement] = []
    for i, expr in enumerate(exprs):
        p = index(path, i)
        expr = _as_map(expr)
        operator = expr.get("operator")
        values = _as_list(expr.get("values"))
        if operator not in ("In", "NotIn"):
            errors.append(FieldError.not_supported(child(p, "operator"), operator, ["In", "NotIn"]))
        elif len(values) != 1:
            errors.append(FieldError.invalid(child(p, "values"), values, "must have one element"))
        else:
            out.append(_FieldRequirement(str(expr.get("key", "")), operator == "In", str(values[0])))
    if errors:
        return None, errors
    return tuple(out), []


# ------------------------------------------------------------------------ node selectors


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One parsed ``v1.NodeSelectorTerm``; ``errors`` non-empty means the term never matches."""

    labels: Selector | None
    fields: tuple[_FieldRequirement, ...] | None
    errors: tuple[FieldError, ...] = ()

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        if self.errors:
            return False
        if self.labels is not None and not self.labels.matches(node_labels):
            return False
        if self.fields is not None and node_name:
            fields = {"metadata.name": node_name}
            return all(r.matches(fields) for r in self.fields)
        return True


def _is_empty_term(term: Mapping[str, Any]) -> bool:
    return not _as_list(term.get("matchExpressions")) and not _as_list(term.get("matchFields"))


def _parse_term(term: Mapping[str, Any], path: str) -> NodeSelectorTerm:
    errors: list[FieldError] = []
    labels: Selector | None = None
    fields: tuple[_FieldRequirement, ...] | None = None
    exprs = _as_list(term.get("matchExpressions"))
    if exprs:
        labels, problems = _node_requirements(exprs, child(path, "matchExpressions"))
        errors += problems
    field_exprs = _as_list(term.get("matchFields"))
    if field_exprs:
        fields, problems = _field_requirements(field_exprs, child(path, "matchFields"))
        errors += problems
    return NodeSelectorTerm(labels, fields, tuple(errors))


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """``v1.NodeSelector``: terms ORed.  Terms with parse errors are kept (they never match)."""

    terms: tuple[NodeSelectorTerm, ...]

    @property
    def errors(self) -> list[FieldError]:
        return [e for t in self.terms for e in t.errors]

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(node_labels, node_name) for t in self.terms)


def parse_node_selector(selector: Mapping[str, Any] | None, path: str = "") -> NodeSelector:
    """``NewLazyErrorNodeSelector``: empty terms are dropped, broken ones kept with their errors."""
    terms = _as_list(_as_map(selector).get("nodeSelectorTerms"))
    base = child(path, "nodeSelectorTerms")
    parsed = [_parse_term(_as_map(t), index(base, i)) for i, t in enumerate(terms) if not _is_empty_term(_as_map(t))]
    return NodeSelector(tuple(parsed))


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


def parse_preferred_terms(terms: Sequence[Any] | None, path: str = "") -> tuple[tuple[PreferredTerm, ...], list[FieldError]]:
    """``NewPreferredSchedulingTerms``: weight-0 and empty terms skipped, every error reported."""
    parsed: list[PreferredTerm] = []
    errors: list[FieldError] = []
    for i, raw in enumerate(_as_list(terms)):
        raw = _as_map(raw)
        weight = raw.get("weight") or 0
        preference = _as_map(raw.get("preference"))
        if weight == 0 or _is_empty_term(preference):
            continue
        term = _parse_term(preference, index(path, i))
        if term.errors:
            errors.extend(term.errors)
        else:
            parsed.append(PreferredTerm(int(weight), term))
    return tuple(parsed), errors


def preferred_score(terms: Sequence[PreferredTerm], node_labels: Mapping[str, str], node_name: str) -> int:
    return sum(t.weight for t in terms if t.term.matches(node_labels, node_name))


# ------------------------------------------------------------------------ taints and tolerations


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Mapping[str, Any]) -> bool:
        """``Toleration.ToleratesTaint`` (comparison operators are behind an off-by-default gate)."""
        if self.effect and self.effect != taint.get("effect", ""):
            return False
        if self.key and self.key != taint.get("key", ""):
            return False
        if self.operator in ("", "Equal"):
            return self.value == (taint.get("value") or "")
        return self.operator == "Exists"


def parse_tolerations(pod: Mapping[str, Any]) -> tuple[Toleration, ...]:
    raw = _as_list(_as_map(pod.get("spec")).get("tolerations"))
    return tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in (_as_map(x) for x in raw)
    )


def tolerations_tolerate(tolerations: Iterable[Toleration], taint: Mapping[str, Any]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


# ------------------------------------------------------------------------ pod affinity terms


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """The scheduler's ``fwk.AffinityTerm``; hashable so identical terms aggregate in the engine."""

    namespaces: frozenset[str]
    selector: Selector
    namespace_selector: Selector
    topology_key: str

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None) -> bool:
        """``AffinityTerm.Matches``: namespace listed (or selected), then the label selector."""
        if namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(labels)
        return False


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    term: AffinityTerm
    weight: int


def _selector_error(exc: SelectorError) -> str:
    """kube.labels prefixes requirement errors with ``matchExpressions[i].``; upstream's
    ``LabelSelectorAsSelector`` passes no path, so the prefix is dropped to match its text."""
    text = str(exc)
    if text.startswith("matchExpressions["):
        close = text.find("].")
        if close != -1:
            return text[close + 2 :]
    return text


def _affinity_term(pod_namespace: str, raw: Mapping[str, Any]) -> AffinityTerm:
    selector = selector_from_label_selector(raw.get("labelSelector"))
    ns_selector = selector_from_label_selector(raw.get("namespaceSelector"))
    names = [str(n) for n in _as_list(raw.get("namespaces"))]
    if not names and raw.get("namespaceSelector") is None:
        names = [pod_namespace]
    return AffinityTerm(frozenset(names), selector, ns_selector, str(raw.get("topologyKey") or ""))


def _terms(pod_namespace: str, raw_terms: list[Any]) -> list[AffinityTerm]:
    return [_affinity_term(pod_namespace, _as_map(t)) for t in raw_terms]


def _weighted(pod_namespace: str, raw_terms: list[Any]) -> list[WeightedTerm]:
    out = []
    for t in raw_terms:
        t = _as_map(t)
        out.append(WeightedTerm(_affinity_term(pod_namespace, _as_map(t.get("podAffinityTerm"))), int(t.get("weight") or 0)))
    return out


@dataclass(frozen=True, slots=True)
class PodTerms:
    """``framework.PodInfo``'s four term lists; a list that fails to parse is empty, as upstream
    leaves it, and its error is kept in ``errors`` (``parse_error`` formats them like NewPodInfo)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def parse_error(self) -> str | None:
        return aggregate_message(self.errors) if self.errors else None


NO_TERMS = PodTerms()


def parse_pod_terms(pod: Mapping[str, Any]) -> PodTerms:
    affinity = _as_map(_as_map(pod.get("spec")).get("affinity"))
    pod_affinity = _as_map(affinity.get("podAffinity"))
    anti = _as_map(affinity.get("podAntiAffinity"))
    if not pod_affinity and not anti:
        return NO_TERMS
    namespace = str(_as_map(pod.get("metadata")).get("namespace") or "")
    parsed: dict[str, list[Any]] = {}
    errors: list[str] = []
    sources = (
        ("requiredAffinityTerms", pod_affinity, "requiredDuringSchedulingIgnoredDuringExecution", _terms),
        ("requiredAntiAffinityTerms", anti, "requiredDuringSchedulingIgnoredDuringExecution", _terms),
        ("preferredAffinityTerms", pod_affinity, "preferredDuringSchedulingIgnoredDuringExecution", _weighted),
        ("preferredAntiAffinityTerms", anti, "preferredDuringSchedulingIgnoredDuringExecution", _weighted),
    )
    for label, section, key, build in sources:
        try:
            parsed[label] = build(namespace, _as_list(section.get(key)))
        except SelectorError as exc:
            parsed[label] = []
            errors.append(f"{label}: {_selector_error(exc)}")
    return PodTerms(
        tuple(parsed["requiredAffinityTerms"]),
        tuple(parsed["requiredAntiAffinityTerms"]),
        tuple(parsed["preferredAffinityTerms"]),
        tuple(parsed["preferredAntiAffinityTerms"]),
        tuple(errors),
    )


def merge_namespace_selector(term: AffinityTerm, namespaces: Mapping[str, Mapping[str, str]]) -> AffinityTerm:
    """``mergeAffinityTermNamespacesIfNotEmpty`` for the incoming pod's own terms.

    An empty (match-all) namespace selector is kept; any other selector is unrolled into the
    namespace names it selects among ``namespaces`` and replaced by "nothing", so matching the
    term never needs the other pod's namespace labels.
    """
    if term.namespace_selector == EVERYTHING:
        return term
    selected = {name for name, labels in namespaces.items() if term.namespace_selector.matches(labels)}
    return AffinityTerm(term.namespaces | selected, term.selector, NOTHING, term.topology_key)

