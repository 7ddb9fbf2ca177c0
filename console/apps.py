from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The live operations console: page shell, overview, audit log, websocket fan-out."""

    name = "console"
    verbose_name = "Console"
