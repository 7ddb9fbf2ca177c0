"""Worker heartbeats in Redis, read by /readyz and the overview; a request's id carried into
the tasks it queues; a pool process's startup heap kept out of the cyclic collector's way.

Each worker process refreshes ``meridian:worker:<hostname>`` with a TTL; a worker that
dies simply lets its key expire. A task message sent while a request is served carries the
request's id (``core.logs``); the task runs with it bound, so its log lines and audit
entries name the request that asked for the work.
"""

from __future__ import annotations

import logging
import threading

import gc

from celery.signals import before_task_publish, task_postrun, task_prerun, worker_process_init, worker_ready, worker_shutdown

logger = logging.getLogger(__name__)

HEARTBEAT_KEY = "meridian:worker:{hostname}"
HEARTBEAT_TTL = 30
_stop = threading.Event()


def beat_once(hostname: str) -> None:
    import time

    from .redis import get_redis

    get_redis().set(HEARTBEAT_KEY.format(hostname=hostname), str(time.time()), ex=HEARTBEAT_TTL)


def live_workers() -> list[str]:
    from .redis import get_redis

    prefix = HEARTBEAT_KEY.format(hostname="")
    keys = get_redis().scan_iter(match=prefix + "*", count=100)
    return sorted(key.decode()[len(prefix):] for key in keys)


def _heartbeat_loop(hostname: str, interval: float) -> None:
    while not _stop.is_set():
        try:
            beat_once(hostname)
        except Exception:
            logger.warning("worker heartbeat to Redis failed", exc_info=True)
        _stop.wait(interval)


@worker_ready.connect
def _start_heartbeat(sender=None, **_kwargs) -> None:
    from django.conf import settings

    hostname = getattr(sender, "hostname", None) or "worker"
    _stop.clear()
    threading.Thread(
        target=_heartbeat_loop, args=(hostname, settings.MERIDIAN_WORKER_HEARTBEAT_SECONDS), daemon=True, name="meridian-heartbeat"
    ).start()


@worker_shutdown.connect
def _stop_heartbeat(sender=None, **_kwargs) -> None:
    _stop.set()
    hostname = getattr(sender, "hostname", None)
    if hostname:
        try:
            from .redis import get_redis

            get_redis().delete(HEARTBEAT_KEY.format(hostname=hostname))
        except Exception:
            logger.warning("could not clear worker heartbeat", exc_info=True)


def freeze_startup_heap() -> None:
    """Move every object alive now (Django, the apps, their modules: what a process holds for
    its whole life) out of the cyclic garbage collector's generations, as Python's ``gc.freeze``
    documentation advises for forked workers. Without it each full collection walks that heap
    again: a quarter of an inventory sync's CPU went there (``bench/bench_fleet.py``: 401 ms a
    cluster, 297 ms frozen). Objects made later are collected as before; what is frozen is still
    freed by reference counting, only cycles among it would stay."""
    gc.freeze()


@worker_process_init.connect
def _freeze_on_start(**_kwargs) -> None:
    freeze_startup_heap()


@before_task_publish.connect
def _carry_request_id(headers=None, **_kwargs) -> None:
    from .logs import carry_request_id

    carry_request_id(headers)


@task_prerun.connect
def _bind_request_id(task=None, **_kwargs) -> None:
    from . import context
    from .logs import carried_request_id

    request_id = carried_request_id(task.request) if task is not None else None
    if request_id is not None:
        task.request.meridian_request_token = context.bind_request_id(request_id)


@task_postrun.connect
def _unbind_request_id(task=None, **_kwargs) -> None:
    from . import context

    token = getattr(task.request, "meridian_request_token", None) if task is not None else None
    if token is not None:
        context.unbind_request_id(token)
        task.request.meridian_request_token = None
