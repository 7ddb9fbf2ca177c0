from django.apps import AppConfig


class FleetConfig(AppConfig):
    """Member clusters, nodes, workloads and pods: the inventory every other area reads."""

    name = "fleet"
    verbose_name = "Fleet"

    def ready(self) -> None:
        from core.backup import database_restored
        from core.events import register_topic_kind
        from core.roles import grant_to_operators

        from .models import Cluster
        from .tokens import forget_cached_tokens

        from . import scoping

        grant_to_operators("fleet.sync_cluster", "fleet.cordon_cluster")
        scoping.register()
        register_topic_kind("fleet", model=Cluster)
        register_topic_kind("cluster", model=Cluster, lookup=lambda name: Cluster.objects.filter(name=name).first())
        database_restored.connect(forget_cached_tokens, dispatch_uid="fleet-forget-cached-tokens")
        from .documents import register_documents

        register_documents()  # Cluster as a meridian.io/v1 document (config as code)
