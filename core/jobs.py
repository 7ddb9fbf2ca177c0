"""Job rows: the truth about background work, and the outbox that makes sure it happens.

Every background task leaves a Job (``core.taskbase.MeridianTask`` records one when it runs).
Work that a change asks for is ``enqueue``d: the Job is written in the change's own
transaction and its message sent after commit, so the two commit together. The broker is
only the transport: should the send fail (Redis down), the message vanish (a Redis restart
keeps nothing), or the worker die mid-task (kill -9), the job is still ``pending`` or
``running`` in the database and ``reap`` sends it again; a message delivered to a worker that
died before acknowledging it goes back to its queue (``restore_orphaned``). Tasks are
idempotent and a job runs at most once at a time: a second delivery of a job that is running
on a live worker, or already finished, is dropped.

Lifecycle: pending → running → succeeded | failed | canceled; a transient fault (Redis,
the database, a member cluster) puts a running job back to pending while Celery retries it,
and a busy lock makes it ``waiting`` (``waiting_for`` names the lock and its holder) until
its retry. A job whose worker died is settled by the reaper: succeeded when the work it
asked for was done meanwhile by another run (the task's ``superseded`` hook says so, e.g. a
cluster synced after the request), else sent again, or failed after ``MAX_LOST_WORKERS``
lost workers. Every status change is an event on topic ``job-<id>``.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When
from django.db.models.functions import Concat
from django.utils import timezone
from django.utils.translation import gettext as _

from . import events
from .audit import record_change
from .context import current_actor
from .errors import Conflict
from .locks import LockBusy, holding_as
from .models import Job
from .sql import BATCH, on_commit_together
from .worker_signals import HEARTBEAT_TTL, held_by, live_workers

logger = logging.getLogger(__name__)

#: A job whose workers died this many times fails instead of being sent again.
MAX_LOST_WORKERS = 5
#: A pending job whose message was sent this long ago and never started is sent again
#: (its message was lost without a broker restart, e.g. a purged queue).
REDISPATCH_AFTER = timedelta(minutes=15)
#: A pending job whose send failed is sent again by the reaper after this long.
SEND_RETRY_AFTER = timedelta(seconds=5)
#: A sent message's mark, beside it in the broker's Redis: the broker's run id and when it was
#: sent (``_mark_sent``). A Redis restart loses it with the message; ``reap`` records it in the
#: job's row (``dispatched``, ``broker_epoch``) well before it expires.
SENT_KEY = "meridian:job-sent:{task_id}"
SENT_KEY_TTL = int(REDISPATCH_AFTER.total_seconds())
#: A delivered task message that no live worker has said it holds for this many seconds is
#: put back in its queue: a heartbeat's lifetime, several of its periods, so a message just
#: delivered shows in its worker's next heartbeat first.
ORPHAN_AFTER = float(HEARTBEAT_TTL)
_unheld_since: dict[str, float] = {}

_current: contextvars.ContextVar[Job | None] = contextvars.ContextVar("meridian_job", default=None)
_log: contextvars.ContextVar[JobLog | None] = contextvars.ContextVar("meridian_job_log", default=None)


class JobCanceled(Exception):
    """Raised inside a job's work when someone canceled it meanwhile (see ``checkpoint``)."""


# ---------------------------------------------------------------------------- requesting work

def enqueue(task_name: str, *args: Any, obj: models.Model | None = None, params: Mapping[str, Any] | None = None,
            countdown: float | None = None, **kwargs: Any) -> Job:
    """Ask for ``task_name(*args, **kwargs)``: a pending Job now, its message after commit.

    Call it inside the transaction of the change that needs the work; if that transaction
    rolls back, neither the job nor the message exists.
    """
    actor = current_actor()
    job = Job.objects.create(
        kind=task_name, task_name=task_name, task_args=list(args), task_kwargs=dict(kwargs), params=dict(params or {}),
        task_id=str(uuid.uuid4()), triggered_by=actor.name[:150], user=actor.user if getattr(actor.user, "pk", None) else None,
        object_type=ContentType.objects.get_for_model(obj) if obj is not None else None,
        object_id=str(obj.pk) if obj is not None else "",
    )
    _announce(job)
    on_commit_together(_send_committed, (job.pk, countdown))
    return job


def _send_committed(jobs: list[tuple[int, float | None]]) -> None:
    """A commit's jobs, sent together: one read of their rows, however many, and no write.
    A sync enqueues its follow-up jobs as it commits; each write after the commit waited for
    the write lock on SQLite behind the other worker's sync."""
    for countdown in dict.fromkeys(c for _pk, c in jobs):
        dispatch_many([pk for pk, c in jobs if c == countdown], countdown=countdown)


def dispatch(job_id: int, *, countdown: float | None = None) -> bool:
    """Send the job's task message; False (and the job stays pending) when the broker is down."""
    return dispatch_many([job_id], countdown=countdown) == 1


def dispatch_many(job_ids: Sequence[int], *, countdown: float | None = None) -> int:
    """Send the task messages of those of the jobs still queued; returns how many were sent.
    A job not sent stays pending: ``reap`` sends it again (the outbox keeps it)."""
    sent = 0
    for start in range(0, len(job_ids), BATCH):
        jobs = list(Job.objects.filter(pk__in=job_ids[start : start + BATCH], status__in=Job.QUEUED).exclude(task_name="").order_by("pk"))
        if not jobs:
            continue
        try:
            epoch = broker_epoch()
        except Exception as exc:
            logger.warning("could not send %d job(s) (%s): %s", len(jobs), jobs[0].task_name, exc)
            return sent
        done = [job for job in jobs if _send(job, countdown)]
        if done:
            _mark_sent(done, epoch)
            sent += len(done)
    return sent


def _mark_sent(jobs: Sequence[Job], epoch: str) -> None:
    """Mark the jobs' messages sent, in Redis beside them (``SENT_KEY``): nothing is written to
    the database after a commit. That write waited on SQLite for the other sync's write lock,
    which had taken the lock at our commit: the two processes took turns at each other's heels
    (an eighth of the fleet bench). ``reap`` records the marks in the rows."""
    from .redis import get_redis

    mark = f"{epoch} {time.time():.6f}"
    try:
        with get_redis().pipeline(transaction=False) as pipe:
            for job in jobs:
                pipe.set(SENT_KEY.format(task_id=job.task_id), mark, ex=SENT_KEY_TTL)
            pipe.execute()
    except Exception as exc:  # the reaper sends them again; the second delivery of a job is dropped
        logger.warning("could not mark %d sent job(s) (%s): %s", len(jobs), jobs[0].task_name, exc)


def sent_marks(jobs: Sequence[tuple[str, Any]], epoch: str, *, now: Any = None) -> list[Any]:
    """For each ``(task_id, dispatched)`` of a queued job, when the outbox sent its message to
    the broker whose run id is ``epoch``, newer than ``dispatched`` and within
    ``REDISPATCH_AFTER``; None where no such send is marked (never sent, sent to a broker since
    restarted, or sent long ago and never started)."""
    from .redis import get_redis

    now = now or timezone.now()
    marks = get_redis().mget([SENT_KEY.format(task_id=task_id) for task_id, _ in jobs]) if jobs else []
    found: list[Any] = []
    for (_task_id, dispatched), mark in zip(jobs, marks, strict=True):
        mark_epoch, _, at = (mark.decode() if isinstance(mark, bytes) else mark or "").partition(" ")
        when = datetime.fromtimestamp(float(at), tz=UTC) if mark_epoch == epoch and at else None
        fresh = when is not None and when > now - REDISPATCH_AFTER and (dispatched is None or when > dispatched)
        found.append(when if fresh else None)
    return found


def _send(job: Job, countdown: float | None) -> bool:
    try:
        task_named(job.task_name).apply_async(
            tuple(job.task_args), {**job.task_kwargs, "job_id": job.pk}, task_id=job.task_id, countdown=countdown,
            retry=False)
    except Exception as exc:  # the outbox keeps it: reap() sends it again
        logger.warning("could not send job %s (%s): %s", job.pk, job.task_name, exc)
        return False
    return True


_TASK_MODULES_LOCK = threading.Lock()
_task_modules_loaded = False


def task_named(name: str) -> Any:
    """The registered Celery task ``name``, its app's tasks modules loaded first if need be.

    A worker imports the apps' tasks modules when it starts and a web process when it starts
    (``config.asgi``); any other process (a management command, a script) the first time it
    sends a job, so the task's own class and shard router send it, not the reaper 5-20 s later.
    """
    from celery import current_app

    if name not in current_app.tasks:
        load_task_modules()
    return current_app.tasks[name]


def load_task_modules() -> None:
    """Import the apps' tasks modules, once. Under a lock: a thread that asked while another was
    importing them found the modules half-loaded and the task missing (three of the first four
    clusters registered at once failed to send)."""
    global _task_modules_loaded
    from celery import current_app

    with _TASK_MODULES_LOCK:
        if not _task_modules_loaded:
            current_app.loader.import_default_modules()
            _task_modules_loaded = True


def broker_epoch() -> str:
    """The Redis server's run id (it changes on every restart, which loses every queued message)."""
    return _broker_server()[0]


def _broker_server() -> tuple[str, float]:
    """The Redis server's run id and how long it has been up (seconds)."""
    from .redis import get_redis

    info = get_redis().info("server")
    return str(info.get("run_id", "")), float(info.get("uptime_in_seconds", 0))


# ---------------------------------------------------------------------------- running work

def worker_id(hostname: str | None) -> str:
    return f"{hostname or 'local'}:{os.getpid()}"


def record_finished(*, task_name: str, task_id: str, args: Any, kwargs: Mapping[str, Any], hostname: str | None,
                    started: Any, triggered_by: str | None = None, result: Any = None,
                    error: BaseException | None = None) -> Job:
    """The Job of periodic work that ran unrecorded (``core.taskbase``): written once it is
    known to be worth a row (it did something, or failed)."""
    actor = current_actor()
    job = Job.objects.create(
        kind=task_name, task_name=task_name, task_args=_json_list(args), task_kwargs=_json_dict(kwargs),
        task_id=task_id or "", status=Job.Status.FAILED if error is not None else Job.Status.SUCCEEDED,
        attempts=1, started=started, dispatched=started, finished=timezone.now(),
        result=_json_dict(result) if isinstance(result, Mapping) else ({"result": result} if result is not None else {}),
        error=f"{type(error).__name__}: {error}"[:4000] if error is not None else "",
        triggered_by=(triggered_by or actor.name)[:150], user=actor.user if getattr(actor.user, "pk", None) else None)
    _announce(job)
    return job


def record_started(*, task_name: str, task_id: str, args: Any, kwargs: Mapping[str, Any],
                   triggered_by: str | None = None) -> Job:
    """The Job of a run nobody asked for that is recorded from the start (a long periodic pass);
    ``start`` then marks it running as it does an enqueued one."""
    actor = current_actor()
    return Job.objects.create(
        kind=task_name, task_name=task_name, task_args=_json_list(args), task_kwargs=_json_dict(kwargs),
        task_id=task_id or "", dispatched=timezone.now(), triggered_by=(triggered_by or actor.name)[:150],
        user=actor.user if getattr(actor.user, "pk", None) else None)


def start(job_id: int, *, task_name: str, task_id: str, args: Any, kwargs: Mapping[str, Any],
          hostname: str | None) -> Job | None:
    """The job this delivery runs, marked running; None when it must not run (finished,
    canceled, or running on a live worker already: a duplicate delivery)."""
    me = worker_id(hostname)
    now = timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update(no_key=True).filter(pk=job_id).first()
        if job is None or job.status in Job.FINISHED:
            return None
        other_task = bool(job.task_name and task_name and job.task_name != task_name)
        other_message = bool(task_id and job.task_id and task_id != job.task_id)
        if other_task or other_message:  # a stale message naming a job id reused by another database
            logger.warning("a delivery of %s (%s) names job %s of %s (%s): dropped", task_name, task_id, job.pk,
                           job.task_name, job.task_id)
            return None
        if job.status == Job.Status.RUNNING and job.worker and job.worker != me and worker_alive(job.worker):
            logger.info("job %s already runs on %s; dropping this delivery", job.pk, job.worker)
            return None
        job.status, job.worker, job.attempts, job.waiting_for = Job.Status.RUNNING, me, job.attempts + 1, ""
        job.task_id = task_id or job.task_id
        job.started = job.started or now
        job.save(update_fields=["status", "worker", "attempts", "task_id", "started", "waiting_for"])
    _announce(job)
    return job


@contextlib.contextmanager
def bound(job: Job) -> Iterator[Job]:
    """Make ``job`` the current one for the block (``checkpoint``, ``current_job``; locks taken
    in it name the job as their holder) and record its thread's log lines (``JobLog``)."""
    token = _current.set(job)
    log = JobLog(job)
    log_token = _log.set(log)
    root = logging.getLogger()
    root.addHandler(log)
    try:
        with holding_as(f"job {job.pk} ({job.kind})"):
            yield job
    finally:
        root.removeHandler(log)
        log.close()
        _log.reset(log_token)
        _current.reset(token)
        _checked.pop(job.pk, None)


def current_job() -> Job | None:
    return _current.get()


#: How often ``checkpoint`` asks the database (seconds): a canceled job stops within about this.
CHECK_EVERY = 0.25
_checked: dict[int, float] = {}


def checkpoint() -> None:
    """Raise JobCanceled if the current job was canceled meanwhile. Long work calls it between
    units (a batch of rows, a rollout step); it asks the database at most every ``CHECK_EVERY``
    seconds, so calling it often costs nothing. Raised inside a transaction, it rolls the
    unit back: a canceled job leaves nothing half-done."""
    job = _current.get()
    if job is None:
        return
    now = time.monotonic()
    if now - _checked.get(job.pk, 0.0) < CHECK_EVERY:
        return
    _checked[job.pk] = now
    if Job.objects.filter(pk=job.pk, status=Job.Status.CANCELED).exists():
        raise JobCanceled(f"job {job.pk} was canceled")


class JobLog(logging.Handler):
    """A job's output as it runs, as NetBox's job log: the log lines its thread writes (its
    task's and the apps' loggers, INFO and up) are appended to ``Job.log`` and sent as
    ``job.log`` events on the job's topic, at most once per ``FLUSH_SECONDS``. A thread of its
    own writes them, with its own database connection: the task's transaction (a sync is one)
    would hide them until it commits, and drop them when it rolls back."""

    FLUSH_SECONDS = 1.0
    MAX_CHARS = 200_000

    def __init__(self, job: Job) -> None:
        super().__init__(level=logging.INFO)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        self.job_id, self.thread = job.pk, threading.get_ident()
        self.lines: list[str] = []
        self.size = len(job.log or "")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._writer = threading.Thread(target=self._write_loop, daemon=True, name=f"job-log:{job.pk}")
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread or self.size >= self.MAX_CHARS:
            return
        try:
            line = self.format(record)
        except Exception:  # noqa: BLE001 - a bad log call must not break the job
            return
        with self._lock:
            self.size += len(line) + 1
            self.lines.append(line if self.size < self.MAX_CHARS else "… (log truncated)")

    def _write_loop(self) -> None:
        from django.db import connection

        try:
            while not self._stop.wait(self.FLUSH_SECONDS):
                self._write()
            self._write()
        finally:
            connection.close()

    def _write(self) -> None:
        with self._lock:
            lines, self.lines = self.lines, []
        if not lines:
            return
        text = "\n".join(lines) + "\n"
        try:
            Job.objects.filter(pk=self.job_id).update(log=Concat(F("log"), Value(text), output_field=models.TextField()))
        except Exception:  # noqa: BLE001 - the database is down: the lines are lost, the job goes on
            return
        with contextlib.suppress(Exception):
            events.send_now(f"job-{self.job_id}", "job.log", {"id": self.job_id, "lines": lines})

    def close(self) -> None:
        """Write what is left and stop (again: nothing)."""
        if not self._stop.is_set():
            self._stop.set()
            self._writer.join(timeout=5)
        super().close()


def succeed(job: Job, result: Any = None) -> None:
    if isinstance(result, Mapping):
        job.result = _json_dict(result)
    _finish(job, Job.Status.SUCCEEDED)


def fail(job: Job, exc: BaseException) -> None:
    _finish(job, Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:4000])


def retrying(job: Job, exc: BaseException | None, *, countdown: float | None = None, sent: bool = True,
             epoch: str | None = None) -> None:
    """A transient fault: the job waits for its retry (back to pending, the error noted); a
    busy lock: the job is waiting for it (``waiting_for`` says which, and who holds it).
    A retry that could not be ``sent`` (the broker is down) leaves the job unsent: ``reap``
    sends it again, as it does a change's job whose first send failed. ``epoch`` is the
    broker's run id read before the retry was sent (``reap`` resends a job sent to another)."""
    if isinstance(exc, LockBusy):
        status, fields = Job.Status.WAITING, {"waiting_for": str(exc)[:300]}
    else:
        when = " once the broker is back" if not sent else f" in {countdown:.0f} s" if countdown else ""
        note = f"retrying{when}: {type(exc).__name__}: {exc}" if exc else "retrying"
        status, fields = Job.Status.PENDING, {"error": note[:4000], "waiting_for": ""}
    if sent and epoch is not None:
        fields["broker_epoch"] = epoch
    updated = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(
        status=status, worker="", dispatched=timezone.now() if sent else None, **fields)
    if updated:
        job.refresh_from_db()
        _announce(job)
    elif Job.objects.filter(pk=job.pk, status=Job.Status.CANCELED).exclude(worker="").exists():
        stopped(job)  # canceled meanwhile: the retry's delivery is dropped (``start``), so the work stops here


def _finish(job: Job, status: str, *, error: str = "") -> None:
    log = _log.get()
    if log is not None and log.job_id == job.pk:
        log.close()  # every line written before the job says it is over
    ended = {"status": status, "finished": timezone.now(), "error": error, "result": job.result, "worker": "", "waiting_for": ""}
    updated = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(**ended)
    if not updated:  # canceled while its work ran on past its last checkpoint: the job says what happened
        note = f"{ended['finished']:%Y-%m-%d %H:%M:%S} the cancel came too late: the work had finished ({status})\n"
        updated = Job.objects.filter(Q(pk=job.pk, status=Job.Status.CANCELED) & ~Q(worker="")).update(
            **ended, log=Concat(F("log"), Value(note), output_field=models.TextField()))
    if updated:
        job.refresh_from_db()
        _announce(job)


def stopped(job: Job) -> None:
    """A canceled job's work stopped at a checkpoint: it holds no worker any more, and its log says when."""
    log = _log.get()
    if log is not None and log.job_id == job.pk:
        log.close()
    note = f"{timezone.now():%Y-%m-%d %H:%M:%S} stopped: the job was canceled\n"
    Job.objects.filter(pk=job.pk, status=Job.Status.CANCELED).update(
        worker="", log=Concat(F("log"), Value(note), output_field=models.TextField()))
    _announce(job)


def superseded(job: Job) -> str | None:
    """Why the work ``job`` asked for needs no run any more (another run did it since the job
    was created), from its task's ``superseded`` hook; None when it still does."""
    from celery import current_app

    task = current_app.tasks.get(job.task_name) if job.task_name else None
    hook = getattr(task, "superseded", None)
    if hook is None:
        return None
    try:
        return hook(job)
    except Exception:  # the hook reads the database: when it cannot tell, the work runs
        logger.warning("could not tell whether job %s was superseded", job.pk, exc_info=True)
        return None


# ---------------------------------------------------------------------------- operators

def cancel_job(job: Job) -> Job:
    """Cancel a job that has not finished and revoke its message; Conflict when it had."""
    with transaction.atomic():
        locked = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
        if locked.status in Job.FINISHED:
            raise Conflict("finished", _("Job %(id)s already %(status)s.") % {"id": locked.pk, "status": locked.status})
        before = {"status": locked.status}
        locked.status, locked.finished = Job.Status.CANCELED, timezone.now()
        locked.save(update_fields=["status", "finished"])
        record_change(locked, "action", verb="cancel", before=before, after={"status": locked.status})
        _announce(locked)
        task_id = locked.task_id
    if task_id:
        transaction.on_commit(lambda: _revoke(task_id), robust=True)
    return locked


def _revoke(task_id: str) -> None:
    from celery import current_app

    try:
        current_app.control.revoke(task_id)
    except Exception as exc:  # the job row says canceled: a late delivery is dropped by start()
        logger.warning("could not broadcast the revoke of %s: %s", task_id, exc)


# ---------------------------------------------------------------------------- the reaper

def worker_alive(worker: str, live: set[str] | None = None) -> bool:
    """Is the worker process ``<node>:<pid>`` still there? Its node's heartbeat says, and on
    this machine's own node the process table does."""
    node, _, pid = worker.rpartition(":")
    if live is None:
        live = set(live_workers())
    if node not in live:
        return False
    if node == os.environ.get("MERIDIAN_WORKER_NODE") and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return True


def reap(*, now: Any = None, heartbeats_after: float | None = None) -> dict[str, int]:
    """Send again what was lost: jobs of dead workers, failed sends, messages a Redis restart
    dropped, messages delivered to workers that died holding them. A send marked in Redis
    (``_mark_sent``) is recorded in its job's row instead (``_record_sent``).

    Never by age alone: a running job on a live worker is left alone however long it runs.
    Beat runs it (``core.beat``), not a worker's pool: busy or dead workers cannot hold it up.
    Within a heartbeat's lifetime of a Redis restart (``heartbeats_after`` seconds of the
    server's uptime) no worker is judged dead: the restart emptied the heartbeats, which the
    live workers have not written again yet.
    """
    now = now or timezone.now()
    live = set(live_workers())
    epoch, uptime = _broker_server()
    report = {"requeued": 0, "failed": 0, "resent": 0, "superseded": 0, "restored": 0}
    trusted = uptime >= (HEARTBEAT_TTL if heartbeats_after is None else heartbeats_after)
    running = Job.objects.filter(status=Job.Status.RUNNING).exclude(worker="") if trusted else Job.objects.none()
    for job in running:
        if worker_alive(job.worker, live):
            continue
        report[_lost(job)] += 1
    stale = models.Q(dispatched__isnull=True, created__lt=now - SEND_RETRY_AFTER) | models.Q(
        dispatched__lt=now - REDISPATCH_AFTER) | (models.Q(dispatched__isnull=False) & ~models.Q(broker_epoch=epoch))
    unsent = Job.objects.filter(status__in=Job.QUEUED).exclude(task_name="").filter(stale)
    report["resent"] = dispatch_many(_record_sent(list(unsent.values_list("pk", "task_id", "dispatched")), epoch, now))
    if trusted:
        report["restored"] = restore_orphaned(live)
    return report


def _record_sent(jobs: list[tuple[int, str, Any]], epoch: str, now: Any) -> list[int]:
    """Record in their rows the sends of the stale ``(pk, task_id, dispatched)`` jobs that
    their marks show (one UPDATE per batch); returns the pks of the rest, to be sent again."""
    unsent: list[int] = []
    for start in range(0, len(jobs), BATCH):
        batch = jobs[start : start + BATCH]
        marks = sent_marks([(task_id, dispatched) for _pk, task_id, dispatched in batch], epoch, now=now)
        sent = {pk: when for (pk, _t, _d), when in zip(batch, marks, strict=True) if when is not None}
        unsent += [pk for pk, _t, _d in batch if pk not in sent]
        if sent:
            Job.objects.filter(pk__in=sent, status__in=Job.QUEUED).update(
                dispatched=Case(*(When(pk=pk, then=Value(when)) for pk, when in sent.items()),
                                output_field=models.DateTimeField()), broker_epoch=epoch)
    return unsent


def restore_orphaned(live: set[str]) -> int:
    """Put back in their queues the task messages delivered to workers that are gone; how many.

    A worker killed, or whose Celery restarted, while it held messages unacknowledged (a job
    reserved but not started, the retry of a job ``waiting`` for a lock until its ETA) leaves
    them in the Redis transport's ``unacked`` hash, which kombu restores only after the
    visibility timeout: ten minutes of a job saying "waiting" with nobody to run it. Workers
    say what they hold with each heartbeat (``core.worker_signals.held_deliveries``); a message
    none of the ``live`` ones has held for ``ORPHAN_AFTER`` seconds is restored as kombu
    restores one (``restore_by_tag``: atomic, so a late acknowledgement wins). Nothing is
    restored while a live worker does not say what it holds. A restored message of a job that
    runs meanwhile is dropped on delivery, as any duplicate.
    """
    from celery import current_app

    with current_app.connection_for_write() as connection:
        channel = connection.default_channel
        unacked_key = getattr(channel, "unacked_key", None)
        if unacked_key is None:  # not kombu's Redis transport
            return 0
        tags = {tag.decode() if isinstance(tag, bytes) else tag for tag in channel.client.hkeys(unacked_key)}
        held = held_by(live) if tags else set()
        if held is None:
            _unheld_since.clear()
            return 0
        now, unheld = time.monotonic(), tags - held
        for tag in set(_unheld_since) - unheld:
            del _unheld_since[tag]
        orphaned = [tag for tag in unheld if now - _unheld_since.setdefault(tag, now) >= ORPHAN_AFTER]
        for tag in orphaned:
            channel.qos.restore_by_tag(tag, client=channel.client)  # next in line: it is overdue
            del _unheld_since[tag]
    if orphaned:
        logger.warning("restored %d task message(s) that no live worker held (their worker died holding them)",
                       len(orphaned))
    return len(orphaned)


def _lost(job: Job) -> str:
    """The job's worker is gone: settle it as superseded (its work was done meanwhile), send it
    again, or fail it after too many lost workers. Returns which."""
    reason = superseded(job)
    if reason:
        updated = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, worker=job.worker).update(
            status=Job.Status.SUCCEEDED, finished=timezone.now(), worker="", waiting_for="",
            result={"superseded": reason, "worker_lost": job.worker}, error="")
        if updated:
            job.refresh_from_db()
            _announce(job)
        return "superseded"
    if job.lost_workers + 1 >= MAX_LOST_WORKERS or not job.task_name:
        updated = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, worker=job.worker).update(
            status=Job.Status.FAILED, finished=timezone.now(), worker="",
            lost_workers=job.lost_workers + 1,
            error=f"worker {job.worker} was lost: {job.lost_workers + 1} workers died running it; giving up")
        if updated:
            job.refresh_from_db()
            _announce(job)
        return "failed"
    updated = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, worker=job.worker).update(
        status=Job.Status.PENDING, worker="", error=f"worker {job.worker} was lost; sent again", dispatched=None,
        lost_workers=job.lost_workers + 1)
    if updated:
        job.refresh_from_db()
        _announce(job)
        dispatch(job.pk)
    return "requeued"


def expire(*, keep_system: timedelta, keep: timedelta) -> int:
    """Delete finished jobs: the system's own succeeded runs after ``keep_system``, the rest after ``keep``.

    A system run about an object (a sync of a cluster, the reconcile a sync fanned out) goes
    too, unless it is the newest of its kind for that object: pages show an object's latest
    job as its state, and an older one (a failure kept for ``keep``) must not take its place.
    On the idle demo fleet those runs were ~24,000 rows a day, kept for ``keep`` (180 days).
    """
    now = timezone.now()
    finished = Job.objects.filter(status__in=Job.FINISHED)
    newer = Job.objects.filter(kind=OuterRef("kind"), object_type=OuterRef("object_type"), object_id=OuterRef("object_id"),
                               pk__gt=OuterRef("pk"))
    system = finished.filter(Q(object_id="") | Exists(newer), triggered_by__startswith="system", user__isnull=True,
                             finished__lt=now - keep_system)
    deleted, _ = system.filter(status=Job.Status.SUCCEEDED).delete()
    old, _ = finished.filter(finished__lt=now - keep).delete()
    return deleted + old


# ---------------------------------------------------------------------------- helpers

def _announce(job: Job) -> None:
    events.publish(f"job-{job.pk}", "job.status", {"id": job.pk, "kind": job.kind, "status": job.status})


def _json_list(value: Any) -> list[Any]:
    import json

    try:
        return json.loads(json.dumps(list(value or ()), default=str))
    except (TypeError, ValueError):
        return []


def _json_dict(value: Mapping[str, Any] | None) -> dict[str, Any]:
    import json

    try:
        return json.loads(json.dumps(dict(value or {}), default=str))
    except (TypeError, ValueError):
        return {}
