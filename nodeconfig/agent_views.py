"""The node-agent HTTP API: ``GET .../config`` (ETag, 304) and ``POST .../status`` (204).

Plain Django views, not DRF: agents are machines with a per-cluster bearer token, not
users, and the poll path must stay lean. ``nodeconfig.fastpath`` answers still-valid
``If-None-Match`` polls before Django is entered at all; this view answers the rest. Redis
is a cache on this path: with Redis down, tokens and ETags are read from the database.
Errors use the REST API's one body (``{"code", "detail", "errors"}``).
"""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse

from core.context import acting_as
from core.errors import NON_FIELD, Refused
from fleet.machine import agent_endpoint, if_none_match, not_modified, problem
from fleet.models import Node

from .agent import effective_config, parse_report, record_reports
from .etags import cached_etag, remember

MAX_REPORT_BYTES = 1_000_000


@agent_endpoint("GET")
def node_config(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    tags = if_none_match(request)
    if tags:
        cached = cached_etag(cluster, node)
        if cached and cached in tags:
            return not_modified(cached)
    row = Node.objects.select_related("cluster").filter(cluster__name=cluster, name=node).first()
    if row is None:
        return problem(404, "not_found", f"Cluster {cluster} has no node {node}.")
    payload, etag = effective_config(row)
    remember(cluster, node, etag, payload["configs"])
    if etag in tags:
        return not_modified(etag)
    response = JsonResponse(payload)
    response["ETag"] = etag
    response["Cache-Control"] = "no-cache"
    return response


@agent_endpoint("POST")
def node_status(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    if len(request.body) > MAX_REPORT_BYTES:
        return problem(413, "too_large", "A status report is at most 1 MB.")
    try:
        body = json.loads(request.body or b"{}")
        applied, errors = parse_report(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        detail = f"Not JSON: {getattr(exc, 'msg', 'nested too deeply')}"
        return problem(400, "parse_error", detail, {NON_FIELD: [detail]})
    except Refused as exc:
        return problem(400, exc.code, exc.detail, exc.errors)
    row = Node.objects.select_related("cluster").filter(cluster__name=cluster, name=node).first()
    if row is None:
        return problem(404, "not_found", f"Cluster {cluster} has no node {node}.")
    try:
        with acting_as(f"agent:{cluster}/{node}", source="agent"):
            record_reports(row.cluster, {node: (applied, errors)})
    except Refused as exc:
        return problem(400, exc.code, exc.detail, exc.errors)
    return HttpResponse(status=204)
