"""Structured logs: one JSON object per line, each carrying the request it belongs to.

A line written while a request is served carries the id its response echoes in
``X-Request-ID`` and its audit entries carry; a line written by a task carries the task's name
and id, and the id of the request that queued it (``carry_request_id`` puts it in the
message's headers, ``core.worker_signals`` binds it while the task runs). One grep follows a
user's action from the web process through the workers. ``LOG_FORMAT=json`` (the default in
production) selects it; ``plain`` keeps one readable line for a developer's terminal.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from . import context

#: Attributes every LogRecord has: anything else on a record came from ``extra=`` and is logged.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}
REQUEST_ID_HEADER = "meridian_request_id"


class JsonFormatter(logging.Formatter):
    """time, level, logger, message, request_id, task, task_id, the record's extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        extras = {key: value for key, value in vars(record).items() if key not in _STANDARD and not key.startswith("_")}
        request = extras.pop("request", None)  # django.request logs after the request's context ended
        request_id = getattr(request, "id", None) or context.current_request_id()
        if request_id is not None:
            entry["request_id"] = str(request_id)
        if request is not None and hasattr(request, "path"):
            entry["path"] = request.path
        entry.update(_task())
        entry.update(extras)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class OutageInOneLine(logging.Filter):
    """A library's "unexpected exception" that is only Redis being away: one warning line.

    channels_redis' pub/sub receiver retries every second while Redis is down and logs each
    try with a traceback; the outage is normal (the receiver subscribes again by itself when
    Redis is back), so it is said in one line a try, not forty lines.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, OSError) or type(error).__module__.startswith("redis."):  # OSError: refused, reset, timed out
            record.msg, record.args = f"{record.getMessage()}: Redis unreachable ({error})", None
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _task() -> dict[str, str]:
    """The Celery task running in this thread, if any."""
    from celery import current_task

    task = current_task
    if not task or getattr(task.request, "id", None) is None:
        return {}
    return {"task": task.name, "task_id": task.request.id}


def carry_request_id(headers: dict[str, Any] | None) -> None:
    """Put the current request's id into a task message's headers (``before_task_publish``)."""
    request_id = context.current_request_id()
    if request_id is not None and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, str(request_id))


def carried_request_id(request: Any) -> uuid.UUID | None:
    """The request id a task message carries (None without one, or a malformed one)."""
    value = getattr(request, REQUEST_ID_HEADER, None) or (getattr(request, "headers", None) or {}).get(REQUEST_ID_HEADER)
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
