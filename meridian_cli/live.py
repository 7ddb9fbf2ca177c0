"""Live progress from the websocket, with REST as the backstop.

``Events`` holds one websocket to ``/ws/`` (the API token in ``Authorization``, the server's
own origin in ``Origin``, as the server's check wants): ``hello``, then ``subscribe`` per
topic and its ``subscribed`` answer with the sequence number, then ``event`` messages (several
that came close together as one ``batch``), which a reader thread puts on a queue. It is best effort: when the websocket cannot be opened or
drops, ``wait_until`` keeps going on REST polls alone, so ``--wait`` never depends on it.

``wait_until`` draws a Rich progress bar (done / total, and a state line), updated from each
event's data at once and from a REST read every few seconds (events may be coalesced or
missed: a gap in the sequence is simply caught up by the next read), until the work is done,
fails, or the timeout passes.
"""

from __future__ import annotations

import json
import queue
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .client import Client
from .output import err

POLL_SECONDS = 3.0


class WaitTimeout(Exception):
    """``--wait`` ran out of time; the message says where the work stood."""


class WaitFailed(Exception):
    """The work being waited for failed (a rollout paused on failures, a job failed)."""


@dataclass(frozen=True)
class State:
    """Where asynchronous work stands: ``done`` of ``total``, a line for people, finished or failed."""

    done: int
    total: int
    text: str
    finished: bool = False
    failure: str = ""


class Events:
    """A websocket subscribed to ``topics``; ``next(timeout)`` returns an event's message or None."""

    def __init__(self, client: Client, topics: Sequence[str], *, verify: bool | str = True) -> None:
        self.client, self.topics, self.verify = client, list(topics), verify
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self.connection: Any = None
        self.sequences: dict[str, int] = {}

    def open(self) -> bool:
        """Connect and subscribe; False (and nothing raised) when the websocket is not available."""
        from websockets.sync.client import connect

        try:
            self.connection = connect(self.client.websocket_url(), origin=self.client.origin(),  # type: ignore[arg-type]
                                      additional_headers={"Authorization": f"Token {self.client.token}"},
                                      open_timeout=10, ssl=self._ssl())
            hello = json.loads(self.connection.recv(timeout=10))
            if hello.get("type") != "hello":
                raise ConnectionError(f"unexpected greeting {hello!r}")
            for topic in self.topics:
                self.connection.send(json.dumps({"type": "subscribe", "topic": topic}))
            pending = set(self.topics)
            deadline = time.monotonic() + 10
            while pending and time.monotonic() < deadline:
                message = json.loads(self.connection.recv(timeout=max(deadline - time.monotonic(), 0.1)))
                if message.get("type") == "subscribed":
                    self.sequences[message["topic"]] = int(message.get("seq") or 0)
                    pending.discard(message["topic"])
                elif message.get("type") == "error":
                    raise ConnectionError(f"{message.get('topic')}: {message.get('detail')}")
                else:
                    self._take(message)
        except Exception as exc:  # noqa: BLE001 - live progress is best effort; REST polls carry on
            err.print(f"[dim](live updates unavailable: {exc}; polling instead)[/]")
            self.close()
            return False
        threading.Thread(target=self._read, daemon=True, name="meridian-events").start()
        return True

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.client.websocket_url().startswith("wss:"):
            return None
        context = ssl.create_default_context(cafile=self.verify if isinstance(self.verify, str) else None)
        if self.verify is False:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _read(self) -> None:
        try:
            for raw in self.connection:
                self._take(json.loads(raw))
        except Exception:  # noqa: BLE001 - a dropped socket leaves the REST polls
            return

    def _take(self, message: dict[str, Any]) -> None:
        """Queue an event, or each event of a batch (events that came close together)."""
        for each in (message.get("events") or []) if message.get("type") == "batch" else [message]:
            if each.get("type") == "event":
                self.queue.put(each)

    def next(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self.queue.get(timeout=max(timeout, 0.01))
        except queue.Empty:
            return None

    def close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.close()
            except Exception:  # noqa: BLE001
                pass
            self.connection = None


class _Bar:
    """A Rich progress bar on a terminal; elsewhere (CI logs, pipes) a plain line per change."""

    def __init__(self, title: str, *, quiet: bool) -> None:
        self.title, self.quiet, self.last = title, quiet, None
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[text]}"), TimeElapsedColumn(), console=err, transient=False) \
            if err.is_terminal and not quiet else None
        self.task: Any = None

    def __enter__(self) -> _Bar:
        if self.progress is not None:
            self.progress.start()
            self.task = self.progress.add_task(self.title, total=1, completed=0, text="")
        return self

    def update(self, state: State) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=max(state.total, 1), completed=state.done, text=state.text)
            return
        shown = (state.done, state.total, state.text)
        if not self.quiet and shown != self.last:
            err.print(f"{self.title}: {state.done}/{state.total} {state.text}", markup=False, highlight=False, soft_wrap=True)
            self.last = shown

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


def wait_until(client: Client, *, title: str, topics: Sequence[str], read: Callable[[], State],
               from_event: Callable[[Mapping[str, Any]], State | None] | None = None, timeout: float,
               verify: bool | str = True, quiet: bool = False) -> State:
    """Follow work until ``read()`` (or an event) says finished; raise ``WaitFailed`` or
    ``WaitTimeout`` otherwise. Returns the last state."""
    events = Events(client, topics, verify=verify)
    live = events.open() if topics else False
    deadline = time.monotonic() + timeout
    state = read()
    show = _Bar(title, quiet=quiet)
    try:
        with show:
            show.update(state)
            last_read = time.monotonic()
            while not state.finished and not state.failure:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeout(f"timed out after {timeout:.0f}s: {title}: {state.done}/{state.total} {state.text}")
                message = events.next(min(remaining, 1.0)) if live else (time.sleep(min(remaining, 1.0)) or None)
                if message is not None and from_event is not None:
                    state = from_event(message.get("data") or {}) or state
                due = time.monotonic() - last_read >= POLL_SECONDS or (message is not None and from_event is None)
                if due or state.finished or state.failure:  # the end is confirmed by a read, not an event
                    state, last_read = read(), time.monotonic()
                show.update(state)
    finally:
        events.close()
    if state.failure:
        raise WaitFailed(f"{title}: {state.failure}")
    return state
