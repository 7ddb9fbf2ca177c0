"""The highly available deployment, built once for the module: a PostgreSQL of its own (a
standby joins for the failover test), Redis behind Sentinel (a primary, a replica, one
sentinel), nginx in front of two web processes, two workers and two beats — all started with
the README's production commands, ``REDIS_URL`` of the ``sentinel://`` form and a libpq
multi-host ``DATABASE_URL``. Marked ``ha`` (slow; ``.ci/run`` runs it once, on PostgreSQL)."""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest

from tests.faults.processes import Meridian, Nginx, PrivatePostgres, SentinelSet, free_port, wait_until

WEBS = ("web-a", "web-b")
WORKERS = ("worker-a", "worker-b")
BEATS = ("beat-a", "beat-b")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/ha/" in str(item.fspath):
            item.add_marker(pytest.mark.ha)


class Stack:
    """Everything above, and ``heal()`` to bring back whatever a test killed."""

    def __init__(self, tmp) -> None:
        self.tmp = tmp
        self.postgres = PrivatePostgres().init()
        self.standby: PrivatePostgres | None = None
        self.standby_port = free_port()  # named in DATABASE_URL from the start: libpq skips it until it runs
        self.redis = SentinelSet().start()
        self.database_url = (f"postgres://postgres@127.0.0.1:{self.postgres.port},127.0.0.1:{self.standby_port}/meridian"
                             "?target_session_attrs=read-write")
        self.meridian = Meridian(database_url=self.database_url, redis_url=self.redis.url, var_dir=tmp, extra_env={
            "MERIDIAN_ADMIN_USERNAME": "ha-admin", "MERIDIAN_ADMIN_PASSWORD": "ha-admin-password-1",
            "MERIDIAN_DB_POOL_MAX": "6", "MERIDIAN_WEBHOOK_THREADS": "2", "MERIDIAN_PROXY_COUNT": "1"})
        self.ports: dict[str, int] = {name: free_port() for name in WEBS}
        self.nginx = Nginx(list(self.ports.values()))

    def start(self) -> Stack:
        self.meridian.manage("migrate", "--noinput")
        self.meridian.manage("bootstrap_admin")
        self.token = self.meridian.manage(
            "shell", "--verbosity", "0", "-c", "from django.contrib.auth import get_user_model; from core.models import APIToken; "
            "print(APIToken.issue(get_user_model().objects.get(username='ha-admin'))[1])").stdout.strip()
        self.nginx.start()
        self.heal()
        return self

    @property
    def base(self) -> str:
        return self.nginx.base

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Token {self.token}"}, timeout=30)

    def heal(self) -> None:
        """Every process running again, and Meridian ready behind the proxy."""
        for name in WEBS:
            if name not in self.meridian.procs:
                self.meridian.start_web(name, port=self.ports[name], workers=1)
        for name in WORKERS:
            if name not in self.meridian.procs:
                self.meridian.start_worker(name)
        for name in BEATS:
            if name not in self.meridian.procs:
                self.meridian.start_beat(name)
        wait_until(lambda: httpx.get(f"{self.base}/readyz", timeout=5).json()["status"] == "ready", timeout=90,
                   what="Meridian to be ready behind the proxy")

    def log(self, name: str) -> str:
        return self.meridian.log(name)

    def close(self) -> None:
        self.meridian.close()
        self.nginx.close()
        self.redis.close()
        if self.standby is not None:
            self.standby.close()
        self.postgres.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Closed also when it fails to start (a missing nginx left the private PostgreSQL, Redis
    and Sentinel running after the run, holding their ports)."""
    built = Stack(tmp_path_factory.mktemp("ha"))
    try:
        yield built.start()
    finally:
        built.close()


@pytest.fixture
def healthy(stack) -> Stack:
    stack.heal()
    time.sleep(1)
    return stack


def run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout
