"""The one websocket endpoint: authenticated clients subscribe to topics they may read.

Client → server: ``{"type": "subscribe", "topic": "job-42"}``, ``{"type": "unsubscribe", ...}``,
``{"type": "ping"}``. Server → client: ``subscribed`` (with the topic's current sequence
number, the point to backfill from), ``error``, ``pong`` and ``event`` messages, and
``{"type": "batch", "events": [...]}`` for events that came close together.

A browser gets at most ``MESSAGES_PER_SECOND`` messages in any second: a rollout's tick sends
the same summary on the list's topic and on the target's own, the overview listens to five
topics, and a thousand browsers each woken several times a second cost the web process and the
browsers more than the events are worth. The first event of a burst waits ``GATHER_SECONDS``
for the rest of it, or ``LAST_GATHER_SECONDS`` when its message is the last the budget allows
for longer than that (what comes close behind then rides along instead of waiting); events
that arrive while the budget is spent go out together when it allows, in the order they came
(each keeps its topic's sequence number).
"""

from __future__ import annotations

import asyncio
from collections import deque

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core import events

MAX_SUBSCRIPTIONS = 64
CLOSE_UNAUTHENTICATED = 4401
MESSAGES_PER_SECOND = 2
GATHER_SECONDS = 0.025
LAST_GATHER_SECONDS = 0.2


class EventConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.topics: set[str] = set()
        self._held: list[dict] = []
        self._flush: asyncio.TimerHandle | None = None
        self._sent: deque[float] = deque(maxlen=MESSAGES_PER_SECOND)  # when the last messages went
        await self.accept()
        await self.send_json({"type": "hello", "user": user.get_username()})

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
        self._held.append(message["event"])
        if self._flush is None:
            loop = asyncio.get_running_loop()
            now = loop.time()
            recent = [t for t in self._sent if t > now - 1.0]
            if len(recent) >= MESSAGES_PER_SECOND:  # spent: it frees a second after the oldest
                at = recent[0] + 1.0
            elif len(recent) == MESSAGES_PER_SECOND - 1 and recent[0] + 1.0 - now > LAST_GATHER_SECONDS:
                at = now + LAST_GATHER_SECONDS  # the last message for a while: let what comes close ride along
            else:
                at = now + GATHER_SECONDS
            self._flush = loop.call_at(at, self._send_held)

    def _send_held(self) -> None:
        held, self._held, self._flush = self._held, [], None
        self._sent.append(asyncio.get_running_loop().time())
        self._sending = asyncio.ensure_future(  # referenced: the loop keeps only weak references to tasks
            self.send_json(held[0] if len(held) == 1 else {"type": "batch", "events": held}))
