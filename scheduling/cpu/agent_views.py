"""Node agents read their node's CPU sets: ``GET /api/agent/v1/clusters/{cluster}/nodes/{node}/cpuset``.

The same machine rules as the node-config agent API (``fleet.machine``): a bearer
agent token of the cluster (no token 401, another cluster's 403), ETag with ``If-None-Match``
→ 304, the REST API's one error body. The answer is the node's share pool and every
instance's cpuset — what the annotations say, for agents that apply cgroups themselves.

The ETag comes from the database (one indexed row: the node's allocation version), so it is
never stale; Redis only caches the body under its (per node, per version) ETag, and with
Redis down the body is built from the database.
"""

from __future__ import annotations

import logging

import orjson
from django.http import HttpRequest, HttpResponse
from redis.exceptions import RedisError

from core.redis import get_redis
from fleet.machine import agent_endpoint, if_none_match, not_modified, problem

from ..models import NodeCPU
from .agent import AGENT_BODY_KEY, agent_etag, agent_payload

logger = logging.getLogger(__name__)
BODY_KEY = AGENT_BODY_KEY
BODY_SECONDS = 3600


def _cached(etag: str) -> bytes | None:
    try:
        return get_redis().get(BODY_KEY.format(etag=etag))
    except (RedisError, OSError) as exc:
        logger.warning("cpuset body cache unavailable (%s); answering from the database", exc)
        return None


def _remember(etag: str, body: bytes) -> None:
    try:
        get_redis().set(BODY_KEY.format(etag=etag), body, ex=BODY_SECONDS)
    except (RedisError, OSError) as exc:
        logger.warning("could not cache a cpuset body: %s", exc)


@agent_endpoint("GET")
def node_cpuset(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    row = NodeCPU.objects.filter(cluster__name=cluster, name=node).only(
        "pk", "name", "created", "version", "reserved_cpus", "overcommit_ratio", "topology_digest", "io_queues").first()
    if row is None:
        return problem(404, "not_found", f"Cluster {cluster} has no node {node} with a CPU topology.")
    etag = agent_etag(row)
    if etag in if_none_match(request):
        return not_modified(etag)
    body = _cached(etag)
    if body is None:
        full = NodeCPU.objects.get(pk=row.pk)
        etag = agent_etag(full)  # the row read again: the body and its tag describe one version
        body = orjson.dumps(agent_payload(full, cluster))
        _remember(etag, body)
    response = HttpResponse(body, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = "no-cache"
    return response
