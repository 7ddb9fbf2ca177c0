from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps
from django.db.models.signals import post_migrate


class ReadOnlyAdminConfig(admin_apps.AdminConfig):
    """Django's admin with ``core.admin_site.ReadOnlyAdminSite`` as its default site: read-only in the
    embedded mode, never mounted in production (``config/urls.py``)."""

    default = False  # named in INSTALLED_APPS; "core" itself is CoreConfig
    default_site = "core.admin_site.ReadOnlyAdminSite"


class CoreConfig(AppConfig):
    """Cross-cutting machinery every app uses: auth tokens, roles, audit, jobs, events, sharding."""

    name = "core"
    verbose_name = "Meridian core"

    def ready(self) -> None:
        from django.core import checks

        from . import events, roles, schema, scopes, sso  # noqa: F401  (schema registers OpenAPI extensions)
        from .models import Job, ObjectChange

        post_migrate.connect(roles.sync_role_permissions_handler, dispatch_uid="meridian-roles")
        checks.register(sso.check)
        scopes.register_records(Job)  # a scoped user reads the jobs and audit entries of what is in scope
        scopes.register_records(ObjectChange)
        events.register_topic_kind("system")
        events.register_topic_kind("job", model=Job, lookup=_job)
        events.register_topic_kind("audit", model=ObjectChange)


def _job(object_id: str):
    from .models import Job

    return Job.objects.filter(pk=int(object_id)).first() if object_id.isdigit() else None
