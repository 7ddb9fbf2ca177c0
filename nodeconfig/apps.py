from django.apps import AppConfig


class NodeconfigConfig(AppConfig):
    """Differentiated node-agent configuration (Katalyst Custom Config): targets, revisions, rollouts."""

    name = "nodeconfig"
    verbose_name = "Node config"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from core.events import register_topic_kind
        from core.roles import grant_to_operators
        from fleet.signals import nodes_changed

        grant_to_operators("nodeconfig.emergency_downgrade", "nodeconfig.manage_rollout", "nodeconfig.add_configtarget",
                           "nodeconfig.change_configtarget", "nodeconfig.delete_configtarget")
        register_topic_kind("nodeconfig", permission="nodeconfig.view_configtarget")
        register_topic_kind("nodeconfig-target", permission="nodeconfig.view_configtarget")
        nodes_changed.connect(_queue_node_reconcile, dispatch_uid="nodeconfig-nodes-changed")
        from .seed_types import ensure_seed_types

        post_migrate.connect(ensure_seed_types, sender=self, dispatch_uid="nodeconfig-seed-types")


def _queue_node_reconcile(sender, cluster, names, **_) -> None:
    from .tasks import reconcile_nodes_task

    for start in range(0, len(names), 5000):
        reconcile_nodes_task.delay(cluster.name, names[start : start + 5000])
