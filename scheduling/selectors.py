"""Pod (anti-)affinity terms over plain v1 dicts: the scheduler's ``AffinityTerm`` (namespaces +
label selector + namespace selector + topology key) and ``framework.PodInfo``'s four term lists.

Node selector terms and tolerations are Kubernetes rules shared with the federation scheduler and
live in ``kube.nodeaffinity`` and ``kube.taints``; label selectors are ``kube.labels``'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kube.labels import Selector, SelectorError, selector_from_label_selector
from scheduling.status import aggregate_message

__all__ = [
    "AffinityTerm",
    "PodTerms",
    "WeightedTerm",
    "merge_namespace_selector",
    "parse_pod_terms",
]

EVERYTHING = Selector.everything()
NOTHING = Selector.nothing()


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


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

