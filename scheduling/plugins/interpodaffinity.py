"""InterPodAffinity (``framework/plugins/interpodaffinity``): filter and two-phase score.

Filter, as upstream's PreFilter/Filter:

* the incoming pod's required affinity: every term's topology key must be on the node and some
  existing pod matching *all* terms must share the node's value for each key, unless no pod in the
  cluster matches them and the pod matches its own terms (the first pod of a self-affine group
  may land anywhere that has the keys) -> ``UnschedulableAndUnresolvable``;
* its required anti-affinity: no matching existing pod in the node's topology -> ``Unschedulable``;
* existing pods' required anti-affinity (symmetry): the node must not share a topology pair with
  an existing pod whose term matches the incoming pod -> ``Unschedulable``.

A namespace selector on the incoming pod's terms is resolved against ``namespaces`` (the v1
Namespace objects); existing pods' terms are matched against the incoming pod's namespace labels.

Score, two-phase (the seed's rewrite): phase one sums signed weights per topology pair
``(key, value)`` over the cluster once -- the incoming pod's preferred (anti-)affinity against the
existing pods, and the existing pods' required affinity (``hardPodAffinityWeight``) and preferred
(anti-)affinity against the incoming pod; phase two scores each candidate by looking up its own
label pairs.  Both phases read the ``AffinityIndex`` the cluster keeps per distinct term and per
distinct pod label set, so the work does not grow with identical replicas.  Scores are then
min-max normalised to 0..100 over the scored nodes.  ``naive_scores`` keeps the quadruple loop
(nodes x pods x terms x candidate nodes) as the oracle.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from scheduling.args import InterPodAffinityArgs
from scheduling.cluster import ClusterState, NodeInfo, PodInfo
from scheduling.helpers import MAX_NODE_SCORE
from scheduling.plugins.base import NodeCheck, Plugin, Scorer
from scheduling.selectors import AffinityTerm, WeightedTerm, merge_namespace_selector
from scheduling.status import SKIP, UNRESOLVABLE, UNSCHEDULABLE, Skip, Status

__all__ = ["InterPodAffinity", "naive_scores", "normalize_min_max"]

REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI = "node(s) didn't match pod anti-affinity rules"

_AFFINITY_FAIL = Status.of(UNRESOLVABLE, REASON_AFFINITY)
_ANTI_FAIL = Status.of(UNSCHEDULABLE, REASON_ANTI)
_EXISTING_FAIL = Status.of(UNSCHEDULABLE, REASON_EXISTING_ANTI)

Pair = tuple[str, str]


def _matches_all(terms: Sequence[AffinityTerm], namespace: str, labels: Mapping[str, str]) -> bool:
    """``podMatchesAllAffinityTerms`` (incoming terms have their namespace selector merged)."""
    return bool(terms) and all(t.matches(namespace, labels, None) for t in terms)


def normalize_min_max(raw: Sequence[int]) -> list[int]:
    """InterPodAffinity's NormalizeScore: (s - min) / (max - min) * 100, truncated."""
    if not raw:
        return []
    low, high = min(raw), max(raw)
    spread = high - low
    if spread <= 0:
        return [0] * len(raw)
    return [int(float(MAX_NODE_SCORE) * ((s - low) / spread)) for s in raw]


class _FilterState:
    """PreFilter's three topology-pair counters for one incoming pod."""

    def __init__(self, cluster: ClusterState, pod: PodInfo, required: Sequence[AffinityTerm], anti: Sequence[AffinityTerm]) -> None:
        self.existing_anti: Counter[Pair] = Counter()
        ns_labels = cluster.namespace_labels(pod.namespace)
        for term, counts in cluster.affinity.required_anti.items():
            if term.matches(pod.namespace, pod.labels, ns_labels):
                for value, count in counts.items():
                    self.existing_anti[(term.topology_key, value)] += count
        self.affinity: Counter[Pair] = Counter()
        self.anti: Counter[Pair] = Counter()
        if required or anti:
            self._count_incoming(cluster, required, anti)

    def _count_incoming(self, cluster: ClusterState, required: Sequence[AffinityTerm], anti: Sequence[AffinityTerm]) -> None:
        nodes = cluster.nodes
        for group in cluster.affinity.groups.values():
            if required and _matches_all(required, group.namespace, group.labels):
                for idx, count in group.nodes.items():
                    labels = nodes[idx].labels
                    for term in required:
                        value = labels.get(term.topology_key)
                        if value is not None:
                            self.affinity[(term.topology_key, value)] += count
            for term in anti:
                if term.matches(group.namespace, group.labels, None):
                    for idx, count in group.nodes.items():
                        value = nodes[idx].labels.get(term.topology_key)
                        if value is not None:
                            self.anti[(term.topology_key, value)] += count


def _filter_check(state: _FilterState, required: Sequence[AffinityTerm], anti: Sequence[AffinityTerm], self_match: bool) -> NodeCheck:
    affinity, anti_counts, existing = state.affinity, state.anti, state.existing_anti
    first_of_group = not affinity and self_match

    def check(node: NodeInfo) -> Status | None:
        labels = node.labels
        if required:
            pods_exist = True
            for term in required:
                value = labels.get(term.topology_key)
                if value is None:
                    return _AFFINITY_FAIL  # every topology key must be on the node
                if affinity.get((term.topology_key, value), 0) <= 0:
                    pods_exist = False
            if not pods_exist and not first_of_group:
                return _AFFINITY_FAIL
        if anti_counts:
            for term in anti:
                value = labels.get(term.topology_key)
                if value is not None and anti_counts.get((term.topology_key, value), 0) > 0:
                    return _ANTI_FAIL
        if existing:
            for pair in labels.items():
                if existing.get(pair, 0) > 0:
                    return _EXISTING_FAIL
        return None

    return check


class InterPodAffinity(Plugin):
    """``InterPodAffinity`` (args: ``hardPodAffinityWeight`` 0..100, default 1;
    ``ignorePreferredTermsOfExistingPods``, default false)."""

    name = "InterPodAffinity"
    has_filter = True
    has_score = True
    parse_args = InterPodAffinityArgs.parse

    def survives_placement(self, pod: PodInfo) -> bool:
        """A pod without inter-pod terms adds nothing the plugin counts (the index holds the
        terms of placed pods; the pod's own groups are only read for incoming terms)."""
        return not pod.has_pod_affinity

    # -- filter -------------------------------------------------------------------------------

    def prefilter(self, cluster: ClusterState, pod: PodInfo) -> NodeCheck | Status | Skip:
        terms = pod.terms
        if terms.errors:
            return Status.of(UNRESOLVABLE, f"parsing pod: {terms.parse_error}")
        if not terms.required_affinity and not terms.required_anti_affinity and not cluster.affinity.required_anti:
            return SKIP  # nothing to count: what the full state below would conclude, without building it
        required = [merge_namespace_selector(t, cluster.namespaces) for t in terms.required_affinity]
        anti = [merge_namespace_selector(t, cluster.namespaces) for t in terms.required_anti_affinity]
        state = _FilterState(cluster, pod, required, anti)
        if not state.existing_anti and not required and not anti:
            return SKIP
        return _filter_check(state, required, anti, _matches_all(required, pod.namespace, pod.labels))

    # -- score --------------------------------------------------------------------------------

    def topology_scores(self, cluster: ClusterState, pod: PodInfo) -> dict[str, dict[str, int]] | Skip:
        """Phase one: signed weight per topology pair, ``{key: {value: weight}}``."""
        terms = pod.terms
        if terms.errors:
            raise ValueError(f"failed to parse pod: {terms.parse_error}")
        preferred = [WeightedTerm(merge_namespace_selector(w.term, cluster.namespaces), w.weight) for w in terms.preferred_affinity]
        preferred += [WeightedTerm(merge_namespace_selector(w.term, cluster.namespaces), -w.weight) for w in terms.preferred_anti_affinity]
        if self.parsed.ignore_preferred_terms_of_existing_pods and not preferred:
            return SKIP
        index = cluster.affinity
        if not preferred and not index.preferred and not (index.required_affinity and self.parsed.hard_pod_affinity_weight > 0):
            return SKIP  # no term anywhere could add a weight
        scores: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._incoming_terms(cluster, preferred, scores)
        self._existing_terms(cluster, pod, scores)
        return scores if scores else SKIP

    @staticmethod
    def _incoming_terms(cluster: ClusterState, preferred: Sequence[WeightedTerm], scores: dict[str, dict[str, int]]) -> None:
        if not preferred:
            return
        nodes = cluster.nodes
        for group in cluster.affinity.groups.values():
            for wt in preferred:
                if not wt.term.matches(group.namespace, group.labels, None):
                    continue
                key = wt.term.topology_key
                for idx, count in group.nodes.items():
                    value = nodes[idx].labels.get(key)
                    if value is not None:
                        scores[key][value] += wt.weight * count

    def _existing_terms(self, cluster: ClusterState, pod: PodInfo, scores: dict[str, dict[str, int]]) -> None:
        index = cluster.affinity
        ns_labels = cluster.namespace_labels(pod.namespace)
        hard = self.parsed.hard_pod_affinity_weight
        if hard > 0:
            for term, counts in index.required_affinity.items():
                if term.matches(pod.namespace, pod.labels, ns_labels):
                    for value, count in counts.items():
                        scores[term.topology_key][value] += hard * count
        for (term, weight), counts in index.preferred.items():
            if term.matches(pod.namespace, pod.labels, ns_labels):
                for value, count in counts.items():
                    scores[term.topology_key][value] += weight * count

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer | Skip:
        topology = self.topology_scores(cluster, pod)
        if topology is SKIP:
            return SKIP
        table = {key: dict(values) for key, values in topology.items()}  # type: ignore[union-attr]

        def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
            raw = []
            for node in nodes:  # phase two: look up the candidate's own pairs
                labels = node.labels
                total = 0
                for key, values in table.items():
                    value = labels.get(key)
                    if value is not None:
                        total += values.get(value, 0)
                raw.append(total)
            return normalize_min_max(raw)

        return scorer


def naive_scores(
    cluster: ClusterState, pod: PodInfo, candidates: Sequence[NodeInfo], args: InterPodAffinityArgs
) -> list[int]:
    """The oracle: for each node, each of its pods, each term, each candidate node (seed's loop).

    Deliberately free of the aggregation the plugin relies on; used by the property test and
    the benchmark to check that the two-phase scores are identical.
    """
    terms = pod.terms
    if terms.errors:
        raise ValueError(f"failed to parse pod: {terms.parse_error}")
    incoming = [(merge_namespace_selector(w.term, cluster.namespaces), w.weight) for w in terms.preferred_affinity]
    incoming += [(merge_namespace_selector(w.term, cluster.namespaces), -w.weight) for w in terms.preferred_anti_affinity]
    if args.ignore_preferred_terms_of_existing_pods and not incoming:
        return [0] * len(candidates)
    ns_labels = cluster.namespace_labels(pod.namespace)
    raw = [0] * len(candidates)
    matched = False
    for node in cluster.nodes:
        for existing in node.pods:
            weighted: list[tuple[AffinityTerm, int]] = []
            weighted += [(t, w) for t, w in incoming if t.matches(existing.namespace, existing.labels, None)]
            own = existing.terms
            if args.hard_pod_affinity_weight > 0:
                weighted += [(t, args.hard_pod_affinity_weight) for t in own.required_affinity if t.matches(pod.namespace, pod.labels, ns_labels)]
            weighted += [(w.term, w.weight) for w in own.preferred_affinity if w.term.matches(pod.namespace, pod.labels, ns_labels)]
            weighted += [(w.term, -w.weight) for w in own.preferred_anti_affinity if w.term.matches(pod.namespace, pod.labels, ns_labels)]
            for term, weight in weighted:
                value = node.labels.get(term.topology_key)
                if value is None:
                    continue
                matched = True
                for i, candidate in enumerate(candidates):
                    if candidate.labels.get(term.topology_key) == value:
                        raw[i] += weight
    if not matched:
        return [0] * len(candidates)
    return normalize_min_max(raw)
