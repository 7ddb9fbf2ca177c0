"""Django's admin, read-only: nothing writes around the services.

Every change in Meridian goes through a service that validates it and writes its audit entry
(``core.users``, ``core.tokens``, ``fleet.services``, …); the in-app Administration section is
where admins change things. Django's admin would write rows directly (users, tokens, jobs,
audit entries), so:

- in production (``MERIDIAN_ENV=production``) it is not mounted at all (``config/urls.py``);
- in the embedded default it is a read-only browser of the tables: ``core.admin_site.ReadOnlyAdminSite``
  (the default site, through ``core.apps.ReadOnlyAdminConfig``) wraps every ``ModelAdmin``
  registered on it — Django's own for users and groups included — so nothing can be added,
  changed or deleted, and the bulk delete action is gone.
"""

from __future__ import annotations

from django.contrib import admin

from .admin_site import ReadOnlyModelAdmin
from .models import APIToken, Job, ObjectChange


@admin.register(APIToken)
class APITokenAdmin(ReadOnlyModelAdmin):
    list_display = ["key_prefix", "user", "name", "write_enabled", "created", "expires", "last_used"]
    list_filter = ["write_enabled"]
    exclude = ["key_hash"]


@admin.register(Job)
class JobAdmin(ReadOnlyModelAdmin):
    list_display = ["id", "kind", "status", "triggered_by", "created", "finished"]
    list_filter = ["status", "kind"]


@admin.register(ObjectChange)
class ObjectChangeAdmin(ReadOnlyModelAdmin):
    list_display = ["time", "actor", "source", "action", "verb", "object_repr"]
    list_filter = ["action", "source"]
    search_fields = ["actor", "object_repr", "reason"]
