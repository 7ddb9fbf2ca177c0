"""Supervise a few processes: one that exits is started again with backoff, and says so.

``make run`` (``meridian_run``: web, worker, beat) and ``meridian_worker`` (its Celery
worker) run their processes under it. honcho's manager, used before, ended every process
when one exited: a worker that died in a Redis outage took the whole embedded product with
it. Here a process that exits without being asked is started again after a backoff (1 s,
doubling to 30 s, back to 1 s once it ran ``stable_after`` seconds), with a line naming the
exit code, the delay and the restart count; the others go on.

Children run in sessions of their own, so a terminal's Ctrl-C reaches the supervisor only,
which stops them in order (SIGTERM to each: uvicorn and Celery drain; SIGKILL to its process
group after ``stop_timeout``; a second signal kills at once). Each child is also told by the kernel to stop when the
supervisor dies (``PR_SET_PDEATHSIG``), so a ``kill -9`` of the supervisor leaves no
process behind. Plain Python, no Django: it runs before Django is set up, and in tests.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

PR_SET_PDEATHSIG = 1
MIN_BACKOFF = 1.0
MAX_BACKOFF = 30.0


@dataclass(frozen=True)
class Program:
    """A process to keep running. ``{start}`` in an argument or an environment value becomes
    the start's number (1, 2, …): a restarted Celery worker takes a new node name, so the
    reaper anywhere can tell its dead predecessor's jobs by their lapsed heartbeat."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None

    def command(self, start: int) -> tuple[list[str], dict[str, str] | None]:
        argv = [arg.replace("{start}", str(start)) for arg in self.argv]
        env = {k: v.replace("{start}", str(start)) for k, v in self.env.items()} if self.env is not None else None
        return argv, env


@dataclass
class _Child:
    program: Program
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = MIN_BACKOFF
    due: float = 0.0
    readers: list[threading.Thread] = field(default_factory=list)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The kernel sends SIGTERM to this child when the supervisor's thread that started it ends."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux's /proc; none elsewhere)."""
    parents: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    with open(f"/proc/{entry}/stat") as stat:
                        parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


def describe_exit(code: int) -> str:
    """``code 1`` or ``signal SIGKILL``, as Popen.returncode says it."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"code {code}"


class Supervisor:
    """Run ``programs`` until told to stop; restart any that exits meanwhile."""

    def __init__(self, programs: Sequence[Program], *, out: TextIO | None = None, prefix_output: bool = True,
                 min_backoff: float = MIN_BACKOFF, max_backoff: float = MAX_BACKOFF, stable_after: float = 30.0,
                 stop_timeout: float | None = 20.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.children = [_Child(p, backoff=min_backoff) for p in programs]
        self.out = out or sys.stdout
        self.prefix_output = prefix_output
        self.min_backoff, self.max_backoff, self.stable_after = min_backoff, max_backoff, stable_after
        self.stop_timeout = stop_timeout
        self.clock = clock
        self.stopping = False
        self._forced = False
        self._received = ""
        self._write_lock = threading.Lock()
        self._width = max([len(p.name) for p in programs] + [6])

    # ------------------------------------------------------------------ running

    def run(self) -> int:
        """Start everything, supervise until SIGINT/SIGTERM, stop everything; the exit code."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            for child in self.children:
                self._spawn(child)
            while not self.stopping:
                self._tend()
                time.sleep(0.1)
            self.say(f"{self._received or 'stop'} received: stopping")
            return self._stop_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame) -> None:
        """Only flags: a handler runs between two bytecodes of the main thread, which may hold the output lock."""
        if self.stopping:
            self._forced = True  # a second Ctrl-C: no more waiting
        self.stopping = True
        self._received = signal.Signals(signum).name

    def _tend(self) -> None:
        now = self.clock()
        for child in self.children:
            if child.proc is None:
                if now >= child.due:
                    self._spawn(child)
                continue
            code = child.proc.poll()
            if code is None:
                continue
            self._reap(child)
            ran = now - child.started
            child.backoff = self.min_backoff if ran >= self.stable_after else child.backoff
            child.restarts += 1
            child.due = now + child.backoff
            self.say(f"{child.program.name} exited with {describe_exit(code)} after {ran:.0f} s; "
                     f"restarting in {child.backoff:.3g} s (restart {child.restarts})")
            child.backoff = min(child.backoff * 2, self.max_backoff)

    def _spawn(self, child: _Child) -> None:
        program = child.program
        pipe = subprocess.PIPE if self.prefix_output else None
        argv, env = program.command(child.restarts + 1)
        try:
            child.proc = subprocess.Popen(
                argv, env=env, cwd=program.cwd,
                stdout=pipe, stderr=subprocess.STDOUT if self.prefix_output else None, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent)
        except OSError as exc:
            child.due = self.clock() + child.backoff
            self.say(f"{program.name} could not start ({exc}); trying again in {child.backoff:.3g} s")
            child.backoff = min(child.backoff * 2, self.max_backoff)
            return
        child.started = self.clock()
        self.say(f"{program.name} started (pid {child.proc.pid})")
        if self.prefix_output:
            reader = threading.Thread(target=self._relay, args=(program.name, child.proc.stdout), daemon=True,
                                      name=f"relay:{program.name}")
            reader.start()
            child.readers = [reader]

    def _reap(self, child: _Child) -> None:
        for reader in child.readers:
            reader.join(timeout=2)
        child.readers = []
        child.proc = None

    # ------------------------------------------------------------------ stopping

    def _stop_all(self) -> int:
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for child in running:
            self._signal(child, signal.SIGKILL if self._forced else signal.SIGTERM)
        deadline = None if self.stop_timeout is None else self.clock() + self.stop_timeout
        killed = self._forced
        while any(c.proc.poll() is None for c in running):
            if not killed and (self._forced or (deadline is not None and self.clock() >= deadline)):
                for child in running:
                    if child.proc.poll() is None:
                        self.say(f"{child.program.name} did not stop in time: killing it")
                        self._signal(child, signal.SIGKILL)
                killed = True
            time.sleep(0.1)
        codes = []
        for child in running:  # the ones asked to stop: how they ended is this run's exit code
            codes.append(child.proc.returncode)
            self.say(f"{child.program.name} stopped ({describe_exit(child.proc.returncode)})")
        for child in self.children:
            if child.proc is not None:
                self._reap(child)
        return 0 if all(code in (0, -signal.SIGTERM) for code in codes) else 1

    @staticmethod
    def _signal(child: _Child, sig: int) -> None:
        """SIGTERM to the child alone (Celery and uvicorn stop their own pool processes in order:
        a pool process signalled too would die mid-task); SIGKILL to it and every process below
        it, whatever session they made (a supervised supervisor's children have their own)."""
        targets = [child.proc.pid, *descendants(child.proc.pid)] if sig == signal.SIGKILL else [child.proc.pid]
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    # ------------------------------------------------------------------ output

    def say(self, message: str) -> None:
        self._write("system", message)

    def _relay(self, name: str, stream) -> None:
        for raw in iter(stream.readline, b""):
            self._write(name, raw.decode(errors="replace").rstrip("\n"))
        stream.close()

    def _write(self, name: str, line: str) -> None:
        text = f"{time.strftime('%H:%M:%S')} {name:<{self._width}} | {line}\n"
        with self._write_lock:
            self.out.write(text)
            self.out.flush()
