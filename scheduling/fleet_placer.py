"""The fleet simulator's placer (``fleet.simulator``, the simulated clusters behind the simulator
connector): where its pods go, decided by kube-scheduler's scheduling cycle over plain node
objects, under the scheduling policy of the simulated cluster (its Meridian label
``scheduling.meridian.io/policy``, else the fleet's default policy, as the pod scheduler uses
for pods that name none), or under the engine's default policy (``engine.Policy.default()``:
TaintToleration, NodeAffinity, NodeResourcesFit, InterPodAffinity filters; upstream's score
plugins and weights) where no cluster is named.

``fleet.simulator`` sits below scheduling in the layers, so it does not import this: the
scheduling app registers it (``register``, with the database's policy lookup) when Django
starts. Pure: nothing here touches Django (the lookup is handed in); a node the engine cannot
read (a patched node with malformed quantities) takes no pods, and a pod it cannot read stays
Pending, as with a real scheduler. (It was ``simplacer.py``; the placement simulator page is
``whatif``, which does not use this.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .cluster import ClusterState
from .engine import Policy, Scheduler

#: The policy of a Meridian cluster, by its name.
PolicyLookup = Callable[[str], Policy]


def engine_placer(nodes: Sequence[Mapping[str, Any]], cluster: str | None = None, *,
                  policies: PolicyLookup | None = None) -> Callable[[Sequence[Mapping[str, Any]]], list[str | None]]:
    """A function placing replicas of one template (pods equal but for their names), one after
    another with each placement assumed: the chosen node's name, or None, per pod."""
    policy = policies(cluster) if policies is not None and cluster is not None else Policy.default()
    scheduler = Scheduler(policy, cluster=ClusterState(nodes, skip_unreadable=True))

    def place(pods: Sequence[Mapping[str, Any]]) -> list[str | None]:
        try:
            return [placement.node for placement in scheduler.schedule_replicas(pods)]
        except ValueError:  # a pod the engine cannot read stays Pending, as its replicas do
            return [None] * len(pods)

    return place


def register(policies: PolicyLookup | None = None) -> None:
    from fleet import simulator

    simulator.set_placement_engine(functools.partial(engine_placer, policies=policies) if policies else engine_placer)
