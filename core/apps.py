from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    """Cross-cutting machinery every app uses: auth tokens, roles, audit, jobs, events, sharding."""

    name = "core"
    verbose_name = "Meridian core"

    def ready(self) -> None:
        from . import events, roles, schema  # noqa: F401  (schema registers OpenAPI extensions)

        post_migrate.connect(roles.sync_role_permissions_handler, dispatch_uid="meridian-roles")
        events.register_topic_kind("system", permission=None)
        events.register_topic_kind("job", permission="core.view_job")
        events.register_topic_kind("audit", permission="core.view_objectchange")
