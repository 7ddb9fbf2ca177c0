"""The one websocket endpoint: authenticated clients subscribe to topics they may read.

Client → server: ``{"type": "subscribe", "topic": "job-42"}``, ``{"type": "unsubscribe", ...}``,
``{"type": "ping"}``. Server → client: ``subscribed`` (with the topic's current sequence
number, the point to backfill from), ``error``, ``pong`` and ``event`` messages, and
``{"type": "batch", "events": [...]}`` for events that came close together.

A browser gets at most ``MESSAGES_PER_SECOND`` messages in any second: a rollout's tick sends
the same summary on the list's topic and on the target's own, the overview listens to five
topics, and a thousand browsers each woken several times a second cost the web process and the
browsers more than the events are worth. Events sent together (``core.events.send_many``: a
tick's summaries) come already encoded, and each topic's layer message also carries the tick's
next topics' events: a browser gets every event of the tick it follows from the first of them
that reaches it, as one websocket message, and skips the tick's later copies. Nothing else is
held: an event goes out as it arrives unless the budget is spent, and then everything that
arrived goes out together when it allows, in the order it came (each event keeps its topic's
sequence number). Waiting for the tick's second topic instead (a companion wait of up to 250 ms)
put every browser behind the web process's fan-out of both topics to all 1,000 sockets
(``bench/bench_live.py``: p95 327 ms at 10,000 nodes); waiting a fixed moment for a burst to
complete did not even merge it.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict, deque

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core import events

MAX_SUBSCRIPTIONS = 64
CLOSE_UNAUTHENTICATED = 4401
MESSAGES_PER_SECOND = 2
#: The budget's window: a little over a second, so that messages delayed unequally on their way
#: (the web process's fan-out, the browser's own event loop) never put three into a browser's
#: second. With exactly 1.0 one browser of 1,000 once counted 3 in a second (bench_live).
BUDGET_WINDOW_SECONDS = 1.1
#: The ticks whose delivered topics a consumer remembers (a tick's copies arrive back to back).
TICKS_REMEMBERED = 8


class EventConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.topics: set[str] = set()
        self._held: list[str] = []  # events, encoded
        self._ticks: OrderedDict[str, set[str]] = OrderedDict()  # tick → topics already delivered from it
        self._flush: asyncio.TimerHandle | None = None
        self._sent: deque[float] = deque(maxlen=MESSAGES_PER_SECOND)  # when the last messages went
        await self.accept()
        await self.send_json({"type": "hello", "user": user.get_username()})

    async def dispatch(self, message) -> None:
        """Hand a message to its handler without Channels' ``close_old_connections`` first.

        Channels runs that before every message on the one thread synchronous code shares; an
        event for 1,000 sockets queued 1,000 trips there and reached the last browser a second
        late. This consumer touches the database only through ``database_sync_to_async``, which
        closes stale connections itself.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "_flush", None) is not None:
            self._flush.cancel()
        for topic in getattr(self, "topics", set()):
            await self.channel_layer.group_discard(events.group_name(topic), self.channel_name)

    async def receive_json(self, content, **kwargs) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "subscribe":
            await self._subscribe(content.get("topic"))
        elif kind == "unsubscribe":
            await self._unsubscribe(content.get("topic"))
        elif kind == "ping":
            await self.send_json({"type": "pong"})
        else:
            await self.send_json({"type": "error", "code": "bad_message", "detail": "expected subscribe, unsubscribe or ping"})

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        try:
            await super().receive(text_data=text_data, bytes_data=bytes_data, **kwargs)
        except ValueError:
            await self.send_json({"type": "error", "code": "bad_json", "detail": "messages must be JSON objects"})

    async def _subscribe(self, topic) -> None:
        if not isinstance(topic, str) or events.resolve(topic) is None:
            await self.send_json({"type": "error", "topic": topic, "code": "unknown_topic", "detail": "no such topic"})
            return
        if len(self.topics) >= MAX_SUBSCRIPTIONS and topic not in self.topics:
            await self.send_json({"type": "error", "topic": topic, "code": "too_many", "detail": f"at most {MAX_SUBSCRIPTIONS} topics"})
            return
        allowed = await database_sync_to_async(events.authorize)(self.scope["user"], topic)
        if not allowed:
            await self.send_json({"type": "error", "topic": topic, "code": "forbidden", "detail": "not allowed to read this topic"})
            return
        await self.channel_layer.group_add(events.group_name(topic), self.channel_name)
        self.topics.add(topic)
        sequence = await database_sync_to_async(events.current_sequence)(topic)
        await self.send_json({"type": "subscribed", "topic": topic, "seq": sequence})

    async def _unsubscribe(self, topic) -> None:
        if topic in self.topics:
            self.topics.discard(topic)
            await self.channel_layer.group_discard(events.group_name(topic), self.channel_name)
        await self.send_json({"type": "unsubscribed", "topic": topic})

    async def meridian_event(self, message) -> None:
        if not self._take(message):
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        recent = [t for t in self._sent if t > now - BUDGET_WINDOW_SECONDS]
        spent = len(recent) >= MESSAGES_PER_SECOND  # then it frees a window after the oldest
        at = recent[0] + BUDGET_WINDOW_SECONDS if spent else now
        if self._flush is not None:
            if self._flush.when() <= at:
                return
            self._flush.cancel()
            self._flush = None
        if at <= now:
            await self._send_held()
        else:
            self._flush = loop.call_at(at, self._send_later)

    def _take(self, message) -> bool:
        """Hold the message's events of the topics this browser follows and has not had from the tick."""
        encoded = message.get("encoded")
        if encoded is None:  # from a process of the previous release, during a rolling upgrade
            encoded = [(event["topic"], json.dumps(event)) for event in message.get("events") or [message["event"]]]
        delivered = self._delivered(message.get("tick"))
        taken = [(topic, text) for topic, text in encoded if topic in self.topics and topic not in delivered]
        delivered.update(topic for topic, _ in taken)
        self._held.extend(text for _, text in taken)
        return bool(taken)

    def _delivered(self, tick: str | None) -> set[str]:
        """The topics already delivered from a tick (its later copies skip them)."""
        if tick is None:
            return set()
        delivered = self._ticks.get(tick)
        if delivered is None:
            delivered = self._ticks[tick] = set()
            if len(self._ticks) > TICKS_REMEMBERED:
                self._ticks.popitem(last=False)
        return delivered

    def _send_later(self) -> None:
        self._flush = None
        self._sending = asyncio.ensure_future(self._send_held())  # referenced: the loop keeps only weak references

    async def _send_held(self) -> None:
        held, self._held = self._held, []
        if not held:
            return
        self._sent.append(asyncio.get_running_loop().time())
        await self.send(text_data=held[0] if len(held) == 1 else '{"type": "batch", "events": [' + ", ".join(held) + "]}")
