from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """Scheduling policies, templates and bindings; placement simulator; CPU co-location."""

    name = "scheduling"
    verbose_name = "Scheduling"
