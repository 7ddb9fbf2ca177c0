"""Celery beat's scheduler for Meridian: in memory, and a failed send is tried again soon.

Celery's default scheduler keeps its state in a shelve file (inside the checkout unless
configured) and treats an entry whose send failed as sent: during a broker outage a
five-minute quota resync or a thirty-minute reschedule simply vanishes until its next
period. Every periodic task of Meridian is an idempotent resync, so no state needs to
survive a restart (each runs once when beat starts); and an entry whose send fails is due
again after ``RETRY_SECONDS`` until a send succeeds.

Several beats may run (two pods, a restart overlapping the old one): only the holder of the
``beat-leader`` lease (``core.locks.Lease``) sends anything; the others stand by, trying
each second, and the first to find it free leads — within ``LEADER_TTL`` seconds of a
leader's death, at once after a leader stopped cleanly (it releases the lease).

The job reaper (``core.jobs.reap``) runs here, every ``REAP_SECONDS``, in the leading beat's process
rather than as a task: a task waits for a free pool process, and when every one is busy with
long work (first syncs of big clusters) the jobs of a dead worker would keep saying
"running" for as long. It records no job of its own; what it did is logged.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import timedelta

from celery import beat
from celery.schedules import schedule as interval_schedule

from .locks import Lease

logger = logging.getLogger(__name__)
RETRY_SECONDS = 5.0
REAP_SECONDS = 5.0
LEADER_TTL = 10.0
#: A tick at least this often: the lease is renewed (or, standing by, tried) each time.
TICK_SECONDS = 1.0


class Scheduler(beat.Scheduler):
    _next_reap = 0.0
    _lease: Lease | None = None
    _leading = False

    def tick(self, *args, **kwargs) -> float:
        if self._lease is None:
            self._lease = Lease("beat-leader", ttl=LEADER_TTL, holder=f"beat {socket.gethostname()}:{os.getpid()}")
        leading = self._lease.keep()
        if leading != self._leading:
            # a change of leader is worth an operator's eye: logged at WARNING, beat's default level
            self._leading = leading
            if leading:
                logger.warning("beat: leading (lease %s)", self._lease.name)
            else:
                logger.warning("beat: standing by; %s leads", self._lease.holder() or "nobody (Redis unreachable)")
        if not leading:
            return TICK_SECONDS
        wait = super().tick(*args, **kwargs)
        if time.monotonic() >= self._next_reap:
            self._next_reap = time.monotonic() + REAP_SECONDS
            reap()
        return min(wait, max(self._next_reap - time.monotonic(), 0.1), TICK_SECONDS)

    def close(self) -> None:
        """A beat that stops hands the lease over at once (a standby leads within a second)."""
        if self._lease is not None:
            self._lease.release()
        super().close()

    def apply_entry(self, entry: beat.ScheduleEntry, producer=None) -> None:
        try:
            self.apply_async(entry, producer=producer, advance=False)
        except Exception as exc:
            logger.warning("beat: could not send %s (%s); trying again in %.0f s", entry.name, exc, RETRY_SECONDS)
            self._due_again_soon(entry.name)

    def _due_again_soon(self, name: str) -> None:
        """Make the (already advanced) entry due in RETRY_SECONDS and rebuild the heap."""
        current = self.schedule.get(name)
        run_every = getattr(current.schedule, "run_every", None) if current else None
        if current is None or not isinstance(current.schedule, interval_schedule) or run_every is None:
            return
        wait = min(RETRY_SECONDS, run_every.total_seconds())
        current.last_run_at = self.app.now() - run_every + timedelta(seconds=wait)
        self._heap = None


def reap() -> None:
    """One pass of the job reaper, its faults logged (Redis or the database down: next time)."""
    from django.db import close_old_connections, connection

    from .context import acting_as
    from .jobs import reap as reap_jobs

    close_old_connections()
    try:
        with acting_as("system:reaper"):
            report = reap_jobs()
    except Exception as exc:  # noqa: BLE001 - an outage: the next pass tries again
        logger.warning("beat: job reaper could not run (%s: %s)", type(exc).__name__, exc)
        return
    finally:
        connection.close()  # beat is no request cycle: nothing else hands the connection back
    if any(report.values()):
        logger.info("beat: job reaper %s", report, extra={"reaped": report})
