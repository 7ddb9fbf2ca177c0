"""Django for a benchmark: a fresh var directory, Redis, the database, migrated."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def setup_django(database_url: str | None, *, var_dir: str | None = None, redis_url: str | None = "redis://127.0.0.1:6379/13") -> None:
    """``database_url`` (e.g. ``BENCH_DATABASE_URL``), else SQLite under the var directory.

    Without a connection pool: benchmarks fork worker processes, and a pool's sockets must not
    be shared across fork. ``REDIS_URL`` from the environment wins over ``redis_url``.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["MERIDIAN_VAR_DIR"] = var_dir or tempfile.mkdtemp(prefix="meridian-bench-")
    Path(os.environ["MERIDIAN_VAR_DIR"]).mkdir(parents=True, exist_ok=True)
    if redis_url:
        os.environ.setdefault("REDIS_URL", redis_url)
    if database_url:
        os.environ["DATABASE_URL"] = database_url
        os.environ["DATABASE_POOL"] = "0"
    else:
        os.environ.pop("DATABASE_URL", None)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def timed(fn: Callable[[], Any], repeat: int = 5) -> tuple[float, Any]:
    """The best of ``repeat`` runs of ``fn`` (seconds) and the last run's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result
