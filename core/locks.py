"""The one lock helper: a named Redis lock with a short TTL that its holder keeps extending.

Background work that must not run twice at once (one cluster's sync, one config type's
matching pass, one federated object's reconcile) holds ``hold(name)``. The TTL is short
(``ttl``, 15 s by default) and a daemon thread extends it every ``ttl / 3`` while the block
runs, so a long pass keeps its lock however long it takes, and a holder that dies (kill -9,
a lost machine) frees it within one TTL instead of blocking everyone for minutes.

A lock that is busy raises ``LockBusy`` at once (or after ``wait`` seconds): callers never
block a request on a lock; tasks come back later (``core.taskbase.MeridianTask`` retries
``LockBusy`` with a short countdown, the job saying "waiting" and for what). Should an
extension fail (the key expired because the holder stalled longer than the TTL, or Redis
restarted), ``held.lost`` turns true; work that must not overlap checks it before committing
(``held.ensure()``).

The lock's value names its holder (``holding_as``: the job that holds it), so ``LockBusy``
says who is in the way.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from redis.exceptions import LockError, RedisError

from .redis import get_redis

logger = logging.getLogger(__name__)
KEY = "meridian:lock:{name}"
DEFAULT_TTL = 15.0

_holder: contextvars.ContextVar[str] = contextvars.ContextVar("meridian_lock_holder", default="")


class LockBusy(Exception):
    """Someone else holds the lock (``holder`` says who, when known); try again later."""

    def __init__(self, name: str, holder: str = "") -> None:
        super().__init__(f"{name} is busy" + (f" (held by {holder})" if holder else ""))
        self.name, self.holder = name, holder


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
def holding_as(label: str) -> Iterator[None]:
    """Locks taken inside the block name ``label`` as their holder (e.g. ``job 12 (fleet.sync_cluster)``)."""
    token = _holder.set(label)
    try:
        yield
    finally:
        _holder.reset(token)


@contextlib.contextmanager
def hold(name: str, *, ttl: float = DEFAULT_TTL, wait: float = 0) -> Iterator[HeldLock]:
    """Hold lock ``name`` for the block, extending it until the block ends."""
    lock = get_redis().lock(KEY.format(name=name), timeout=ttl, thread_local=False)
    token = f"{uuid.uuid4().hex} {_holder.get() or 'another process'}".encode()
    if not lock.acquire(blocking=wait > 0, blocking_timeout=wait or None, token=token):
        raise LockBusy(name, holder_of(name))
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


def holder_of(name: str) -> str:
    """Who holds lock ``name`` ("" when nobody does, or Redis cannot say)."""
    try:
        value = get_redis().get(KEY.format(name=name))
    except RedisError:
        return ""
    return value.decode(errors="replace").partition(" ")[2] if value else ""


_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class Lease:
    """A leadership kept by its holder's own loop calling ``keep()`` (no thread): one beat of
    several is the scheduler. Held for ``ttl`` seconds after the last ``keep()``; a holder that
    dies (kill -9) frees it within ``ttl``, one that stops releases it at once. ``keep()`` says
    False whenever leadership cannot be confirmed (another holds it, or Redis does not answer),
    so two holders never both act on it."""

    def __init__(self, name: str, *, ttl: float = 10.0, holder: str = "") -> None:
        self.name, self.ttl = name, ttl
        self.key = KEY.format(name=name)
        self.token = f"{uuid.uuid4().hex} {holder or 'another process'}"
        self.held = False

    def keep(self) -> bool:
        """Take the lease if free, renew it if ours; whether this holder leads now."""
        try:
            redis = get_redis()
            if self.held and redis.eval(_RENEW, 1, self.key, self.token, int(self.ttl * 1000)):
                return True
            self.held = bool(redis.set(self.key, self.token, nx=True, px=int(self.ttl * 1000)))
        except (RedisError, OSError):
            self.held = False
        return self.held

    def release(self) -> None:
        if self.held:
            with contextlib.suppress(RedisError, OSError):
                get_redis().eval(_RELEASE, 1, self.key, self.token)
        self.held = False

    def holder(self) -> str:
        return holder_of(self.name)