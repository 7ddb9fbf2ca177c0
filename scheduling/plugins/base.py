"""The shape every scheduling plugin has here: PreFilter returning a per-node check, PreScore
returning a scorer over a list of nodes.

kube-scheduler splits a plugin into PreFilter/Filter/PreScore/Score/NormalizeScore calls that
share a CycleState.  Here PreFilter *returns* the Filter as a closure over everything it
precomputed for the pod, and PreScore returns one function that scores and normalises a list of
nodes.  That keeps the per-node work of the placement engine to one call, and it is the same
code the contract functions (``framework.filter_nodes``/``score_nodes``) run, so the engine and
the contract cannot disagree.

``prefilter`` returns ``SKIP`` (every node passes), a ``Status`` (PreFilter rejected the pod:
every node fails with it) or a ``NodeCheck``.  ``prescore`` returns ``SKIP`` (every node scores
0) or a ``Scorer``; it raises ``ValueError`` where upstream returns an Error status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from scheduling.cluster import ClusterState, NodeInfo, PodInfo
from scheduling.status import SKIP, Skip, Status

__all__ = ["NodeCheck", "Plugin", "PreFilterOutcome", "PreScoreOutcome", "Scorer", "constant_scorer", "node_local", "per_node"]

NodeCheck = Callable[[NodeInfo], "Status | None"]
Scorer = Callable[[Sequence[NodeInfo]], list[int]]
PreFilterOutcome = "NodeCheck | Status | Skip"
PreScoreOutcome = "Scorer | Skip"


_F = Any


def node_local(fn: _F) -> _F:
    """Mark a check or scorer whose result for a node depends only on that node's own state and
    on the pod's resource requests (``PodInfo.resource_key``): no normalisation across the
    candidates, no other node read. The engine keeps such verdicts and scores per pod shape and
    node, and recomputes a node only after a pod went there (``Scheduler._local_cycle``)."""
    fn.node_local = True
    return fn


def per_node(one: Callable[[NodeInfo], int]) -> Scorer:
    """A node-local scorer from its per-node score ``one`` (kept as ``scorer.one``, which the
    engine calls when it recomputes a single node)."""

    @node_local
    def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
        return [one(node) for node in nodes]

    scorer.one = one  # type: ignore[attr-defined]
    return scorer


def constant_scorer(score: int) -> Scorer:
    """A scorer giving every node ``score`` (e.g. TaintToleration when no node has a
    PreferNoSchedule taint: every raw count is 0, all normalise to the maximum)."""

    def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
        return [score] * len(nodes)

    scorer.constant = score  # type: ignore[attr-defined]
    return scorer


class Plugin:
    """Base class: a plugin without a Filter passes every node, one without a Score scores 0."""

    name: ClassVar[str] = ""
    has_filter: ClassVar[bool] = False
    has_score: ClassVar[bool] = False
    # A static filter's verdict depends only on the node's labels, taints and name and on the pod
    # (``filter_signature``), never on other pods: the engine may evaluate it once per pod shape.
    static_filter: ClassVar[bool] = False
    # A pod-only plugin's PreFilter, PreScore, ``filter_signature`` and ``node_names`` read only
    # the pod and the nodes' static data (labels, taints, allocatable), never the pods placed on
    # them, so their outcomes hold for every replica of a template: the engine computes them
    # once per pod shape (``PodInfo.shape``). The checks and scorers they return read the node's
    # current state when called, as every check does.
    pod_only: ClassVar[bool] = False
    #: What validates this plugin's args (upstream's ``*Args.parse``, or ``no_args``), run once
    #: here: its result is ``self.parsed``. None where the plugin reads its args itself.
    parse_args: ClassVar[Callable[[Mapping[str, Any] | None], Any] | None] = None

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = args
        parse = type(self).parse_args  # from the class: a plain function stays unbound
        if parse is not None:
            self.parsed = parse(args)

    def prefilter(self, cluster: ClusterState, pod: PodInfo) -> NodeCheck | Status | Skip:
        return SKIP

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer | Skip:
        return SKIP

    def survives_placement(self, pod: PodInfo) -> bool:
        """Whether this plugin's PreFilter and PreScore outcomes for ``pod`` stay what they are
        after replicas of ``pod`` are placed: the engine then keeps one plan for a run of
        replicas (``Scheduler.schedule_replicas``). True for pod-only plugins."""
        return self.pod_only

    def filter_signature(self, pod: PodInfo) -> Any:
        """For static filters: a hashable summary of everything in the pod the verdict reads."""
        raise NotImplementedError

    def node_names(self, pod: PodInfo) -> set[str] | None:
        """PreFilterResult.NodeNames: the only nodes worth filtering, or None for all of them."""
        return None

    def memo(self, cluster: ClusterState, signature: Any) -> dict[int, Any]:
        """A per-cluster cache for results that depend only on static node data (labels,
        taints) and a pod signature; the engine reuses it across pods of the same shape."""
        key = (self.name, id(self), signature)
        table = cluster.cache.get(key)
        if table is None:
            table = cluster.cache[key] = {}
        return table
