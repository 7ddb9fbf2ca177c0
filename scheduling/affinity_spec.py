"""v1 ``Affinity`` as plain dicts: validation with Kubernetes' field errors, and merging.

Validation
----------
:func:`validate_affinity` (and the per-kind functions) check a ``NodeAffinity``,
``PodAffinity`` or ``PodAntiAffinity`` the way the API server's
``pkg/apis/core/validation`` does, with the same field paths and wording
(``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]
.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'``),
so a pod that passes here is not refused later by the API server for its affinity.

Meridian is stricter than upstream in three places, because its affinity comes from
rendered templates and a bad argument should be caught at admission, not show up as a pod
that never schedules: node selector ``values`` must be valid label values, ``Gt``/``Lt``
values must be integers the scheduler can parse (64-bit, ``kube.labels.parse_int64``), and
unknown fields are refused (``Forbidden: unknown field``)
rather than dropped. Types are checked too (a number where a string belongs is an
``Invalid value``), since the input is JSON-like data, not a decoded Go struct.

``deferred`` marks values that are not known yet (template placeholders): such a scalar
passes type and content checks, and checks that depend on it (the operator's rules for
``values``) are skipped. Rendering later validates the concrete result in full.

Merging (what a template adds to a pod)
---------------------------------------
:func:`merge_affinity` combines what the pod already has (P) with what a template adds (T).
Nothing the pod had is ever dropped or loosened:

* **Required node affinity** — Kubernetes ORs ``nodeSelectorTerms`` and ANDs the
  expressions inside one term.  "P and T" is therefore the cross product: one term per pair
  (p, t) holding p's expressions followed by t's (exact duplicates once), fields likewise.
  A pair with an empty term (which matches no node) is left out, since it cannot match;
  if every pair is left out the result is one empty term, which matches no node, as P or T
  did not.  If every pod term already contains all expressions of some template term, the
  pod already implies T and is left as it is (this also makes the merge idempotent, as a
  mutating webhook must be).  The product is refused (:class:`MergeError`, code
  ``affinity_too_large``) above ``max_terms`` terms instead of producing a huge pod spec.
* **Preferred node affinity** and **pod (anti-)affinity, required and preferred** — the
  template's terms are appended after the pod's (required pod terms are already ANDed, and
  preferred terms add up their weights).  A template term the pod already has, equal field
  for field, is not added twice.
* A kind the pod does not have is taken from the template as is; a kind the template does
  not set is left alone; ``spec.nodeSelector`` and everything else are untouched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube.labels import (
    LABEL_SELECTOR_OPERATORS,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    parse_int64,
    validate_label_key,
    validate_label_value,
)
from kube.nodeaffinity import FIELD_SELECTOR_OPERATORS, NODE_NAME_FIELD, NODE_SELECTOR_OPERATORS, is_empty_term

__all__ = [
    "AFFINITY_KINDS",
    "MAX_NODE_SELECTOR_TERMS",
    "FieldError",
    "MergeError",
    "merge_affinity",
    "validate_affinity",
    "validate_label_selector",
    "validate_node_affinity",
    "validate_pod_affinity",
]

AFFINITY_KINDS = ("nodeAffinity", "podAffinity", "podAntiAffinity")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
#: Upper bound on required node selector terms after a cross product.
MAX_NODE_SELECTOR_TERMS = 64


class _Omitted:
    """No bad value to print (``field.Required``/``Forbidden`` carry none)."""

    def __repr__(self) -> str:
        return "<omitted>"


_OMIT: Any = _Omitted()


# ----------------------------------------------------------------------------- field errors

def _value_text(value: Any) -> str:
    """How ``field.Error`` prints a bad value: strings quoted, numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float, str)):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: ``type`` is upstream's ErrorType text (``Required value``, ``Invalid value``,
    ``Unsupported value``, ``Forbidden``); ``value`` is the bad value when there is one."""

    field: str
    type: str
    detail: str = ""
    value: Any = _OMIT

    def body(self) -> str:
        """The message without the field path (``ErrorBody()``)."""
        text = self.type
        if self.value is not _OMIT and self.type not in ("Required value", "Forbidden"):
            text += f": {_value_text(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def _never(_value: Any) -> bool:
    return False


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()


class _Validator:
    """Collects field errors; each method checks one API type at ``path``."""

    def __init__(self, deferred: Callable[[Any], bool]) -> None:
        self.deferred = deferred
        self.errors: list[FieldError] = []

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.errors.append(FieldError(path, "Invalid value", detail, value))

    def required(self, path: str, detail: str) -> None:
        self.errors.append(FieldError(path, "Required value", detail))

    def forbidden(self, path: str, detail: str) -> None:
        self.errors.append(FieldError(path, "Forbidden", detail))

    # -- shapes

    def mapping(self, value: Any, path: str, fields: Sequence[str]) -> Mapping[str, Any] | None:
        """``value`` as an object with only ``fields``; None (absent) or a reported error give None."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.invalid(path, value, "must be an object")
            return None
        for key in value:
            if not isinstance(key, str):
                self.invalid(path, key, "field names must be strings")
            elif key not in fields:
                self.forbidden(_child(path, key), "unknown field")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.invalid(path, value, "must be a list")
            return []
        return value

    def string(self, value: Any, path: str) -> bool:
        """True when ``value`` is a known string worth checking further."""
        if self.deferred(value):
            return False
        if not isinstance(value, str):
            self.invalid(path, value, "must be a string")
            return False
        return True

    def strings(self, value: Any, path: str) -> list[tuple[int, str]]:
        """Known string items of a list, with their indices."""
        return [(i, item) for i, item in enumerate(self.items(value, path)) if self.string(item, f"{path}[{i}]")]

    def label_name(self, key: Any, path: str) -> None:
        if self.string(key, path):
            for message in validate_label_key(key):
                self.invalid(path, key, message)

    def label_value(self, value: str, path: str) -> None:
        for message in validate_label_value(value):
            self.invalid(path, value, message)

    def weight(self, term: Mapping[str, Any], path: str) -> None:
        weight = term.get("weight", 0)
        if self.deferred(weight):
            return
        if not _is_int(weight):
            self.invalid(_child(path, "weight"), weight, "must be an integer")
        elif not 1 <= weight <= 100:
            self.invalid(_child(path, "weight"), weight, "must be in the range 1-100")

    # -- node affinity

    def node_affinity(self, value: Any, path: str) -> None:
        affinity = self.mapping(value, path, (REQUIRED, PREFERRED))
        if affinity is None:
            return
        if affinity.get(REQUIRED) is not None:
            self.node_selector(affinity[REQUIRED], _child(path, REQUIRED))
        self.weighted_terms(affinity, path, "preference", self.node_selector_term)

    def node_selector(self, value: Any, path: str) -> None:
        selector = self.mapping(value, path, ("nodeSelectorTerms",))
        if selector is None:
            return
        terms_path = _child(path, "nodeSelectorTerms")
        raw = selector.get("nodeSelectorTerms")
        terms = self.items(raw, terms_path)
        if not terms and (raw is None or isinstance(raw, list)):
            self.required(terms_path, "must have at least one node selector term")
        for i, term in enumerate(terms):
            self.node_selector_term(term, f"{terms_path}[{i}]")

    def node_selector_term(self, value: Any, path: str) -> None:
        term = self.mapping(value, path, ("matchExpressions", "matchFields"))
        if term is None:
            return
        expressions_path = _child(path, "matchExpressions")
        for i, requirement in enumerate(self.items(term.get("matchExpressions"), expressions_path)):
            self.node_requirement(requirement, f"{expressions_path}[{i}]")
        fields_path = _child(path, "matchFields")
        for i, requirement in enumerate(self.items(term.get("matchFields"), fields_path)):
            self.field_requirement(requirement, f"{fields_path}[{i}]")

    def node_requirement(self, value: Any, path: str) -> None:
        self.requirement(value, path, NODE_SELECTOR_OPERATORS)

    def requirement_parts(self, value: Any, path: str) -> tuple[Mapping[str, Any], list[Any], str, Any] | None:
        """A selector requirement's mapping, its values and their path, and its operator (None:
        not a mapping, already reported)."""
        requirement = self.mapping(value, path, ("key", "operator", "values"))
        if requirement is None:
            return None
        values_path = _child(path, "values")
        values = self.items(requirement.get("values"), values_path)
        return requirement, values, values_path, requirement.get("operator", "")

    def field_requirement(self, value: Any, path: str) -> None:
        parts = self.requirement_parts(value, path)
        if parts is None:
            return
        requirement, values, values_path, operator = parts
        if self.string(operator, _child(path, "operator")):
            if operator in FIELD_SELECTOR_OPERATORS:
                if len(values) != 1:
                    self.required(values_path,
                                  "must be only one value when `operator` is 'In' or 'NotIn' for node field selector")
            else:
                self.invalid(_child(path, "operator"), operator, "not a valid selector operator")
        key = requirement.get("key", "")
        if self.string(key, _child(path, "key")) and key != NODE_NAME_FIELD:
            self.invalid(_child(path, "key"), key, "not a valid field selector key")
        for i, item in self.strings(values, values_path):
            for message in dns1123_subdomain_errors(item):
                self.invalid(f"{values_path}[{i}]", item, message)

    # -- pod affinity

    def pod_affinity(self, value: Any, path: str) -> None:
        affinity = self.mapping(value, path, (REQUIRED, PREFERRED))
        if affinity is None:
            return
        for i, term in enumerate(self.items(affinity.get(REQUIRED), _child(path, REQUIRED))):
            self.pod_affinity_term(term, f"{_child(path, REQUIRED)}[{i}]")
        self.weighted_terms(affinity, path, "podAffinityTerm", lambda term, at: self.pod_affinity_term(term or {}, at))

    def weighted_terms(self, affinity: Mapping[str, Any], path: str, key: str, check: Callable[[Any, str], None]) -> None:
        """``preferredDuringSchedulingIgnoredDuringExecution``: each a ``weight`` and a term under ``key``."""
        for i, term in enumerate(self.items(affinity.get(PREFERRED), _child(path, PREFERRED))):
            term_path = f"{_child(path, PREFERRED)}[{i}]"
            term = self.mapping(term, term_path, ("weight", key))
            if term is None:
                continue
            self.weight(term, term_path)
            check(term.get(key), _child(term_path, key))

    def pod_affinity_term(self, value: Any, path: str) -> None:
        term = self.mapping(value, path, ("labelSelector", "namespaceSelector", "namespaces", "topologyKey",
                                          "matchLabelKeys", "mismatchLabelKeys"))
        if term is None:
            return
        self.label_selector(term.get("labelSelector"), _child(path, "labelSelector"))
        self.label_selector(term.get("namespaceSelector"), _child(path, "namespaceSelector"))
        for i, name in self.strings(term.get("namespaces"), _child(path, "namespaces")):
            for message in dns1123_label_errors(name):
                self.invalid(f"{_child(path, 'namespaces')}[{i}]", name, message)
        self.label_keys(term, path)
        topology_key = term.get("topologyKey")
        if topology_key in ("", None):
            self.required(_child(path, "topologyKey"), "can not be empty")
        else:
            self.label_name(topology_key, _child(path, "topologyKey"))

    def label_keys(self, term: Mapping[str, Any], path: str) -> None:
        """``matchLabelKeys`` / ``mismatchLabelKeys``: label keys, only with a labelSelector, never in both."""
        seen: dict[str, str] = {}
        for name in ("matchLabelKeys", "mismatchLabelKeys"):
            keys_path = _child(path, name)
            keys = self.strings(term.get(name), keys_path)
            if keys and term.get("labelSelector") is None:
                self.forbidden(keys_path, "must not be specified when labelSelector is not set")
            for i, key in keys:
                self.label_name(key, f"{keys_path}[{i}]")
                if seen.get(key, name) != name:
                    self.invalid(f"{keys_path}[{i}]", key, "exists in both matchLabelKeys and mismatchLabelKeys")
                seen[key] = name

    def label_selector(self, value: Any, path: str) -> None:
        selector = self.mapping(value, path, ("matchLabels", "matchExpressions"))
        if selector is None:
            return
        labels_path = _child(path, "matchLabels")
        labels = selector.get("matchLabels")
        if labels is not None and not isinstance(labels, Mapping):
            self.invalid(labels_path, labels, "must be an object")
        elif labels:
            for key, label in labels.items():
                self.label_name(key, labels_path)
                if self.string(label, labels_path):
                    self.label_value(label, labels_path)
        expressions_path = _child(path, "matchExpressions")
        for i, requirement in enumerate(self.items(selector.get("matchExpressions"), expressions_path)):
            self.selector_requirement(requirement, f"{expressions_path}[{i}]")

    def selector_requirement(self, value: Any, path: str) -> None:
        self.requirement(value, path, LABEL_SELECTOR_OPERATORS)

    def requirement(self, value: Any, path: str, operators: Collection[str]) -> None:
        """A node selector requirement (``operators`` with Gt and Lt) or a label selector's:
        upstream's two validations, which differ only there."""
        parts = self.requirement_parts(value, path)
        if parts is None:
            return
        requirement, values, values_path, operator = parts
        numeric = operator in ("Gt", "Lt") and operator in operators
        if self.string(operator, _child(path, "operator")):
            if operator in ("In", "NotIn") and not values:
                self.required(values_path, "must be specified when `operator` is 'In' or 'NotIn'")
            elif operator in ("Exists", "DoesNotExist") and values:
                self.forbidden(values_path, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            elif numeric and len(values) != 1:
                self.required(values_path, "must be specified single value when `operator` is 'Lt' or 'Gt'")
            elif operator not in operators:
                self.invalid(_child(path, "operator"), operator, "not a valid selector operator")
        self.label_name(requirement.get("key", ""), _child(path, "key"))
        for i, item in self.strings(values, values_path):
            self.label_value(item, f"{values_path}[{i}]")
            if numeric and parse_int64(item) is None:
                self.invalid(f"{values_path}[{i}]", item, "must be an integer when `operator` is 'Lt' or 'Gt'")


def _errors(check: Callable[[_Validator, Any, str], None], value: Any, path: str,
            deferred: Callable[[Any], bool]) -> list[FieldError]:
    """The field errors ``check`` finds in ``value`` at ``path``."""
    validator = _Validator(deferred)
    check(validator, value, path)
    return validator.errors


def validate_node_affinity(value: Any, path: str = "spec.affinity.nodeAffinity", *,
                           deferred: Callable[[Any], bool] = _never) -> list[FieldError]:
    """Field errors of a v1 ``NodeAffinity`` (empty when valid)."""
    return _errors(_Validator.node_affinity, value, path, deferred)


def validate_pod_affinity(value: Any, path: str = "spec.affinity.podAffinity", *,
                          deferred: Callable[[Any], bool] = _never) -> list[FieldError]:
    """Field errors of a v1 ``PodAffinity`` or ``PodAntiAffinity`` (the two share one schema)."""
    return _errors(_Validator.pod_affinity, value, path, deferred)


def validate_label_selector(value: Any, path: str, *, deferred: Callable[[Any], bool] = _never) -> list[FieldError]:
    """Field errors of a ``metav1.LabelSelector`` (``ValidateLabelSelector``); None is valid (absent)."""
    return _errors(_Validator.label_selector, value, path, deferred)


def validate_affinity(value: Any, path: str = "spec.affinity", *,
                      deferred: Callable[[Any], bool] = _never) -> list[FieldError]:
    """Field errors of a v1 ``Affinity`` (node, pod and pod anti-affinity)."""
    validator = _Validator(deferred)
    affinity = validator.mapping(value, path, AFFINITY_KINDS)
    if affinity is not None:
        validator.node_affinity(affinity.get("nodeAffinity"), _child(path, "nodeAffinity"))
        validator.pod_affinity(affinity.get("podAffinity"), _child(path, "podAffinity"))
        validator.pod_affinity(affinity.get("podAntiAffinity"), _child(path, "podAntiAffinity"))
    return validator.errors


# ----------------------------------------------------------------------------------- merging

class MergeError(ValueError):
    """The pod's affinity and the template's cannot be combined; ``code`` and ``field`` say why and where."""

    def __init__(self, code: str, field: str, message: str) -> None:
        self.code = code
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def _terms(selector: Any) -> list[Mapping[str, Any]]:
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    return list(terms) if isinstance(terms, list) else []


def _parts(term: Mapping[str, Any], name: str) -> list[Any]:
    value = term.get(name) if isinstance(term, Mapping) else None
    return list(value) if isinstance(value, list) else []


def _contains(pod_term: Mapping[str, Any], template_term: Mapping[str, Any]) -> bool:
    """Every requirement of ``template_term`` is in ``pod_term``, so pod_term implies it."""
    if is_empty_term(template_term):
        return is_empty_term(pod_term)
    return all(any(r == o for o in _parts(pod_term, name)) for name in ("matchExpressions", "matchFields")
               for r in _parts(template_term, name))


def _both(pod_term: Mapping[str, Any], template_term: Mapping[str, Any]) -> dict[str, Any]:
    """The term matching nodes that match both: the requirements of each, pod's first."""
    term: dict[str, Any] = {}
    for name in ("matchExpressions", "matchFields"):
        combined = _parts(pod_term, name)
        combined += [r for r in _parts(template_term, name) if r not in combined]
        if combined:
            term[name] = copy.deepcopy(combined)
    return term


def _and_required(pod: Any, template: Mapping[str, Any], path: str, max_terms: int) -> Any:
    """Required node selectors P and T as one selector (cross product of their ORed terms)."""
    pod_terms, template_terms = _terms(pod), _terms(template)
    if all(any(_contains(p, t) for t in template_terms) for p in pod_terms):
        return copy.deepcopy(pod)
    size = len(pod_terms) * len(template_terms)
    if size > max_terms:
        raise MergeError("affinity_too_large", _child(path, "nodeSelectorTerms"),
                         f"the pod's {len(pod_terms)} required node selector terms and the template's "
                         f"{len(template_terms)} would combine into {size} terms (at most {max_terms} allowed)")
    combined: list[dict[str, Any]] = []
    for p in pod_terms:
        for t in template_terms:
            if is_empty_term(p) or is_empty_term(t):
                continue
            term = _both(p, t)
            if term not in combined:
                combined.append(term)
    result = copy.deepcopy(dict(pod))
    result["nodeSelectorTerms"] = combined if combined or not size else [{}]
    return result


def _append_new(existing: Any, additions: Any) -> list[Any]:
    current = list(existing) if isinstance(existing, list) else []
    result = copy.deepcopy(current)
    for term in additions or []:
        if term not in result:
            result.append(copy.deepcopy(term))
    return result


def _merge_kind(kind: str, existing: Any, addition: Mapping[str, Any], path: str, max_terms: int) -> Any:
    if existing is None:
        return copy.deepcopy(dict(addition))
    if not isinstance(existing, Mapping):
        raise MergeError("invalid_pod", path, "must be an object")
    merged = copy.deepcopy(dict(existing))
    for name, value in addition.items():
        if value is None:
            continue
        if merged.get(name) is None:
            merged[name] = copy.deepcopy(value)
        elif kind == "nodeAffinity" and name == REQUIRED:
            merged[name] = _and_required(merged[name], value, _child(path, name), max_terms)
        else:
            merged[name] = _append_new(merged[name], value)
    return merged


def merge_affinity(existing: Mapping[str, Any] | None, addition: Mapping[str, Any], *,
                   path: str = "spec.affinity", max_terms: int = MAX_NODE_SELECTOR_TERMS) -> dict[str, Any]:
    """``existing`` (the pod's ``spec.affinity``, may be None) with ``addition`` merged in; see the module doc.

    Neither input is modified.  Raises :class:`MergeError` when the required node selector
    product would exceed ``max_terms``.
    """
    if existing is not None and not isinstance(existing, Mapping):
        raise MergeError("invalid_pod", path, "must be an object")
    merged = copy.deepcopy(dict(existing or {}))
    for kind in AFFINITY_KINDS:
        addition_kind = addition.get(kind)
        if addition_kind:
            merged[kind] = _merge_kind(kind, merged.get(kind), addition_kind, _child(path, kind), max_terms)
    return merged
