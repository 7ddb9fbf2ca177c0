"""The event bus: publish to a topic after commit; websocket clients subscribe to topics.

Topics are named ``<kind>`` or ``<kind>-<id>`` (``rollout-42``, ``quota-group-3``). Each
kind is registered with the permission a user needs to subscribe. Every event carries a
per-topic sequence number from Redis, so a client that missed events (a reconnect, a
gap in the numbers) knows to backfill over REST.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from redis.exceptions import RedisError

from .redis import get_redis
from .sql import on_commit_together

logger = logging.getLogger(__name__)

TOPIC_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[A-Za-z0-9_.]+)*$")
MAX_TOPIC_LENGTH = 90
SEQUENCE_KEY = "meridian:events:seq:{topic}"
#: How many of the topics that follow a topic in one ``send_many`` its message also carries the
#: events of, bounded so a message stays small.
FOLLOWING = 8

#: A topic's object id → the object whose ``view`` permission the subscription needs (None: gone).
Lookup = Callable[[str], Any]


@dataclass(frozen=True)
class TopicKind:
    """Who may subscribe: ``view`` on ``model`` (per object when the topic names one and
    ``lookup`` finds it), through ``core.permissions`` like every page and API call; a kind
    with no model is open to every signed-in user.

    A kind-wide topic (``fleet``, ``nodeconfig``, ``quotas``, …) carries events about any
    object of the kind, so it needs ``view`` fleet-wide (the role): a user who may view some
    objects only (a scoped role, a quota owner) subscribes to their objects' own topics
    (``cluster-<name>``, ``nodeconfig-target-<id>``, ``federation-object-<id>``, ``job-<id>``)."""

    name: str
    model: Any = None
    lookup: Lookup | None = None

    def allows(self, user: Any, object_id: str | None) -> bool:
        from .permissions import may

        if not (user and user.is_authenticated and user.is_active):
            return False
        if self.model is None:
            return True
        if object_id is not None and self.lookup is not None:
            obj = self.lookup(object_id)
            return obj is not None and may(user, "view", obj)
        return may(user, "view", self.model)


_kinds: dict[str, TopicKind] = {}


def register_topic_kind(name: str, *, model: Any = None, lookup: Lookup | None = None) -> None:
    """Declare a topic kind and the model whose ``view`` permission its subscribers need."""
    if not TOPIC_PATTERN.match(name):
        raise ValueError(f"bad topic kind {name!r}")
    _kinds[name] = TopicKind(name, model, lookup)


def kinds() -> list[TopicKind]:
    return list(_kinds.values())


def resolve(topic: str) -> tuple[TopicKind, str | None] | None:
    """Split a topic into its registered kind and object id (the longest registered kind wins)."""
    if not isinstance(topic, str) or len(topic) > MAX_TOPIC_LENGTH or not TOPIC_PATTERN.match(topic):
        return None
    for name in sorted(_kinds, key=len, reverse=True):
        if topic == name:
            return _kinds[name], None
        if topic.startswith(name + "-"):
            return _kinds[name], topic[len(name) + 1 :]
    return None


def authorize(user: Any, topic: str) -> bool:
    resolved = resolve(topic)
    return resolved is not None and resolved[0].allows(user, resolved[1])


def group_name(topic: str) -> str:
    """The Channels group behind a topic (group names allow only a small alphabet)."""
    return f"topic.{topic}"


def current_sequence(topic: str) -> int:
    value = get_redis().get(SEQUENCE_KEY.format(topic=topic))
    return int(value) if value else 0


def publish(topic: str, event_type: str, data: Mapping[str, Any] | None = None) -> None:
    """Deliver an event to the topic's subscribers once the current transaction commits.

    Outside a transaction it is sent at once; inside a transaction that rolls back it is
    never sent, so browsers never see a change that did not happen.
    """
    if resolve(topic) is None:
        raise ValueError(f"unknown or malformed topic {topic!r}")
    on_commit_together(_send_after_commit, (topic, event_type, dict(data or {})))


def _send_after_commit(items: list[tuple[str, str, Mapping[str, Any]]]) -> None:
    """A commit's events, sent together. A live event is best effort: with Redis down they are
    dropped in one log line (the browsers' sequence check refreshes them once it is back), not
    a traceback per change."""
    try:
        send_many(items)
    except (RedisError, OSError) as exc:
        logger.warning("%d live event(s) dropped (%s on %s first): %s", len(items), items[0][1], items[0][0], exc)


def send_now(topic: str, event_type: str, data: Mapping[str, Any]) -> int:
    """Number the event and hand it to the channel layer; returns its sequence number."""
    return send_many([(topic, event_type, data)])[0]


def send_many(items: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[int]:
    """``send_now`` for several events, handed to the channel layer together; returns their
    sequence numbers, in the order given.

    Each event is encoded to JSON here, once, not in each of a thousand sockets' consumers
    (decoding and encoding it per socket was most of the web process's work in a tick). A
    topic's message carries its own events and those of the next ``FOLLOWING`` topics, all
    marked with the tick: a browser following several of them (a rollout's tick sends the
    summary on the list's topic and on the target's own) gets them as one websocket message
    from whichever group's message reaches it first, and skips the tick's later copies
    (``console.consumers``), instead of waiting for the web process to fan out every topic.
    One event loop and Redis connection serve them all, where a call per event opened its own.
    """
    if not items:
        return []
    by_topic: dict[str, list[int]] = {}
    for index, (topic, _, _) in enumerate(items):
        by_topic.setdefault(topic, []).append(index)
    pipe = get_redis().pipeline(transaction=False)
    for topic, indices in by_topic.items():
        pipe.incrby(SEQUENCE_KEY.format(topic=topic), len(indices))
    sequences = [0] * len(items)
    for last, indices in zip(pipe.execute(), by_topic.values()):
        for offset, index in enumerate(indices):
            sequences[index] = int(last) - len(indices) + 1 + offset
    now = time.time()
    encoded = {
        topic: [[topic, json.dumps({"type": "event", "topic": topic, "event": items[i][1], "seq": sequences[i],
                                    "time": now, "data": dict(items[i][2])})] for i in indices]
        for topic, indices in by_topic.items()
    }
    topics = list(by_topic)
    tick = uuid.uuid4().hex
    messages = [
        (group_name(topic), {"type": "meridian.event", "tick": tick,
                             "encoded": [pair for each in topics[position:position + 1 + FOLLOWING] for pair in encoded[each]]})
        for position, topic in enumerate(topics)
    ]

    async def send_all() -> None:
        layer = get_channel_layer()
        for group, message in messages:
            await layer.group_send(group, message)

    _on_sender_loop(send_all())
    return sequences


#: The process's loop for sending, and the process it belongs to (a forked child makes its own).
_sender: tuple[int, asyncio.AbstractEventLoop] | None = None
_sender_lock = threading.Lock()


def _on_sender_loop(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run ``coroutine`` on the process's sender loop, a thread of its own that lives as long as
    the process, and wait for it. The channel layer keeps its Redis connections per loop: a loop
    per call (``async_to_sync`` from a worker's thread) opened a thread, a loop and a Redis
    connection for every commit's events and closed them again, 3 ms a commit where a send
    takes 0.2 ms, and a Redis connection made and dropped per commit. A kept connection that a
    Redis restart broke is replaced by redis-py's retry of the command on a fresh one."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _sender_loop())
    future.result()


def _sender_loop() -> asyncio.AbstractEventLoop:
    global _sender
    with _sender_lock:
        if _sender is None or _sender[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="meridian-events", daemon=True).start()
            _sender = (os.getpid(), loop)
        return _sender[1]
