from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """Hierarchical business-group quotas with whole-workload admission."""

    name = "quotas"
    verbose_name = "Quotas"
