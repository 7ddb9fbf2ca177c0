"""Optimistic concurrency: ETags of what a user can change, checked under the row lock.

A resource's ETag is a digest of its *spec* — the fields a user writes (``etag_fields`` on
the model), not the status a reconciler keeps moving — so a GET, an edit page and the
REST API agree on it, and a busy quota group's usage does not make every edit stale.

A writer states what it read: the REST base viewset takes ``If-Match``, a page's verb view
the form's hidden ``version``; both bind it with ``expecting(obj, etag)`` for the request.
The service, after locking the row it is about to change, calls ``check(row)``: a different
current ETag raises ``PreconditionFailed`` (412 in the API, a conflict message on the form)
and nothing is written. Without an expectation, ``check`` does nothing: If-Match is the
caller's choice, as in HTTP.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator

from django.db.models import Model
from django.utils.translation import gettext as _

from .errors import PreconditionFailed

_expected: contextvars.ContextVar[tuple[str, str, frozenset[str]] | None] = contextvars.ContextVar(
    "meridian_if_match", default=None)


def etag(instance: Model) -> str:
    """A strong ETag (quoted) of the instance's spec fields."""
    from .audit import json_safe

    fields = getattr(instance, "etag_fields", None) or [
        f.attname for f in instance._meta.concrete_fields if f.name not in ("created", "updated")]
    values = {name: json_safe(getattr(instance, name)) for name in fields}
    if callable(getattr(instance, "etag_extra", None)):
        values["~"] = json_safe(instance.etag_extra())
    digest = hashlib.sha256(json.dumps(values, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:20]
    return f'"{digest}"'


def parse_if_match(header: str | None) -> frozenset[str] | None:
    """The entity tags of an ``If-Match`` header (weak ones never match, RFC 9110 §13.1.1)."""
    if not header or not header.strip():
        return None
    tags = {part.strip() for part in header.split(",") if part.strip()}
    return frozenset(t for t in tags if not t.startswith("W/"))


def _key(instance: Model) -> tuple[str, str]:
    return instance._meta.label_lower, str(instance.pk)


@contextlib.contextmanager
def expecting(instance: Model, tags: frozenset[str] | str | None) -> Iterator[None]:
    """For the block, a write to ``instance`` must find one of ``tags`` current (none given, or
    an empty version from a form that carried none: no precondition, as without If-Match)."""
    if isinstance(tags, str):
        tags = frozenset({tags if tags.startswith('"') else f'"{tags}"'}) if tags.strip() else None
    if not tags:
        yield
        return
    token = _expected.set((*_key(instance), tags))
    try:
        yield
    finally:
        _expected.reset(token)


def check(locked: Model) -> None:
    """Refuse the write when the caller expected another version of ``locked`` (call under its row lock)."""
    expected = _expected.get()
    if expected is None or expected[:2] != _key(locked):
        return
    tags = expected[2]
    if "*" in tags or etag(locked) in tags:
        return
    raise PreconditionFailed(_("%(object)s changed since you read it; reload to see the current version, then try "
                               "again.") % {"object": locked})

