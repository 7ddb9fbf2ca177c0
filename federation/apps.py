from django.apps import AppConfig


class FederationConfig(AppConfig):
    """Multi-cluster workloads, the global scheduler and water-level weights."""

    name = "federation"
    verbose_name = "Federation"
