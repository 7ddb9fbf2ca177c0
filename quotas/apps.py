from __future__ import annotations

from datetime import datetime

from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """Hierarchical business-group quotas with whole-workload admission."""

    name = "quotas"
    verbose_name = "Quotas"

    def ready(self) -> None:
        from core.events import register_topic_kind
        from core.roles import grant_to_operators
        from fleet.signals import finished_pods_needed, workloads_changed

        grant_to_operators("quotas.add_quotagroup", "quotas.change_quotagroup", "quotas.delete_quotagroup",
                           "quotas.rollback_quotagroup")
        from . import delegation
        from .models import QuotaGroup

        delegation.register()
        delegation.register_scope()
        register_topic_kind("quotas", model=QuotaGroup)
        from .documents import register_documents

        register_documents()  # QuotaGroup as a meridian.io/v1 document (config as code)
        workloads_changed.connect(_queue_ledger_sync, dispatch_uid="quotas-workloads-changed")
        finished_pods_needed.connect(_cash_not_accrued_since, dispatch_uid="quotas-finished-pods-needed")


def _queue_ledger_sync(sender, cluster, keys, **_) -> None:
    """Workloads an inventory sync changed: align their charges, as a job per chunk."""
    from core.jobs import enqueue

    for start in range(0, len(keys), 2000):
        enqueue("quotas.sync_workloads", cluster.name, [list(k) for k in keys[start : start + 2000]], obj=cluster)


def _cash_not_accrued_since(sender, **_) -> datetime | None:
    """Cash budgets charge the pods that ran since their last accrual: those pods stay."""
    from .reconcile import cash_accrued_until

    return cash_accrued_until()
