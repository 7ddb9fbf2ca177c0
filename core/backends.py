"""The authentication backend: Django's, with local passwords that can be turned off.

``MERIDIAN_LOCAL_LOGIN=false`` (single sign-on only): no password is checked anywhere — the
login form, Django's admin, the API token endpoint (``POST /api/v1/auth/token/``) — because
they all authenticate through this backend. Sign-ins through the identity provider log in
with it too (``core.sso_views``), and permissions are Django's ``ModelBackend``'s.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend


class MeridianBackend(ModelBackend):
    def authenticate(self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any) -> Any:
        if not settings.MERIDIAN_LOCAL_LOGIN:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
