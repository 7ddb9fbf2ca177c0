"""Request id propagation, login-everywhere enforcement, re-checking single sign-on sessions, and
static files scanned once per process."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import httpx
from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware
from django.http import HttpRequest, HttpResponse
from servestatic.middleware import ServeStaticMiddleware

from . import context, oidc, sso
from .errors import Refused

logger = logging.getLogger(__name__)
#: After a failed re-check (the provider unreachable), try again this much sooner than a full interval.
RETRY_SECONDS = 60

_REQUEST_ID = re.compile(r"^[0-9a-fA-F-]{32,36}$")


class StaticFilesMiddleware(ServeStaticMiddleware):
    """servestatic, with the static directories scanned once per process, not once per instance.

    Django builds the middleware chain once per handler, and the test client builds a handler
    per client: the scan (a stat and a realpath for each of ~200 files) was four fifths of the
    access matrix's time. Files do not change under a running process (``collectstatic`` runs at
    build time; with DEBUG, servestatic's autorefresh looks each file up per request anyway).
    """

    _scanned: ClassVar[tuple[dict[str, Any], list[tuple[str, str]]] | None] = None

    def add_files_from_finders(self) -> None:
        if StaticFilesMiddleware._scanned is None:
            super().add_files_from_finders()
            StaticFilesMiddleware._scanned = (dict(self.files), list(self.directories))
            return
        files, directories = StaticFilesMiddleware._scanned
        self.files.update(files)
        for root, prefix in reversed(directories):
            self.insert_directory(root, prefix)


class RequestIDMiddleware:
    """Give every request an id (honouring a well-formed incoming ``X-Request-ID``).

    The id groups the audit entries one request wrote and is echoed back to the caller.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.id = _incoming_id(request.headers.get("X-Request-ID", "")) or uuid.uuid4()
        token = context.bind_request(request)
        try:
            response = self.get_response(request)
        finally:
            context.unbind_request(token)
        response["X-Request-ID"] = str(request.id)
        return response


def _incoming_id(value: str) -> uuid.UUID | None:
    if not _REQUEST_ID.match(value):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


class LoginRequiredMiddleware(DjangoLoginRequiredMiddleware):
    """Django's login-everywhere, except REST views, which answer 401/403 themselves.

    DRF authenticates tokens inside the view, so a redirect to the login page here would
    turn every token-authenticated API call into a 302.
    """

    def process_view(self, request, view_func, view_args, view_kwargs):
        if _is_rest_view(view_func):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


def _is_rest_view(view_func: Callable) -> bool:
    from rest_framework.views import APIView

    view_class = getattr(view_func, "cls", None) or getattr(view_func, "view_class", None)
    return isinstance(view_class, type) and issubclass(view_class, APIView)


class OIDCSessionMiddleware:
    """A session signed in through the identity provider is re-checked with it every
    ``MERIDIAN_OIDC_RECHECK_SECONDS`` (the refresh-token grant, like mozilla-django-oidc's
    SessionRefresh but without a browser round trip, so API calls and page fetches alike):

    - the provider refuses (the user was disabled there, their provider session ended): the
      Meridian session ends at once, and the request goes on signed out (a page: to the login);
    - it renews: the new ID token's groups are applied (``core.sso``: a group removed at the
      provider removes the right within one interval), a user it now maps to someone else or
      that Meridian deactivated is signed out;
    - the provider cannot be reached: the session goes on and is checked again a minute later
      (an outage of the provider does not sign everyone out).

    Sessions are besides capped at ``MERIDIAN_OIDC_SESSION_SECONDS`` (set at sign-in).

    With single sign-on on, pages also let forms lead to the provider (``form-action``): the
    sign-out form posts to Meridian, which redirects to the provider's end-session page, and
    browsers hold a form's redirects to the page's ``form-action``.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not oidc.enabled():
            return self.get_response(request)
        session = getattr(request, "session", None)
        if session is not None and sso.SESSION_REFRESH_TOKEN in session:
            checked = session.get(sso.SESSION_CHECKED, 0)
            if time.time() - checked >= settings.MERIDIAN_OIDC_RECHECK_SECONDS:
                recheck(request)
        response = self.get_response(request)
        update = dict(getattr(response, "_csp_update", None) or {})
        update["form-action"] = [*update.get("form-action", []), oidc.origin()]
        response._csp_update = update  # read by django-csp's middleware, outside this one
        return response


def recheck(request: HttpRequest) -> None:
    """Ask the provider whether the session's user is still theirs (see ``OIDCSessionMiddleware``)."""
    session = request.session
    try:
        tokens = oidc.refresh(session[sso.SESSION_REFRESH_TOKEN])
    except oidc.Refused as exc:
        logger.info("single sign-on session of %s ended: the provider refused to renew it (%s)", request.user, exc)
        logout(request)
        return
    except (httpx.HTTPError, ValueError) as exc:
        logger.warning("single sign-on session re-check failed, retrying in a minute: %s", exc)
        session[sso.SESSION_CHECKED] = time.time() - settings.MERIDIAN_OIDC_RECHECK_SECONDS + RETRY_SECONDS
        return
    claims = tokens.get("claims")
    if claims:
        try:
            user = sso.sign_in(claims)
        except Refused:
            user = None
        if user is None or user.pk != request.user.pk:
            logout(request)
            return
    session[sso.SESSION_REFRESH_TOKEN] = tokens.get("refresh_token") or session[sso.SESSION_REFRESH_TOKEN]
    session[sso.SESSION_ID_TOKEN] = tokens.get("id_token") or session.get(sso.SESSION_ID_TOKEN, "")
    session[sso.SESSION_CHECKED] = time.time()
