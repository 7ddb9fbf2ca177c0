"""Stable hashing shared by every app.

Python's ``hash()`` is salted per process, so anything that must agree across processes
and restarts (shard routing, change detection of mirrored objects) hashes through here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson

_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def canonical_json(obj: Any) -> bytes:
    """Compact JSON with sorted keys at every depth: equal objects give equal bytes."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def fnv32a(data: bytes, state: int = _FNV32_OFFSET) -> int:
    """32-bit FNV-1a, the hash KubeAdmiral shards its controllers by. ``state``: the hash of a
    prefix, so ``fnv32a(b, fnv32a(a)) == fnv32a(a + b)`` (many keys sharing a long prefix hash
    the prefix once)."""
    h = state
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


def stable_hash(key: str | bytes) -> int:
    """Process-independent 32-bit hash of a key (``shard = stable_hash(key) % count``)."""
    return fnv32a(key.encode() if isinstance(key, str) else key)


def shard_of(key: str | bytes, shard_count: int) -> int:
    """The shard owning ``key`` among ``shard_count`` shards."""
    if shard_count < 1:
        raise ValueError("shard_count must be at least 1")
    return stable_hash(key) % shard_count


def object_digest(obj: Any) -> str:
    """SHA-256 hex digest of an object's canonical JSON, for cheap change detection."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def facts_digest(obj: Any) -> str:
    """:func:`object_digest` of JSON without floats (strings, integers, booleans, None, lists,
    dicts with string keys: the inventory's facts, a million rows a fleet sync), written by
    orjson: for those the same bytes as ``canonical_json``, several times faster. orjson writes
    a float otherwise (``1e16``, not ``1e+16``), so what may hold one uses ``object_digest``;
    what orjson refuses (a key not a string, an integer beyond 64 bits) falls back to it."""
    try:
        text = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        return object_digest(obj)
    return hashlib.sha256(text).hexdigest()
