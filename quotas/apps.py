from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """Hierarchical business-group quotas with whole-workload admission."""

    name = "quotas"
    verbose_name = "Quotas"

    def ready(self) -> None:
        from core.events import register_topic_kind
        from core.roles import grant_to_operators
        from fleet.signals import workloads_changed

        grant_to_operators("quotas.add_quotagroup", "quotas.change_quotagroup", "quotas.delete_quotagroup")
        register_topic_kind("quotas", permission="quotas.view_quotagroup")
        workloads_changed.connect(_queue_ledger_sync, dispatch_uid="quotas-workloads-changed")


def _queue_ledger_sync(sender, cluster, keys, **_) -> None:
    from .tasks import sync_workloads

    for start in range(0, len(keys), 2000):
        sync_workloads.delay(cluster.name, [list(k) for k in keys[start : start + 2000]])
