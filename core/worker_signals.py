"""Worker heartbeats in Redis, read by /readyz and the overview.

Each worker process refreshes ``meridian:worker:<hostname>`` with a TTL; a worker that
dies simply lets its key expire.
"""

from __future__ import annotations

import logging
import threading

from celery.signals import worker_ready, worker_shutdown

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
