"""Informer-style reading of a member cluster: list once, then watch from the list's resourceVersion.

A full list of nodes, pods and four workload kinds per cluster every sync is the API-server
load Katalyst's design avoids. An ``Informer`` keeps one kind's objects (``objects``) and the
resourceVersion it has seen; ``refresh`` brings both up to date: the first call lists, later
calls watch from that version for a moment, applying ADDED/MODIFIED/DELETED events and
following BOOKMARKs, and a 410 Gone (the server no longer keeps the version, as after etcd
compaction) relists. A call that fails raises ``ConnectorError`` and keeps what is known, so
the next one resumes from the same version. ``ClusterInformers`` holds one cluster's
informers, refreshes them side by side, and relists everything every ``full_resync_seconds``
as drift repair; ``informers_for`` keeps them per cluster in the worker process that owns the
cluster's shard (another worker taking the shard over starts with a list).

Others may follow the objects as they change: a *listener* (``ClusterInformers.listeners``) is
called with every applied event, ``(api_version, kind, type, object)``, under the informers'
lock (it must only take note: the scheduling app's pod scheduler queues them), and with type
``RELISTED`` (no object) after a list replaced a kind's objects. A *companion*
(``register_companion``) is work that runs beside a cluster's ``Watcher`` in the process holding
its lease, started and stopped with it: the pod scheduler is one.

Plain objects in, plain objects out: no Django here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from .connectors.base import WORKLOAD_KINDS, Connector, ConnectorError
from .inventory import FactsMemo

logger = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
#: (api_version, kind, event type, object): ADDED, MODIFIED, DELETED, or RELISTED with {}.
Listener = Callable[[str, str, str, dict[str, Any]], None]
RELISTED = "RELISTED"

#: The kinds the inventory mirrors through informers, as (apiVersion, kind).
INFORMED_KINDS: tuple[tuple[str, str], ...] = (("v1", "Node"), ("v1", "Pod"), *WORKLOAD_KINDS)


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


@dataclass
class Informer:
    """One kind of one cluster, as an informer's cache holds it."""

    api_version: str
    kind: str
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    resource_version: str = ""
    listed_at: float = float("-inf")  # time.monotonic() of the last full list
    listeners: list[Listener] = field(default_factory=list)  # shared with the cluster's other informers

    def refresh(self, connector: Connector, *, watch_seconds: int = 1, relist: bool = False) -> int:
        """Bring the objects up to date; returns how many changed (all of them on a list)."""
        if relist or not self.resource_version:
            return self._list(connector)
        changed = 0
        try:
            for event in connector.watch(self.api_version, self.kind, resource_version=self.resource_version,
                                         timeout_seconds=watch_seconds):
                changed += self._apply(event.type, event.object)
        except ConnectorError as exc:
            if exc.status != 410:
                raise
            return self._list(connector)
        return changed

    def _apply(self, kind: str, obj: dict[str, Any]) -> int:
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "ERROR":
            code = obj.get("code")
            raise ConnectorError(str(obj.get("message") or "watch error"), reason="conflict" if code == 410 else "server",
                                 status=code if isinstance(code, int) else None)
        if version:
            self.resource_version = version
        if kind == "BOOKMARK":
            return 0
        if kind == "DELETED":
            if self.objects.pop(_key(obj), None) is None:
                return 0
            self._tell(kind, obj)
            return 1
        if self.objects.get(_key(obj)) == obj:
            return 0
        self.objects[_key(obj)] = obj
        self._tell(kind, obj)
        return 1

    def _tell(self, kind: str, obj: dict[str, Any]) -> None:
        for listener in self.listeners:
            try:
                listener(self.api_version, self.kind, kind, obj)
            except Exception:  # noqa: BLE001 - a listener's fault must not stop the informer
                logger.exception("informer listener failed")

    def _list(self, connector: Connector, lock: threading.Lock | None = None) -> int:
        """A full list, swapped in at once (under ``lock`` when readers share the objects)."""
        listed = connector.list(self.api_version, self.kind)
        fresh = {_key(obj): obj for obj in listed.items}
        with lock or contextlib.nullcontext():
            changed = sum(1 for key, obj in fresh.items() if self.objects.get(key) != obj) + sum(
                1 for key in self.objects if key not in fresh)
            self.objects, self.resource_version = fresh, listed.resource_version
            self.listed_at = time.monotonic()
            self._tell(RELISTED, {})
        return changed

    def follow(self, connector: Connector, *, lock: threading.Lock, changed: Callable[[], None], stop: threading.Event,
               watch_seconds: int = 60, resync_seconds: float = 600.0) -> None:
        """Keep a watch open until ``stop``: each event is applied (under ``lock``) as it arrives
        and ``changed`` is called after one that changed something. Watches are renewed every
        ``watch_seconds`` from the version reached; 410 Gone or a due drift repair
        (``resync_seconds`` after the last list) lists again. Errors raise ``ConnectorError``."""
        while not stop.is_set():
            if not self.resource_version or time.monotonic() - self.listed_at >= resync_seconds:
                if self._list(connector, lock):
                    changed()
                continue
            try:
                for event in connector.watch(self.api_version, self.kind, resource_version=self.resource_version,
                                             timeout_seconds=watch_seconds):
                    with lock:
                        applied = self._apply(event.type, event.object)
                    if applied:
                        changed()
                    if stop.is_set():
                        return
            except ConnectorError as exc:
                if exc.status != 410:
                    raise
                self.resource_version = ""


@dataclass
class ClusterInformers:
    """The informers of one cluster, refreshed together (one thread per kind)."""

    fingerprint: str = ""
    full_resync_seconds: float = 600.0
    clock: Callable[[], float] = time.monotonic
    informers: dict[tuple[str, str], Informer] = field(default_factory=dict)
    last_full: float = float("-inf")
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: int = 0  # syncs that failed in a row
    last_used: float = 0.0  # when a sync last asked for them (``informers_for``)
    retry_at: float = float("-inf")
    #: A ``Watcher`` keeps them current: readers take the objects as they are, no refresh.
    watched: bool = False
    watcher: Watcher | None = None
    #: Facts of the cached objects, kept from one build of the inventory snapshot to the next.
    facts: FactsMemo = field(default_factory=FactsMemo)
    #: Called with every applied event (see the module docstring); shared by every kind's informer.
    listeners: list[Listener] = field(default_factory=list)
    #: The last NodeMetrics list (node name -> item), when it was read (monotonic) and how many
    #: lists so far: syncs and the pod scheduler read the same report (``metrics_due``).
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    metrics_read: float = float("-inf")
    metrics_serial: int = 0

    def watching(self) -> bool:
        """Whether this process's watcher of the cluster is running."""
        return self.watcher is not None and self.watcher.alive()

    def __post_init__(self) -> None:
        for api_version, kind in INFORMED_KINDS:
            self.informers.setdefault((api_version, kind), Informer(api_version, kind, listeners=self.listeners))

    def metrics_due(self, every: float) -> bool:
        """Whether the NodeMetrics report is older than ``every`` seconds (metrics-server itself
        refreshes every 15 s by default: reading it at every watched write is wasted work)."""
        return self.clock() - self.metrics_read >= every

    def record_metrics(self, items: Iterable[dict[str, Any]]) -> None:
        self.metrics = {str((item.get("metadata") or {}).get("name") or ""): item for item in items}
        self.metrics_read = self.clock()
        self.metrics_serial += 1

    def refresh(self, connector: Connector, *, watch_seconds: int = 1) -> int:
        """Every kind up to date (a full list of each when the resync is due); the number of
        objects that changed. The first error raises after every kind had its turn."""
        relist = self.clock() - self.last_full >= self.full_resync_seconds
        informers = list(self.informers.values())
        with ThreadPoolExecutor(max_workers=len(informers), thread_name_prefix="informer") as pool:
            futures = [pool.submit(i.refresh, connector, watch_seconds=watch_seconds, relist=relist) for i in informers]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise errors[0]
        if relist:
            self.last_full = self.clock()
        return sum(f.result() for f in futures)

    def listed(self) -> bool:
        """Whether every kind has been listed (its objects are the cluster's, not just empty)."""
        return all(informer.resource_version for informer in self.informers.values())

    def record(self, ok: bool) -> None:
        """A sync's outcome: after ``n`` failures in a row, periodic syncs wait 15 s · 2^(n-1), at most 5 min."""
        self.failures = 0 if ok else self.failures + 1
        self.retry_at = self.clock() + min(300.0, 15.0 * 2 ** (self.failures - 1)) if self.failures else float("-inf")

    def backing_off(self) -> bool:
        return self.clock() < self.retry_at

    def items(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        return list(self.informers[(api_version, kind)].objects.values())

    def workloads(self) -> list[dict[str, Any]]:
        """Every workload of the mirrored kinds, each with apiVersion and kind set (``Connector.list_workloads``)."""
        return [{**obj, "apiVersion": api_version, "kind": kind} for api_version, kind in WORKLOAD_KINDS
                for obj in self.items(api_version, kind)]


@dataclass(eq=False)
class Watcher:
    """Holds a cluster's watches open so that a change reaches the inventory within a moment.

    A sync every 15 s that watches for one second sees a label change up to 15 s late; a
    watcher keeps one thread per kind in a watch (``Informer.follow``) and one writer thread
    that calls ``write(watcher)`` a moment after anything changed (``settle_seconds`` gathers a
    burst of events into one write, at least as long as the last write took: a cluster changing
    all the time is written at most half the time) and every ``write_every_seconds`` regardless
    (usage metrics, status). Only the writer writes. A kind whose watch fails reports through
    ``failed`` (the cluster shows it), waits ``retry_seconds`` doubling to 5 min, and resumes
    from its version. ``stop`` ends it all (threads finish their current watch); ``on_stop``
    runs once after, from the writer thread (it releases the lease the watcher held).
    """

    informers: ClusterInformers
    connector: Connector
    write: Callable[[Watcher], None]
    failed: Callable[[ConnectorError], None]
    on_stop: Callable[[], None] = lambda: None
    watch_seconds: int = 60
    settle_seconds: float = 0.05
    write_every_seconds: float = 15.0
    retry_seconds: float = 15.0
    stopping: threading.Event = field(default_factory=threading.Event)
    dirty: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    #: Work started with the watcher (``register_companion``), stopped before its lease is released.
    companions: list[Companion] = field(default_factory=list)

    def start(self, name: str) -> None:
        self.informers.watched = True
        for informer in self.informers.informers.values():
            self._thread(f"watch:{name}:{informer.kind}", self._follow, informer)
        self._thread(f"watch:{name}:writer", self._write_loop)

    def stop(self) -> None:
        self.stopping.set()
        self.dirty.set()
        for companion in self.companions:
            companion.stop()

    def alive(self) -> bool:
        return not self.stopping.is_set() and all(thread.is_alive() for thread in self.threads)

    def changed(self) -> None:
        self.dirty.set()

    def _thread(self, name: str, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _follow(self, informer: Informer) -> None:
        failures = 0
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                informer.follow(self.connector, lock=self.informers.lock, changed=self.changed, stop=self.stopping,
                                watch_seconds=self.watch_seconds, resync_seconds=self.informers.full_resync_seconds)
            except ConnectorError as exc:
                if self.stopping.is_set():
                    return
                # failures in a row double the pause; one after a watch that held a while starts over
                failures = 1 if time.monotonic() - started > self.watch_seconds else failures + 1
                self._report(exc)
                self.stopping.wait(min(300.0, self.retry_seconds * 2 ** (failures - 1)))
                self.changed()  # a write after the pause shows whether the cluster is back
            except Exception:  # noqa: BLE001 - a thread must not die silently: log, pause, go on
                if self.stopping.is_set():
                    return  # the connector closed under a watch that was ending anyway
                logger.exception("watch of %s failed", informer.kind)
                self.stopping.wait(15.0)

    def _report(self, exc: ConnectorError) -> None:
        try:
            self.failed(exc)
        except Exception:  # noqa: BLE001
            logger.exception("could not record a failed watch")

    def _write_loop(self) -> None:
        took = 0.0
        try:
            while not self.stopping.is_set():
                self.dirty.wait(self.write_every_seconds)
                if self.stopping.is_set():
                    break
                # a burst of events settles first; under a steady stream of them, a write waits as
                # long as the last one took, so writing a big cluster leaves the process half its time
                self.stopping.wait(max(self.settle_seconds, took))
                self.dirty.clear()
                started = time.monotonic()
                try:
                    self.write(self)
                    took = time.monotonic() - started
                except Exception:  # noqa: BLE001 - kept dirty: the next round writes again
                    logger.exception("watched write failed")
                    self.dirty.set()
                    self.stopping.wait(1.0)
        finally:
            self.stopping.set()
            self.informers.watched = False
            for companion in self.companions:  # they end before the lease goes: no two owners at once
                companion.stop()
                companion.join(COMPANION_STOP_SECONDS)
            self.on_stop()


class Companion(Protocol):
    """Work beside a cluster's watcher (see ``register_companion``)."""

    def stop(self) -> None: ...

    def join(self, timeout: float) -> None: ...


@dataclass(frozen=True)
class WatchContext:
    """What a companion is started with: the cluster, its informers (kept current by the
    watcher), and whether the process still holds the cluster's lease."""

    cluster_pk: int
    cluster_name: str
    informers: ClusterInformers
    lease_lost: Callable[[], bool]


CompanionFactory = Callable[[WatchContext], "Companion | None"]
#: Seconds a stopping watcher waits for each companion to finish before it releases its lease.
COMPANION_STOP_SECONDS = 20.0
_companions: list[CompanionFactory] = []


def register_companion(factory: CompanionFactory) -> None:
    """Start ``factory(context)``'s companion with every watcher in this process (apps register
    at startup: fleet sits below them in the layers). A factory returning None starts nothing."""
    if factory not in _companions:
        _companions.append(factory)


def start_companions(watcher: Watcher, context: WatchContext) -> None:
    for factory in list(_companions):
        try:
            companion = factory(context)
        except Exception:  # noqa: BLE001 - one companion's fault must not stop the watcher
            logger.exception("could not start a companion of the watcher of %s", context.cluster_name)
            continue
        if companion is not None:
            watcher.companions.append(companion)


_registry: dict[int, ClusterInformers] = {}
_registry_lock = threading.Lock()
#: Informers not used for this long are dropped (a deleted cluster, a shard another worker took
#: over): a cluster synced again after that starts with a list.
IDLE_SECONDS = 3600.0


def informers_for(cluster_id: int, fingerprint: str, *, full_resync_seconds: float = 600.0,
                  clock: Callable[[], float] = time.monotonic) -> ClusterInformers:
    """This process's informers of a cluster; fresh ones (a list first) when its connection
    changed (``fingerprint``), as after a new kubeconfig. Idle ones are dropped on the way."""
    now = clock()
    with _registry_lock:
        for idle in [key for key, informers in _registry.items() if now - informers.last_used > IDLE_SECONDS]:
            _drop(idle)
        found = _registry.get(cluster_id)
        if found is None or found.fingerprint != fingerprint:
            _drop(cluster_id)
            found = _registry[cluster_id] = ClusterInformers(fingerprint, full_resync_seconds)
        found.last_used = now
        return found


def forget(cluster_ids: Iterable[int] | None = None) -> None:
    """Drop informers and stop their watchers (all without ids): a deleted cluster, or tests starting clean."""
    with _registry_lock:
        for cluster_id in list(_registry) if cluster_ids is None else cluster_ids:
            _drop(cluster_id)


def _drop(cluster_id: int) -> None:
    """Forget a cluster's informers and stop their watcher (with ``_registry_lock`` held)."""
    dropped = _registry.pop(cluster_id, None)
    if dropped is not None and dropped.watcher is not None:
        dropped.watcher.stop()
