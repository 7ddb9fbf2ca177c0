"""kube-scheduler's scheduling queue (``pkg/scheduler/backend/queue``'s PriorityQueue) over plain data.

Three places a pending pod can wait, as upstream keeps them:

* **active**: pods to try now, popped highest ``spec.priority`` first, then in arrival order
  (upstream's PrioritySort with the time the pod entered the queue);
* **backoff**: pods that failed and wait out their backoff: ``initial_backoff`` seconds doubled
  per attempt up to ``max_backoff`` (upstream's 1 s and 10 s), then active again;
* **unschedulable**: pods no node could take. They stay until the cluster changes in a way that
  may help them (``cluster_changed``: a node added or changed, a pod deleted; upstream's
  ``MoveAllToActiveOrBackoffQueue``) — then to backoff, or straight to active when their backoff
  is over — or at the latest ``max_unschedulable`` seconds after they failed (upstream's
  ``podMaxInUnschedulablePodsDuration``, 5 minutes).

A popped pod is *in flight* until the caller says how its attempt ended: ``done`` (bound),
``failed(unschedulable=True)`` (no node fits) or ``failed(unschedulable=False)`` (an error:
the bind failed, a policy could not be read). As upstream, a pod that was found unschedulable
while the cluster changed during its attempt (``moveRequestCycle``) goes to backoff rather
than waiting for the next change, which may never come. An update of a waiting pod keeps its
place; an update of an unschedulable one moves it (its spec may now fit); ``delete`` forgets it.

Pure: time is passed in (monotonic seconds), nothing here sleeps or reads a clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ACTIVE", "BACKOFF", "INITIAL_BACKOFF", "IN_FLIGHT", "MAX_BACKOFF", "MAX_UNSCHEDULABLE", "UNSCHEDULABLE", "PodKey",
           "QueuedPod", "SchedulingQueue", "pod_priority"]

PodKey = tuple[str, str]  # (namespace, name)

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
MAX_UNSCHEDULABLE = 300.0

ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT = "active", "backoff", "unschedulable", "in-flight"


@dataclass(eq=False)
class QueuedPod:
    """One pending pod: the latest object seen, its arrival order and its failed attempts."""

    key: PodKey
    pod: Mapping[str, Any]
    priority: int
    seq: int
    where: str = ACTIVE
    attempts: int = 0
    backoff_until: float = 0.0
    unschedulable_since: float = 0.0
    added_at: float = 0.0  # when it was first queued
    cycle: int = 0  # the scheduling cycle that popped it last
    message: str = ""  # why its last attempt failed
    extra: dict[str, Any] = field(default_factory=dict)  # the caller's notes (its last FailedScheduling event ...)

    @property
    def uid(self) -> str:
        return str((self.pod.get("metadata") or {}).get("uid") or "")


def pod_priority(pod: Mapping[str, Any]) -> int:
    """``spec.priority`` (set by the Priority admission plugin from the PriorityClass), else 0."""
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class SchedulingQueue:
    """Pending pods of one cluster; see the module docstring."""

    def __init__(self, *, initial_backoff: float = INITIAL_BACKOFF, max_backoff: float = MAX_BACKOFF,
                 max_unschedulable: float = MAX_UNSCHEDULABLE) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self.pods: dict[PodKey, QueuedPod] = {}
        self._active: list[tuple[int, int, PodKey]] = []
        self._backoff: list[tuple[float, int, PodKey]] = []
        self._seq = 0
        self.cycle = 0
        self.move_request_cycle = -1

    def __len__(self) -> int:
        return len(self.pods)

    def __contains__(self, key: object) -> bool:
        return key in self.pods

    def counts(self) -> dict[str, int]:
        out = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, IN_FLIGHT: 0}
        for item in self.pods.values():
            out[item.where] += 1
        return out

    # -- what comes in ----------------------------------------------------------------------

    def add(self, key: PodKey, pod: Mapping[str, Any], now: float) -> QueuedPod:
        """A pending pod seen (ADDED, or MODIFIED while still pending): queued, or updated in place."""
        item = self.pods.get(key)
        if item is not None:
            return self.update(item, pod, now)
        self._seq += 1
        item = self.pods[key] = QueuedPod(key, pod, pod_priority(pod), self._seq, added_at=now)
        _spec_changed(item, pod)
        self._push_active(item)
        return item

    def update(self, item: QueuedPod, pod: Mapping[str, Any], now: float) -> QueuedPod:
        if (item.pod.get("metadata") or {}).get("uid") != (pod.get("metadata") or {}).get("uid"):
            self.delete(item.key)  # another pod of the same name: a new arrival
            return self.add(item.key, pod, now)
        item.pod = pod
        priority = pod_priority(pod)
        changed = _spec_changed(item, pod)
        if item.where == UNSCHEDULABLE and changed:
            self._release(item, now)  # an update may make it schedulable (upstream: isPodUpdated)
        elif priority != item.priority and item.where == ACTIVE:
            item.priority = priority
            self._push_active(item)
        item.priority = priority
        return item

    def delete(self, key: PodKey) -> QueuedPod | None:
        """The pod is gone, bound elsewhere or being deleted: it waits no more (heaps drop it lazily)."""
        return self.pods.pop(key, None)

    def cluster_changed(self, now: float) -> int:
        """Something that may let unschedulable pods fit happened: they go back to be tried
        (after their backoff). How many moved."""
        self.move_request_cycle = self.cycle
        moved = [item for item in self.pods.values() if item.where == UNSCHEDULABLE]
        for item in moved:
            self._release(item, now)
        return len(moved)

    # -- what goes out ----------------------------------------------------------------------

    def pop(self, now: float, limit: int) -> list[QueuedPod]:
        """Up to ``limit`` pods to try now, in order; each is in flight until ``done``/``failed``."""
        self.flush(now)
        out: list[QueuedPod] = []
        while self._active and len(out) < limit:
            priority, seq, key = heapq.heappop(self._active)
            item = self.pods.get(key)
            if item is None or item.where != ACTIVE or item.seq != seq or item.priority != -priority:
                continue
            self.cycle += 1
            item.where, item.cycle = IN_FLIGHT, self.cycle
            out.append(item)
        return out

    def done(self, item: QueuedPod) -> None:
        """The attempt ended for good (bound, or the pod was bound or deleted meanwhile)."""
        if self.pods.get(item.key) is item:
            del self.pods[item.key]

    def failed(self, item: QueuedPod, now: float, *, unschedulable: bool, message: str = "") -> None:
        """An attempt ended without a bind: backoff grows; an unschedulable pod waits for a change."""
        if self.pods.get(item.key) is not item:
            return  # deleted meanwhile
        item.attempts += 1
        item.message = message
        item.backoff_until = now + self.backoff(item.attempts)
        if unschedulable and self.move_request_cycle < item.cycle:
            item.where, item.unschedulable_since = UNSCHEDULABLE, now
            return
        item.where = BACKOFF
        heapq.heappush(self._backoff, (item.backoff_until, item.seq, item.key))

    def retry(self, item: QueuedPod) -> None:
        """Put an in-flight pod back as it was, without counting an attempt (its try was cut short)."""
        if self.pods.get(item.key) is item and item.where == IN_FLIGHT:
            self._push_active(item)

    def backoff(self, attempts: int) -> float:
        """Upstream's ``calculateBackoffDuration``: initial · 2^(attempts-1), at most the maximum."""
        duration = self.initial_backoff
        for _ in range(1, max(attempts, 1)):
            duration *= 2
            if duration >= self.max_backoff:
                return self.max_backoff
        return min(duration, self.max_backoff)

    def flush(self, now: float) -> None:
        """Backoffs that ended go active; pods unschedulable for too long are tried again."""
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, key = heapq.heappop(self._backoff)
            item = self.pods.get(key)
            if item is not None and item.where == BACKOFF and item.seq == seq:
                self._push_active(item)
        since = now - self.max_unschedulable
        overdue = [i for i in self.pods.values() if i.where == UNSCHEDULABLE and i.unschedulable_since <= since]
        for item in overdue:
            self._release(item, now)

    def next_wake(self, now: float) -> float | None:
        """Seconds until a waiting pod is due (0 when some are active), None when none waits."""
        if any(item.where == ACTIVE for item in self._valid_active()):
            return 0.0
        times = [item.backoff_until for item in self.pods.values() if item.where == BACKOFF]
        times += [item.unschedulable_since + self.max_unschedulable for item in self.pods.values() if item.where == UNSCHEDULABLE]
        return max(0.0, min(times) - now) if times else None

    def waiting(self) -> Iterator[QueuedPod]:
        return iter(list(self.pods.values()))

    # -- internals --------------------------------------------------------------------------

    def _valid_active(self) -> Iterator[QueuedPod]:
        for priority, seq, key in self._active:
            item = self.pods.get(key)
            if item is not None and item.where == ACTIVE and item.seq == seq and item.priority == -priority:
                yield item

    def _push_active(self, item: QueuedPod) -> None:
        item.where = ACTIVE
        heapq.heappush(self._active, (-item.priority, item.seq, item.key))

    def _release(self, item: QueuedPod, now: float) -> None:
        if item.backoff_until > now:
            item.where = BACKOFF
            heapq.heappush(self._backoff, (item.backoff_until, item.seq, item.key))
        else:
            self._push_active(item)


def _spec_changed(item: QueuedPod, pod: Mapping[str, Any]) -> bool:
    """Whether an update may change the pod's fit (upstream moves a pod on any update but of its
    status and resourceVersion): its spec, labels or annotations."""
    old = item.extra.get("seen")
    new = (pod.get("spec"), (pod.get("metadata") or {}).get("labels"), (pod.get("metadata") or {}).get("annotations"))
    item.extra["seen"] = new
    return old is not None and old != new
