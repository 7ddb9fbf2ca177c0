"""Token authentication for the REST API and the websocket: Meridian's own API tokens
(``Authorization: Token <key>``) and the identity provider's access tokens
(``Authorization: Bearer <JWT>``, ``core.oidc`` validates them, ``core.sso`` finds the user)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from . import oidc, sso
from .errors import Refused, Unavailable
from .models import APIToken, hash_token

logger = logging.getLogger(__name__)

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


class KeywordAuthentication(authentication.BaseAuthentication):
    """``Authorization: <keyword> <credentials>``: the header parsed once for every scheme;
    subclasses set ``keyword``, ``encoding`` and ``malformed`` and check the credentials."""

    keyword = ""
    encoding = "utf-8"
    malformed = ""

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(self.malformed)
        try:
            return self.authenticate_credentials(parts[1].decode(self.encoding))
        except UnicodeError:
            raise exceptions.AuthenticationFailed(_("Token contains invalid characters.")) from None

    def authenticate_credentials(self, raw: str) -> tuple[Any, Any]:
        raise NotImplementedError

    def authenticate_header(self, request) -> str:
        return self.keyword


class APITokenAuthentication(KeywordAuthentication):
    """``Authorization: Token <key>`` against hashed, optionally expiring tokens."""

    keyword = "Token"
    malformed = _("Malformed Authorization header: use 'Token <key>'.")

    def authenticate_credentials(self, raw: str) -> tuple[Any, APIToken]:
        found = user_for_token(raw)
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid or expired token."))
        return found


@dataclass(frozen=True)
class ProviderToken:
    """``request.auth`` for an identity provider's access token: its claims; it may write
    (the user's role decides what)."""

    claims: dict[str, Any] = field(default_factory=dict)
    write_enabled: bool = True


def user_for_provider_token(raw: str) -> tuple[Any, ProviderToken]:
    """The user an identity provider's access token acts as; ``InvalidToken`` or ``Refused``
    when it is not accepted, ``Unavailable`` when the provider's keys cannot be read."""
    if not oidc.enabled():
        raise oidc.InvalidToken("single sign-on is not configured")
    try:
        claims = oidc.validate_access_token(raw)
    except httpx.HTTPError as exc:
        logger.warning("the identity provider's keys could not be read: %s", exc)
        raise Unavailable("unavailable",
                          gettext("The identity provider's signing keys cannot be read right now; retry.")) from None
    return sso.user_for_claims(claims), ProviderToken(claims)


class ProviderTokenAuthentication(KeywordAuthentication):
    """``Authorization: Bearer <access token>`` from the identity provider: a JWT it signed
    for Meridian's audience (``MERIDIAN_OIDC_AUDIENCE``), acting as the user it names."""

    keyword = "Bearer"
    encoding = "ascii"
    malformed = _("Malformed Authorization header: use 'Bearer <access token>'.")

    def authenticate_credentials(self, raw: str) -> tuple[Any, ProviderToken]:
        try:
            return user_for_provider_token(raw)
        except oidc.InvalidToken as exc:
            raise exceptions.AuthenticationFailed(_("Invalid provider token: %(why)s.") % {"why": exc}) from None
        except Unavailable:
            raise
        except Refused as exc:
            raise exceptions.AuthenticationFailed(exc.detail) from None


class WebsocketTokenMiddleware:
    """Authenticate a websocket by ``Authorization: Token <key>`` (or an identity provider's
    ``Bearer`` access token) when no session user is set.

    Browsers use the session cookie; scripts and agents send the header.
    """

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            keyword, raw = _header_token(scope)
            if raw:
                found = await database_sync_to_async(_websocket_user)(keyword, raw)
                scope = dict(scope, user=found[0] if found else AnonymousUser(), auth=found[1] if found else None)
        return await self.inner(scope, receive, send)


def _websocket_user(keyword: str, raw: str) -> tuple[Any, Any] | None:
    if keyword == "token":
        return user_for_token(raw)
    try:
        return user_for_provider_token(raw)
    except (oidc.InvalidToken, Refused):
        return None


def _header_token(scope) -> tuple[str, str | None]:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            parts = value.decode("latin1").split()
            if len(parts) == 2 and parts[0].lower() in ("token", "bearer"):
                return parts[0].lower(), parts[1]
    return "", None


def WebsocketAuthMiddlewareStack(inner):  # noqa: N802 - mirrors Channels' AuthMiddlewareStack
    return AuthMiddlewareStack(WebsocketTokenMiddleware(inner))
