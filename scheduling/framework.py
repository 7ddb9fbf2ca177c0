"""kube-scheduler's in-tree plugins over plain data (``k8s.io/kubernetes/pkg/scheduler/framework/plugins``).

The contract (``docs``: contracts.md, "Python: scheduling")::

    filter_nodes(plugin, pod, nodes, pods, args=None, namespaces=()) -> dict[str, FilterResult]
    score_nodes(plugin, pod, nodes, pods, args=None, namespaces=()) -> dict[str, int]

``pod``, ``nodes``, ``pods`` and ``namespaces`` are v1 objects as dicts in API JSON casing.  An
existing pod runs on the node its ``spec.nodeName`` names; pods naming no node in ``nodes`` are
ignored, and so is the incoming pod's own ``spec.nodeName``.  ``args`` are the plugin's
KubeSchedulerConfiguration args in JSON casing, defaulted per field (see ``scheduling.args``).
``filter_nodes`` runs the plugin's PreFilter then its Filter on every node: a PreFilter Skip
passes every node, a PreFilter rejection fails every node with PreFilter's reason.
``score_nodes`` runs PreScore, Score and NormalizeScore over all ``nodes`` (scores 0..100 before
plugin weights); a PreScore Skip scores every node 0.  Both raise ``ValueError`` where upstream
fails argument validation or returns an Error status.

Plugins: ``NodeResourcesFit``, ``NodeResourcesBalancedAllocation``, ``InterPodAffinity``,
``NodeAffinity``, ``TaintToleration`` (upstream) and ``ExtendedBalancedAllocation``,
``WaterLevelStackSpread``, ``MostAvailable`` (Meridian, see ``scheduling.plugins.meridian``),
``CPUSetExclusive``, ``CPUSetShared`` (Meridian's CPU co-location, see ``scheduling.plugins.cpuset``).
More plugins join with ``register_plugin(cls)``.

Feature gates are at today's defaults (pod-level resources, sidecars and in-place resize on;
DRA and taint comparison operators out of scope).  Deliberate differences from upstream, all
documented where they are implemented:

* pods in phase Succeeded/Failed are ignored (the scheduler's pod informer never sees them);
* several insufficient extended resources are reported in the pod's request order, not Go's
  random map order;
* a node whose PreFilter narrowed the candidates (NodeAffinity's ``metadata.name`` terms) is
  judged by Filter directly, which gives the same verdict and upstream's Filter reason;
* argument defaults and strictness as listed in ``scheduling.args``;
* label-selector error texts come from ``kube.labels`` (the field path of a bad value may differ
  in wording, the failing value and code do not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduling.cluster import ClusterState, PodInfo
from scheduling.plugins.base import Plugin
from scheduling.plugins.cpuset import CPUSetExclusive, CPUSetShared
from scheduling.plugins.interpodaffinity import InterPodAffinity
from scheduling.plugins.meridian import ExtendedBalancedAllocation, MostAvailable, WaterLevelStackSpread
from scheduling.plugins.nodeaffinity import NodeAffinity, TaintToleration
from scheduling.plugins.noderesources import BalancedAllocation, Fit
from scheduling.status import SKIP, ArgsError, FieldError, FilterResult, Status

__all__ = [
    "PLUGINS",
    "ArgsError",
    "FieldError",
    "FilterResult",
    "filter_nodes",
    "make_plugin",
    "register_plugin",
    "score_nodes",
]

PLUGINS: dict[str, type[Plugin]] = {
    cls.name: cls
    for cls in (
        Fit,
        BalancedAllocation,
        InterPodAffinity,
        NodeAffinity,
        TaintToleration,
        ExtendedBalancedAllocation,
        WaterLevelStackSpread,
        MostAvailable,
    )
}


def register_plugin(cls: type[Plugin]) -> type[Plugin]:
    """Add a plugin under its ``name`` (usable as a class decorator); a name is registered once."""
    if not cls.name or PLUGINS.get(cls.name, cls) is not cls:
        raise ValueError(f"plugin name {cls.name!r} is empty or taken")
    PLUGINS[cls.name] = cls
    return cls


# CPU co-location (Part B)
register_plugin(CPUSetExclusive)
register_plugin(CPUSetShared)


def make_plugin(name: str, args: Mapping[str, Any] | None = None) -> Plugin:
    """A configured plugin; ``ValueError`` for an unknown name or invalid args."""
    cls = PLUGINS.get(name)
    if cls is None:
        raise ValueError(f"unknown scheduling plugin {name!r}; known: {', '.join(sorted(PLUGINS))}")
    return cls(args)


#: Kubernetes objects as dicts in API JSON casing (nodes, pods, namespaces), as contracts.md says.
Objects = Sequence[Mapping[str, Any]]


def filter_nodes(plugin: str, pod: Mapping[str, Any], nodes: Objects, pods: Objects,
                 args: Mapping[str, Any] | None = None, namespaces: Objects = ()) -> dict[str, FilterResult]:
    """Run ``plugin``'s PreFilter and Filter for ``pod`` on each node: name -> FilterResult."""
    impl, cluster, incoming = _prepared(plugin, pod, nodes, pods, args, namespaces)
    outcome = impl.prefilter(cluster, incoming)
    if outcome is SKIP:
        return {node.name: FilterResult(True) for node in cluster.nodes}
    if isinstance(outcome, Status):
        rejected = FilterResult.from_status(outcome)
        return {node.name: rejected for node in cluster.nodes}
    return {node.name: FilterResult.from_status(outcome(node)) for node in cluster.nodes}  # type: ignore[operator]


def score_nodes(plugin: str, pod: Mapping[str, Any], nodes: Objects, pods: Objects,
                args: Mapping[str, Any] | None = None, namespaces: Objects = ()) -> dict[str, int]:
    """Run ``plugin``'s PreScore, Score and NormalizeScore over all nodes: name -> 0..100."""
    impl, cluster, incoming = _prepared(plugin, pod, nodes, pods, args, namespaces)
    scorer = impl.prescore(cluster, incoming)
    if scorer is SKIP:
        return {node.name: 0 for node in cluster.nodes}
    scores = scorer(cluster.nodes)  # type: ignore[operator]
    return {node.name: score for node, score in zip(cluster.nodes, scores, strict=True)}


def _prepared(plugin: str, pod: Mapping[str, Any], nodes: Objects, pods: Objects, args: Mapping[str, Any] | None,
              namespaces: Objects) -> tuple[Plugin, ClusterState, PodInfo]:
    """The plugin made from its args, the cluster the objects describe, and the incoming pod."""
    return make_plugin(plugin, args), ClusterState.build(nodes, pods, namespaces), PodInfo(pod)
