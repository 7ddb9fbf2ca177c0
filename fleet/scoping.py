"""Cluster bindings (``core.scopes``): a role held on some clusters, named or selected by their
labels, reaches those clusters and what lives in them (nodes, workloads, pods, their tokens);
the other areas declare their own cluster-scoped models against the same kind."""

from __future__ import annotations

from django.db.models import Q

from core import scopes
from core.models import RoleBinding
from kube.labels import SelectorError, parse_selector

from .models import Cluster, ClusterToken, Node, Pod, Workload
from .selectors import selector_q

NOTHING = Q(pk__in=[])


def clusters_q(binding: RoleBinding) -> Q:
    """The clusters a binding names or selects (a selector that no longer parses selects none)."""
    q = Q(name__in=binding.names) if binding.names else NOTHING
    if binding.selector:
        try:
            q |= selector_q(parse_selector(binding.selector))
        except SelectorError:
            pass
    return q


def select(binding: RoleBinding, via: str, action: str) -> Q:
    """The kind's selection, on a model ``via`` a cluster foreign key."""
    q = clusters_q(binding)
    return q if not via else Q(**{f"{via}__in": Cluster.objects.filter(q).values("pk")})


def register() -> None:
    scopes.register_kind(RoleBinding.Scope.CLUSTERS, select)
    scopes.register_scoped(Cluster, RoleBinding.Scope.CLUSTERS, subject=True)
    for model in (Node, Workload, Pod, ClusterToken):
        scopes.register_scoped(model, RoleBinding.Scope.CLUSTERS, via="cluster")
