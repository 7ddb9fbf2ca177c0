"""The Celery application and Meridian's sharded task routing.

Reconcile work is sharded the way KubeAdmiral shards its controllers: a task that
declares a ``shard_key`` is routed to queue ``reconcile.<stable_hash(key) % MERIDIAN_SHARDS>``,
so all work on one object is serialised on one shard and a worker can own any subset.
Every task is a ``core.taskbase.MeridianTask``: it records a Job and retries transient
faults (named by string: the class imports models, which need Django set up first).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, Task

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("meridian", task_cls="core.taskbase:MeridianTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def route_task(name: str, args: tuple, kwargs: dict, options: dict, task: Task | None = None, **_: Any) -> dict | None:
    """Send tasks that declare ``shard_key`` to their shard queue; others go to the default queue.

    The shard key is computed from the call's own arguments, whatever they are: a key
    function takes the arguments it needs and ignores the rest (``key(first, *_, **__)``).
    """
    from core.sharding import shard_queue

    task = task or app.tasks.get(name)
    shard_key = getattr(task, "shard_key", None)
    if shard_key is None or options.get("queue"):
        return None
    return {"queue": shard_queue(shard_key(*(args or ()), **(kwargs or {})))}


import core.worker_signals  # noqa: E402,F401  (registers the worker heartbeat)
