"""The admission webhook's ASGI fast path: decisions on a fixed pool of database threads.

Django under ASGI runs each request's synchronous code in a thread of its own, so every
webhook call would open (and later drop) a database connection: at 64 concurrent API
server calls that costs more than the decision itself and can exhaust PostgreSQL's
connection slots. Admission is machine-to-machine and needs none of the page middleware,
so this wrapper answers ``POST /api/admission/v1/quotas/validate`` with ``webhook.decide``
on ``MERIDIAN_WEBHOOK_THREADS`` long-lived threads, each keeping its connection. Row locks
still serialise writers per group; the threads only remove the per-request overhead.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from django.db import DatabaseError, connections

from .webhook import MAX_REVIEW_BYTES, WEBHOOK_PATH, decide_many


MAX_BATCH = 64
UNAVAILABLE = (503, {"detail": "The database is unavailable; the API server will retry or apply its failure policy."})


def _decide_on_pool_thread(calls: list[tuple[str, bytes]]) -> list[tuple[int, dict[str, Any]]]:
    """``decide_many``, dropping this thread's connections if the database failed under them."""
    try:
        return decide_many(calls)
    except DatabaseError:
        connections.close_all()
        raise


class AdmissionFastPath:
    """Calls queue while every pool thread is busy; a free thread takes all queued calls as
    one batch, so batches grow exactly when load does."""

    def __init__(self, app: Any, threads: int) -> None:
        self.app = app
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[tuple[str, bytes, asyncio.Future]] = []
        self._running = 0

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
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="meridian-webhook"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _start_batches(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="quota-webhook")
        while self._pending and self._running < self.threads:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            self._running += 1
            work = loop.run_in_executor(self._pool, _decide_on_pool_thread, [(a, b) for a, b, _ in batch])
            work.add_done_callback(lambda done, batch=batch: self._finish(loop, done, batch))

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
        self._pool, self._pending, self._running = None, [], 0

    def _finish(self, loop: asyncio.AbstractEventLoop, done: asyncio.Future, batch: list) -> None:
        self._running -= 1
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
