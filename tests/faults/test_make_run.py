"""``make run``, as the README starts it (the embedded default in a directory of the test's own),
has its worker killed with -9: the web server keeps answering throughout, the supervisor prints
the exit and the restart, a new worker takes work within seconds, and Ctrl-C still stops
everything. (Its supervisor used to end every process when one exited: one worker crash ended
the embedded product.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import httpx

from .processes import ROOT, descendants, free_port, wait_until


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_make_run_keeps_serving_and_restarts_its_killed_worker(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "MERIDIAN_ENV")}
    env.update(PORT=str(port), MERIDIAN_VAR_DIR=str(tmp_path), MERIDIAN_ADMIN_USERNAME="run-admin",
               MERIDIAN_ADMIN_PASSWORD="run-admin-password-1", PYTHONUNBUFFERED="1")
    output = tmp_path / "run.log"
    run = subprocess.Popen(["make", "run"], cwd=ROOT, env=env, stdout=output.open("wb"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    failures: list[str] = []
    stop = threading.Event()
    try:
        wait_until(lambda: httpx.get(f"{base}/readyz", timeout=2).json()["status"] == "ready", timeout=240,
                   what="make run to be ready")
        token = subprocess.run(
            [sys.executable, "manage.py", "shell", "--verbosity", "0", "-c",
             "from django.contrib.auth import get_user_model; from core.models import APIToken; "
             "print(APIToken.issue(get_user_model().objects.get(username='run-admin'))[1])"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120).stdout.strip()
        api = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=30)

        def keep_asking() -> None:
            with httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=10) as client:
                while not stop.is_set():
                    for path in ("/healthz", "/api/v1/fleet/clusters/"):
                        try:
                            status = client.get(path).status_code
                        except httpx.HTTPError as exc:
                            failures.append(f"{path}: {exc!r}")
                            continue
                        if status != 200:
                            failures.append(f"{path}: {status}")
                    time.sleep(0.2)

        asker = threading.Thread(target=keep_asking, daemon=True)
        asker.start()
        workers = [pid for pid in descendants(run.pid) if "meridian_worker" in _cmdline(pid)]
        assert len(workers) == 1, [(_cmdline(pid)) for pid in descendants(run.pid)]
        worker = workers[0]
        for pid in [worker, *descendants(worker)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()

        wait_until(lambda: "worker exited with signal SIGKILL" in output.read_text(errors="replace"), timeout=10,
                   what="the supervisor to show the worker's exit")
        text = output.read_text(errors="replace")
        assert "restarting in 1 s (restart 1)" in text, text[-3000:]
        wait_until(lambda: [pid for pid in descendants(run.pid) if "meridian_worker" in _cmdline(pid) and pid != worker],
                   timeout=10, what="a new worker process")
        job = api.post("/api/v1/fleet/clusters/bj-1/sync/").json()
        wait_until(lambda: api.get(f"/api/v1/core/jobs/{job['id']}/").json()["status"] == "succeeded", timeout=60,
                   what="the new worker to run a requested sync")
        assert time.monotonic() - killed < 70
        assert httpx.get(f"{base}/readyz", timeout=5).json()["checks"]["workers"]["ok"] is True
        stop.set()
        asker.join(timeout=15)
        assert failures == [], f"the web server stopped answering while the worker restarted: {failures[:5]}"
    finally:
        stop.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it
        try:
            run.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            raise
    left = [pid for pid in _processes_of(tmp_path) if pid != os.getpid()]
    assert not left, ([_cmdline(p) for p in left], output.read_text(errors="replace")[-2000:])
    # make itself dies of the SIGINT a terminal sends its whole group; what it ran stopped cleanly
    assert run.returncode in (0, -signal.SIGINT), run.returncode
    assert "web stopped" in output.read_text(errors="replace") and "beat stopped" in output.read_text(errors="replace")


def _processes_of(var_dir) -> list[int]:
    """Processes started for this run (its directory in their environment)."""
    marker = f"MERIDIAN_VAR_DIR={var_dir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
    return found
