"""The node-agent HTTP API: ``GET .../config`` (ETag, 304) and ``POST .../status`` (204).

Plain Django views, not DRF: agents are machines with a per-cluster bearer token, not
users, and the poll path must stay lean. ``nodeconfig.fastpath`` answers still-valid
``If-None-Match`` polls before Django is entered at all; this view answers the rest.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from core.context import acting_as
from core.redis import get_redis
from fleet.models import Node
from fleet.tokens import token_cluster

from .agent import ReportError, effective_config, etag_key, parse_report, record_reports, remember

MAX_REPORT_BYTES = 1_000_000


def bearer(request: HttpRequest) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    return raw.strip() if scheme.lower() == "bearer" else ""


def _authorize(request: HttpRequest, cluster: str) -> HttpResponse | None:
    """None when the bearer token is an agent token of ``cluster``; else the refusal."""
    raw = bearer(request)
    if not raw:
        return _problem(401, "unauthenticated", "Send Authorization: Bearer <agent token>.")
    owner = token_cluster(raw, "agent")
    if owner is None:
        return _problem(401, "unauthenticated", "The agent token is unknown, expired or revoked.")
    if owner[1] != cluster:
        return _problem(403, "forbidden", "This agent token belongs to another cluster.")
    return None


def _problem(status: int, code: str, detail: str) -> JsonResponse:
    response = JsonResponse({"code": code, "detail": detail}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="meridian-agent"'
    return response


def not_modified(etag: str) -> HttpResponse:
    response = HttpResponse(status=304)
    response["ETag"] = etag
    return response


@csrf_exempt
@login_not_required
@require_GET
def node_config(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    refusal = _authorize(request, cluster)
    if refusal is not None:
        return refusal
    if_none_match = request.headers.get("If-None-Match", "")
    if if_none_match:
        cached = get_redis().get(etag_key(cluster, node))
        if cached and cached.decode() in _etags(if_none_match):
            return not_modified(cached.decode())
    row = Node.objects.select_related("cluster").filter(cluster__name=cluster, name=node).first()
    if row is None:
        return _problem(404, "not_found", f"Cluster {cluster} has no node {node}.")
    payload, etag = effective_config(row)
    remember(cluster, node, etag, payload["configs"])
    if etag in _etags(if_none_match):
        return not_modified(etag)
    response = JsonResponse(payload)
    response["ETag"] = etag
    response["Cache-Control"] = "no-cache"
    return response


def _etags(header: str) -> set[str]:
    """The entity tags of an If-None-Match header (weak ones compared weakly, as RFC 9110 says)."""
    tags = {part.strip() for part in header.split(",") if part.strip()}
    return {t[2:] if t.startswith("W/") else t for t in tags}


@csrf_exempt
@login_not_required
@require_POST
def node_status(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    refusal = _authorize(request, cluster)
    if refusal is not None:
        return refusal
    if len(request.body) > MAX_REPORT_BYTES:
        return _problem(413, "too_large", "A status report is at most 1 MB.")
    try:
        body = json.loads(request.body or b"{}")
        applied, errors = parse_report(body)
    except json.JSONDecodeError as exc:
        return JsonResponse({"non_field_errors": [f"Not JSON: {exc.msg}"]}, status=400)
    except ReportError as exc:
        return JsonResponse({exc.field: [str(exc)]}, status=400)
    row = Node.objects.select_related("cluster").filter(cluster__name=cluster, name=node).first()
    if row is None:
        return _problem(404, "not_found", f"Cluster {cluster} has no node {node}.")
    try:
        with acting_as(f"agent:{cluster}/{node}", source="agent"):
            record_reports(row.cluster, {node: (applied, errors)})
    except ReportError as exc:
        return JsonResponse({exc.field: [str(exc)]}, status=400)
    return HttpResponse(status=204)
