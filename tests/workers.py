"""Real workers for tests that go through the queue: a Celery worker in a thread of the test
process consuming shard queues, or the README's worker as a process of its own on the test
database; purging stale messages, and waiting for a job to finish."""

from __future__ import annotations

import contextlib
import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.models import Job


def purge_queues(*shard_keys: str) -> None:
    """Drop the messages waiting in these keys' shard queues (all shard queues and ``default``
    without keys): messages of jobs whose database rows are gone, or never meant to run."""
    redis, keys = _queue_keys(shard_keys)
    for queue_keys in keys:
        redis.delete(*queue_keys)


def waiting_messages(*shard_keys: str) -> int:
    """How many messages wait in these keys' shard queues (all of them without keys)."""
    redis, keys = _queue_keys(shard_keys)
    return sum(redis.llen(key) for queue_keys in keys for key in queue_keys)


def marked_sent(*jobs: Job) -> list[Any]:
    """When the outbox marked each job's message sent to the broker running now (None: not sent)."""
    from core.jobs import broker_epoch, sent_marks

    return sent_marks([(job.task_id, None) for job in jobs], broker_epoch())


def _queue_keys(shard_keys: tuple[str, ...]) -> tuple[Any, list[list[str]]]:
    """Redis, and each queue's keys (kombu keeps a queue's priorities in keys of their own)."""
    from core.redis import get_redis
    from core.sharding import all_shard_queues, shard_queue

    redis = get_redis()
    queues = sorted({shard_queue(key) for key in shard_keys}) if shard_keys else [*all_shard_queues(), "default"]
    return redis, [[queue, *redis.scan_iter(match=f"{queue}\x06\x16*")] for queue in queues]


@contextlib.contextmanager
def solo_worker(queues: list[str]) -> Iterator[Any]:
    """A real Celery worker (the solo pool, in a thread of this process) consuming ``queues``;
    yields its controller (``.consumer`` is its Celery consumer).

    The solo pool sends ``worker_process_init`` in this process, and Meridian's handler freezes
    the heap as a pool process's startup heap (``core.worker_signals.freeze_startup_heap``). The
    test process is no worker: what was frozen is handed back to the collector when the worker
    stops. Frozen cycles are never collected, and a finished thread's database connection among
    them kept its PostgreSQL session open until the suite's end ("test_test is being accessed by
    2 other sessions" when the test database was dropped)."""
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    try:
        with start_worker(app, queues=queues, perform_ping_check=False, pool="solo", shutdown_timeout=10) as worker:
            yield worker
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def shard_worker(*shard_keys: str, purge: bool = True) -> Iterator[None]:
    """A real Celery worker (in a thread of this process) consuming the shard queues of these keys.

    For ``transaction=True`` tests only: the worker reads committed rows. Messages that earlier
    tests left in those queues name jobs of databases that were rolled back since, so they are
    dropped first (``purge=False`` keeps what this test sent before the worker started).
    """
    from core.sharding import shard_queue

    if purge:
        purge_queues(*shard_keys)
    with solo_worker(sorted({shard_queue(key) for key in shard_keys})):
        yield


@contextlib.contextmanager
def worker_process(var_dir: Path) -> Iterator[Any]:
    """The README's worker (``meridian_worker --shards all``), a process of its own, on the test
    database and this suite's Redis; yields its ``Meridian`` (``tests.faults.processes``).

    For ``transaction=True`` tests that time what a worker does while the test acts on it: a
    worker in a thread of the test process shares its interpreter lock with the test, and on
    a loaded machine each waits for the other. Messages earlier tests left are dropped first.
    Only Meridian's own tasks run there: a task a test module defines is unknown to it.
    """
    from django.conf import settings

    from tests.faults.processes import Meridian

    purge_queues()
    processes = Meridian(database_url=this_database_url(), redis_url=settings.REDIS_URL, var_dir=var_dir,
                         extra_env={"MERIDIAN_DB_POOL_MIN": "1", "MERIDIAN_DB_POOL_MAX": "3"})
    processes.env["MERIDIAN_SHARDS"] = str(settings.MERIDIAN_SHARDS)  # the queues this process sends to
    processes.start_worker()
    try:
        yield processes
    finally:
        processes.close()


def this_database_url() -> str:
    """A ``DATABASE_URL`` naming the database this test runs on (pytest-django's test database)."""
    from django.db import connection

    database = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(database['NAME']).resolve()}"
    password = f":{database['PASSWORD']}" if database.get("PASSWORD") else ""
    return (f"postgres://{database.get('USER') or 'postgres'}{password}@{database.get('HOST') or '127.0.0.1'}:"
            f"{database.get('PORT') or 5432}/{database['NAME']}")


def unacked_tag(broker: Any, task_id: str, key: str = "unacked") -> str | None:
    """The delivery tag under which a worker holds a message of task ``task_id`` unacknowledged,
    if one does: kombu's Redis transport keeps them in its ``unacked`` hash, each as [message,
    exchange, routing key]."""
    for tag, raw in broker.hgetall(key).items():
        if json.loads(raw)[0]["headers"]["id"] == task_id:
            return tag.decode()
    return None


def queued(broker: Any, task_id: str) -> bool:
    """Whether a message of task ``task_id`` waits in a queue (kombu's Redis transport keeps each
    queue as a list of messages)."""
    return any(json.loads(raw)["headers"]["id"] == task_id for key in broker.scan_iter()
               if broker.type(key) == b"list" for raw in broker.lrange(key, 0, -1))


def wait_for_job(job: Job | int | str, timeout: float = 30) -> Job:
    """The job once it finished (succeeded, failed or canceled), by row, primary key or task id
    (whose row may not exist yet); fails the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    current: Job | None = None
    while time.monotonic() < deadline:
        rows = Job.objects.filter(task_id=job) if isinstance(job, str) else Job.objects.filter(pk=job if isinstance(job, int) else job.pk)
        current = rows.first()
        if current is not None and current.status in Job.FINISHED:
            return current
        time.sleep(0.05)
    raise AssertionError(f"job {job} did not finish within {timeout} s: {current and current.status} {current and current.error}")
