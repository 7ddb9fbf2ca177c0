"""``make run`` (``manage.py meridian_run``) stopped by SIGTERM while it is still starting.

A service manager or a container runtime stops with SIGTERM, and an impatient one does it while
the database is still being migrated: the embedded Redis the command started must not outlive it
(it did: Python's default SIGTERM ends the process before the command's ``finally``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent


def answers(socket: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(socket), socket_timeout=1, retry=None).ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False


def test_a_sigterm_while_migrating_stops_the_embedded_redis(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "MERIDIAN_ENV")}
    env |= {"MERIDIAN_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    run = subprocess.Popen([sys.executable, "manage.py", "meridian_run", "--no-seed", "--port", "0"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    socket = tmp_path / "redis.sock"
    try:
        for line in run.stdout:
            if line.startswith("embedded Redis on"):
                break
        assert answers(socket), "the embedded Redis is up"
        run.send_signal(signal.SIGTERM)  # the database is being migrated now
        output = run.communicate(timeout=60)[0]
        assert "database migrated" not in output, "stopped while starting, as the test means"
        assert run.returncode == 128 + signal.SIGTERM
        assert not answers(socket), "the embedded Redis stopped with the command"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        if answers(socket):  # the bug this test is about: do not leave it behind
            redis.Redis(unix_socket_path=str(socket)).shutdown(nosave=True)
