"""The authentication backend: Django's, with local passwords that can be turned off.

``MERIDIAN_LOCAL_LOGIN=false`` (single sign-on only): no password is checked anywhere — the
login form, Django's admin, the API token endpoint (``POST /api/v1/auth/token/``) — because
they all authenticate through this backend. Sign-ins through the identity provider log in
with it too (``core.sso_views``), and permissions are Django's ``ModelBackend``'s, read in one
query instead of two (``get_all_permissions``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Permission


class MeridianBackend(ModelBackend):
    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any) -> Any:
        if not settings.MERIDIAN_LOCAL_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_all_permissions(self, user_obj: Any, obj: Any = None) -> set[str]:
        """Django's answer (the user's own permissions and their groups'), in one query, a UNION,
        where ``ModelBackend`` makes two: every request a session or a token makes asks it once,
        for the role check. Cached on the user object, as Django caches it."""
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None:
            return set()
        if not hasattr(user_obj, "_perm_cache"):
            fields = ("content_type__app_label", "codename")
            if user_obj.is_superuser:
                rows = Permission.objects.values_list(*fields).order_by()
            else:
                own = Permission.objects.filter(user=user_obj).values_list(*fields).order_by()
                rows = own.union(Permission.objects.filter(group__user=user_obj).values_list(*fields).order_by())
            user_obj._perm_cache = {f"{app}.{codename}" for app, codename in rows}
        return user_obj._perm_cache
