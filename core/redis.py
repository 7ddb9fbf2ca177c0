"""One Redis client per process for Meridian's own keys (sequences, heartbeats)."""

from __future__ import annotations

import functools

import redis
from django.conf import settings


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=3, health_check_interval=30)


def get_redis() -> redis.Redis:
    return _client(settings.REDIS_URL)
