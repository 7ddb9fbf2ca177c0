from django.apps import AppConfig


class FleetConfig(AppConfig):
    """Member clusters, nodes, workloads and pods: the inventory every other area reads."""

    name = "fleet"
    verbose_name = "Fleet"
