"""Signing in and out: the login page (passwords, unless ``MERIDIAN_LOCAL_LOGIN`` is off, and the
single sign-on button when it is configured), the authorization code flow's two ends, and a
sign-out that ends the provider's session too (RP-initiated logout).

The flow (``core.oidc.client``, Authlib): ``/accounts/oidc/login/`` sends the browser to the
provider with state, nonce and a PKCE challenge kept in the session; the provider sends it
back to ``/accounts/oidc/callback/``, where the code is exchanged (with the verifier), the ID
token checked (signature, issuer, audience, nonce, expiry) and its claims turned into the
user (``core.sso.sign_in``, rights from the group mapping). Anything refused comes back to
the login page saying why, with nothing signed in.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import requests
from authlib.integrations.base_client import OAuthError
from django.conf import settings
from django.contrib.auth import login as auth_login
from django.contrib.auth import logout as auth_logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from joserfc.errors import JoseError

from . import oidc, sso
from .errors import Refused

logger = logging.getLogger(__name__)
BACKEND = "core.backends.MeridianBackend"
SESSION_NEXT = "oidc_next"


def login_context() -> dict[str, Any]:
    return {"sso_enabled": oidc.enabled(), "local_login": settings.MERIDIAN_LOCAL_LOGIN,
            "sso_label": settings.MERIDIAN_OIDC_BUTTON}


class LoginView(auth_views.LoginView):
    """Django's login page, which also offers single sign-on and refuses passwords when they
    are turned off (the backend refuses them everywhere else)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(**kwargs) | login_context()

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.MERIDIAN_LOCAL_LOGIN:
            return refused_login(request, _("Passwords are turned off here: sign in with single sign-on."), status=403)
        return super().post(request, *args, **kwargs)


class LogoutView(auth_views.LogoutView):
    """Signs out of Meridian, and for a session that came from the provider, out of the
    provider too: its end-session endpoint with the ID token as hint, back to our login page."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        id_token = request.session.get(sso.SESSION_ID_TOKEN) if hasattr(request, "session") else None
        if not id_token or not oidc.enabled():
            return super().post(request, *args, **kwargs)
        auth_logout(request)
        try:
            return oidc.client().logout_redirect(request, post_logout_redirect_uri=request.build_absolute_uri(reverse("login")),
                                                 id_token_hint=id_token)
        except (RuntimeError, requests.RequestException) as exc:  # no end-session endpoint, or unreachable
            logger.warning("signed out of Meridian only: the provider's end-session endpoint failed: %s", exc)
            return redirect("login")


def refused_login(request: HttpRequest, detail: str, *, status: int) -> HttpResponse:
    """The login page again, saying why signing in failed."""
    context = login_context() | {"sso_error": detail, "next": ""}
    return render(request, "registration/login.html", context, status=status)


def sso_endpoint(view: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """One end of the provider round trip: open to anyone signed out, GET only, never cached,
    and 404 while single sign-on is not configured."""

    @functools.wraps(view)
    def endpoint(request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            raise Http404("single sign-on is not configured")
        return view(request)

    return login_not_required(require_GET(never_cache(endpoint)))


@sso_endpoint
def sso_login(request: HttpRequest) -> HttpResponse:
    """Off to the provider."""
    wanted = request.GET.get("next", "")
    if url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        request.session[SESSION_NEXT] = wanted
    try:
        return oidc.client().authorize_redirect(request, request.build_absolute_uri(reverse("oidc-callback")))
    except (requests.RequestException, httpx.HTTPError, ValueError) as exc:
        logger.warning("single sign-on: the provider's discovery document could not be read: %s", exc)
        return refused_login(request, _("The identity provider cannot be reached right now; try again."), status=503)


@sso_endpoint
def sso_callback(request: HttpRequest) -> HttpResponse:
    """Back from the provider: check everything, sign the user in with their mapped rights."""
    try:
        tokens = oidc.client().authorize_access_token(request)
    except (OAuthError, JoseError) as exc:
        logger.info("single sign-on refused: %s", exc)
        return refused_login(request, _("Single sign-on failed: %(why)s") % {"why": exc}, status=403)
    except (requests.RequestException, httpx.HTTPError) as exc:
        logger.warning("single sign-on: the provider could not be reached: %s", exc)
        return refused_login(request, _("The identity provider cannot be reached right now; try again."), status=503)
    claims = tokens.get("userinfo")
    if not claims:
        return refused_login(request, _("The provider sent no ID token (is the openid scope requested?)."), status=403)
    try:
        user = sso.sign_in(claims)
    except Refused as exc:
        return refused_login(request, exc.detail, status=403)
    wanted = request.session.pop(SESSION_NEXT, "")
    auth_login(request, user, backend=BACKEND)
    request.session[sso.SESSION_ID_TOKEN] = tokens.get("id_token", "")
    if tokens.get("refresh_token"):
        request.session[sso.SESSION_REFRESH_TOKEN] = tokens["refresh_token"]
    request.session[sso.SESSION_CHECKED] = time.time()
    request.session.set_expiry(settings.MERIDIAN_OIDC_SESSION_SECONDS)
    return redirect(wanted or settings.LOGIN_REDIRECT_URL)
