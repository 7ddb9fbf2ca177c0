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


# ``meridian_run`` as ``make run`` starts it, except that the SIGTERM comes from inside a ``__del__``
# just as migrating begins: Python ignores an exception raised there (a redis connection's ``__del__``
# swallowed the handler's SystemExit in one CI run, and the command went on to migrate and supervise).
SIGTERM_IN_A_DEL = """
import os, signal, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.core import management
from core.management.commands import meridian_run

class Collected:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # the handler runs here, inside __del__

def call_command(name, *args, **kwargs):
    if name == "migrate":
        Collected()
    return management.call_command(name, *args, **kwargs)

meridian_run.call_command = call_command
management.call_command("meridian_run", "--no-seed", "--port", "0")
"""


def start(tmp_path: Path, command: list[str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "MERIDIAN_ENV")}
    env |= {"MERIDIAN_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, *command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def stopped_while_starting(run: subprocess.Popen, socket: Path, send_sigterm: bool) -> None:
    try:
        for line in run.stdout:
            if line.startswith("embedded Redis on"):
                break
        if send_sigterm:
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


def test_a_sigterm_while_migrating_stops_the_embedded_redis(tmp_path):
    run = start(tmp_path, ["manage.py", "meridian_run", "--no-seed", "--port", "0"])
    stopped_while_starting(run, tmp_path / "redis.sock", send_sigterm=True)


def test_a_sigterm_whose_exit_a_del_swallowed_still_stops_the_command_and_its_redis(tmp_path):
    run = start(tmp_path, ["-c", SIGTERM_IN_A_DEL])
    stopped_while_starting(run, tmp_path / "redis.sock", send_sigterm=False)
