"""Production mode refuses insecure defaults; with real ones, ``check --deploy`` is clean."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STRONG_KEY = "k" * 10 + "Zq8#vL2!pW9@xR4$mT7^bN1&cF6*hJ3(dS5)gK0-aE" + "u" * 10


def run_manage(args: list[str], extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DATABASE_URL", "ALLOWED_HOSTS", "DEBUG"}}
    env.update(extra_env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


PRODUCTION = {
    "MERIDIAN_ENV": "production",
    "SECRET_KEY": STRONG_KEY,
    "DATABASE_URL": "postgres://meridian@127.0.0.1:5432/meridian",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "ALLOWED_HOSTS": "meridian.example.com",
}


def test_production_check_deploy_is_clean():
    result = run_manage(["check", "--deploy", "--fail-level", "WARNING"], PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    "change,message",
    [
        ({"SECRET_KEY": ""}, "SECRET_KEY"),
        ({"SECRET_KEY": "short"}, "too weak"),
        ({"SECRET_KEY": "django-insecure-" + "x" * 60}, "too weak"),
        ({"DATABASE_URL": ""}, "DATABASE_URL"),
        ({"ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS"),
        ({"DEBUG": "true"}, "DEBUG"),
        ({"MERIDIAN_ENV": "staging"}, "MERIDIAN_ENV"),
    ],
)
def test_production_refuses_insecure_settings(change, message):
    result = run_manage(["check"], {**PRODUCTION, **change})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and message in result.stderr


def test_embedded_default_needs_nothing_set(tmp_path):
    result = run_manage(["check"], {"MERIDIAN_VAR_DIR": str(tmp_path), "REDIS_URL": ""})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600


def test_a_sqlite_url_runs_its_file_as_the_embedded_database_runs(tmp_path):
    """``DATABASE_URL=sqlite:///…`` (a second process on the embedded file, the test suite's
    worker on the test database) gets the write-ahead log and IMMEDIATE transactions: without
    them two processes that both read and then write deadlock ("database is locked")."""
    path = tmp_path / "named.sqlite3"
    script = ("from django.db import connection; connection.ensure_connection(); "
              "print(connection.settings_dict['OPTIONS']['transaction_mode'], "
              "connection.cursor().execute('PRAGMA journal_mode').fetchone()[0])")
    result = run_manage(["shell", "--no-imports", "-c", script], {"MERIDIAN_VAR_DIR": str(tmp_path), "REDIS_URL": "",
                                                  "DATABASE_URL": f"sqlite:///{path}"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["IMMEDIATE", "wal"], result.stdout
    assert path.exists() and not (tmp_path / "meridian.sqlite3").exists(), "the named file, not the embedded one"


def test_processes_starting_together_all_read_the_one_whole_secret_key(tmp_path):
    """The embedded default's key is made by whichever process starts first: the web processes,
    the worker and beat of a fresh installation start together, and each must read the same,
    whole key. One read it while another was still writing it (empty: every request a 500,
    "The SECRET_KEY setting must not be empty"), or two each wrote their own."""
    from config.settings import _embedded_secret_key

    context = multiprocessing.get_context("fork")
    for round_ in range(20):
        var_dir = tmp_path / f"var-{round_}"
        start = context.Barrier(8)
        keys = context.Queue()

        def read_key() -> None:
            start.wait()  # noqa: B023
            keys.put(_embedded_secret_key(var_dir))  # noqa: B023

        processes = [context.Process(target=read_key) for _ in range(8)]
        for process in processes:
            process.start()
        seen = [keys.get(timeout=30) for _ in processes]
        for process in processes:
            process.join(timeout=30)
        assert len(set(seen)) == 1 and len(seen[0]) >= 50, f"round {round_}: {[len(key) for key in set(seen)]}"
        assert (var_dir / "secret_key").stat().st_mode & 0o777 == 0o600
        assert [path.name for path in var_dir.iterdir()] == ["secret_key"], "no draft left behind"
