"""Meridian schedules the pods of member clusters: one scheduler per cluster, beside its watcher.

A pod whose ``spec.schedulerName`` is ``MERIDIAN_SCHEDULER_NAME`` (``meridian``) is left alone by
kube-scheduler and placed here, the way kube-scheduler places its own:

* **Where it runs.** In the worker process holding the cluster's watch lease (``fleet.tasks``):
  a companion of the cluster's ``Watcher`` (``fleet.informer.register_companion``), so one
  process in the deployment schedules a cluster at a time; when that process dies the lease
  lapses and the next owner takes over with a fresh listing. It reads the watcher's informers
  (one list, then watches: no extra load on the API server) through a listener that queues
  every node and pod event for the scheduling thread, and the NodeMetrics report the watcher's
  periodic pass keeps on the informers.
* **The cycle** (``scheduling.livecache.LiveCluster``): the queue of pending pods (priority,
  then arrival; backoff 1 s doubling to 10 s; unschedulable pods wait for a cluster change or
  five minutes), placement by the framework under the pod's policy — its annotation
  (``sched.cloud.ctrip.com/policy`` or ``scheduling.meridian.io/policy``), else the cluster's
  label ``scheduling.meridian.io/policy`` (Meridian's cluster labels), else the fleet's default
  policy — and the pod assumed on its node at once, so nothing is booked twice between the
  bind and the watch's echo.
* **Binding** (a pool of ``MERIDIAN_SCHEDULER_BIND_THREADS`` threads): a pod asking for
  exclusive CPUs gets them allocated on the node and written to it first
  (``scheduling.cpu.binding``); then the ``pods/binding`` subresource, as kube-scheduler's
  DefaultBinder. 201: a ``Scheduled`` Event. 409 or 404 (bound or deleted meanwhile, or replaced
  by another pod of that name): not an error, the pod leaves the queue (its CPUs are given
  back). Other errors: a ``FailedScheduling`` Event, backoff, retry.
* **Unschedulable pods** get a ``FailedScheduling`` Event with the framework's reasons as
  kube-scheduler words them ("0/3 nodes are available: 3 Insufficient cpu.") and wait.
  Events are ``events.k8s.io/v1`` with ``reportingController`` the scheduler's name
  (``scheduling.recorder``).
* **A pod deleted** (or finished) gives its exclusive CPUs back.
* **Dormant clusters.** Until a pod of a cluster names this scheduler, its events are only
  looked at for one (no engine state, no PodInfo per pod); the first wakes the scheduler with a
  full listing from the informers. Ten minutes with nothing to schedule put it back to sleep.

Nothing here is on the request path of the web processes. State lives in memory and in the
member cluster; the CPU allocations in the database (the truth for them).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django import db
from django.conf import settings
from django.utils import timezone

from core.errors import Refused
from fleet.connectors.base import Connector, ConnectorError
from fleet.informer import RELISTED, WatchContext, register_companion
from fleet.models import Cluster
from fleet.services import connector_for

from . import admission, services
from .cpu import allocation as cpu_allocation
from .cpu import binding as cpu_binding
from .cpu.state import CPU_ISOLATE_MODE, EXCLUSIVE
from .engine import Policy
from .livecache import BOUND, Attempt, LiveCluster, pod_key, usage_from_metrics
from .recorder import FAILED_SCHEDULING, SCHEDULED, EventRecorder, EventWrite
from .schedqueue import QueuedPod

logger = logging.getLogger(__name__)

CLUSTER_POLICY_LABEL = services.CLUSTER_POLICY_LABEL
#: Pods taken from the queue per round, and binds in flight at most.
BATCH = 256
MAX_IN_FLIGHT = 512
#: How often the policies and the cluster's default are checked for changes (a cheap read).
POLICY_CHECK_SECONDS = 2.0
#: A cluster without pods for this scheduler is followed cheaply (no engine state); an active
#: one left with nothing to schedule for this long goes back to that.
IDLE_SECONDS = 600.0
EVENT_FLUSH_SECONDS = 10.0

#: This process's running schedulers, by cluster name (tests and benchmarks read their figures).
running: dict[str, ClusterScheduler] = {}


@contextlib.contextmanager
def _database() -> Iterator[None]:
    """A scheduler's threads are no request or task: each use of the database gives its
    connection back at once (a process may schedule many clusters; the pool is small)."""
    try:
        yield
    finally:
        db.connection.close()


def _exclusive(pod: Mapping[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(CPU_ISOLATE_MODE) == EXCLUSIVE


def _machine_max(policy: Policy) -> dict[str, int] | None:
    """The ``machineMaxList`` the policy gives ``CPUSetExclusive`` (the allocator checks it again)."""
    for spec in policy.filters:
        if spec.name == "CPUSetExclusive" and spec.args:
            return cpu_allocation.parse_machine_max(spec.args.get("machineMaxList"))
    return None


@dataclass
class _Outcome:
    """How a bind (or a release) ended, handed from a bind thread to the scheduling thread."""

    attempt: Attempt | None
    status: str  # bound | gone | refused | error | released
    at: datetime | None = None
    message: str = ""
    annotations: dict[str, str] | None = None
    extras: dict[str, dict[str, str]] | None = None
    seconds: float = 0.0


@dataclass
class Stats:
    """What the scheduler did, for tests, benchmarks and logs."""

    bound: int = 0
    gone: int = 0
    unschedulable: int = 0
    errors: int = 0
    events: int = 0
    event_errors: int = 0
    queued_to_bound: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=200_000))
    bind_seconds: collections.deque[float] = field(default_factory=lambda: collections.deque(maxlen=200_000))

    def as_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "gone": self.gone, "unschedulable": self.unschedulable, "errors": self.errors,
                "events": self.events, "event_errors": self.event_errors}


class ClusterScheduler:
    """One member cluster's pod scheduler (see the module docstring): a scheduling thread and a
    pool of bind threads, fed by the cluster's informers."""

    def __init__(self, context: WatchContext, *, name: str | None = None, bind_threads: int | None = None) -> None:
        self.context = context
        self.name = name or settings.MERIDIAN_SCHEDULER_NAME
        self.live = LiveCluster(self.name)
        self.recorder = EventRecorder(self.name, f"{self.name}-{socket.gethostname()}"[:128])
        self.stats = Stats()
        self.events: collections.deque[tuple[str, str, dict[str, Any]]] = collections.deque()
        self.outcomes: collections.deque[_Outcome] = collections.deque()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.started = threading.Event()  # set once the first listing is loaded
        self.pool = ThreadPoolExecutor(bind_threads or settings.MERIDIAN_SCHEDULER_BIND_THREADS,
                                       thread_name_prefix=f"bind:{context.cluster_name}")
        self.thread = threading.Thread(target=self._run, name=f"scheduler:{context.cluster_name}", daemon=True)
        self.connector: Connector | None = None
        self._in_flight = 0
        self._policies: dict[str | None, tuple[Policy | None, str]] = {}
        self._policy_version: tuple[Any, ...] | None = None
        self._cluster_default: str | None = None
        self._checked_at = float("-inf")
        self._flushed_at = time.monotonic()
        self._metrics_serial = -1
        self._cpu_ready: set[str] = set()  # nodes known to have their CPU state
        self._node_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self.active = False  # False: dormant, no pod of the cluster names this scheduler
        self._idle_since: float | None = None

    # -- companion --------------------------------------------------------------------------

    def start(self) -> None:
        self.context.informers.listeners.append(self._listen)
        running[self.context.cluster_name] = self
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    def alive(self) -> bool:
        return self.thread.is_alive()

    def _listen(self, api_version: str, kind: str, event: str, obj: dict[str, Any]) -> None:
        """Called by the informers under their lock: only take note."""
        if api_version == "v1" and kind in ("Node", "Pod"):
            self.events.append((kind, event, obj))
            self.wake.set()

    # -- the scheduling thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            with _database():
                cluster = Cluster.objects.get(pk=self.context.cluster_pk)
                self.connector = connector_for(cluster)
            self.events.append(("Pod", RELISTED, {}))  # the first round looks for pods already waiting
            self.started.set()
            while not self.stopping.is_set() and not self.context.lease_lost():
                try:
                    self._round()
                except Exception:  # noqa: BLE001 - log, start over from a listing, go on
                    logger.exception("pod scheduling of %s failed; starting over", self.context.cluster_name)
                    self.stopping.wait(1.0)
                    if self.active:
                        self._load()
                    else:  # waking failed (the database, a closed pool): look again next round
                        self.events.append(("Pod", RELISTED, {}))
                wait = self.live.queue.next_wake(time.monotonic())
                timeout = 1.0 if wait is None else min(1.0, wait)
                if timeout > 0 and not self.outcomes and not self.events:
                    self.wake.wait(timeout)
                self.wake.clear()
        except Exception:  # noqa: BLE001 - the watcher goes on; the next owner schedules
            logger.exception("the pod scheduler of %s stopped", self.context.cluster_name)
        finally:
            with contextlib.suppress(ValueError):
                self.context.informers.listeners.remove(self._listen)
            self.pool.shutdown(wait=True)
            self._take_outcomes()
            if self.connector is not None:
                self.connector.close()
            if running.get(self.context.cluster_name) is self:
                del running[self.context.cluster_name]
            db.connection.close()
            self.started.set()

    def _round(self) -> None:
        if not self.active:
            self._look_for_pods()
            return
        self._drain()
        self._take_outcomes()
        self._read_metrics()
        self._check_policies()
        self._schedule()
        self._flush_events()
        self.live.maintain()
        self._maybe_rest()

    # -- dormant while no pod is ours ---------------------------------------------------------

    def _activate(self) -> None:
        self.active = True
        self._idle_since = None
        self._load()

    def _pending_in_informers(self) -> bool:
        """Whether any pod of the cluster waits for this scheduler."""
        informers = self.context.informers
        with informers.lock:
            return any(self._waits_for_us(pod) for pod in informers.informers[("v1", "Pod")].objects.values())

    def _waits_for_us(self, pod: Mapping[str, Any]) -> bool:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        return (spec.get("schedulerName") == self.name and not spec.get("nodeName") and not meta.get("deletionTimestamp")
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))

    def _look_for_pods(self) -> None:
        """Dormant: events are only looked at for a pod of ours (which wakes the scheduler with a
        full listing) and for exclusive pods gone (their CPUs are given back)."""
        wanted = False
        while self.events:
            kind, event, obj = self.events.popleft()
            if event == RELISTED:
                wanted = wanted or self._pending_in_informers()
            elif kind == "Pod":
                self._pod_gone(event, obj)
                wanted = wanted or (event != "DELETED" and self._waits_for_us(obj))
        if wanted:
            self._activate()

    def _maybe_rest(self) -> None:
        """Nothing of ours for ``IDLE_SECONDS``: drop the engine's state and go dormant again."""
        busy = len(self.live.queue) or self._in_flight or any(p.state != BOUND for p in self.live.placed.values())
        now = time.monotonic()
        if busy:
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now
        elif now - self._idle_since >= IDLE_SECONDS:
            self.live = LiveCluster(self.name)
            self.active, self._idle_since, self._metrics_serial = False, None, -1
            self._cpu_ready.clear()

    def _load(self) -> None:
        """Everything from the informers (a start, or after a relist)."""
        informers = self.context.informers
        with informers.lock:
            nodes, pods = informers.items("v1", "Node"), informers.items("v1", "Pod")
            self.events.clear()
        now = time.monotonic()
        self.live.load(nodes, pods, now)
        self.live.state()  # the engine's state, built now rather than by the first pending pod
        with _database():
            pk = self.context.cluster_pk
            extras = cpu_binding.node_extras(pk) if cpu_binding.has_cpu_nodes(pk) else {}
        for name in list(self.live.node_extra):
            if name not in extras:
                self.live.set_node_extra(name, None)
        for name, extra in extras.items():
            self.live.set_node_extra(name, extra)
        self._cpu_ready = set(extras)
        self._metrics_serial = -1
        self.live.queue.cluster_changed(now)

    def _drain(self) -> None:
        now = time.monotonic()
        changed = False
        while self.events:
            kind, event, obj = self.events.popleft()
            if event == RELISTED:
                self._load()
                return
            if kind == "Node":
                changed |= self.live.node_event(event, obj)
                continue
            self._pod_gone(event, obj)
            changed |= self.live.pod_event(event, obj, now)
        if changed:
            self.live.queue.cluster_changed(now)

    def _pod_gone(self, event: str, pod: Mapping[str, Any]) -> None:
        """A pod deleted or finished: its exclusive CPUs go back, its Event series end."""
        if (event == "DELETED" or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")) and _exclusive(pod):
            self._submit(self._release, pod)
        if event == "DELETED":
            self.recorder.forget(pod)

    def _read_metrics(self) -> None:
        informers = self.context.informers
        if informers.metrics_serial == self._metrics_serial:
            return
        self._metrics_serial = informers.metrics_serial
        for item in list(informers.metrics.values()):
            parsed = usage_from_metrics(item)
            if parsed is not None:
                self.live.report_usage(*parsed)

    def _check_policies(self) -> None:
        """Every few seconds: policies changed (the scheduling config version) or the cluster's
        default did? Then forget the compiled ones, and let waiting pods try again."""
        now = time.monotonic()
        if now - self._checked_at < POLICY_CHECK_SECONDS:
            return
        self._checked_at = now
        with _database():
            version = admission.current_version()
            labels = Cluster.objects.filter(pk=self.context.cluster_pk).values_list("labels", flat=True).first() or {}
        default = services.cluster_policy_name(labels)
        seen = (version, default)
        if seen != self._policy_version:
            if self._policy_version is not None:
                self.live.queue.cluster_changed(now)
            self._policy_version, self._cluster_default = seen, default
            self._policies.clear()

    def _policy_for(self, pod: Mapping[str, Any]) -> tuple[Policy | None, str]:
        """The pod's policy: its annotation, else the cluster's label, else the fleet's default."""
        named = admission.policy_name_of(pod)
        name = named or self._cluster_default
        found = self._policies.get(name)
        if found is None:
            try:
                with _database():
                    found = (services.policy_named(name)[0], "")
            except Refused as exc:
                cluster = self.context.cluster_name
                where = "" if named else f" (the default of cluster {cluster}: its label {CLUSTER_POLICY_LABEL})"
                found = (None, f"{exc.detail}{where}")
            self._policies[name] = found
        return found

    def _schedule(self) -> None:
        room = MAX_IN_FLIGHT - self._in_flight
        if room <= 0:
            return
        now = time.monotonic()
        for item in self.live.pending(now, min(BATCH, room)):
            policy, problem = self._policy_for(item.pod)
            if policy is None:
                self._unschedulable(item, problem)
                continue
            attempt = self.live.attempt(item, policy)
            if attempt.node is None:
                self._unschedulable(item, attempt.placement.reasons)
                continue
            if _exclusive(item.pod) and attempt.node not in self._cpu_ready:
                self._prepare_cpu_node(attempt.node, item.key)
            self._in_flight += 1
            self._submit(self._bind, attempt)

    def _prepare_cpu_node(self, node: str, besides: tuple[str, str]) -> None:
        """The first exclusive pod bound to a node: its CPU state is made here, before any bind to
        it is sent (so no bind races the reconcile that makes it)."""
        pending = {f"{key[0]}/{key[1]}": item.pod for key, item in self.live.queue.pods.items()}
        with _database():
            ready = cpu_binding.prepare_node(self.context.cluster_pk, self.live.nodes.get(node, {}),
                                             self.live.pods_on(node, besides=besides), pending)
            extras = cpu_binding.node_extras(self.context.cluster_pk, [node]) if ready else {}
        if ready:
            self._cpu_ready.add(node)
            for name, annotations in extras.items():
                self.live.set_node_extra(name, annotations)

    def _unschedulable(self, item: QueuedPod, message: str) -> None:
        self.stats.unschedulable += 1
        self.live.queue.failed(item, time.monotonic(), unschedulable=True, message=message)
        self._event(item.pod, FAILED_SCHEDULING, message)

    def _take_outcomes(self) -> None:
        now = time.monotonic()
        while self.outcomes:
            outcome = self.outcomes.popleft()
            for name, extra in (outcome.extras or {}).items():
                self.live.set_node_extra(name, extra)
            attempt = outcome.attempt
            if attempt is None:
                continue
            self._in_flight -= 1
            item = attempt.item
            namespace, name = item.key
            if outcome.status == "bound":
                assert outcome.at is not None
                self.live.bind_succeeded(item.key, item.uid, outcome.at, outcome.annotations)
                self.live.queue.done(item)
                self.stats.bound += 1
                self.stats.queued_to_bound.append(now - item.added_at)
                self.stats.bind_seconds.append(outcome.seconds)
                self._event(item.pod, SCHEDULED, f"Successfully assigned {namespace}/{name} to {attempt.node}")
                continue
            self.live.bind_failed(item.key, item.uid)
            if outcome.status == "gone":
                self.stats.gone += 1
                self.live.queue.done(item)
            elif outcome.status == "refused":
                self._unschedulable(item, outcome.message)
            else:
                self.stats.errors += 1
                logger.warning("binding %s/%s to %s failed (retried after a backoff): %s", namespace, name, attempt.node,
                               outcome.message, extra={"cluster": self.context.cluster_name})
                self.live.queue.failed(item, now, unschedulable=False, message=outcome.message)
                self._event(item.pod, FAILED_SCHEDULING, outcome.message)

    # -- the bind threads -------------------------------------------------------------------

    def _submit(self, fn: Any, *args: Any) -> None:
        try:
            self.pool.submit(fn, *args)
        except RuntimeError:  # shutting down
            if fn == self._bind:
                self.outcomes.append(_Outcome(args[0], "error", message="the scheduler is stopping"))

    def _bind(self, attempt: Attempt) -> None:
        started = time.monotonic()
        item, node = attempt.item, attempt.node
        assert node is not None and self.connector is not None
        namespace, name = item.key
        exclusive = _exclusive(item.pod)
        outcome: _Outcome
        try:
            annotations = None
            try:
                if exclusive:
                    with self._node_lock(node), _database():  # one allocation and delivery per node at a time
                        annotations = cpu_binding.allocate_for_pod(self.context.cluster_pk, node, item.pod, self.connector,
                                                                   machine_max=_machine_max(attempt.policy))
                self.connector.bind(namespace, name, node, uid=item.uid)
            except ConnectorError as exc:
                status = "gone" if exc.status in (404, 409) else "error"
                outcome = _Outcome(attempt, status, message=f"Binding rejected: {exc}")
            except Refused as exc:
                outcome = _Outcome(attempt, "refused", message=f"node {node} cannot give the pod its CPUs: {exc.detail}")
            else:
                outcome = _Outcome(attempt, "bound", at=timezone.now(), annotations=annotations)
            if exclusive:
                with _database():
                    if outcome.status != "bound":
                        cpu_binding.release_for_pod(self.context.cluster_pk, item.pod, self.connector)
                    outcome.extras = cpu_binding.node_extras(self.context.cluster_pk, [node])
        except Exception as exc:  # noqa: BLE001 - the pod is retried; the scheduling thread must hear back
            logger.exception("binding %s/%s to %s failed", namespace, name, node)
            outcome = _Outcome(attempt, "error", message=f"Binding rejected: {exc}")
        outcome.seconds = time.monotonic() - started
        self.outcomes.append(outcome)
        self.wake.set()

    def _node_lock(self, node: str) -> threading.Lock:
        with self._locks_lock:
            found = self._node_locks.get(node)
            if found is None:
                found = self._node_locks[node] = threading.Lock()
            return found

    def _release(self, pod: Mapping[str, Any]) -> None:
        """A deleted or finished exclusive pod: its CPUs go back to the share pool."""
        assert self.connector is not None
        try:
            with _database():
                nodes = cpu_binding.release_for_pod(self.context.cluster_pk, pod, self.connector)
                extras = cpu_binding.node_extras(self.context.cluster_pk, nodes) if nodes else {}
        except Exception:  # noqa: BLE001 - the reconciler releases what is left
            logger.exception("releasing the CPUs of %s/%s failed", *pod_key(pod))
            return
        if extras:
            self.outcomes.append(_Outcome(None, "released", extras=extras))
            self.wake.set()

    # -- Events -----------------------------------------------------------------------------

    def _event(self, pod: Mapping[str, Any], kind: tuple[str, str, str], note: str) -> None:
        write = self.recorder.record(pod, kind, note, timezone.now())
        if write is not None:
            self._submit(self._send, write)

    def _flush_events(self) -> None:
        now = time.monotonic()
        if now - self._flushed_at < EVENT_FLUSH_SECONDS:
            return
        self._flushed_at = now
        for write in self.recorder.flush(timezone.now()):
            self._submit(self._send, write)

    def _send(self, write: EventWrite) -> None:
        assert self.connector is not None
        try:
            if write.verb == "create":
                self.connector.create(write.body)
            else:
                self.connector.patch("events.k8s.io/v1", "Event", write.name, write.body, namespace=write.namespace)
            self.stats.events += 1
        except ConnectorError as exc:
            self.stats.event_errors += 1
            logger.info("could not record an event about %s/%s: %s", write.namespace, write.name, exc)


def companion(context: WatchContext) -> ClusterScheduler | None:
    """The pod scheduler of a watched cluster (``fleet.informer`` starts it with the watcher)."""
    if not settings.MERIDIAN_POD_SCHEDULER:
        return None
    scheduler = ClusterScheduler(context)
    scheduler.start()
    return scheduler


def register() -> None:
    register_companion(companion)
