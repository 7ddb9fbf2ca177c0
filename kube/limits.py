"""Bounds on what people send: how deeply a native object, a policy spec or a manifest may nest.

Kubernetes objects nest a few levels deep (a Deployment's container requests sit at depth
seven); a body nested thousands of levels is an attack or a bug, and every recursive step
on it (parsing, copying, hashing, merging, rendering) could exhaust Python's stack. Such
input is refused up front with the field it came in, never a 500 halfway through a change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Deepest nesting of mappings and lists accepted in an object, a spec or a manifest.
MAX_DEPTH = 100


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests mappings and lists more than ``limit`` levels (iteratively, so a
    value too deep for recursion is measured too)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def too_deep_message(limit: int = MAX_DEPTH) -> str:
    return f"is nested more than {limit} levels deep"
