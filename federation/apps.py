from django.apps import AppConfig


class FederationConfig(AppConfig):
    """Multi-cluster workloads, the global scheduler and water-level weights."""

    name = "federation"
    verbose_name = "Federation"

    def ready(self) -> None:
        from core.events import register_topic_kind
        from core.roles import grant_to_operators

        grant_to_operators(
            "federation.add_federatedobject", "federation.change_federatedobject", "federation.delete_federatedobject",
            "federation.rollback_federatedobject", "federation.rollout_federatedobject", "federation.reschedule_federatedobject",
            "federation.add_propagationpolicy", "federation.change_propagationpolicy", "federation.delete_propagationpolicy",
            "federation.add_overridepolicy", "federation.change_overridepolicy", "federation.delete_overridepolicy",
        )
        from core import live
        from fleet.models import Cluster
        from fleet.signals import cluster_cordoned

        from . import services
        from .models import OBJECT_LIVE, FederatedObject
        from .reconcile import object_events

        cluster_cordoned.connect(services.cluster_cordoned, dispatch_uid="federation-cluster-cordoned")
        live.register(OBJECT_LIVE, object_events)
        _scope()
        register_topic_kind("federation", model=FederatedObject)
        register_topic_kind("federation-object", model=FederatedObject, lookup=_object)
        register_topic_kind("water-levels", model=Cluster)
        from .documents import register_documents

        register_documents()  # policies and federated objects as meridian.io/v1 documents (config as code)


def _scope() -> None:
    """Namespace bindings reach the federated objects and policies of their namespaces
    (fleet-wide policies stay fleet-wide roles'); cluster bindings the members placed on their
    clusters and the clusters' water levels."""
    from core import scopes
    from core.models import RoleBinding

    from .models import (
        FederatedObject,
        FederatedRevision,
        MemberObject,
        OverridePolicy,
        PropagationPolicy,
        WaterLevelRollup,
        WaterLevelSample,
    )

    namespaces, clusters = RoleBinding.Scope.NAMESPACES, RoleBinding.Scope.CLUSTERS
    scopes.register_kind(namespaces, scopes.names_q("namespace"))
    for model in (FederatedObject, PropagationPolicy, OverridePolicy):
        scopes.register_scoped(model, namespaces, subject=True)
    for model in (FederatedRevision, MemberObject):
        scopes.register_scoped(model, namespaces, via="object")
    for model in (MemberObject, WaterLevelSample, WaterLevelRollup):
        scopes.register_scoped(model, clusters, via="cluster")


def _object(object_id: str):
    from .models import FederatedObject

    return FederatedObject.objects.filter(pk=int(object_id)).first() if object_id.isdigit() else None
