"""The one websocket endpoint: authenticated clients subscribe to topics they may read.

Client → server: ``{"type": "subscribe", "topic": "job-42"}``, ``{"type": "unsubscribe", ...}``,
``{"type": "ping"}``. Server → client: ``subscribed`` (with the topic's current sequence
number, the point to backfill from), ``error``, ``pong`` and ``event`` messages.
"""

from __future__ import annotations

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core import events

MAX_SUBSCRIPTIONS = 64
CLOSE_UNAUTHENTICATED = 4401


class EventConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.topics: set[str] = set()
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
        await self.send_json(message["event"])
