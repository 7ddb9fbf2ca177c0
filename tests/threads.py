"""Something held by another thread, for the tests of what that does to this one."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from django.db import connections


@contextlib.contextmanager
def held_in_a_thread(hold: Callable[[], AbstractContextManager], *, at_most: float = 20) -> Iterator[Callable[[], None]]:
    """``hold()`` entered in a thread of its own and kept (``at_most`` seconds) until the ``let_go``
    yielded is called, which returns once the thread has left it, or until the block ends. The
    thread closes its database connections as it ends, so none is left checked out."""
    entered, leave = threading.Event(), threading.Event()

    def run() -> None:
        try:
            with hold():
                entered.set()
                leave.wait(at_most)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()

    def let_go() -> None:
        leave.set()
        thread.join(10)
        assert not thread.is_alive(), "the thread let go"

    try:
        assert entered.wait(10), "the thread holds it"
        yield let_go
    finally:
        leave.set()
        thread.join(10)
