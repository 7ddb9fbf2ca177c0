"""Matching at fleet scale, rollout waves and the agent-facing config, over plain data.

``match_target`` (the contract) decides for one node against a list of targets. Matching
100,000 nodes against 500 targets that way is 50M selector evaluations; ``TargetIndex``
instead narrows each node to the targets that can match it (by node name, and by the value
of one equality key per selector) and lets ``match_target`` decide among those, so the
answer is the contract's answer by construction.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kube.labels import Operator, Selector, parse_selector

from .hashing import config_hash
from .matching import MatchResult, TargetRef, match_target

CLUSTER_LABEL = "cluster"
EQUALITY = (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)


@dataclass(frozen=True)
class ScopedTarget:
    """A target as the reconciler sees it: its contract fields, id, scope and tier."""

    id: int
    ref: TargetRef
    cluster: str | None = None  # None: fleet-wide
    emergency: bool = False


@dataclass(frozen=True)
class NodeMatch:
    matched: int | None  # id of the winning regular target
    error: str | None
    emergency: int | None  # id of the emergency target covering the node, if any


@lru_cache(maxsize=8192)
def cached_selector(text: str) -> Selector:
    return parse_selector(text)


def node_labels_with_cluster(labels: Mapping[str, str], cluster: str) -> Mapping[str, str]:
    """Fleet-wide selectors may name the cluster; a node's own ``cluster`` label wins."""
    if CLUSTER_LABEL in labels:
        return labels
    return {**labels, CLUSTER_LABEL: cluster}


class TargetIndex:
    """Targets of one config type, indexed so each node checks only plausible ones."""

    def __init__(self, targets: Sequence[ScopedTarget]) -> None:
        self._order = {t.id: i for i, t in enumerate(targets)}
        self._by_id = {t.id: t for t in targets}
        self._by_name: dict[str, list[ScopedTarget]] = defaultdict(list)
        self._by_value: dict[str, dict[str, list[ScopedTarget]]] = defaultdict(lambda: defaultdict(list))
        self._scan: list[ScopedTarget] = []
        self._globals: list[ScopedTarget] = []
        self._emergency: list[ScopedTarget] = []
        for target in targets:
            self._add(target)

    def _add(self, target: ScopedTarget) -> None:
        ref = target.ref
        if target.emergency:
            self._emergency.append(target)
        elif ref.node_names:
            for name in ref.node_names:
                self._by_name[name].append(target)
        elif ref.node_label_selector:
            key_values = _index_entry(ref.node_label_selector)
            if key_values is None:
                self._scan.append(target)
            else:
                key, values = key_values
                for value in values:
                    self._by_value[key][value].append(target)
        else:
            self._globals.append(target)

    def candidates(self, cluster: str, node_name: str, labels: Mapping[str, str]) -> list[ScopedTarget]:
        """Targets in scope that may match the node (a superset of those that do)."""
        found = list(self._by_name.get(node_name, ()))
        for key, by_value in self._by_value.items():
            value = labels.get(key)
            if value is not None:
                found.extend(by_value.get(value, ()))
        found.extend(self._scan)
        found.extend(self._globals)
        return [t for t in found if t.cluster is None or t.cluster == cluster]

    def match(self, cluster: str, node_name: str, labels: Mapping[str, str]) -> NodeMatch:
        labels = node_labels_with_cluster(labels, cluster)
        unique = {t.id: t for t in self.candidates(cluster, node_name, labels)}
        candidates = [unique[i] for i in sorted(unique, key=self._order.__getitem__)]
        result: MatchResult = match_target(node_name, labels, [t.ref for t in candidates])
        matched = None
        if result.name is not None:
            matched = next(t.id for t in candidates if t.ref.name == result.name)
        return NodeMatch(matched, result.error, self._emergency_for(cluster, node_name, labels))

    def _emergency_for(self, cluster: str, node_name: str, labels: Mapping[str, str]) -> int | None:
        for target in self._emergency:
            if target.cluster is not None and target.cluster != cluster:
                continue
            ref = target.ref
            if ref.node_names and node_name not in ref.node_names:
                continue
            if ref.node_label_selector and not cached_selector(ref.node_label_selector).matches(labels):
                continue
            return target.id
        return None


def _index_entry(selector_text: str) -> tuple[str, tuple[str, ...]] | None:
    """The equality requirement a node must meet for this selector to match, if any."""
    for requirement in cached_selector(selector_text).requirements:
        if requirement.operator in EQUALITY:
            return requirement.key, tuple(requirement.values)
    return None


# ---------------------------------------------------------------------------- rollout waves

WAVE_PATTERN = re.compile(r"^(?P<count>[0-9]{1,7})(?P<percent>%?)$")


def parse_wave_size(text: str) -> tuple[int, bool]:
    """``"50"`` → (50, False), ``"10%"`` → (10, True); raises ValueError otherwise."""
    match = WAVE_PATTERN.match(text.strip())
    if not match or int(match["count"]) == 0:
        raise ValueError(f"wave size must be a positive count or percentage such as 50 or 10%, not {text!r}")
    percent = bool(match["percent"])
    if percent and int(match["count"]) > 100:
        raise ValueError("a wave percentage cannot exceed 100%")
    return int(match["count"]), percent


def wave_count(wave_size: str, matched: int) -> int:
    """Nodes released per wave: upstream's canary rounds a percentage down, but a wave of a
    non-empty set always releases at least one node or the rollout would never move."""
    if not wave_size:
        return matched
    count, percent = parse_wave_size(wave_size)
    if percent:
        count = math.floor(matched * count / 100)
    return max(1, min(count, matched)) if matched else 0


# ---------------------------------------------------------------------------- agent-facing config

def deep_merge(base: Any, overlay: Any) -> Any:
    """``overlay`` over ``base``: objects merge key by key, anything else is replaced."""
    if not isinstance(base, Mapping) or not isinstance(overlay, Mapping):
        return overlay
    merged = dict(base)
    for key, value in overlay.items():
        merged[key] = deep_merge(base[key], value) if key in base else value
    return merged


def overlay_hash(base_config: Mapping[str, Any] | None, emergency_config: Mapping[str, Any]) -> str:
    """The hash of an emergency override layered on a node's regular target."""
    return config_hash(deep_merge(base_config or {}, emergency_config))


ServedEntry = tuple[str, str, str | None, int | None, str]
"""(config type, its default's hash, target, revision, hash) — everything a served body depends on."""


def node_etag(entries: Iterable[ServedEntry]) -> str:
    """A strong ETag over what a node is served. Content-addressed: nodes served the same
    configs share it, so the rendered configs can be cached once per ETag, not per node."""
    text = ";".join("|".join(str(part) for part in entry) for entry in sorted(entries, key=lambda e: e[0]))
    return '"' + hashlib.sha256(text.encode()).hexdigest()[:20] + '"'
