"""What every machine endpoint of a member cluster shares: node agents' and API servers'
bearer tokens, the one error body, and entity tags.

Machines are not users: they send ``Authorization: Bearer <token>`` with a token issued to
their cluster (``fleet.tokens``), and get the REST API's error body
(``{"code", "detail", "errors"}``) with ``WWW-Authenticate`` on a 401.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from core.errors import error_body

from .tokens import token_cluster


def bearer(authorization: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value ("" for anything else)."""
    scheme, _, raw = authorization.partition(" ")
    return raw.strip() if scheme.lower() == "bearer" else ""


def authorize_agent(request: HttpRequest, cluster: str) -> HttpResponse | None:
    """None when the bearer token is an agent token of ``cluster``; else the refusal."""
    raw = bearer(request.headers.get("Authorization", ""))
    if not raw:
        return problem(401, "unauthenticated", "Send Authorization: Bearer <agent token>.")
    owner = token_cluster(raw, "agent")
    if owner is None:
        return problem(401, "unauthenticated", "The agent token is unknown, expired or revoked.")
    if owner[1] != cluster:
        return problem(403, "forbidden", "This agent token belongs to another cluster.")
    return None


AgentView = Callable[[HttpRequest, str, str], HttpResponse]


def agent_endpoint(method: str) -> Callable[[AgentView], AgentView]:
    """A node agent's view of ``(request, cluster, node)``: machines are not users (no session,
    sign-in or CSRF token), only ``method`` is answered, and the view runs only for a bearer
    agent token of ``cluster``."""
    def decorate(view: AgentView) -> AgentView:
        @functools.wraps(view)
        def endpoint(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
            refused = authorize_agent(request, cluster)
            return refused if refused is not None else view(request, cluster, node)

        return csrf_exempt(login_not_required(require_http_methods([method])(endpoint)))

    return decorate


def refusal(status: int, code: str, detail: str) -> tuple[int, dict[str, Any]]:
    """A machine endpoint's refusal as (HTTP status, the one error body), for the webhooks'
    batched answers (an admission decision itself is an AdmissionReview, not this)."""
    return status, error_body(code, detail)


WEBHOOK_UNAUTHORIZED = refusal(401, "unauthenticated", "Send Authorization: Bearer <webhook token> of the calling cluster.")


def too_large(limit: int) -> tuple[int, dict[str, Any]]:
    return refusal(413, "too_large", f"An AdmissionReview is at most {limit} bytes.")


def not_a_review(exc: Exception) -> tuple[int, dict[str, Any]]:
    return refusal(400, "invalid", f"Not an AdmissionReview: {exc}")


def problem(status: int, code: str, detail: str, errors: dict | None = None) -> JsonResponse:
    response = JsonResponse(error_body(code, detail, errors), status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="meridian-agent"'
    return response


def not_modified(etag: str) -> HttpResponse:
    response = HttpResponse(status=304)
    response["ETag"] = etag
    return response


def if_none_match(request: HttpRequest) -> set[str]:
    """The entity tags of the request's If-None-Match (weak ones compared weakly, RFC 9110)."""
    header = request.headers.get("If-None-Match", "")
    tags = {part.strip() for part in header.split(",") if part.strip()}
    return {t[2:] if t.startswith("W/") else t for t in tags}
