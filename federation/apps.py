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
            "federation.manage_rollout", "federation.reschedule_federatedobject",
            "federation.add_propagationpolicy", "federation.change_propagationpolicy", "federation.delete_propagationpolicy",
            "federation.add_overridepolicy", "federation.change_overridepolicy", "federation.delete_overridepolicy",
            "federation.cordon_cluster",
        )
        register_topic_kind("federation", permission="federation.view_federatedobject")
        register_topic_kind("federation-object", permission="federation.view_federatedobject")
        register_topic_kind("water-levels", permission="fleet.view_cluster")
