"""Admission webhooks' ASGI fast path: decisions in batches on a small pool of long-lived threads.

Django under ASGI runs each request's synchronous code in a fresh thread context with the whole
middleware stack, and each such thread opens (and later drops) a database connection: at 64
concurrent API-server calls that costs more than the decision itself and can exhaust
PostgreSQL's connection slots. A webhook is machine-to-machine and needs none of the page
middleware, so a subclass of :class:`BatchingWebhook` answers ``POST <path>`` itself: calls
queue while a batch is being decided, the next free pool thread takes every queued call (up to
``MAX_BATCH``) to ``decide``, so batches grow exactly when load does, and each pool thread
keeps its database connection. Everything else goes to the wrapped ``app``.

Subclasses (``quotas.fastpath``, ``scheduling.fastpath``) name the path, the body limit, the
decision and the answers for a batch that failed as a whole.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from django.db import DatabaseError, connection, connections

from .metrics import count_webhook_answers, observe_request
from .worker_signals import freeze_startup_heap

MAX_BATCH = 64
Answer = tuple[int, dict[str, Any]]
_JSON = (b"content-type", b"application/json")
_CHALLENGE = (b"www-authenticate", b'Bearer realm="meridian-webhook"')


class BatchingWebhook:
    path: str = ""
    max_body: int = 0
    thread_name: str = "webhook"
    #: ``None``: a free thread starts the next batch at once. A number: another batch starts only
    #: next to one that has run that long, i.e. one stuck on a lock (see ``quotas.fastpath``).
    overlap_after: float | None = None

    def __init__(self, app: Any, threads: int = 2) -> None:
        self.app = app
        self.threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[tuple[str, bytes, asyncio.Future]] = []
        self._started: list[float] = []  # start times of the running batches
        self._recheck: asyncio.TimerHandle | None = None

    # -- what a webhook defines -------------------------------------------------------------

    def decide(self, calls: list[tuple[str, bytes]]) -> list[Answer]:
        """(HTTP status, JSON body) per call (authorization header, body), on a pool thread."""
        raise NotImplementedError

    def failed(self, bodies: Sequence[bytes], error: BaseException | None) -> list[Answer]:
        """The answers when ``decide`` raised ``error`` for the whole batch (``None``: cancelled)."""
        raise NotImplementedError

    # -- the ASGI side ----------------------------------------------------------------------

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await read_body(receive, self.max_body + 1)
        authorization = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future = loop.create_future()
        self._pending.append((authorization, body, answer))
        self._start_batches(loop)
        started = time.perf_counter()
        status, payload = await answer
        observe_request(self.path, "POST", status, time.perf_counter() - started)
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
            work = loop.run_in_executor(self._pool, self._decide_on_pool_thread, [(a, b) for a, b, _ in batch])
            work.add_done_callback(lambda done, batch=batch, started=started: self._finish(loop, done, batch, started))

    def _may_start(self, loop: asyncio.AbstractEventLoop) -> bool:
        """A free thread, and (with ``overlap_after``) no running batch younger than that; if
        there is one, look again when it comes of age."""
        if len(self._started) >= self.threads:
            return False
        if not self._started or self.overlap_after is None:
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

        ``freeze_startup_heap`` moves everything alive once Django has started (hundreds of
        thousands of objects) out of the collector's reach: a full collection otherwise walks
        all of them and stops every thread for ~100 ms, a webhook's whole p99 budget several
        times over. The objects stay alive anyway; garbage made later is collected as before.
        """
        freeze_startup_heap()
        return ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=self.thread_name)

    def _decide_on_pool_thread(self, calls: list[tuple[str, bytes]]) -> list[Answer]:
        """``decide`` on a connection known to work: a batch that failed on a broken connection
        is answered by ``failed``, and the broken connection must not fail every later batch
        too, so it is dropped (and reopened by the next query)."""
        if connection.errors_occurred:
            connection.close_if_unusable_or_obsolete()
        try:
            return self.decide(calls)
        except DatabaseError:
            connections.close_all()
            raise

    def _finish(self, loop: asyncio.AbstractEventLoop, done: asyncio.Future, batch: list, started: float) -> None:
        self._started.remove(started)
        if done.cancelled():
            results = self.failed([body for _, body, _ in batch], None)
        elif done.exception() is not None:
            results = self.failed([body for _, body, _ in batch], done.exception())
        else:
            results = done.result()
        count_webhook_answers(self.thread_name, results)
        for (_, _, answer), result in zip(batch, results, strict=True):
            if not answer.done():
                answer.set_result(result)
        self._start_batches(loop)

    def close(self) -> None:
        """Close every pool thread's database connections, then the pool, then the wrapped
        app's (tests, shutdown)."""
        if self._pool is not None:
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
        inner = getattr(self.app, "close", None)
        if callable(inner):
            inner()


async def read_body(receive: Any, limit: int) -> bytes:
    """The request body, cut at ``limit`` bytes (a decision refuses anything that long)."""
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
