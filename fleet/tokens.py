"""Per-cluster credentials for node agents and admission webhooks: issue, rotate, revoke, check.

Stored as SHA-256 like user API tokens; the raw key is returned once. A token names its
cluster, so a leaked agent token of one cluster reads nothing of another.
"""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from django.db import transaction
from redis.exceptions import RedisError
from django.utils import timezone

from core.audit import record_change
from core.context import current_actor
from core.models import hash_token

from .models import Cluster, ClusterToken

logger = logging.getLogger(__name__)
LAST_USED_RESOLUTION = timedelta(minutes=1)
#: Machine callers (node agents, webhooks) authenticate on every request: the token's
#: cluster is cached by the token's hash for this long, and dropped at once when the token is
#: revoked. The value is "<cluster id>:<cluster name>"; ASGI fast paths read it directly.
CACHE_SECONDS = 30
CACHE_KEY = "meridian:fleet:token:{kind}:{digest}"
TOKEN_PREFIX = {"agent": "mag_", "webhook": "mwh_"}


def issue_token(cluster: Cluster, kind: str, *, name: str = "", rotate: bool = False) -> tuple[ClusterToken, str]:
    """A new token of ``kind``; with ``rotate`` every older active token of that kind is revoked."""
    if kind not in ClusterToken.Kind.values:
        raise ValueError(f"unknown token kind {kind!r}")
    raw = TOKEN_PREFIX[kind] + secrets.token_urlsafe(32)
    with transaction.atomic():
        revoked = 0
        if rotate:
            older = active_tokens(cluster, kind)
            digests = list(older.values_list("key_hash", flat=True))
            revoked = older.update(revoked=timezone.now())
            transaction.on_commit(lambda: _revoked(digests), robust=True)
        token = ClusterToken.objects.create(
            cluster=cluster, kind=kind, name=name, key_prefix=raw[:8], key_hash=hash_token(raw), created_by=current_actor().name
        )
        record_change(
            token, "create", verb="rotate_token" if rotate else "issue_token",
            after={"cluster": cluster.name, "kind": kind, "name": name, "key_prefix": token.key_prefix, "revoked_others": revoked},
        )
    return token, raw


def revoke_token(token: ClusterToken) -> bool:
    with transaction.atomic():
        updated = ClusterToken.objects.filter(pk=token.pk, revoked__isnull=True).update(revoked=timezone.now())
        if updated:
            transaction.on_commit(lambda: _revoked([token.key_hash]), robust=True)
            record_change(token, "update", verb="revoke_token", before={"revoked": None}, after={"revoked": "now"})
    token.refresh_from_db()
    return bool(updated)


def active_tokens(cluster: Cluster, kind: str):
    now = timezone.now()
    return ClusterToken.objects.filter(cluster=cluster, kind=kind, revoked__isnull=True).exclude(expires__lte=now)


def authenticate(raw: str, kind: str) -> ClusterToken | None:
    """The active token of ``kind`` with this raw key, or None."""
    if not raw or not raw.startswith(TOKEN_PREFIX.get(kind, "\0")):
        return None
    token = ClusterToken.objects.select_related("cluster").filter(key_hash=hash_token(raw), kind=kind, revoked__isnull=True).first()
    now = timezone.now()
    if token is None or (token.expires is not None and token.expires <= now):
        return None
    if token.last_used is None or now - token.last_used > LAST_USED_RESOLUTION:
        ClusterToken.objects.filter(pk=token.pk).update(last_used=now)
    return token


def token_cluster(raw: str, kind: str) -> tuple[int, str] | None:
    """``(cluster id, cluster name)`` of the active token of ``kind``, cached in Redis.

    Machine endpoints sit on member clusters' critical path (a webhook with
    ``failurePolicy: Fail``), so the cache is only a cache: with Redis down the database
    answers, slower, and the cache fills again once Redis is back.
    """
    if not raw or not raw.startswith(TOKEN_PREFIX.get(kind, "\0")):
        return None
    key = CACHE_KEY.format(kind=kind, digest=hash_token(raw))
    cached = _cache_get(key)
    if cached:
        cluster_id, _, name = cached.decode().partition(":")
        return int(cluster_id), name
    token = authenticate(raw, kind)
    if token is None:
        return None
    ttl = CACHE_SECONDS if token.expires is None else min(CACHE_SECONDS, int((token.expires - timezone.now()).total_seconds()))
    if ttl > 0:
        _cache_set(key, f"{token.cluster_id}:{token.cluster.name}", ttl)
    return token.cluster_id, token.cluster.name


def _cache_get(key: str) -> bytes | None:
    from core.redis import get_redis

    try:
        return get_redis().get(key)
    except (RedisError, OSError) as exc:
        logger.warning("token cache unavailable (%s); checking the token in the database", exc)
        return None


def _cache_set(key: str, value: str, ttl: int) -> None:
    from core.redis import get_redis

    try:
        get_redis().set(key, value, ex=ttl)
    except (RedisError, OSError):
        pass


def forget_cached_tokens(**_: object) -> int:
    """After the database was restored (``core.backup.database_restored``): a cached token may
    be one the restored rows never issued (or revoked)."""
    from core.redis import delete_matching

    return delete_matching(CACHE_KEY.format(kind="*", digest="*"))


def _revoked(digests: list[str]) -> None:
    from core.redis import get_redis

    keys = [CACHE_KEY.format(kind=kind, digest=d) for d in digests for kind in TOKEN_PREFIX]
    if keys:
        get_redis().delete(*keys)
