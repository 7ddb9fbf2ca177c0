"""Kubernetes Events as kube-scheduler writes them: ``events.k8s.io/v1`` through client-go's
``tools/events`` EventRecorder (kube-scheduler ≥ 1.19).

kube-scheduler records, per pod:

* ``Normal`` / ``Scheduled`` / action ``Binding``: "Successfully assigned <ns>/<name> to <node>";
* ``Warning`` / ``FailedScheduling`` / action ``Scheduling``: the FitError's message ("0/3 nodes are
  available: 3 Insufficient cpu."), cut to the API's 1,024-byte note limit (upstream's
  ``truncateMessage``: the first 1,020 bytes and " ...").

An Event is named ``<pod name>.<event time in nanoseconds, hex>`` in the pod's namespace, with
``reportingController`` the scheduler's name (``default-scheduler`` upstream; Meridian's own
name here, so ``kubectl get events`` tells them apart) and ``reportingInstance``
``<controller>-<host>``. Isomorphic events (same pod, action, reason, controller) form a series
as the EventRecorder makes them: the first is created; the second turns it into a series
(``series.count: 2``), patched at once; later ones only count in memory and are patched when the
series has been quiet for ``finish_seconds`` (6 minutes upstream) or at the latest every
``refresh_seconds`` (30 minutes), then forgotten once finished.

Pure: the caller sends what ``record``/``flush`` return through its connector; time is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["FAILED_SCHEDULING", "NOTE_LIMIT", "SCHEDULED", "EventRecorder", "EventWrite", "micro_time", "truncate_note"]

SCHEDULED = ("Normal", "Scheduled", "Binding")
FAILED_SCHEDULING = ("Warning", "FailedScheduling", "Scheduling")
NOTE_LIMIT = 1024
API_VERSION = "events.k8s.io/v1"


def micro_time(at: datetime) -> str:
    """``metav1.MicroTime``'s RFC 3339 form with microseconds, in UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def truncate_note(message: str) -> str:
    """kube-scheduler's ``truncateMessage``: at most 1,024 bytes, " ..." marking the cut."""
    raw = message.encode()
    if len(raw) <= NOTE_LIMIT:
        return message
    suffix = " ..."
    return raw[: NOTE_LIMIT - len(suffix)].decode(errors="ignore") + suffix


@dataclass(frozen=True)
class EventWrite:
    """One request to make: create ``body``, or merge-patch the event ``namespace/name`` with ``body``."""

    verb: Literal["create", "patch"]
    namespace: str
    name: str
    body: dict[str, Any]


@dataclass
class _Series:
    event: dict[str, Any]
    count: int = 1
    last: datetime | None = None
    written_count: int = 1
    written_at: datetime | None = None


@dataclass
class EventRecorder:
    """Events of one scheduler (see the module docstring)."""

    controller: str
    instance: str
    finish_seconds: float = 360.0
    refresh_seconds: float = 1800.0
    _series: dict[tuple[Any, ...], _Series] = field(default_factory=dict)

    def record(self, pod: Mapping[str, Any], kind: tuple[str, str, str], note: str, at: datetime) -> EventWrite | None:
        """The request ``kind`` (``SCHEDULED``/``FAILED_SCHEDULING``) about ``pod`` needs now, if any."""
        type_, reason, action = kind
        meta = pod.get("metadata") or {}
        regarding = {"apiVersion": "v1", "kind": "Pod", "namespace": meta.get("namespace") or "default",
                     "name": meta.get("name") or "", "uid": meta.get("uid") or "",
                     "resourceVersion": meta.get("resourceVersion") or ""}
        key = (regarding["namespace"], regarding["name"], regarding["uid"], action, reason, self.controller)
        series = self._series.get(key)
        if series is not None:
            series.count += 1
            series.last = at
            if series.count == 2:
                return self._patch(series, at)
            return None
        name = f"{regarding['name']}.{int(at.timestamp() * 1e9):x}"
        event = {"apiVersion": API_VERSION, "kind": "Event", "metadata": {"name": name, "namespace": regarding["namespace"]},
                 "eventTime": micro_time(at), "reportingController": self.controller, "reportingInstance": self.instance,
                 "action": action, "reason": reason, "regarding": regarding, "note": truncate_note(note), "type": type_}
        self._series[key] = _Series(event, last=at, written_at=at)
        return EventWrite("create", regarding["namespace"], name, event)

    def flush(self, at: datetime) -> list[EventWrite]:
        """Series due a write (quiet for ``finish_seconds``: written and forgotten; counting for
        ``refresh_seconds`` since the last write: written); events that never repeated are
        forgotten once quiet."""
        writes = []
        for key, series in list(self._series.items()):
            quiet = series.last is not None and (at - series.last).total_seconds() >= self.finish_seconds
            stale = series.written_at is not None and (at - series.written_at).total_seconds() >= self.refresh_seconds
            if series.count > series.written_count and (quiet or stale):
                writes.append(self._patch(series, at))
            if quiet:
                del self._series[key]
        return writes

    def forget(self, pod: Mapping[str, Any]) -> None:
        """The pod is gone: its series end without a last write."""
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
        for key in [k for k in self._series if k[0] == namespace and k[1] == name]:
            del self._series[key]

    def __len__(self) -> int:
        return len(self._series)

    @staticmethod
    def _patch(series: _Series, at: datetime) -> EventWrite:
        series.written_count, series.written_at = series.count, at
        meta = series.event["metadata"]
        return EventWrite("patch", meta["namespace"], meta["name"],
                          {"series": {"count": series.count, "lastObservedTime": micro_time(series.last or at)}})
