"""A process loads the apps' tasks modules the first time it sends a job (``core.jobs.task_named``);
a web process when it starts (``config.asgi``).

Found by ``bench/bench_watch.py``: three of the first four clusters registered at once in a fresh
process logged "could not send job" (the task was missing) and waited for the reaper. Each case
runs in a new interpreter, as a process starts: this one has imported every task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, threading
import django
django.setup()
from celery import current_app
from core.jobs import task_named

loaded_before = "fleet.sync_cluster" in current_app.tasks
barrier = threading.Barrier(8)
found, errors = [], []

def send_first_job():
    barrier.wait()
    try:
        found.append(task_named("fleet.sync_cluster").name)
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=send_first_job) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"loaded_before": loaded_before, "found": found, "errors": errors}))
"""


def test_threads_sending_a_fresh_processes_first_jobs_at_once_all_find_their_task(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "MERIDIAN_VAR_DIR": str(tmp_path)}
    for _ in range(3):  # the race struck 5 to 7 of 8 threads in each of three runs
        run = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        outcome = json.loads(run.stdout.strip().splitlines()[-1])
        assert not outcome["loaded_before"], "a fresh process has not imported the tasks modules"
        assert outcome["errors"] == [] and outcome["found"] == ["fleet.sync_cluster"] * 8


ASGI_SCRIPT = """
import json, sys
from django.core import checks

ran = []
checks.register(lambda app_configs, **kwargs: ran.append(1) or [])
import config.asgi  # noqa: F401  (uvicorn config.asgi:application, as the README starts the web)
from celery import current_app
from core.jobs import task_named

loaded = "fleet.sync_cluster" in current_app.tasks
task_named("nodeconfig.reconcile_type")  # the emergency downgrade's job
print(json.dumps({"loaded": loaded, "checks_ran": len(ran), "kubernetes": "fleet.connectors.kubernetes" in sys.modules}))
"""


def test_a_web_process_loads_what_its_first_requests_would_before_it_serves(tmp_path):
    """Its first job sent (the emergency downgrade's, after a rolling restart) loaded the tasks
    modules and ran Django's system checks inside the request; its first request to a member
    cluster imported the Kubernetes client."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "MERIDIAN_VAR_DIR": str(tmp_path)}
    env.pop("CELERY_SKIP_CHECKS", None)
    run = subprocess.run([sys.executable, "-c", ASGI_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome == {"loaded": True, "checks_ran": 0, "kubernetes": True}
