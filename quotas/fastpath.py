"""The admission webhook's ASGI fast path: decisions on a fixed pool of database threads.

Django under ASGI runs each request's synchronous code in a thread of its own, so every
webhook call would open (and later drop) a database connection: at 64 concurrent API
server calls that costs more than the decision itself and can exhaust PostgreSQL's
connection slots. Admission is machine-to-machine and needs none of the page middleware,
so this wrapper answers ``POST /api/admission/v1/quotas/validate`` with ``webhook.decide``
on ``MERIDIAN_WEBHOOK_THREADS`` long-lived threads, each keeping its connection. Row locks
still serialise writers per group; the threads only remove the per-request overhead and let
a batch run beside one stuck on a lock (``AdmissionFastPath``).
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from django.db import DatabaseError, connection, connections

from .webhook import MAX_REVIEW_BYTES, WEBHOOK_PATH, decide_many

MAX_BATCH = 64
UNAVAILABLE = (503, {"detail": "The database is unavailable; the API server will retry or apply its failure policy."})
_JSON = (b"content-type", b"application/json")
_CHALLENGE = (b"www-authenticate", b'Bearer realm="meridian-webhook"')


def _decide_on_pool_thread(calls: list[tuple[str, bytes]]) -> list[tuple[int, dict[str, Any]]]:
    """``decide_many``, on a connection that is known to work.

    A batch that failed on a broken connection is answered with reasoned denials, and the
    broken connection must not fail every later batch too: it is dropped (and reopened by
    the next query) once Django has seen an error that is not the data's fault.
    """
    if connection.errors_occurred:
        connection.close_if_unusable_or_obsolete()
    try:
        return decide_many(calls)
    except DatabaseError:
        connections.close_all()
        raise


class AdmissionFastPath:
    """Calls queue while a batch is being decided; the next batch takes every queued call
    (up to ``MAX_BATCH``), so batches grow exactly when load does.

    One batch at a time is the fast shape (measured on two cores: 1.5–2× the decisions/s of
    four concurrent batches, a third of their paced p99): every batch pays a fixed cost
    (token lookup, two database round trips, a WAL flush), concurrent batches of a spread
    load lock overlapping groups and mostly wait for each other, and they split the queue
    into small batches that pay that cost more often. Another pool thread only starts a
    batch next to one that has run for ``overlap_after`` seconds, i.e. one that is stuck (a
    long lock held by a tree change or a reconcile), so other groups are not held up
    behind it.
    """

    overlap_after = 0.1  # a normal batch of 64 takes 10–30 ms

    def __init__(self, app: Any, threads: int) -> None:
        self.app = app
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[tuple[str, bytes, asyncio.Future]] = []
        self._started: list[float] = []  # start times of the running batches
        self._recheck: asyncio.TimerHandle | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != WEBHOOK_PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive, MAX_REVIEW_BYTES + 1)
        authorization = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()
        self._pending.append((authorization, body, answer))
        self._start_batches(loop)
        status, payload = await answer
        content = orjson.dumps(payload)
        headers = [_JSON, (b"content-length", str(len(content)).encode())]
        if status == 401:
            headers.append(_CHALLENGE)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _start_batches(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._pool is None:
            self._pool = self._start_pool()
        while self._pending and self._may_start(loop):
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            started = time.monotonic()
            self._started.append(started)
            work = loop.run_in_executor(self._pool, _decide_on_pool_thread, [(a, b) for a, b, _ in batch])
            work.add_done_callback(lambda done, batch=batch, started=started: self._finish(loop, done, batch, started))

    def _may_start(self, loop: asyncio.AbstractEventLoop) -> bool:
        """A free thread, and no running batch younger than ``overlap_after`` (if there is
        one, look again when it comes of age)."""
        if len(self._started) >= self.threads:
            return False
        if not self._started:
            return True
        wait = max(self._started) + self.overlap_after - time.monotonic()
        if wait <= 0:
            return True
        if self._recheck is None:
            self._recheck = loop.call_later(wait, self._look_again, loop)
        return False

    def _look_again(self, loop: asyncio.AbstractEventLoop) -> None:
        self._recheck = None
        self._start_batches(loop)

    def _start_pool(self) -> ThreadPoolExecutor:
        """The threads, and the process made fit for a latency goal of milliseconds.

        ``gc.freeze()`` moves everything alive once Django has started (hundreds of thousands
        of objects) out of the collector's reach: a full collection otherwise walks all of
        them and stops every thread for ~100 ms, the webhook's whole p99 budget several times
        over. The objects stay alive anyway; only garbage made later is collected.
        """
        gc.freeze()
        return ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="quota-webhook")

    def close(self) -> None:
        """Close every pool thread's database connections, then the pool (tests, shutdown)."""
        if self._pool is None:
            return
        barrier = threading.Barrier(self.threads)

        def close_here() -> None:
            barrier.wait(timeout=10)  # one task per thread: each closes its own connections
            connections.close_all()

        for future in [self._pool.submit(close_here) for _ in range(self.threads)]:
            future.result(timeout=30)
        self._pool.shutdown()
        if self._recheck is not None:
            self._recheck.cancel()
        self._pool, self._pending, self._started, self._recheck = None, [], [], None

    def _finish(self, loop: asyncio.AbstractEventLoop, done: asyncio.Future, batch: list, started: float) -> None:
        self._started.remove(started)
        results = [UNAVAILABLE] * len(batch) if done.cancelled() or done.exception() is not None else done.result()
        for (_, _, answer), result in zip(batch, results, strict=True):
            if not answer.done():
                answer.set_result(result)
        self._start_batches(loop)


async def _read_body(receive: Any, limit: int) -> bytes:
    """The request body, cut at ``limit`` bytes (``decide`` refuses anything that long)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        if size < limit:
            chunks.append(chunk[: limit - size])
            size += len(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks)
