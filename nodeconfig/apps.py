from django.apps import AppConfig


class NodeconfigConfig(AppConfig):
    """Differentiated node-agent configuration (Katalyst Custom Config): targets, revisions, rollouts."""

    name = "nodeconfig"
    verbose_name = "Node config"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from core import live, metrics
        from core.events import register_topic_kind
        from core.roles import grant_to_operators
        from fleet.signals import nodes_changed

        from .models import TARGET_LIVE, ConfigTarget
        from .rollout import progress_events, rollout_metrics

        metrics.register("nodeconfig", rollout_metrics)

        grant_to_operators("nodeconfig.add_configtarget", "nodeconfig.change_configtarget", "nodeconfig.delete_configtarget",
                           "nodeconfig.rollback_configtarget", "nodeconfig.rollout_configtarget",
                           "nodeconfig.downgrade_configtarget")
        _scope()
        register_topic_kind("nodeconfig", model=ConfigTarget)
        register_topic_kind("nodeconfig-target", model=ConfigTarget, lookup=_target)
        live.register(TARGET_LIVE, progress_events)
        from .documents import register_documents

        register_documents()  # ConfigType and ConfigTarget as meridian.io/v1 documents (config as code)
        nodes_changed.connect(_queue_node_reconcile, dispatch_uid="nodeconfig-nodes-changed")
        from .seed_types import ensure_seed_types

        post_migrate.connect(ensure_seed_types, sender=self, dispatch_uid="nodeconfig-seed-types")
        from core.backup import database_restored

        from .etags import forget_all_etags

        database_restored.connect(forget_all_etags, dispatch_uid="nodeconfig-forget-etags")


def _scope() -> None:
    """Cluster bindings reach the targets of their clusters (fleet-wide ones stay fleet-wide
    roles'), the nodes' configs and the revisions; config types are schemas, readable by all."""
    from core import scopes
    from core.models import RoleBinding

    from .models import ConfigRevision, ConfigTarget, ConfigType, NodeConfig

    clusters = RoleBinding.Scope.CLUSTERS
    scopes.register_scoped(ConfigTarget, clusters, via="cluster", subject=True)
    scopes.register_scoped(NodeConfig, clusters, via="cluster")
    scopes.register_scoped(ConfigRevision, clusters, via="target__cluster")
    scopes.register_scoped(ConfigType, clusters, via=scopes.EVERYTHING)


def _target(object_id: str):
    from .models import ConfigTarget

    return ConfigTarget.objects.filter(pk=int(object_id)).first() if object_id.isdigit() else None


def _queue_node_reconcile(sender, cluster, names, **_) -> None:
    """Nodes an inventory sync changed: match them again, as a job per chunk (sent after commit)."""
    from core.jobs import enqueue

    for start in range(0, len(names), 5000):
        enqueue("nodeconfig.reconcile_nodes", cluster.name, names[start : start + 5000], obj=cluster)
