"""Real Meridians for the command line's tests, and the installed ``meridian`` to run against them.

The command line is never imported here: every test runs ``<venv>/bin/meridian`` (what
``pip install -e .`` / ``make venv`` installs) as a subprocess with its own config file.

A Meridian is started with the README's production commands (``tests.faults.processes``):
uvicorn, and for the module that needs them a real worker (``meridian_worker``) and beat (the
simulated node agents report through beat, so ``--wait`` ends when they acknowledge), over a
private Redis and a database of its own — a file on SQLite, a database beside the suite's on
PostgreSQL (``<name>_cli_*``, dropped afterwards) — never the test database, which the
processes would see flushed. Migrations run once per session into a template that each
Meridian copies; each module starts its processes once, not per test.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from tests.faults.processes import ROOT, Meridian, PrivateRedis, wait_until

ADMIN, PASSWORD = "cli-admin", "cli-admin-password-42"


def pytest_collection_modifyitems(items):
    """Marked ``cli``: the command line speaks HTTP only, so CI runs it once (on PostgreSQL)."""
    for item in items:
        if "tests/cli/" in str(item.fspath):
            item.add_marker(pytest.mark.cli)
MERIDIAN_CLI = Path(sys.executable).parent / "meridian"
SEED = """
from django.core.management import call_command
call_command("seed_demo", clusters=2, nodes=40, tick_seconds=5)
call_command("seed_nodeconfig_demo")
call_command("seed_quotas_demo")
call_command("seed_federation_demo", history_days=0)
call_command("seed_scheduling_demo")
"""
_names = itertools.count(1)


def _postgres() -> Mapping[str, str] | None:
    """The suite's PostgreSQL server (None on SQLite)."""
    database = settings.DATABASES["default"]
    if "postgresql" not in database["ENGINE"] and database["ENGINE"] != "core.postgresql":
        return None
    return {"user": database.get("USER") or "postgres", "host": database.get("HOST") or "127.0.0.1",
            "port": str(database.get("PORT") or 5432), "name": database["NAME"]}


def _admin_sql(server: Mapping[str, str], *statements: str) -> None:
    import psycopg

    with psycopg.connect(host=server["host"], port=server["port"], user=server["user"], dbname="postgres",
                         autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


class Databases:
    """Databases for the Meridians of this session: a migrated template, and copies of it.

    On SQLite a Meridian runs in the embedded mode (no ``DATABASE_URL``: its ``var`` directory's
    file, with the WAL and IMMEDIATE transactions the settings give it); on PostgreSQL each copy
    is a database beside the suite's, made from the template with ``CREATE DATABASE … TEMPLATE``.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir, self.server = workdir, _postgres()
        self.template_dir = workdir / "template"
        self.template_dir.mkdir()
        self.made: list[str] = []

    def _name(self, suffix: str) -> str:
        return f"{self.server['name']}_cli_{suffix}" if self.server else suffix

    def _url(self, name: str) -> str:
        server = self.server or {}
        return f"postgres://{server['user']}@{server['host']}:{server['port']}/{name}"

    def migrate_template(self, env: Mapping[str, str]) -> None:
        run_env = {**env, "MERIDIAN_VAR_DIR": str(self.template_dir), "MERIDIAN_ADMIN_USERNAME": ADMIN,
                   "MERIDIAN_ADMIN_PASSWORD": PASSWORD}
        run_env.pop("DATABASE_URL", None)
        if self.server is not None:
            name = self._name("template")
            _admin_sql(self.server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
            self.made.append(name)
            run_env["DATABASE_URL"] = self._url(name)
        for command in (("migrate", "--noinput", "-v0"), ("bootstrap_admin",)):
            subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=run_env, check=True, capture_output=True,
                           timeout=300)

    def copy(self, var_dir: Path) -> str | None:
        """What the template holds, for a Meridian whose ``var`` directory is ``var_dir``: its
        ``DATABASE_URL`` (None on SQLite: the file is in ``var_dir``)."""
        shutil.copyfile(self.template_dir / "secret_key", var_dir / "secret_key")
        if self.server is None:
            for suffix in ("", "-wal", "-shm"):
                source = self.template_dir / f"meridian.sqlite3{suffix}"
                if source.exists():
                    shutil.copyfile(source, var_dir / source.name)
            return None
        name = self._name(f"m{next(_names)}")
        _admin_sql(self.server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                   f'CREATE DATABASE "{name}" TEMPLATE "{self._name("template")}"')
        self.made.append(name)
        return self._url(name)

    def drop(self, url: str | None) -> None:
        """Drop a copy (on SQLite its file goes with its ``var`` directory)."""
        if url is not None:
            self._drop(url.rsplit("/", 1)[1])

    def _drop(self, name: str) -> None:
        with contextlib.suppress(Exception):
            _admin_sql(self.server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.made = [n for n in self.made if n != name]

    def close(self) -> None:
        for name in list(self.made):
            self._drop(name)


@pytest.fixture(scope="session")
def cli_databases() -> Iterator[Databases]:
    if not MERIDIAN_CLI.exists():
        pytest.fail(f"{MERIDIAN_CLI} is not installed: run `make venv` (it runs `pip install -e .`)")
    workdir = Path(tempfile.mkdtemp(prefix="meridian-cli-db-"))
    databases = Databases(workdir)
    databases.migrate_template(_base_env(workdir))
    yield databases
    databases.close()
    shutil.rmtree(workdir, ignore_errors=True)


def _base_env(var_dir: Path) -> dict[str, str]:
    """What every Meridian process of these tests runs with: small pools (PostgreSQL's
    connections are shared with other engineers), one worker process, a fast-ticking simulator."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "DJANGO_ALLOW")) and k not in ("DATABASE_URL", "REDIS_URL")}
    return env | {"MERIDIAN_VAR_DIR": str(var_dir), "MERIDIAN_DB_POOL_MIN": "1", "MERIDIAN_DB_POOL_MAX": "3",
                  "LOG_FORMAT": "plain", "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1"}


@dataclass
class Stack:
    """One running Meridian and a logged-in command line for it."""

    processes: Meridian
    database: str | None
    home: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.processes.base

    def cli(self, *args: str, input: str | None = None, check: bool | int = True, timeout: float = 120,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        """Run the installed ``meridian`` against this Meridian; ``check`` is the exit code expected
        (True: 0, False: any)."""
        result = subprocess.run([str(MERIDIAN_CLI), *args], input=input, capture_output=True, text=True, timeout=timeout,
                                env={**self.env, **(env or {})}, cwd=self.home)
        expected = 0 if check is True else check
        if check is not False and result.returncode != expected:
            raise AssertionError(f"meridian {' '.join(args)} exited {result.returncode}, not {expected}\n"
                                 f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}\n"
                                 f"web log:\n{self.processes.log('web')[-1500:]}")
        return result

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([str(MERIDIAN_CLI), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env, cwd=self.home)

    def api(self) -> httpx.Client:
        """The REST API as the admin, for checking what the command line did."""
        token = httpx.post(f"{self.url}/api/v1/auth/token/", json={"username": ADMIN, "password": PASSWORD}).json()["token"]
        return httpx.Client(base_url=f"{self.url}/api/v1/", headers={"Authorization": f"Token {token}"}, timeout=30)


@contextlib.contextmanager
def running_meridian(databases: Databases, *, seed: bool, worker: bool) -> Iterator[Stack]:
    home = Path(tempfile.mkdtemp(prefix="meridian-cli-"))
    redis = PrivateRedis().start()
    database = databases.copy(home)
    processes = Meridian(database_url=database or "", redis_url=redis.url, var_dir=home)
    processes.env.pop("DATABASE_URL")
    processes.env.update(_base_env(home) | {"REDIS_URL": redis.url, "MERIDIAN_WORKER_CONCURRENCY": "1"}
                         | ({"DATABASE_URL": database} if database else {}))
    try:
        if seed:
            subprocess.run([sys.executable, "manage.py", "shell", "-c", SEED], cwd=ROOT, env=processes.env, check=True,
                           capture_output=True, timeout=300)
        processes.start_web(workers=1)
        if worker:
            processes.start_worker()
            processes.start_beat()
            wait_until(lambda: httpx.get(f"{processes.base}/readyz", timeout=3).status_code == 200, timeout=60,
                       what="the worker's heartbeat (/readyz)")
        stack = Stack(processes=processes, database=database, home=home,
                      env={"PATH": os.environ.get("PATH", ""), "HOME": str(home), "MERIDIAN_CONFIG": str(home / "config.yaml"),
                           "COLUMNS": "200", "LANG": "C.UTF-8"})
        stack.cli("login", "--server", processes.base, "--username", ADMIN, "--password-stdin", "--context", "test",
                  input=PASSWORD + "\n")
        yield stack
    finally:
        processes.close()
        redis.close()
        databases.drop(database)
        shutil.rmtree(home, ignore_errors=True)


def documents_in(directory: Path) -> dict[str, str]:
    """Relative path → text of every YAML file under ``directory``."""
    return {str(p.relative_to(directory)): p.read_text() for p in sorted(directory.rglob("*.yaml"))}


def lines(text: str) -> Sequence[str]:
    return [line for line in text.splitlines() if line.strip()]
