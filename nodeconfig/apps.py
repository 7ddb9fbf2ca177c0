from django.apps import AppConfig


class NodeconfigConfig(AppConfig):
    """Differentiated node-agent configuration (Katalyst Custom Config): targets, revisions, rollouts."""

    name = "nodeconfig"
    verbose_name = "Node config"
