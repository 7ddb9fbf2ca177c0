"""The fleet simulator's placement engine: kube-scheduler's scheduling cycle under the engine's
default policy (``engine.Policy.default()``: TaintToleration, NodeAffinity, NodeResourcesFit,
InterPodAffinity filters; upstream's score plugins and weights), over plain node objects.

``fleet.simulator`` sits below scheduling in the layers, so it does not import this: the
scheduling app registers it (``register``) when Django starts. Pure: nothing here touches
Django; a node the engine cannot read (a patched node with malformed quantities) takes no
pods, and a pod it cannot read stays Pending, as with a real scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .cluster import NodeInfo, PodInfo
from .engine import Policy, Scheduler


def engine_placer(nodes: Sequence[Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], str | None]:
    """A function placing pods one by one on ``nodes`` (each placement assumed): the node's name or None."""
    scheduler = Scheduler(Policy.default(), [node for node in nodes if _readable(node)])
    # The simulator places a workload's replicas one after another with one spec object: the
    # first replica's PodInfo lends its derived values to the rest (keyed by the spec object
    # itself, kept alive here, so a recycled id() can never match).
    shapes: dict[tuple[int, str], tuple[Any, PodInfo]] = {}

    def place(pod: Mapping[str, Any]) -> str | None:
        try:
            return scheduler.schedule(_info(pod)).node
        except ValueError:
            return None

    def _info(pod: Mapping[str, Any]) -> PodInfo:
        spec, meta = pod.get("spec"), pod.get("metadata") or {}
        if meta.get("labels") or meta.get("annotations"):
            return PodInfo(pod)
        key = (id(spec), str(meta.get("namespace") or ""))
        known = shapes.get(key)
        if known is not None and known[0] is spec:
            return known[1].sibling(pod)
        info = PodInfo(pod)
        shapes[key] = (spec, info)
        return info

    return place


def _readable(node: Mapping[str, Any]) -> bool:
    try:
        NodeInfo(0, node)
    except ValueError:
        return False
    return True


def register() -> None:
    from fleet import simulator

    simulator.set_placement_engine(engine_placer)
