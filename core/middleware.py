"""Request id propagation and login-everywhere enforcement."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequiredMiddleware
from django.http import HttpRequest, HttpResponse

from . import context

_REQUEST_ID = re.compile(r"^[0-9a-fA-F-]{32,36}$")


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
