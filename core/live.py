"""Coalesced live summaries: however many changes, at most one event per thing per tick.

At fleet scale a rollout acknowledges thousands of nodes a second and a federation pass
touches every member of an object; sending an event per change would flood browsers and
Redis. Writers ``mark(kind, key)`` what changed (after their transaction commits, into a
Redis set); ``publish_pending`` (beat, every second) pops the marked keys of each kind and
asks the kind's registered builder for the summaries to send — one per key, or one per
page-level aggregate — built from the database at that moment, so an event always shows
the committed state.

Marking is best effort: with Redis down nothing is marked, and pages that missed events
backfill when their websocket reconnects (``static/meridian/js/live.js``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from django.db import transaction

from . import events
from .redis import get_redis

logger = logging.getLogger(__name__)
DIRTY_KEY = "meridian:live:dirty:{kind}"
SENT_KEY = "meridian:live:sent:{kind}"
#: The beat's tick is a second, but its runs bunch up behind a busy worker (two or three back to
#: back, each finding new marks during a rollout): the periodic task leaves a kind this long
#: after it last sent it, so a browser gets each thing's summary about once a second, not three
#: times in one (``bench/bench_live.py`` counted up to 5 messages a second before).
TICK_SPACING_SECONDS = 0.9
#: kind → builder(keys) → [(topic, event type, data)]
Builder = Callable[[list[str]], Iterable[tuple[str, str, dict[str, Any]]]]
_builders: dict[str, Builder] = {}


def register(kind: str, builder: Builder) -> None:
    """Declare how to summarise changed keys of ``kind`` (call from an AppConfig.ready)."""
    _builders[kind] = builder


def mark(kind: str, keys: Iterable[Any]) -> None:
    """Note that these things changed; their summary goes out at the next tick after commit."""
    values = [str(k) for k in keys if k is not None and k != ""]
    if not values:
        return
    if kind not in _builders:
        raise ValueError(f"no live summary registered for {kind!r}")
    transaction.on_commit(lambda: _add(kind, values), robust=True)


def _add(kind: str, values: list[str]) -> None:
    try:
        get_redis().sadd(DIRTY_KEY.format(kind=kind), *values)
    except Exception as exc:  # best effort: the pages backfill after a reconnect
        logger.warning("could not mark %s %s for the live summary: %s", kind, values[:3], exc)


def publish_pending(limit: int = 500, *, spacing: float = 0.0) -> dict[str, int]:
    """Send the summaries of everything marked since the last call; returns counts per kind.

    With ``spacing``, a kind sent less than that many seconds ago keeps its marks for a later call.
    """
    redis = get_redis()
    sent: dict[str, int] = {}
    for kind, builder in _builders.items():
        gate = SENT_KEY.format(kind=kind)
        if spacing and redis.exists(gate):
            continue
        keys = [k.decode() if isinstance(k, bytes) else str(k) for k in redis.spop(DIRTY_KEY.format(kind=kind), limit) or []]
        if not keys:
            continue
        if spacing:
            redis.set(gate, 1, px=int(spacing * 1000))
        sent[kind] = len(events.send_many(list(builder(keys))))
    return sent


def pending(kind: str) -> set[str]:
    """What is marked and not yet published (for tests and the overview)."""
    return {k.decode() for k in get_redis().smembers(DIRTY_KEY.format(kind=kind))}
