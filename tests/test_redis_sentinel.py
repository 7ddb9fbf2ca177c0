"""``REDIS_URL`` of the ``sentinel://`` form: every user of Redis — Meridian's own client, Celery's
broker and result backend, the Channels layer — finds the master through the sentinels and
follows a failover. The URL forms are checked as written; the failover against a real primary,
replica and sentinel (``redis-server``, its ``--sentinel`` mode) of the test's own."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from core.redis import celery_urls, channel_layer_host, client_for, parse_sentinel_url

from .faults.processes import SentinelSet, wait_until


@pytest.mark.parametrize(("url", "sentinels", "master", "db", "password", "sentinel_password"), [
    ("sentinel://h1:26379,h2:26380/mymaster/3", (("h1", 26379), ("h2", 26380)), "mymaster", 3, None, None),
    ("sentinel://h1/meridian", (("h1", 26379),), "meridian", 0, None, None),
    ("sentinel://:s%40cret@h1,[::1]:26381/m?sentinel_password=sp", (("h1", 26379), ("::1", 26381)), "m", 0, "s@cret", "sp"),
])
def test_sentinel_urls_name_sentinels_master_db_and_passwords(url, sentinels, master, db, password, sentinel_password):
    target = parse_sentinel_url(url)
    assert (target.sentinels, target.master, target.db) == (sentinels, master, db)
    assert (target.password, target.sentinel_password) == (password, sentinel_password)


@pytest.mark.parametrize("url", ["sentinel:///mymaster", "sentinel://h1:26379", "sentinel://h1:26379/"])
def test_a_sentinel_url_without_hosts_or_master_is_refused_naming_what_is_missing(url):
    with pytest.raises(ValueError, match="no sentinel host|no master name"):
        parse_sentinel_url(url)


def test_plain_urls_pass_through_and_unix_sockets_are_spelled_for_kombu():
    assert parse_sentinel_url("redis://127.0.0.1:6379/2") is None
    assert celery_urls("redis://127.0.0.1:6379/2") == ("redis://127.0.0.1:6379/2", {})
    assert celery_urls("unix:///var/run/redis.sock") == ("redis+socket:///var/run/redis.sock", {})
    assert channel_layer_host("redis://h/1", socket_timeout=30) == {"address": "redis://h/1", "socket_timeout": 30}


def test_celery_and_channels_get_every_sentinel_and_the_master_name():
    broker, options = celery_urls("sentinel://:pw@h1,h2:26380/meridian/4?sentinel_password=sp")
    assert broker == "sentinel://:pw@h1:26379/4;sentinel://:pw@h2:26380/4"
    assert options == {"master_name": "meridian", "sentinel_kwargs": {"password": "sp"}}
    host = channel_layer_host("sentinel://h1/meridian/4", socket_timeout=30)
    assert host == {"sentinels": [("h1", 26379)], "master_name": "meridian", "sentinel_kwargs": None, "db": 4,
                    "socket_timeout": 30}


def test_settings_refuse_to_start_with_a_broken_sentinel_url():
    env = {"REDIS_URL": "sentinel://h1:26379", "DJANGO_SETTINGS_MODULE": "config.settings", "PATH": "/usr/bin:/bin"}
    import sys

    result = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                            text=True, cwd=Path(__file__).resolve().parent.parent, timeout=60)
    assert result.returncode != 0 and ImproperlyConfigured.__name__ in result.stderr and "no master name" in result.stderr


@pytest.fixture
def sentinel_set():
    redis_set = SentinelSet().start()
    yield redis_set
    redis_set.close()


def test_meridians_client_follows_a_sentinel_failover(sentinel_set):
    client = client_for(sentinel_set.url, socket_timeout=2, socket_connect_timeout=2)
    client.set("meridian:probe", "before")
    assert redis.Redis(port=sentinel_set.primary).get("meridian:probe") == b"before", "writes go to the primary"
    wait_until(lambda: redis.Redis(port=sentinel_set.replica).get("meridian:probe") == b"before", timeout=10,
               what="the write to reach the replica")
    sentinel_set.kill("primary")
    started = time.monotonic()

    def written() -> bool:
        try:
            client.set("meridian:probe", "after")
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            return False
        return True

    wait_until(written, timeout=30, interval=0.5, what="the client to write to the promoted replica")
    assert redis.Redis(port=sentinel_set.replica).get("meridian:probe") == b"after"
    assert time.monotonic() - started < 30
