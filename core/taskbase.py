"""The one task base: every background task leaves a Job row and survives transient faults.

``MeridianTask`` (the Celery app's default task class) wraps each run:

- the Job: the one ``core.jobs.enqueue`` wrote (``job_id`` in the message); a delivery that
  must not run (job finished, canceled, or running on a live worker) is dropped;
- transient faults — Redis, the broker, the database, and any error whose ``transient``
  attribute is true (a member cluster that did not answer) — are retried with capped
  exponential backoff and jitter; the job goes back to pending meanwhile, nothing is lost;
- ``LockBusy`` (``core.locks``): the same work runs elsewhere; ``on_busy = "retry"`` comes
  back in a few seconds (the job ``waiting``, naming the lock and its holder), ``"skip"``
  (periodic passes) ends the run as done;
- ``superseded``: a task may say how to tell that the work a job asked for was done since
  (a later run did it); such a delivery, or the reaper finding its worker dead, settles the
  job as succeeded instead of running the work again;
- work nobody asked for (beat's periodic passes and what they fan out: a run without a job
  from the outbox) records its Job only when it did something (``idle(result)`` is false) or
  failed: housekeeping that found nothing to do writes nothing (``core.publish_live`` wrote a
  row every second). If its worker dies, the next period does the work again. Long, rare
  passes (a full resync) set ``quiet = False``: recorded from the start, watched and canceled
  like any job.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from celery import Task
from celery.exceptions import Ignore, Reject, Retry
from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import BusyLoadingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import jobs
from .locks import LockBusy, holding_as

logger = logging.getLogger(__name__)


def _psycopg_errors() -> tuple[type[BaseException], ...]:
    try:
        import psycopg
    except ImportError:  # SQLite-only installs
        return ()
    return (psycopg.OperationalError, psycopg.InterfaceError)


#: Faults of the infrastructure, not of the work: worth retrying as they are.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError, TimeoutError, RedisConnectionError, RedisTimeoutError, BusyLoadingError, KombuOperationalError,
    DjangoOperationalError, DjangoInterfaceError, sqlite3.OperationalError, *_psycopg_errors(),
)
BUSY_COUNTDOWN = 3.0


def always_idle(result: Any) -> bool:
    """``idle`` for fan-outs and publishers: what they send records itself (or is the record)."""
    return True


def nothing_done(result: Any) -> bool:
    """The default ``idle``: no result, or a mapping whose values are all empty (``{"stepped": 0}``)."""
    if isinstance(result, Mapping):
        return not any(result.values())
    return not result


def idle_unless(*done: str) -> Callable[[Any], bool]:
    """``idle`` for a pass whose result also names what it looked at (a cluster, the nodes it
    read and skipped): idle unless one of the ``done`` keys — what it changed or found wrong —
    holds something. A busy lock's ``{"skipped": reason}`` is idle too."""

    def idle(result: Any) -> bool:
        return not isinstance(result, Mapping) or not any(result.get(key) for key in done)

    return idle


class MeridianTask(Task):
    """Default task class of Meridian's Celery app (``config.celery``)."""

    #: Extra exception types this task treats as transient (e.g. an unreachable member cluster).
    transient_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    #: What a busy lock means: "retry" (the work is wanted: do it after the running one) or
    #: "skip" (a periodic pass: the running one does it).
    on_busy: ClassVar[str] = "retry"
    #: ``superseded(job) -> reason or None``: the job's work was done since it was asked for
    #: (pass ``superseded=staticmethod(fn)`` to the task decorator).
    superseded: ClassVar[Callable[[Any], str | None] | None] = None
    #: Runs nobody asked for are recorded only once finished, if they did something (False:
    #: from the start, as a job a change asked for; for long, rare passes).
    quiet: ClassVar[bool] = True
    #: ``idle(result) -> bool``: a run nobody asked for that did nothing (pass
    #: ``idle=staticmethod(fn)``); by default an empty result, or one whose values are all empty.
    idle: ClassVar[Callable[[Any], bool]] = staticmethod(nothing_done)
    max_retries = 50
    retry_backoff_max = 60
    #: Record a Job for every run.
    track = True
    #: The outbox adds ``job_id`` to the call (popped before the task runs), so Celery's
    #: send-time check of the arguments against the task's signature would refuse it.
    typing = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        job_id = kwargs.pop("job_id", None)
        if not self.track:
            return self._run(args, kwargs, None)
        request = self.request
        if job_id is None and self.quiet:
            return self._run_unasked(args, kwargs)
        if job_id is None:
            job_id = jobs.record_started(task_name=self.name, task_id=request.id or "", args=args, kwargs=kwargs,
                                         triggered_by="system:beat" if _from_beat(request) else None).pk
            if isinstance(request.kwargs, dict):
                request.kwargs["job_id"] = job_id  # a retry of this delivery keeps its job
        job = jobs.start(job_id, task_name=self.name, task_id=request.id or "", args=args, kwargs=kwargs,
                         hostname=request.hostname)
        if job is None:
            return None
        reason = jobs.superseded(job)
        if reason:
            jobs.succeed(job, {"superseded": reason})
            return None
        with jobs.bound(job):
            try:
                result = self._run(args, kwargs, job)
            except Retry as exc:
                jobs.retrying(job, exc.exc, countdown=_countdown(exc), epoch=getattr(exc, "broker_epoch", None))
                raise
            except RetryNotSent as exc:
                jobs.retrying(job, exc.cause, sent=False)
                raise
            except jobs.JobCanceled:
                jobs.stopped(job)
                return None
            except (Ignore, Reject):
                jobs.succeed(job, {"ignored": True})
                raise
            except BaseException as exc:
                jobs.fail(job, exc)
                raise
            jobs.succeed(job, result)
            return result

    def _run_unasked(self, args: tuple, kwargs: dict) -> Any:
        """Periodic work: its Job is written at the end, and only if it did something or failed
        (a transient fault retries it as it is, still unrecorded)."""
        request = self.request
        started = timezone.now()
        record = {"task_name": self.name, "task_id": request.id or "", "args": args, "kwargs": kwargs,
                  "hostname": request.hostname, "started": started,
                  "triggered_by": "system:beat" if _from_beat(request) else None}
        try:
            with holding_as(f"{self.name} (periodic)"):
                result = self._run(args, kwargs, None)
        except (Retry, Ignore, Reject):
            raise
        except BaseException as exc:
            jobs.record_finished(**record, error=exc)
            raise
        if not self.idle(result):
            jobs.record_finished(**record, result=result)
        return result

    def _run(self, args: tuple, kwargs: dict, job: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except LockBusy as exc:
            if self.on_busy == "skip" or self.request.called_directly:
                logger.info("%s: %s; skipped", self.name, exc)
                return {"skipped": str(exc)}
            raise self._retry(exc, BUSY_COUNTDOWN, max_retries=None) from exc
        except Retry:
            raise
        except Exception as exc:
            if self.request.called_directly or not self.is_transient(exc):
                raise
            retries = self.request.retries
            if self.max_retries is not None and retries >= self.max_retries:
                raise
            countdown = min(self.retry_backoff_max, 2 ** min(retries, 10))
            logger.warning("%s: transient fault (%s: %s); retry %s in %s s", self.name, type(exc).__name__, exc,
                           retries + 1, countdown)
            raise self._retry(exc, _jitter(countdown)) from exc

    def _retry(self, exc: BaseException, countdown: float, **options: Any) -> Retry:
        """Celery's ``retry``, whose failed send (the broker is down: the usual reason for a
        retry) is a ``RetryNotSent``, not the bare ``Reject`` Celery raises for it.

        The broker's run id is read before the send, as ``jobs.dispatch_many`` reads it, and
        carried on the ``Retry`` for the job to record: a job whose first delivery beat the
        sender's bookkeeping had none, and the reaper took its retry for one sent to a broker
        since restarted and sent it again."""
        try:
            epoch: str | None = jobs.broker_epoch()
        except Exception:  # the broker is down: the send below fails, or the reaper checks it later
            epoch = None
        try:
            retry = self.retry(exc=exc, countdown=countdown, throw=False, **options)
        except Reject as rejected:
            raise RetryNotSent(exc, rejected.reason) from exc
        retry.broker_epoch = epoch
        return retry

    def is_transient(self, exc: BaseException) -> bool:
        """Worth retrying as it is: an infrastructure fault, or an error that says so (``transient``)."""
        return isinstance(exc, (*TRANSIENT_ERRORS, *self.transient_errors)) or bool(getattr(exc, "transient", False))


class RetryNotSent(Reject):
    """A transient fault's retry could not be sent (the broker was down): not a job to settle
    as done, as the ``Reject`` Celery raises for it would be (a downgrade's delivery said
    "succeeded" with nothing delivered), but one the outbox sends again once the broker is back."""

    def __init__(self, cause: BaseException, send_error: Any) -> None:
        super().__init__(send_error, requeue=False)
        self.cause = cause


def _from_beat(request: Any) -> bool:
    headers = getattr(request, "headers", None) or {}
    return bool(headers.get("celery_beat_task")) if isinstance(headers, dict) else False


def _countdown(exc: Retry) -> float | None:
    when = getattr(exc, "when", None)
    return float(when) if isinstance(when, (int, float)) else None


def _jitter(countdown: float) -> float:
    import random

    return countdown * (0.5 + random.random() / 2)
