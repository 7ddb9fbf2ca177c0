"""Worker heartbeats in Redis, read by /readyz and the overview; a request's id carried into
the tasks it queues; a pool process's startup heap kept out of the cyclic collector's way.

Each worker refreshes its entry in one sorted set, ``meridian:workers``: the member is its
hostname, the score the Redis server's clock when the entry lapses (now + TTL). A worker that
dies simply lets its entry lapse; readers take the members not lapsed, one round trip
whatever else Redis holds (a SCAN for per-worker keys walked the whole keyspace: 1,023
round trips, 180 ms of every overview, /readyz and /metrics once the fleet's keys were in).
With each heartbeat a worker also says which task messages it holds unacknowledged (running,
reserved, or waiting for their ETA: ``HELD_KEY``), so the reaper can put back in their queue
the ones delivered to a worker that is gone (``core.jobs.reap``), instead of leaving them to
the broker's visibility timeout (ten minutes); a channel closed after its broken connection
leaves what it held to that reaper instead of stopping Celery (``_leave_to_the_reaper_once_closed``).
A task message sent while a request is served carries the request's id (``core.logs``); the
task runs with it bound, so its log lines and audit entries name the request that asked for
the work. Bulk work that builds millions of objects (an inventory sync) pauses the cyclic
collector meanwhile (``collector_paused``).
"""

from __future__ import annotations

import functools
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from celery.signals import before_task_publish, task_postrun, task_prerun, worker_process_init, worker_ready, worker_shutdown

logger = logging.getLogger(__name__)

WORKERS_KEY = "meridian:workers"
#: The delivery tags a worker holds, as of its last heartbeat; always has the member ``REPORTED``
#: (an empty set is no key at all in Redis, which would read as a worker that says nothing).
HELD_KEY = "meridian:held:{hostname}"
REPORTED = ""
HEARTBEAT_TTL = 12  # four missed heartbeats: a killed worker's jobs are settled within a minute
_stop = threading.Event()

# The server's clock on both sides, so machines' clocks need not agree.
_BEAT = """
redis.replicate_commands()
local now = redis.call('TIME')
redis.call('ZADD', KEYS[1], tonumber(now[1]) + tonumber(ARGV[2]), ARGV[1])
redis.call('DEL', KEYS[2])
for i = 3, #ARGV do
  redis.call('SADD', KEYS[2], ARGV[i])
end
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 1
"""
_LIVE = """
redis.replicate_commands()
local now = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now[1])
return redis.call('ZRANGEBYSCORE', KEYS[1], now[1], '+inf')
"""


def beat_once(hostname: str, held: Iterable[str] = ()) -> None:
    """The worker ``hostname`` is alive for the next ``HEARTBEAT_TTL`` seconds, holding the task
    messages whose delivery tags are ``held``."""
    from .redis import get_redis

    redis = get_redis()
    redis.register_script(_BEAT)(keys=[WORKERS_KEY, HELD_KEY.format(hostname=hostname)],
                                 args=[hostname, HEARTBEAT_TTL, REPORTED, *held], client=redis)


def held_deliveries(consumer: Any) -> list[str]:
    """The delivery tags of the task messages Celery's ``consumer`` has not acknowledged yet.

    Read from kombu's emulated acknowledgements (``QoS._delivered``: what the Redis transport
    also keeps in its ``unacked`` hash), copied at once because the consumer's thread changes it.
    No channel (reconnecting) holds nothing: what it held went with its connection.
    """
    channel = getattr(getattr(consumer, "task_consumer", None), "channel", None)
    delivered = getattr(getattr(channel, "_qos", None), "_delivered", None)
    return list(delivered.copy()) if delivered else []


def _leave_to_the_reaper_once_closed(method: Callable[..., Any]) -> Callable[..., Any]:
    """kombu's Redis ``QoS`` method ``method`` (restoring a closing channel's unacknowledged
    messages; acknowledging or rejecting one), made to leave the message to the reaper when the
    channel has lost its connection.

    When Redis goes away, Celery closes the broken connection. The channel, closed after it,
    restores what it held through a transport that has let go of its client; a task that was
    running acknowledges its message through that closed channel. Both raise ``AttributeError``
    (``NoneType`` has no ``hostname``, no ``client``), which is not among the connection errors
    Celery ignores there: "Unrecoverable error", and Celery stops (the kombu family of #582 and
    #970). Left alone, the message stays in the broker's ``unacked`` hash, held by nobody: the
    reaper puts it back in its queue (``core.jobs.restore_orphaned``), and a delivery of a job
    that has finished is dropped.
    """

    @functools.wraps(method)
    def unless_disconnected(qos: Any, *args: Any, **kwargs: Any) -> Any:
        channel = qos.channel
        transport = channel.connection
        if transport is None or getattr(transport, "client", None) is None:
            logger.warning("kombu %s on a channel whose broker connection is gone: its task message(s) "
                           "left for the reaper to put back (%d held)", method.__name__, len(qos._delivered))
            qos._delivered.clear()  # held by nobody now (a second close finds nothing to restore)
            return None
        return method(qos, *args, **kwargs)

    unless_disconnected.meridian_guarded = True  # type: ignore[attr-defined]
    return unless_disconnected


def _guard_disconnected_channels() -> None:
    from kombu.transport.redis import QoS

    for name in ("restore_unacked", "ack", "reject"):
        method = getattr(QoS, name)
        if not getattr(method, "meridian_guarded", False):
            setattr(QoS, name, _leave_to_the_reaper_once_closed(method))


_guard_disconnected_channels()


def forget_worker(hostname: str) -> None:
    """The worker ``hostname`` stopped (or never was): not alive from now on."""
    from .redis import get_redis

    get_redis().pipeline().zrem(WORKERS_KEY, hostname).delete(HELD_KEY.format(hostname=hostname)).execute()


def live_workers() -> list[str]:
    """The hostnames of the workers whose heartbeat has not lapsed, sorted (lapsed ones are dropped)."""
    from .redis import get_redis

    redis = get_redis()
    return sorted(m.decode() for m in redis.register_script(_LIVE)(keys=[WORKERS_KEY], client=redis))


def held_by(hostnames: Iterable[str]) -> set[str] | None:
    """The delivery tags the workers ``hostnames`` hold, as of their last heartbeats; None when
    one of them has not said (a worker of a version that does not, or a heartbeat lost)."""
    from .redis import get_redis

    pipe = get_redis().pipeline()
    for hostname in hostnames:
        pipe.smembers(HELD_KEY.format(hostname=hostname))
    held: set[str] = set()
    for members in pipe.execute():
        if not members:
            return None
        held.update(m.decode() for m in members)
    held.discard(REPORTED)
    return held


def _heartbeat_loop(hostname: str, interval: float, consumer: Any) -> None:
    while not _stop.is_set():
        try:
            beat_once(hostname, held_deliveries(consumer))
        except Exception:
            logger.warning("worker heartbeat to Redis failed", exc_info=True)
        _stop.wait(interval)


@worker_ready.connect
def _start_heartbeat(sender=None, **_kwargs) -> None:
    from django.conf import settings

    hostname = getattr(sender, "hostname", None) or "worker"
    _stop.clear()
    threading.Thread(
        target=_heartbeat_loop, args=(hostname, settings.MERIDIAN_WORKER_HEARTBEAT_SECONDS, sender), daemon=True,
        name="meridian-heartbeat"
    ).start()


@worker_shutdown.connect
def _stop_heartbeat(sender=None, **_kwargs) -> None:
    _stop.set()
    hostname = getattr(sender, "hostname", None)
    if hostname:
        try:
            forget_worker(hostname)
        except Exception:
            logger.warning("could not clear worker heartbeat", exc_info=True)


def freeze_startup_heap() -> None:
    """Move every object alive now (Django, the apps, their modules: what a process holds for
    its whole life) out of the cyclic garbage collector's generations, as Python's ``gc.freeze``
    documentation advises for forked workers. Without it each full collection walks that heap
    again: a quarter of an inventory sync's CPU went there (``bench/bench_fleet.py``: 401 ms a
    cluster, 297 ms frozen). Objects made later are collected as before; what is frozen is still
    freed by reference counting, only cycles among it would stay. So garbage is collected first:
    a cycle frozen would never be freed, and a finished thread's database connection in one kept
    its PostgreSQL session and its pool slot for good."""
    gc.collect()
    gc.freeze()


#: While syncs overlap without end (watched clusters sync in threads), a full collection at
#: most this often, so cycles made meanwhile are still freed.
COLLECT_EVERY_SECONDS = 30.0
_pause = threading.Lock()
_pauses = 0
_resume = False
_collected = 0.0


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (reference counting frees as always). Work that
    builds millions of young objects it keeps (a 20,000-node cluster's snapshot, simulated or
    listed) set off a full collection at every quarter of growth, each walking everything:
    a quarter of a large cluster's sync (``bench/bench_fleet.py``). Process-wide, counted
    across threads: the collector comes back when the last one leaves, if it was on; while
    pauses overlap without end, one leaving collects at most every ``COLLECT_EVERY_SECONDS``."""
    global _pauses, _resume, _collected
    with _pause:
        if _pauses == 0:
            _resume, _collected = gc.isenabled(), time.monotonic()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        collect = False
        with _pause:
            _pauses -= 1
            if _pauses == 0:
                if _resume:
                    gc.enable()
            elif _resume and time.monotonic() - _collected >= COLLECT_EVERY_SECONDS:
                _collected, collect = time.monotonic(), True
        if collect:
            gc.collect()


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
