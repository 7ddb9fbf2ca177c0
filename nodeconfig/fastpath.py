"""The agent poll fast path: answer polls from Redis before Django runs.

100k nodes polling every 30 s is ~3,300 requests/s, and nearly all of them ask "has my
config changed?" when it has not. This ASGI wrapper answers those with one Redis round trip
(the token's cluster and the node's current ETag, both written by Django code: the token
cache by ``fleet.tokens.token_cluster``, the ETag by the reconciler after commit). When the config
did change, a fleet-wide target makes every node fetch at once; ETags are content-addressed,
so the configs cached under the new ETag by the first node's full poll serve all the others
from a second round trip. Anything it is not sure about, and requests sent with
``Cache-Control: no-cache``, go to Django unchanged.

The polls parsed in one turn of the event loop share their round trip: one MGET for all of
their keys (an agent's token key is its cluster's, so a turn's dozens of polls read a handful
of tokens). Per poll, the client's command and connection handling cost more than the server's
work, and shared they no longer dominate the 304 path (``bench/bench_nodeconfig.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from typing import Any

import redis.asyncio as aioredis

import orjson

from core.redis import async_client_for
from fleet.tokens import CACHE_KEY

from .etags import BODY_KEY, ETAG_KEY

logger = logging.getLogger(__name__)
PAUSE_SECONDS = 5.0
POLL_PATH = re.compile(r"^/api/agent/v1/clusters/(?P<cluster>[^/]+)/nodes/(?P<node>[^/]+)/config$")


class _Reads:
    """One event loop's Redis client and the reads waiting for this turn's MGET."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.waiting: list[tuple[tuple[str, ...], asyncio.Future]] = []
        self.sending: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks

    def get(self, loop: asyncio.AbstractEventLoop, *keys: str) -> asyncio.Future:
        """The values of ``keys`` (a list, None where absent), read with this turn's other reads."""
        answer = loop.create_future()
        self.waiting.append((keys, answer))
        if len(self.waiting) == 1:
            loop.call_soon(self._send, loop)  # after every poll the loop parses in this turn
        return answer

    def _send(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self.waiting = self.waiting, []
        keys = list(dict.fromkeys(key for wanted, _ in batch for key in wanted))
        task = loop.create_task(self.client.mget(keys))
        self.sending.add(task)
        task.add_done_callback(self.sending.discard)
        task.add_done_callback(lambda done: self._answer(batch, keys, done))

    @staticmethod
    def _answer(batch: list, keys: list[str], done: asyncio.Task) -> None:
        error = None if done.cancelled() else done.exception()
        if done.cancelled() or error is not None:
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(error or aioredis.ConnectionError("the read was cancelled"))
            return
        values = dict(zip(keys, done.result(), strict=True))
        for wanted, answer in batch:
            if not answer.done():
                answer.set_result([values[key] for key in wanted])


class AgentPollFastPath:
    def __init__(self, app: Any, redis_url: str) -> None:
        self.app = app
        self.redis_url = redis_url
        self._reads: dict[int, _Reads] = {}
        self._paused_until = 0.0

    def _read(self, *keys: str) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        reads = self._reads.get(id(loop))
        if reads is None:
            reads = self._reads[id(loop)] = _Reads(
                async_client_for(self.redis_url, socket_timeout=2, socket_connect_timeout=2))
        return reads.get(loop, *keys)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and time.monotonic() >= self._paused_until:
            match = POLL_PATH.match(scope["path"])
            if match is not None and await self._answer(scope, match, send):
                return
        await self.app(scope, receive, send)

    async def _answer(self, scope: dict, match: re.Match, send: Any) -> bool:
        token, tags = "", b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, rest = value.partition(b" ")
                if scheme.lower() == b"bearer":
                    token = rest.strip().decode("latin-1")
            elif name == b"if-none-match":
                tags = value
            elif name == b"cache-control" and b"no-cache" in value:
                return False  # the agent asks for a fresh read: let Django build it
        if not token:
            return False
        token_key = CACHE_KEY.format(kind="agent", digest=hashlib.sha256(token.encode()).hexdigest())
        etag_key = ETAG_KEY.format(cluster=match["cluster"], node=match["node"])
        try:
            owner, etag = await self._read(token_key, etag_key)
            if owner is None or etag is None or owner.partition(b":")[2].decode() != match["cluster"]:
                return False
            if tags and etag in {t.strip().removeprefix(b"W/") for t in tags.split(b",")}:
                await send({"type": "http.response.start", "status": 304, "headers": [(b"etag", etag)]})
                await send({"type": "http.response.body", "body": b""})
                return True
            (configs,) = await self._read(BODY_KEY.format(etag=etag.decode()))
        except (aioredis.RedisError, OSError) as exc:
            self._paused_until = time.monotonic() + PAUSE_SECONDS
            logger.warning("agent fast path: Redis fault (%s); Django answers from the database for %.0f s",
                           exc, PAUSE_SECONDS)
            return False
        if configs is None:
            return False
        body = b"".join((b'{"cluster":', orjson.dumps(match["cluster"]), b',"node":', orjson.dumps(match["node"]),
                         b',"configs":', configs, b"}"))
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"etag", etag),
            (b"cache-control", b"no-cache")]})
        await send({"type": "http.response.body", "body": body})
        return True
