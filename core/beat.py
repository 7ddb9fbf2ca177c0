"""Celery beat's scheduler for Meridian: in memory, and a failed send is tried again soon.

Celery's default scheduler keeps its state in a shelve file (inside the checkout unless
configured) and treats an entry whose send failed as sent: during a broker outage a
five-minute quota resync or a thirty-minute reschedule simply vanishes until its next
period. Every periodic task of Meridian is an idempotent resync, so no state needs to
survive a restart (each runs once when beat starts); and an entry whose send fails is due
again after ``RETRY_SECONDS`` until a send succeeds.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import beat
from celery.schedules import schedule as interval_schedule

logger = logging.getLogger(__name__)
RETRY_SECONDS = 5.0


class Scheduler(beat.Scheduler):
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
