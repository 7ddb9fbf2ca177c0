"""Redis for Meridian: one client per process for its own keys (sequences, heartbeats, locks),
and ``REDIS_URL`` read once for every user of Redis — Celery's broker and result backend, the
Channels layer, the agents' fast path and these clients.

``REDIS_URL`` is a plain ``redis://``/``rediss://``/``unix://`` URL, or, for a highly available
Redis behind Sentinel::

    sentinel://[[user]:password@]host[:port][,host[:port]…]/<master name>[/<db>][?sentinel_password=…]

(port 26379 by default; the password is the master's, ``sentinel_password`` the sentinels' own).
Every client then asks the sentinels for the current master and follows a failover: Celery's
broker through kombu's ``sentinel://`` transport, the Channels layer through channels-redis'
``sentinels`` hosts, and these clients through redis-py's ``Sentinel.master_for``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from django.conf import settings

SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelTarget:
    """A master known to a set of sentinels (``REDIS_URL`` of the ``sentinel://`` form)."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None

    def master_kwargs(self) -> dict[str, Any]:
        return {k: v for k, v in {"db": self.db, "username": self.username, "password": self.password}.items()
                if v is not None}

    def sentinel_kwargs(self) -> dict[str, Any]:
        return {"password": self.sentinel_password} if self.sentinel_password else {}


def parse_sentinel_url(url: str) -> SentinelTarget | None:
    """The sentinels, master and credentials a ``sentinel://`` URL names; None for any other URL.
    Raises ValueError naming what is missing."""
    if not url.startswith("sentinel://"):
        return None
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    sentinels = []
    for item in filter(None, hosts.split(",")):
        host, port = item.rpartition(":")[::2] if ":" in item and not item.endswith("]") else (item, "")
        sentinels.append((host.strip("[]"), int(port) if port else SENTINEL_PORT))
    path = [unquote(p) for p in parts.path.split("/") if p]
    if not sentinels or not path:
        raise ValueError("REDIS_URL sentinel://host[:port][,host…]/<master name>[/<db>]: "
                         + ("no sentinel host" if not sentinels else "no master name"))
    query = parse_qs(parts.query)
    return SentinelTarget(
        sentinels=tuple(sentinels), master=path[0], db=int(path[1]) if len(path) > 1 else 0,
        username=unquote(username) or None, password=unquote(password) or None,
        sentinel_password=(query.get("sentinel_password") or [None])[0])


def client_for(url: str, **options: Any) -> redis.Redis:
    """A client of the Redis ``url`` names (the current master, for a ``sentinel://`` URL)."""
    target = parse_sentinel_url(url)
    if target is None:
        return redis.Redis.from_url(url, **options)
    from redis.sentinel import Sentinel

    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=target.sentinel_kwargs() or None,
                        socket_timeout=options.get("socket_timeout"), socket_connect_timeout=options.get("socket_connect_timeout"))
    return sentinel.master_for(target.master, **target.master_kwargs(), **options)


def async_client_for(url: str, **options: Any):
    """The asyncio client of the Redis ``url`` names."""
    from redis import asyncio as aioredis

    target = parse_sentinel_url(url)
    if target is None:
        return aioredis.Redis.from_url(url, **options)
    sentinel = aioredis.sentinel.Sentinel(list(target.sentinels), sentinel_kwargs=target.sentinel_kwargs() or None,
                                          socket_timeout=options.get("socket_timeout"),
                                          socket_connect_timeout=options.get("socket_connect_timeout"))
    return sentinel.master_for(target.master, **target.master_kwargs(), **options)


def celery_urls(url: str) -> tuple[str, dict[str, Any]]:
    """Celery's broker/result URL for ``REDIS_URL`` and the transport options it needs
    (kombu spells a unix socket ``redis+socket://`` and a set of sentinels ``sentinel://…;sentinel://…``)."""
    target = parse_sentinel_url(url)
    if target is None:
        return ("redis+socket://" + url[len("unix://"):] if url.startswith("unix://") else url), {}
    auth = f"{target.username or ''}:{target.password}@" if target.password else ""
    broker = ";".join(f"sentinel://{auth}{f'[{host}]' if ':' in host else host}:{port}/{target.db}"
                      for host, port in target.sentinels)
    options: dict[str, Any] = {"master_name": target.master}
    if target.sentinel_password:
        options["sentinel_kwargs"] = target.sentinel_kwargs()
    return broker, options


def channel_layer_host(url: str, **options: Any) -> dict[str, Any]:
    """One ``hosts`` entry of channels-redis' layer for ``REDIS_URL``."""
    target = parse_sentinel_url(url)
    if target is None:
        return {"address": url, **options}
    return {"sentinels": list(target.sentinels), "master_name": target.master,
            "sentinel_kwargs": target.sentinel_kwargs() or None, **target.master_kwargs(), **options}


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return client_for(url, socket_timeout=5, socket_connect_timeout=3, health_check_interval=30)


def get_redis() -> redis.Redis:
    return _client(settings.REDIS_URL)


def delete_matching(pattern: str, *, batch: int = 1000) -> int:
    """Delete every key matching ``pattern`` (SCAN, then UNLINK in batches: never one blocking
    KEYS over a large keyspace); returns how many were deleted."""
    redis_client = get_redis()
    deleted = 0
    keys: list[bytes] = []
    for key in redis_client.scan_iter(match=pattern, count=batch):
        keys.append(key)
        if len(keys) >= batch:
            deleted += redis_client.unlink(*keys)
            keys = []
    if keys:
        deleted += redis_client.unlink(*keys)
    return deleted
