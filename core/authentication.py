"""Token authentication for the REST API and the websocket."""

from __future__ import annotations

from datetime import timedelta

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from .models import APIToken, hash_token

LAST_USED_RESOLUTION = timedelta(minutes=1)


def user_for_token(raw: str) -> tuple[object, APIToken] | None:
    """The active user and token for a raw key, or None; records use at most once a minute."""
    try:
        token = APIToken.objects.select_related("user").get(key_hash=hash_token(raw))
    except APIToken.DoesNotExist:
        return None
    if token.is_expired or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used is None or now - token.last_used > LAST_USED_RESOLUTION:
        APIToken.objects.filter(pk=token.pk).update(last_used=now)
    return token.user, token


class APITokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Token <key>`` against hashed, optionally expiring tokens."""

    keyword = "Token"

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(_("Malformed Authorization header: use 'Token <key>'."))
        try:
            raw = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(_("Token contains invalid characters.")) from None
        found = user_for_token(raw)
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid or expired token."))
        return found

    def authenticate_header(self, request) -> str:
        return self.keyword


class WebsocketTokenMiddleware:
    """Authenticate a websocket by ``Authorization: Token <key>`` when no session user is set.

    Browsers use the session cookie; scripts and agents send the header.
    """

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            raw = _header_token(scope)
            if raw:
                found = await database_sync_to_async(user_for_token)(raw)
                scope = dict(scope, user=found[0] if found else AnonymousUser(), auth=found[1] if found else None)
        return await self.inner(scope, receive, send)


def _header_token(scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            parts = value.decode("latin1").split()
            if len(parts) == 2 and parts[0].lower() == "token":
                return parts[1]
    return None


def WebsocketAuthMiddlewareStack(inner):  # noqa: N802 - mirrors Channels' AuthMiddlewareStack
    return AuthMiddlewareStack(WebsocketTokenMiddleware(inner))
