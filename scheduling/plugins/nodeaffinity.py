"""NodeAffinity and TaintToleration (``framework/plugins/nodeaffinity``, ``.../tainttoleration``).

NodeAffinity filters on the scheduler-enforced ``addedAffinity`` first ("node(s) didn't match
scheduler-enforced node affinity"), then on the pod's ``nodeSelector`` and required node affinity
("node(s) didn't match Pod's node affinity/selector"); both are UnschedulableAndUnresolvable.
Required terms that fail to parse are ignored, as upstream ignores them for backwards
compatibility; preferred terms that fail to parse are an error.  PreFilter skips pods with
nothing to check and rejects pods whose ``metadata.name`` match fields contradict each other
("pod affinity terms conflict").  The score is the sum of matching preferred weights (pod's and
``addedAffinity``'s), normalised so the best node gets 100.

TaintToleration filters on NoSchedule/NoExecute taints ("node(s) had untolerated taint {k: v}",
UnschedulableAndUnresolvable) and scores the number of PreferNoSchedule taints the pod does not
tolerate, reverse-normalised (fewest intolerable taints -> 100).

Both results depend only on node labels/taints and the pod's spec, so they are cached per pod
signature on the cluster: the engine evaluates a node selector once per node per pod shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kube.nodeaffinity import NODE_NAME_FIELD, PreferredTerm, parse_node_selector, parse_preferred_terms, preferred_score
from kube.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Toleration,
    count_intolerable_prefer_no_schedule,
    find_untolerated_taint,
    prefer_no_schedule_tolerations,
)
from scheduling.args import NodeAffinityArgs, no_args
from scheduling.cluster import ClusterState, NodeInfo, PodInfo
from scheduling.helpers import MAX_NODE_SCORE, default_normalize
from scheduling.plugins.base import NodeCheck, Plugin, Scorer, constant_scorer
from scheduling.status import SKIP, UNRESOLVABLE, Skip, Status, aggregate_message

__all__ = ["NodeAffinity", "TaintToleration"]

REASON_POD = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT = "pod affinity terms conflict"

_POD_FAIL = Status.of(UNRESOLVABLE, REASON_POD)
_ENFORCED_FAIL = Status.of(UNRESOLVABLE, REASON_ENFORCED)
_MISSING = object()


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _node_affinity(pod: PodInfo) -> Mapping[str, Any]:
    return _map(_map(_map(pod.pod.get("spec")).get("affinity")).get("nodeAffinity"))


def _signature(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=str)


def _memoized(table: dict[int, Any], compute: Any) -> NodeCheck:
    def check(node: NodeInfo) -> Status | None:
        found = table.get(node.index, _MISSING)
        if found is _MISSING:
            found = table[node.index] = compute(node)
        return found  # type: ignore[no-any-return]

    return check


def _pinned_names(required: Any) -> set[str] | None:
    """PreFilter's node-name narrowing (``PreFilterResult.NodeNames``): the names every term
    pins with ``metadata.name In``, unioned over the ORed terms; None when some term (or the
    absence of terms) leaves every node eligible, an empty set when the pins contradict."""
    if not isinstance(required, Mapping):
        return None
    terms = required.get("nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return None
    names: set[str] | None = None
    for term in terms:
        term_names: set[str] | None = None
        for req in _map(term).get("matchFields") or []:
            req = _map(req)
            if req.get("key") == NODE_NAME_FIELD and req.get("operator") == "In":
                values = {str(v) for v in req.get("values") or []}
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None  # a term without node-name affinity leaves every node eligible
        names = term_names if names is None else names | term_names
    return names


class NodeAffinity(Plugin):
    """``NodeAffinity`` (args: ``addedAffinity`` with required and/or preferred terms)."""

    name = "NodeAffinity"
    has_filter = True
    has_score = True
    static_filter = True
    pod_only = True
    parse_args = NodeAffinityArgs.parse

    def prefilter(self, cluster: ClusterState, pod: PodInfo) -> NodeCheck | Status | Skip:
        required_raw = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
        node_selector = _map(pod.pod.get("spec")).get("nodeSelector")
        if required_raw is None and self.parsed.required is None and node_selector is None:
            return SKIP
        if _pinned_names(required_raw) == set():
            return Status.of(UNRESOLVABLE, REASON_CONFLICT)
        selector_items = tuple(_map(node_selector).items())
        required = parse_node_selector(required_raw) if required_raw is not None else None
        added = self.parsed.required

        def compute(node: NodeInfo) -> Status | None:
            if added is not None and not added.matches(node.labels, node.name):
                return _ENFORCED_FAIL
            labels = node.labels
            for key, value in selector_items:
                if labels.get(key) != value:
                    return _POD_FAIL
            if required is not None and not required.matches(labels, node.name):
                return _POD_FAIL
            return None

        return _memoized(self.memo(cluster, ("filter", self.filter_signature(pod))), compute)

    def filter_signature(self, pod: PodInfo) -> str:
        spec = _map(pod.pod.get("spec"))
        return _signature(spec.get("nodeSelector"), _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution"))

    def node_names(self, pod: PodInfo) -> set[str] | None:
        return _pinned_names(_node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution"))

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer | Skip:
        raw_terms = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
        preferred: Sequence[PreferredTerm] | None = None
        if raw_terms is not None:
            preferred, errors = parse_preferred_terms(raw_terms)
            if errors:
                raise ValueError(aggregate_message(str(e) for e in errors))
        added = self.parsed.preferred
        if preferred is None and added is None:
            return SKIP
        terms = tuple(preferred or ()) + tuple(added or ())
        table = self.memo(cluster, ("score", _signature(raw_terms)))

        def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
            raw = []
            for node in nodes:
                score = table.get(node.index)
                if score is None:
                    score = table[node.index] = preferred_score(terms, node.labels, node.name)
                raw.append(score)
            return default_normalize(raw)

        return scorer


# ------------------------------------------------------------------------ TaintToleration

_HARD_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)


def _untolerated(taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Toleration]) -> Status | None:
    """``FindMatchingUntoleratedTaint`` over NoSchedule/NoExecute taints, first one wins."""
    taint = find_untolerated_taint(taints, tolerations, _HARD_EFFECTS)
    if taint is None:
        return None
    return Status.of(UNRESOLVABLE, f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value') or ''}}}")


class TaintToleration(Plugin):
    """``TaintToleration`` (no args)."""

    name = "TaintToleration"
    has_filter = True
    has_score = True
    static_filter = True
    pod_only = True
    parse_args = no_args

    def filter_signature(self, pod: PodInfo) -> tuple[Toleration, ...]:
        return pod.tolerations

    def prefilter(self, cluster: ClusterState, pod: PodInfo) -> NodeCheck:
        tolerations = pod.tolerations
        table = self.memo(cluster, ("filter", tolerations))

        def check(node: NodeInfo) -> Status | None:
            if not node.taints:
                return None
            found = table.get(node.index, _MISSING)
            if found is _MISSING:
                found = table[node.index] = _untolerated(node.taints, tolerations)
            return found  # type: ignore[return-value]

        return check

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer:
        tolerations = prefer_no_schedule_tolerations(pod.tolerations)
        table = self.memo(cluster, ("score", tolerations))
        flags = self.memo(cluster, "flags")
        if "prefer_no_schedule" not in flags:
            flags["prefer_no_schedule"] = any(t.get("effect") == PREFER_NO_SCHEDULE for node in cluster.nodes for t in node.taints)
        if not flags["prefer_no_schedule"]:  # every raw count is 0: all normalize to the maximum
            return constant_scorer(MAX_NODE_SCORE)

        def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
            raw = []
            for node in nodes:
                if not node.taints:
                    raw.append(0)
                    continue
                count = table.get(node.index)
                if count is None:
                    count = table[node.index] = count_intolerable_prefer_no_schedule(node.taints, tolerations)
                raw.append(count)
            return default_normalize(raw, reverse=True)

        return scorer

