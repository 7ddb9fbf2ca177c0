"""The scheduler's view of one member cluster, kept current from its informers' events:
kube-scheduler's cache (nodes, the pods on them, assumed pods) and its scheduling queue.

Fed by ``load`` (a full listing) and ``node_event`` / ``pod_event`` (each informer event), it
keeps one ``ClusterState`` that every policy's ``Scheduler`` shares (``Scheduler.over``), so
pods of different policies see each other's placements — Ctrip's one scheduler serving many
policies — and one scan position (``next_start``) for all, as upstream keeps one per scheduler.

* **Pending pods** whose ``spec.schedulerName`` is this scheduler's, not yet bound and not being
  deleted, wait in a ``SchedulingQueue``; ``attempt`` places one under a policy and *assumes* it
  at once: from then on it counts on its node (no double booking while the bind is in flight
  and before the watch echoes it). ``bind_succeeded`` keeps it there (from the bind's time, the
  load-aware plugin counts it as placed since a usage report older than that); ``bind_failed``
  takes it away again. The watch's echo of the bound pod confirms the assumed one; a pod bound
  elsewhere than assumed, or changed (resized, relabelled, CPU annotations written), replaces it.
* **Changes** are applied in place where the engine can follow them: a pod bound, deleted or
  finished is added or removed (``ClusterState.add_pod``/``remove_pod``), a node's annotations
  or usage replaced. A node added, removed or changed in what filters read (labels, taints,
  allocatable, schedulability, readiness) rebuilds the state before the next attempt, from the
  objects kept here, with the assumed pods on top. A change that may let waiting pods fit
  (a node added or changed, a pod gone) returns True: the caller moves unschedulable pods back
  (``SchedulingQueue.cluster_changed``).
* **Nodes as the engine reads them** (``node_view``): cordoned nodes carry upstream's
  ``node.kubernetes.io/unschedulable`` taint and NotReady ones ``node.kubernetes.io/not-ready``
  (what the node lifecycle controller puts on them), so the engine refuses them with
  kube-scheduler's own reason; nodes are scanned in name order.
* **Usage** reports (``report_usage``: NodeMetrics, engine units) are kept per node with their
  time and given to the engine's ``NodeInfo`` (``MostAvailable`` reads them).
* **CPU co-location**: a pod asking for exclusive CPUs is placed under its policy plus
  ``CPUSetExclusive`` (filter and score) and ``CPUSetShared``; other pods of a cluster whose
  nodes publish a CPU topology get ``CPUSetShared``, so the sellable rules hold whatever the
  policy names. ``set_node_extra`` adds annotations to a node's view (the database's
  ``cpu-state``), which the CPU plugins read.

Pure: no Django, no I/O; times are passed in. One thread uses an instance.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from scheduling.cluster import ClusterState, NodeInfo, PodInfo, amount_of
from scheduling.cpu.cpuset import TOPOLOGY_ANNOTATION
from scheduling.cpu.state import CPU_ISOLATE_MODE, EXCLUSIVE
from scheduling.engine import Placement, PluginSpec, Policy, Scheduler
from scheduling.schedqueue import IN_FLIGHT, PodKey, QueuedPod, SchedulingQueue

__all__ = [
    "NOT_READY_TAINT",
    "UNSCHEDULABLE_TAINT",
    "Attempt",
    "LiveCluster",
    "node_view",
    "pod_key",
    "usage_from_metrics",
    "with_cpu_plugins",
    "with_condition_taints",
]

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}

ASSUMED, BOUND_UNSEEN, BOUND = "assumed", "bound, echo pending", "bound"
#: Cluster changes kept for the engine's caches before they are dropped (and the caches rebuilt).
MAX_CHANGES = 100_000
MAX_TEMPLATES = 1024


def pod_key(obj: Mapping[str, Any]) -> PodKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _terminal(obj: Mapping[str, Any]) -> bool:
    return str((obj.get("status") or {}).get("phase") or "") in ("Succeeded", "Failed")


def _node_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("nodeName") or "")


def with_condition_taints(taints: Iterable[Any], *, unschedulable: bool, ready: bool) -> list[dict[str, Any]]:
    """A node's taints plus the ones the node lifecycle controller adds for a cordoned node
    (``spec.unschedulable``) and a node that is not Ready, when they are not there yet."""
    out = [dict(t) for t in taints if isinstance(t, Mapping)]
    keys = {t.get("key") for t in out}
    if unschedulable and UNSCHEDULABLE_TAINT["key"] not in keys:
        out.append(dict(UNSCHEDULABLE_TAINT))
    if not ready and NOT_READY_TAINT["key"] not in keys:
        out.append(dict(NOT_READY_TAINT))
    return out


def _ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_view(node: Mapping[str, Any], extra_annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The node as the engine reads it: name, labels, annotations (with ``extra_annotations``),
    taints (with the condition taints), allocatable."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    annotations = dict(meta.get("annotations") or {})
    if extra_annotations:
        annotations.update(extra_annotations)
    taints = with_condition_taints(spec.get("taints") or (), unschedulable=bool(spec.get("unschedulable")), ready=_ready(node))
    return {"metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {}), "annotations": annotations},
            "spec": {"taints": taints}, "status": {"allocatable": dict((node.get("status") or {}).get("allocatable") or {})}}


def _filter_facts(node: Mapping[str, Any]) -> tuple[Any, ...]:
    """What the engine's filters and static caches read of a node (a change rebuilds the state)."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    return (meta.get("labels") or {}, spec.get("taints") or [], bool(spec.get("unschedulable")), _ready(node),
            (node.get("status") or {}).get("allocatable") or {})


def _footprint(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """What the engine reads of a bound pod (a change replaces it): its spec but the node, labels,
    annotations and the resources in its status (in-place resize)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    resized = [(c.get("name"), c.get("resources"), c.get("allocatedResources"))
               for key in ("containerStatuses", "initContainerStatuses") for c in status.get(key) or () if isinstance(c, Mapping)]
    return ({k: v for k, v in spec.items() if k != "nodeName"}, meta.get("labels") or {}, meta.get("annotations") or {}, resized)


def usage_from_metrics(item: Mapping[str, Any]) -> tuple[str, dict[str, int], datetime | None] | None:
    """A NodeMetrics item as (node name, usage in engine units, report time); None when unreadable."""
    name = str((item.get("metadata") or {}).get("name") or "")
    usage = item.get("usage")
    if not name or not isinstance(usage, Mapping):
        return None
    try:
        values = {str(k): amount_of(str(k), v) for k, v in usage.items()}
    except ValueError:
        return None
    stamp = item.get("timestamp")
    try:
        at = datetime.fromisoformat(stamp) if isinstance(stamp, str) and stamp else None
    except ValueError:
        at = None
    return name, values, at


def _exclusive(pod: Mapping[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(CPU_ISOLATE_MODE) == EXCLUSIVE


def with_cpu_plugins(policy: Policy, *, exclusive: bool) -> Policy:
    """``policy`` plus the CPU co-location plugins a pod needs: for an exclusive pod
    ``CPUSetExclusive`` (filter, score weight 1) and ``CPUSetShared``; else ``CPUSetShared``."""
    names = {spec.name for spec in policy.filters}
    filters = list(policy.filters)
    scores = list(policy.scores)
    if exclusive and "CPUSetExclusive" not in names:
        filters.append(PluginSpec("CPUSetExclusive"))
        if "CPUSetExclusive" not in {spec.name for spec in policy.scores}:
            scores.append(PluginSpec("CPUSetExclusive"))
    if "CPUSetShared" not in names:
        filters.append(PluginSpec("CPUSetShared"))
    if len(filters) == len(policy.filters) and len(scores) == len(policy.scores):
        return policy
    return replace(policy, filters=tuple(filters), scores=tuple(scores))


@dataclass(eq=False)
class _Placed:
    """A pod the state counts: its PodInfo, node, uid, footprint and whether its bind is known."""

    info: PodInfo
    node: str
    uid: str
    footprint: tuple[Any, ...]
    state: str = BOUND


@dataclass(frozen=True)
class Attempt:
    """One scheduling attempt: the queued pod, the policy used, the engine's placement, and the
    assumed PodInfo (None when no node fits or the pod could not be read)."""

    item: QueuedPod
    policy: Policy
    placement: Placement
    info: PodInfo | None = None

    @property
    def node(self) -> str | None:
        return self.placement.node


class LiveCluster:
    """One cluster's scheduling state; see the module docstring."""

    def __init__(self, scheduler_name: str, *, queue: SchedulingQueue | None = None) -> None:
        self.scheduler_name = scheduler_name
        self.queue = queue or SchedulingQueue()
        self.nodes: dict[str, Mapping[str, Any]] = {}
        self.placed: dict[PodKey, _Placed] = {}
        self.usage: dict[str, tuple[dict[str, int], datetime | None]] = {}
        self.node_extra: dict[str, dict[str, str]] = {}
        self.cluster: ClusterState | None = None
        self.stale = True
        self.next_start = 0
        self.cpu_nodes = False
        self.rebuilds = 0
        self._facts: dict[str, tuple[Any, ...]] = {}
        self._schedulers: dict[int, tuple[Policy, Scheduler]] = {}
        self._augmented: dict[tuple[int, bool], tuple[Policy, Policy]] = {}
        self._templates: OrderedDict[str, PodInfo] = OrderedDict()

    # -- feeding ----------------------------------------------------------------------------

    def ours(self, pod: Mapping[str, Any]) -> bool:
        return (pod.get("spec") or {}).get("schedulerName") == self.scheduler_name

    def load(self, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], now: float) -> bool:
        """A full listing of both kinds: everything is taken from it but the pods whose bind is in
        flight or not echoed yet, which stay as they are unless the listing shows them bound."""
        self.stale = True
        self.nodes = {str((n.get("metadata") or {}).get("name") or ""): n for n in nodes}
        self._facts = {name: _filter_facts(node) for name, node in self.nodes.items()}
        unconfirmed = {key: placed for key, placed in self.placed.items() if placed.state != BOUND}
        self.placed = {}
        listed: dict[PodKey, Mapping[str, Any]] = {}
        for pod in pods:
            key = pod_key(pod)
            listed[key] = pod
            self._pod(key, pod, now)
        for key, placed in unconfirmed.items():
            if key in self.placed:
                continue  # the listing shows it bound: the listing wins
            pod = listed.get(key)
            same = pod is not None and _uid(pod) == placed.uid
            if placed.state == ASSUMED and (same or pod is None):
                self.placed[key] = placed  # its bind is in flight: its outcome decides
            elif placed.state == BOUND_UNSEEN and same:
                self.placed[key] = placed  # bound after the listing was read
                queued = self.queue.pods.get(key)
                if queued is not None and queued.uid == placed.uid and queued.where != IN_FLIGHT:
                    self.queue.delete(key)
        for key in [k for k, item in self.queue.pods.items() if k not in listed and item.where != IN_FLIGHT]:
            self.queue.delete(key)
        return True

    def node_event(self, kind: str, node: Mapping[str, Any]) -> bool:
        """An informer event of a node; True when waiting pods may now fit."""
        name = str((node.get("metadata") or {}).get("name") or "")
        if kind == "DELETED":
            if self.nodes.pop(name, None) is not None:
                self._facts.pop(name, None)
                self.stale = True
            return False
        facts = _filter_facts(node)
        known = name in self.nodes
        self.nodes[name] = node
        if not known or self._facts.get(name) != facts:
            self._facts[name] = facts
            self.stale = True
            return True
        self._annotations_changed(name)
        return False

    def pod_event(self, kind: str, pod: Mapping[str, Any], now: float) -> bool:
        """An informer event of a pod; True when waiting pods may now fit (resources freed)."""
        key = pod_key(pod)
        if kind == "DELETED":
            queued = self.queue.pods.get(key)
            if queued is not None and queued.uid == _uid(pod):
                self.queue.delete(key)
            return self._forget(key, _uid(pod))
        return self._pod(key, pod, now)

    def report_usage(self, name: str, usage: Mapping[str, int], at: datetime | None) -> None:
        """A node's usage report (NodeMetrics): kept, and given to the engine's node if newer."""
        self.usage[name] = (dict(usage), at)
        node = self.cluster.by_name.get(name) if self.cluster is not None and not self.stale else None
        if node is not None and (node.usage_time is None or at is None or at >= node.usage_time):
            node.report_usage(usage, at)

    def set_node_extra(self, name: str, annotations: Mapping[str, str] | None) -> None:
        """Annotations added to the node's view (``None``: none), e.g. its stored CPU state."""
        if annotations:
            self.node_extra[name] = dict(annotations)
        else:
            self.node_extra.pop(name, None)
        self._annotations_changed(name)

    # -- scheduling -------------------------------------------------------------------------

    def pending(self, now: float, limit: int) -> list[QueuedPod]:
        return self.queue.pop(now, limit)

    def state(self) -> ClusterState:
        """The engine's state, rebuilt first when the cluster changed in a way it cannot follow."""
        if self.stale or self.cluster is None:
            self._rebuild()
        assert self.cluster is not None
        return self.cluster

    def attempt(self, item: QueuedPod, policy: Policy) -> Attempt:
        """Place the pod under ``policy`` and assume it on the chosen node."""
        state = self.state()
        pod = item.pod
        try:
            info = self._info(pod)
            used = self._augment(policy, exclusive=_exclusive(pod))
            scheduler = self._scheduler(used, state)
            scheduler.next_start = self.next_start
            placement = scheduler.decide(info)
            self.next_start = scheduler.next_start
        except ValueError as exc:  # a pod the engine cannot read (upstream: a PreFilter error status)
            return Attempt(item, policy, Placement(None, reasons=f"pod cannot be scheduled: {exc}"))
        if placement.node is None:
            return Attempt(item, used, placement)
        assumed = scheduler.assume(info, placement.node)
        self.placed[item.key] = _Placed(assumed, placement.node, item.uid, _footprint(assumed.pod), ASSUMED)
        return Attempt(item, used, placement, assumed)

    def bind_succeeded(self, key: PodKey, uid: str, at: datetime, annotations: Mapping[str, str] | None = None) -> None:
        """The API server accepted the bind at ``at``: the pod counts as placed from then on (with
        the annotations written before the bind, e.g. its CPU set)."""
        placed = self.placed.get(key)
        if placed is None or placed.uid != uid or placed.state != ASSUMED:
            return  # deleted meanwhile, or the echo came first
        if annotations:
            pod = dict(placed.info.pod)
            meta = dict(pod.get("metadata") or {})
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
            pod["metadata"] = meta
            self._replace(key, placed, PodInfo(pod))
            placed = self.placed[key]
        placed.info.assumed = False
        placed.info.__dict__["placed_at"] = at  # the engine's cached property, set to the bind's time
        placed.state = BOUND_UNSEEN
        node = self.cluster.by_name.get(placed.node) if self.cluster is not None and not self.stale else None
        if node is not None:
            node._virtual_since = None

    def bind_failed(self, key: PodKey, uid: str) -> None:
        """The bind did not happen (refused, pod gone, an error): the assumed pod is taken away."""
        placed = self.placed.get(key)
        if placed is not None and placed.uid == uid and placed.state == ASSUMED:
            self._forget(key, uid)

    def maintain(self) -> None:
        """Keep a long-lived state's bookkeeping bounded (the engine's change list, its plans)."""
        if self.cluster is not None and len(self.cluster.changes) > MAX_CHANGES:
            self.cluster.trim_changes()
        for _, scheduler in self._schedulers.values():
            if len(scheduler._plans) > MAX_TEMPLATES:
                scheduler._plans.clear()

    def pods_on(self, node: str, *, besides: PodKey | None = None) -> list[Mapping[str, Any]]:
        """The pods the state counts on ``node`` (as objects), but ``besides``."""
        return [placed.info.pod for key, placed in self.placed.items() if placed.node == node and key != besides]

    def summary(self) -> dict[str, int]:
        counts = self.queue.counts()
        assumed = sum(1 for p in self.placed.values() if p.state == ASSUMED)
        return {"nodes": len(self.nodes), "pods": len(self.placed), "assumed": assumed,
                "rebuilds": self.rebuilds, **{f"queue_{k.replace('-', '_')}": v for k, v in counts.items()}}

    # -- internals --------------------------------------------------------------------------

    def _pod(self, key: PodKey, pod: Mapping[str, Any], now: float) -> bool:
        uid = _uid(pod)
        placed = self.placed.get(key)
        if placed is not None and placed.uid != uid:
            self._forget(key, placed.uid)  # another pod of the same name
            placed = None
        if _terminal(pod) or (not _node_name(pod) and (pod.get("metadata") or {}).get("deletionTimestamp")):
            queued = self.queue.pods.get(key)
            if queued is not None and queued.uid == uid:
                self.queue.delete(key)
            return self._forget(key, uid)
        node = _node_name(pod)
        if not node:
            if placed is not None:
                return False  # our bind is in flight; the echo will say how it went
            if self.ours(pod):
                self.queue.add(key, pod, now)
            return False
        queued = self.queue.pods.get(key)
        if queued is not None and queued.uid == uid:
            self.queue.delete(key)  # bound by somebody else meanwhile
        footprint = _footprint(pod)
        if placed is not None and placed.node == node:
            if placed.footprint == footprint:
                self._confirm(placed, pod)
                return False
            freed = self._replace(key, placed, PodInfo(pod))
            self.placed[key].state = BOUND
            return freed
        freed = self._forget(key, uid) if placed is not None else False
        info = PodInfo(pod)
        self.placed[key] = _Placed(info, node, uid, footprint, BOUND)
        target = self.cluster.by_name.get(node) if self.cluster is not None and not self.stale else None
        if target is not None:
            self.cluster.add_pod(info, target)  # type: ignore[union-attr]
            self.cluster.changes.append(target.index)  # type: ignore[union-attr]
        return freed

    def _confirm(self, placed: _Placed, pod: Mapping[str, Any]) -> None:
        """The watch shows the pod bound where it was assumed: it counts as placed since the API
        server bound it (unless the bind's answer already said when)."""
        if placed.info.assumed:
            placed.info.assumed = False
            placed.info.__dict__["placed_at"] = PodInfo(pod).placed_at
            node = self.cluster.by_name.get(placed.node) if self.cluster is not None and not self.stale else None
            if node is not None:
                node._virtual_since = None
        placed.state = BOUND

    def _forget(self, key: PodKey, uid: str) -> bool:
        """Take the pod out of the state; True when it held resources there."""
        placed = self.placed.get(key)
        if placed is None or placed.uid != uid:
            return False
        del self.placed[key]
        node = self.cluster.by_name.get(placed.node) if self.cluster is not None and not self.stale else None
        if node is not None and any(p is placed.info for p in node.pods):
            self.cluster.remove_pod(placed.info, node)  # type: ignore[union-attr]
            return True
        return placed.node in self.nodes

    def _replace(self, key: PodKey, placed: _Placed, info: PodInfo) -> bool:
        """Put ``info`` where ``placed`` was (same node): True when it may have freed resources."""
        freed = self._forget(key, placed.uid)
        new = _Placed(info, placed.node, placed.uid, _footprint(info.pod), placed.state)
        self.placed[key] = new
        node = self.cluster.by_name.get(placed.node) if self.cluster is not None and not self.stale else None
        if node is not None:
            self.cluster.add_pod(info, node)  # type: ignore[union-attr]
            self.cluster.changes.append(node.index)  # type: ignore[union-attr]
        return freed

    def _annotations_changed(self, name: str) -> None:
        """A node's annotations (or the extra ones) changed: its view is replaced in place."""
        if self.cluster is None or self.stale:
            return
        node = self.cluster.by_name.get(name)
        raw = self.nodes.get(name)
        if node is None or raw is None:
            return
        view = node_view(raw, self.node_extra.get(name))
        if view["metadata"]["annotations"] == (node.node.get("metadata") or {}).get("annotations"):
            return
        node.node = view
        node.generation += 1
        self.cluster.changes.append(node.index)
        if TOPOLOGY_ANNOTATION in view["metadata"]["annotations"]:
            self.cpu_nodes = True
        fresh = NodeInfo(node.index, view)
        reported = self.usage.get(name)
        newer = reported is None or (reported[1] and fresh.usage_time and fresh.usage_time > reported[1])
        if fresh.usage is not None and newer:
            node.report_usage(fresh.usage, fresh.usage_time)

    def _rebuild(self) -> None:
        views = []
        for name in sorted(self.nodes):
            view = node_view(self.nodes[name], self.node_extra.get(name))
            try:
                NodeInfo(0, view)
            except ValueError:
                continue  # a node the engine cannot read takes no pods
            views.append(view)
        state = ClusterState(views)
        for placed in self.placed.values():
            node = state.by_name.get(placed.node)
            if node is not None:
                state.add_pod(placed.info, node)
        for name, (usage, at) in self.usage.items():
            node = state.by_name.get(name)
            if node is not None and (node.usage_time is None or at is None or at >= node.usage_time):
                node.report_usage(usage, at)
        self.cpu_nodes = any(TOPOLOGY_ANNOTATION in (v["metadata"]["annotations"] or {}) for v in views)
        self.cluster = state
        self.stale = False
        self.rebuilds += 1
        self._schedulers.clear()

    def _scheduler(self, policy: Policy, state: ClusterState) -> Scheduler:
        found = self._schedulers.get(id(policy))
        if found is None or found[0] is not policy:
            found = self._schedulers[id(policy)] = (policy, Scheduler.over(policy, state))
        return found[1]

    def _augment(self, policy: Policy, *, exclusive: bool) -> Policy:
        if not exclusive and not self.cpu_nodes:
            return policy
        key = (id(policy), exclusive)
        found = self._augmented.get(key)
        if found is None or found[0] is not policy:
            found = self._augmented[key] = (policy, with_cpu_plugins(policy, exclusive=exclusive))
        return found[1]

    def _info(self, pod: Mapping[str, Any]) -> PodInfo:
        """The pod's PodInfo; a sibling of the first pod of the same template (replicas of one
        workload share their parsed requests and terms, ``PodInfo.sibling``)."""
        template = _template_key(pod)
        if template is None:
            return PodInfo(pod)
        first = self._templates.get(template)
        if first is None:
            first = self._templates[template] = PodInfo(pod)
            if len(self._templates) > MAX_TEMPLATES:
                self._templates.popitem(last=False)
            return first
        self._templates.move_to_end(template)
        return first.sibling(pod)


def _template_key(pod: Mapping[str, Any]) -> str | None:
    """Pods equal but for name and node (what ``PodInfo.sibling`` needs) share this key; None for
    a pod whose status carries resources (its requests are its own)."""
    status = pod.get("status") or {}
    if status.get("containerStatuses") or status.get("initContainerStatuses"):
        return None
    meta = pod.get("metadata") or {}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    try:
        return json.dumps([meta.get("namespace"), meta.get("labels"), meta.get("annotations"), spec, status.get("phase")],
                          sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
