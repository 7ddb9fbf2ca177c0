"""Agents' ETags in Redis: what the poll fast path compares ``If-None-Match`` with.

The reconciler refreshes the ETags of the nodes it changed after its transaction commits;
a full poll caches the configs under their (content-addressed) ETag. Redis is a cache
here, never the truth: every read falls back to the database when Redis does not answer,
and an ETag refresh that could not reach Redis becomes a job (``nodeconfig.refresh_etags``)
that the outbox sends again until it succeeds, so a stale ETag cannot keep a change (an
emergency downgrade above all) from an agent once Redis is back.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from redis.exceptions import RedisError

from core.redis import get_redis
from fleet.models import Node

from .models import ConfigType, NodeConfig
from .planning import node_etag

logger = logging.getLogger(__name__)
ETAG_KEY = "meridian:nodeconfig:etag:{cluster}/{node}"
BODY_KEY = "meridian:nodeconfig:configs:{etag}"
#: ETags also expire, so one changed behind the reconciler's back (a restored database)
#: heals within the hour; each node then costs one full poll per hour.
ETAG_SECONDS = 3600
CHUNK = 5000
REDIS_FAULTS = (RedisError, OSError)


def etag_key(cluster: str, node: str) -> str:
    return ETAG_KEY.format(cluster=cluster, node=node)


def cached_etag(cluster: str, node: str) -> str | None:
    """The node's ETag from Redis, or None (absent, or Redis down: then the database answers)."""
    try:
        value = get_redis().get(etag_key(cluster, node))
    except REDIS_FAULTS as exc:
        logger.warning("agent ETag cache unavailable (%s); answering from the database", exc)
        return None
    return value.decode() if value else None


def remember(cluster: str, node: str, etag: str, configs: Mapping[str, Any]) -> None:
    """Cache the node's ETag and the configs it names, for the fast path (best effort).

    The ETag is set only if absent: a reconciler's newer one, written after its commit,
    always wins over this request's possibly older read. The configs are keyed by the
    content-addressed ETag, so caching them can never serve a wrong body.
    """
    try:
        with get_redis().pipeline(transaction=False) as pipe:
            pipe.set(etag_key(cluster, node), etag, nx=True, ex=ETAG_SECONDS)
            pipe.set(BODY_KEY.format(etag=etag), orjson.dumps(configs), ex=ETAG_SECONDS)
            pipe.execute()
    except REDIS_FAULTS as exc:
        logger.warning("could not cache node %s/%s's configs: %s", cluster, node, exc)


def refresh_etags(node_ids: Sequence[int]) -> None:
    """Recompute the ETags of these nodes from their rows (after the rows commit); raises on a Redis fault."""
    types = {t.pk: (t.name, t.default_hash) for t in ConfigType.objects.order_by("name")}
    redis = get_redis()
    for start in range(0, len(node_ids), CHUNK):
        chunk = list(node_ids[start : start + CHUNK])
        served: dict[int, dict[int, tuple]] = defaultdict(dict)
        for node_id, type_id, digest, target, revision in NodeConfig.objects.filter(
                node_id__in=chunk, revision__isnull=False).exclude(config_hash="").values_list(
                "node_id", "config_type_id", "config_hash", "target__name", "revision__number"):
            served[node_id][type_id] = (target, revision, digest)
        with redis.pipeline(transaction=False) as pipe:
            for node_id, cluster, name in Node.objects.filter(pk__in=chunk).values_list("pk", "cluster__name", "name"):
                entries = ((kind, default, *served[node_id].get(type_id, (None, None, default)))
                           for type_id, (kind, default) in types.items())
                pipe.set(etag_key(cluster, name), node_etag(entries), ex=ETAG_SECONDS)
            pipe.execute()


def forget_all_etags(**_: Any) -> int:
    """After the database was restored (``core.backup.database_restored``): every cached ETag
    describes configs the restored rows may no longer prescribe, and an agent holding one would
    be told 304 for up to ``ETAG_SECONDS``. Dropped, each node's next poll reads the database.
    The cached bodies stay: they are keyed by their content."""
    from core.redis import delete_matching

    return delete_matching(ETAG_KEY.format(cluster="*", node="*"))


def all_node_ids() -> list[int]:
    return list(Node.objects.values_list("pk", flat=True))
