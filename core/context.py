"""Who is acting right now: a request's user, or a named system component in a task.

Service functions that mutate read the actor from here instead of taking it as an
argument through every layer, so the audit log attributes every change the same way.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Actor:
    """The author of a change: a user (``user`` set) or a system component."""

    name: str
    user: Any = None
    source: str = "system"  # ui | api | system | agent | webhook
    request_id: uuid.UUID | None = None


_request: contextvars.ContextVar[Any] = contextvars.ContextVar("meridian_request", default=None)
_actor: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("meridian_actor", default=None)
_request_id: contextvars.ContextVar[uuid.UUID | None] = contextvars.ContextVar("meridian_request_id", default=None)

SYSTEM = Actor(name="system")


def bind_request(request: Any) -> contextvars.Token:
    """Make ``request`` the source of the actor for the rest of this context."""
    _request_id.set(getattr(request, "id", None))
    return _request.set(request)


def unbind_request(token: contextvars.Token) -> None:
    _request.reset(token)
    _request_id.set(None)


def bind_request_id(request_id: uuid.UUID) -> contextvars.Token:
    """Work done on behalf of a request elsewhere (a task it queued) carries the request's id."""
    return _request_id.set(request_id)


def unbind_request_id(token: contextvars.Token) -> None:
    _request_id.reset(token)


def current_request_id() -> uuid.UUID | None:
    return _request_id.get()


def current_actor() -> Actor:
    """The explicit actor if one is bound, else the request's user, else ``system``.

    The user is read lazily because DRF authenticates inside the view, after middleware ran.
    """
    actor = _actor.get()
    if actor is not None:
        return actor
    request = _request.get()
    user = getattr(request, "user", None) if request is not None else None
    if user is not None and user.is_authenticated:
        source = "api" if request.path.startswith("/api/") else "ui"
        return Actor(name=user.get_username(), user=user, source=source, request_id=getattr(request, "id", None))
    return Actor(name="system", request_id=_request_id.get())


@contextlib.contextmanager
def acting_as(name: str, *, user: Any = None, source: str = "system", request_id: uuid.UUID | None = None) -> Iterator[Actor]:
    """Attribute changes made inside the block to ``name`` (e.g. ``system:fleet-sync``)."""
    actor = Actor(name=name, user=user, source=source, request_id=request_id or _request_id.get() or uuid.uuid4())
    token = _actor.set(actor)
    rid_token = _request_id.set(actor.request_id)
    try:
        yield actor
    finally:
        _actor.reset(token)
        _request_id.reset(rid_token)
