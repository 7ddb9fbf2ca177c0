"""Validation of one config target against its config type and its sibling targets.

Reference: ``validateTargetResourceGenericSpec`` and the functions it calls
(``validateTargetResourceLabelSelector``, ``validateLabelSelectorMatchWithKCCDefinition``,
``validateLabelSelectorOverlapped``, ``validateTargetResourceNodeNames(Overlapped)``,
``validateTargetResourceGlobal(Overlapped)``) in ``kubewharf/katalyst-core``
``pkg/controller/kcc/kcct.go``.

The checks run in upstream's order and stop at the first failing check, so at most one kind
of problem is reported.  Overlap checks report one problem per conflicting target (sorted
by name, as upstream lists them) so that each message can name its target.

Mode is decided as upstream decides it: a selector *and* node names is an error; otherwise
a non-empty ``node_label_selector`` means selector mode, non-empty ``node_names`` node-list
mode, and neither global mode.  ``last_duration`` counts as set whenever it is not ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kube.labels import SelectorError, parse_selector
from nodeconfig.conflicts import selectors_may_conflict
from nodeconfig.matching import TargetRef, int32, parsed_selector

__all__ = [
    "REASONS",
    "TargetProblem",
    "validate_target",
    "warnings_for",
]

REASONS = (
    "both_selector_and_node_names",
    "label_selector_not_supported",
    "selector_with_last_duration",
    "selector_parse_failed",
    "priority_not_supported",
    "selector_key_not_allowed",
    "selector_overlap",
    "node_names_without_last_duration",
    "node_names_overlap",
    "global_with_last_duration",
    "global_duplicated",
)

# Production advice from the KCC design notes: beyond this, selector configs multiply.
MAX_PRIORITIES = 2
MAX_KEYS_PER_PRIORITY = 2


@dataclass(frozen=True)
class TargetProblem:
    """Why a target is invalid: a stable ``reason`` code and a message for people."""

    reason: str
    message: str


def _go_list(items: Sequence[str]) -> str:
    return "[" + " ".join(items) + "]"


def _others(target: TargetRef, others: Sequence[TargetRef]) -> list[TargetRef]:
    """Siblings other than ``target`` itself, ordered by name as upstream reports them."""
    return sorted((o for o in others if o.name != target.name), key=lambda o: o.name)


def _normalised_keys(allowed: Mapping[int, Sequence[str]]) -> dict[int, frozenset[str]]:
    return {int32(priority): frozenset(keys) for priority, keys in allowed.items()}


def _validate_selector(
    target: TargetRef, allowed: Mapping[int, Sequence[str]] | None, others: Sequence[TargetRef]
) -> list[TargetProblem]:
    if not allowed:
        return [TargetProblem("label_selector_not_supported",
                              "this config type allows no label selectors (it has no allowed key list)")]
    if target.last_duration is not None:
        return [TargetProblem("selector_with_last_duration",
                              "nodeLabelSelector and lastDuration are both set; lastDuration is for node lists only")]
    try:
        selector = parse_selector(target.node_label_selector)
    except SelectorError as exc:
        return [TargetProblem("selector_parse_failed", f"nodeLabelSelector does not parse: {exc}")]
    by_priority = _normalised_keys(allowed)
    priority = int32(target.priority)
    allowed_keys = by_priority.get(priority)
    if allowed_keys is None:
        supported = _go_list([str(p) for p in sorted(by_priority)])
        return [TargetProblem("priority_not_supported",
                              f"priority {priority} is not supported by this config type (supported: {supported})")]
    bad_keys = sorted({req.key for req in selector.requirements if req.key not in allowed_keys})
    if bad_keys:
        return [TargetProblem(
            "selector_key_not_allowed",
            f"nodeLabelSelector uses keys not allowed at priority {priority}: {_go_list(bad_keys)} "
            f"(allowed: {_go_list(sorted(allowed_keys))})",
        )]
    problems = []
    for other in _others(target, others):
        if other.node_label_selector == "" or parsed_selector(other.node_label_selector) is None:
            continue
        if int32(other.priority) != priority:
            continue
        if selectors_may_conflict(target.node_label_selector, other.node_label_selector, allowed_keys):
            problems.append(TargetProblem(
                "selector_overlap",
                f"selector overlaps with target {_quoted(other.name)} at priority {priority}",
            ))
    return problems


def _validate_node_names(target: TargetRef, others: Sequence[TargetRef]) -> list[TargetProblem]:
    if target.last_duration is None:
        return [TargetProblem("node_names_without_last_duration",
                              "nodeNames is set but lastDuration is not; a node list must expire")]
    mine = set(target.node_names)
    problems = []
    for other in _others(target, others):
        if len(other.node_names) == 0:
            continue
        shared = sorted(mine.intersection(other.node_names))
        if shared:
            problems.append(TargetProblem(
                "node_names_overlap",
                f"nodeNames overlap with target {_quoted(other.name)}: {', '.join(shared)}",
            ))
    return problems


def _validate_global(target: TargetRef, others: Sequence[TargetRef]) -> list[TargetProblem]:
    if target.last_duration is not None:
        return [TargetProblem("global_with_last_duration",
                              "lastDuration is set on a global target; only node lists expire")]
    return [
        TargetProblem("global_duplicated", f"another global target exists: {_quoted(other.name)}")
        for other in _others(target, others)
        if len(other.node_names) == 0 and other.node_label_selector == ""
    ]


def _quoted(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def validate_target(
    target: TargetRef,
    allowed_keys_by_priority: Mapping[int, Sequence[str]] | None,
    others: Sequence[TargetRef],
) -> list[TargetProblem]:
    """Problems that make ``target`` invalid among ``others`` of the same config type (empty = valid).

    ``allowed_keys_by_priority`` is the type's ``nodeLabelSelectorAllowedKeyList`` as
    ``{priority: keys}``; ``None`` or empty means the type takes no selectors.  ``others``
    may include ``target`` itself; entries with its name are skipped.
    """
    if target.node_label_selector != "" and len(target.node_names) > 0:
        return [TargetProblem("both_selector_and_node_names",
                              "nodeLabelSelector and nodeNames are both set; a target has one targeting mode")]
    if target.node_label_selector != "":
        return _validate_selector(target, allowed_keys_by_priority, others)
    if len(target.node_names) > 0:
        return _validate_node_names(target, others)
    return _validate_global(target, others)


def warnings_for(allowed_keys_by_priority: Mapping[int, Sequence[str]] | None) -> list[str]:
    """Advice (not errors) on a config type's allowed keys: more than two priorities or two keys per priority."""
    if not allowed_keys_by_priority:
        return []
    warnings = []
    if len(allowed_keys_by_priority) > MAX_PRIORITIES:
        warnings.append(
            f"{len(allowed_keys_by_priority)} selector priorities are configured; keep to at most "
            f"{MAX_PRIORITIES}, or the number of configs to maintain explodes"
        )
    for priority in sorted(allowed_keys_by_priority):
        keys = sorted(set(allowed_keys_by_priority[priority]))
        if len(keys) > MAX_KEYS_PER_PRIORITY:
            warnings.append(
                f"priority {priority} allows {len(keys)} selector keys ({', '.join(keys)}); keep to at most "
                f"{MAX_KEYS_PER_PRIORITY}, or the number of configs to maintain explodes"
            )
    return warnings
