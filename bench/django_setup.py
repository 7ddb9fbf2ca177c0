"""Django for a benchmark: a fresh var directory, Redis, the database, migrated; and its command line's sizes."""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def setup_django(database_url: str | None, *, var_dir: str | None = None, redis_url: str | None = "redis://127.0.0.1:6379/13") -> None:
    """``database_url`` (e.g. ``BENCH_DATABASE_URL``), else SQLite under the var directory.

    Without a connection pool: benchmarks fork worker processes, and a pool's sockets must not
    be shared across fork. ``REDIS_URL`` from the environment wins over ``redis_url``. A var
    directory made here goes when the process exits (a 500-cluster run left 1.1 GB behind).
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if var_dir is None:
        var_dir = tempfile.mkdtemp(prefix="meridian-bench-")
        atexit.register(shutil.rmtree, var_dir, ignore_errors=True)  # forked children leave by os._exit: not theirs
    os.environ["MERIDIAN_VAR_DIR"] = var_dir
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


def add_sizes(parser: argparse.ArgumentParser, **sizes: int | float | tuple[int | float, str]) -> argparse.ArgumentParser:
    """``parser`` with an ``--option`` per size (``job_days`` is ``--job-days``), typed as its default;
    a size given as ``(default, help)`` is explained in ``--help``."""
    for name, size in sizes.items():
        default, help_text = size if isinstance(size, tuple) else (size, None)
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default, help=help_text)
    return parser


def setup_from_command_line(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The command line, parsed before Django is set up on ``BENCH_DATABASE_URL`` (or SQLite) so that
    ``--help`` answers at once."""
    args = parser.parse_args()
    setup_django(os.environ.get("BENCH_DATABASE_URL"))
    return args


def timed(fn: Callable[[], Any], repeat: int = 5) -> tuple[float, Any]:
    """The best of ``repeat`` runs of ``fn`` (seconds) and the last run's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result
