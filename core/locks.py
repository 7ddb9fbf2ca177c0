"""The one lock helper: a named Redis lock with a short TTL that its holder keeps extending.

Background work that must not run twice at once (one cluster's sync, one config type's
matching pass, one federated object's reconcile) holds ``hold(name)``. The TTL is short
(``ttl``, 30 s by default) and a daemon thread extends it every ``ttl / 3`` while the block
runs, so a long pass keeps its lock however long it takes, and a holder that dies (kill -9,
a lost machine) frees it within one TTL instead of blocking everyone for minutes.

A lock that is busy raises ``LockBusy`` at once (or after ``wait`` seconds): callers never
block a request on a lock; tasks come back later (``core.taskbase.MeridianTask`` retries
``LockBusy`` with a short countdown). Should an extension fail (the key expired because the
holder stalled longer than the TTL, or Redis restarted), ``held.lost`` turns true; work
that must not overlap checks it before committing (``held.ensure()``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from redis.exceptions import LockError, RedisError

from .redis import get_redis

logger = logging.getLogger(__name__)
KEY = "meridian:lock:{name}"
DEFAULT_TTL = 30.0


class LockBusy(Exception):
    """Someone else holds the lock; try again later."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is busy")
        self.name = name


class LockLost(Exception):
    """The lock expired while held: another holder may be running the same work."""


@dataclass
class HeldLock:
    name: str
    lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def ensure(self) -> None:
        if self.lost:
            raise LockLost(f"lost the lock {self.name} while holding it")


@contextlib.contextmanager
def hold(name: str, *, ttl: float = DEFAULT_TTL, wait: float = 0) -> Iterator[HeldLock]:
    """Hold lock ``name`` for the block, extending it until the block ends."""
    lock = get_redis().lock(KEY.format(name=name), timeout=ttl, thread_local=False)
    if not lock.acquire(blocking=wait > 0, blocking_timeout=wait or None, token=uuid.uuid4().hex.encode()):
        raise LockBusy(name)
    held = HeldLock(name)
    keeper = threading.Thread(target=_keep, args=(lock, held, ttl / 3), daemon=True, name=f"lock:{name}")
    keeper.start()
    try:
        yield held
    finally:
        held._stop.set()
        keeper.join(timeout=1)
        with contextlib.suppress(LockError, RedisError, OSError):
            lock.release()


def _keep(lock, held: HeldLock, every: float) -> None:
    while not held._stop.wait(every):
        try:
            lock.reacquire()
        except LockError:
            held.lost = True
            logger.warning("lock %s expired while held", held.name)
            return
        except Exception:  # Redis unreachable for a moment: try again at the next tick
            logger.warning("could not extend lock %s", held.name, exc_info=True)


def is_held(name: str) -> bool:
    """Whether anyone holds lock ``name`` now (also a lease others defer to, as a cluster's watcher's)."""
    return bool(get_redis().exists(KEY.format(name=name)))
