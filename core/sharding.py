"""Which reconcile shard owns a key; the Celery router and workers agree through this."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from django.conf import settings

from kube.hashing import shard_of

SHARD_QUEUE_PREFIX = "reconcile."


def shard_for(key: str) -> int:
    return shard_of(key, settings.MERIDIAN_SHARDS)


def shard_queue(key: str) -> str:
    return f"{SHARD_QUEUE_PREFIX}{shard_for(key)}"


def all_shard_queues() -> list[str]:
    return [f"{SHARD_QUEUE_PREFIX}{n}" for n in range(settings.MERIDIAN_SHARDS)]


def parse_shard_spec(spec: str, shard_count: int) -> list[int]:
    """Parse ``"all"`` or ``"0,2-3"`` into shard numbers, refusing ones that do not exist."""
    if spec.strip() in {"", "all"}:
        return list(range(shard_count))
    shards: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.strip().partition("-")
        try:
            start, end = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"bad shard range {part!r}: use numbers such as 0,2-3") from None
        if not 0 <= start <= end < shard_count:
            raise ValueError(f"shard range {part!r} is outside 0-{shard_count - 1}")
        shards.update(range(start, end + 1))
    return sorted(shards)


def sharded_task(shard_key: Callable[..., str], **options: Any) -> Callable:
    """Declare a Celery task whose calls go to the shard owning ``shard_key(...)``.

    ``shard_key`` names the task parameters it needs (``lambda cluster_name: ...``); at send
    time ``config.celery.route_task`` binds the call's arguments to the task's own signature
    and passes those, so ``.delay(name, names)`` and ``.delay(name, node_names=names)`` route
    alike and a key function never breaks on arguments it does not use.
    """
    from celery import shared_task

    def decorator(fn: Callable) -> Any:
        return shared_task(shard_key=staticmethod(_bound_key(fn, shard_key)), **options)(fn)

    return decorator


def _bound_key(fn: Callable, shard_key: Callable[..., str]) -> Callable[..., str]:
    task_signature = inspect.signature(fn)
    wanted = [name for name in inspect.signature(shard_key).parameters if name in task_signature.parameters]

    def key(*args: Any, **kwargs: Any) -> str:
        kwargs = {k: v for k, v in kwargs.items() if k in task_signature.parameters}
        bound = task_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return shard_key(**{name: bound.arguments[name] for name in wanted})

    return key
