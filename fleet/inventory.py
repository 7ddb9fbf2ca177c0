"""Kubernetes objects (as connectors return them) → inventory facts, in plain Python.

One conversion path for real and simulated clusters. Nothing here touches the ORM: the
sync adapts these facts into rows. A malformed object never stops a sync: the bad part is
left out and described in ``Snapshot.errors``, which the cluster's status shows.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from kube.hashing import facts_digest
from kube.quantity import Quantity, QuantityError, parse_quantity
from kube.resources import PodSpecError, UnsupportedWorkloadError, pod_limits, pod_requests, workload_pod_template, workload_replicas

GPU = "nvidia.com/gpu"
CPU_TOPOLOGY_ANNOTATION = "scheduling.meridian.io/cpu-topology"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass
class NodeFacts:
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)
    unschedulable: bool = False
    ready: bool = False
    conditions: list[dict[str, str]] = field(default_factory=list)
    capacity: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    requested: dict[str, str] = field(default_factory=dict)
    cpu_capacity_milli: int = 0
    cpu_allocatable_milli: int = 0
    memory_allocatable_bytes: int = 0
    gpu_allocatable: int = 0
    pods_allocatable: int = 0
    cpu_requested_milli: int = 0
    memory_requested_bytes: int = 0
    gpu_requested: int = 0
    pod_count: int = 0
    cpu_usage_milli: int | None = None
    memory_usage_bytes: int | None = None
    usage_time: datetime | None = None
    cpu_topology: list[list[int]] | None = None
    kubelet_version: str = ""

    def row(self) -> dict[str, Any]:
        """Column values; the hash leaves out usage, which moves every sync and is written apart.

        A copy ``FactsMemo`` made (``_base``: the facts kept for an unchanged node) reuses the
        hash of the last row built from the same base when the values are the same again."""
        data = _shallow(self)
        usage = {k: data.pop(k) for k in USAGE_FIELDS}
        base = self.__dict__.get("_base")
        last = base.__dict__.get("_last_row") if base is not None else None
        if last is not None and last[0] == data:
            data["content_hash"] = last[1]
        else:
            digest = facts_digest(data)
            if base is not None:
                base.__dict__["_last_row"] = (dict(data), digest)
            data["content_hash"] = digest
        data.update(usage)
        return data


USAGE_FIELDS = ("cpu_usage_milli", "memory_usage_bytes", "usage_time")


@dataclass
class WorkloadFacts:
    namespace: str
    api_version: str
    kind: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    replicas: int = 0
    ready_replicas: int = 0
    pod_requests: dict[str, str] = field(default_factory=dict)
    pod_limits: dict[str, str] = field(default_factory=dict)
    cpu_request_milli: int = 0
    memory_request_bytes: int = 0
    gpu_request: int = 0
    status: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.kind, self.name)

    def row(self) -> dict[str, Any]:
        data = _shallow(self)
        data["content_hash"] = facts_digest(data)
        return data


@dataclass
class PodFacts:
    namespace: str
    name: str
    uid: str
    node_name: str = ""
    owner_kind: str = ""
    owner_name: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    phase: str = ""
    requests: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)
    cpu_request_milli: int = 0
    memory_request_bytes: int = 0
    gpu_request: int = 0
    started_at: str | None = None
    finished_at: str | None = None

    @property
    def holds_node_resources(self) -> bool:
        return bool(self.node_name) and self.phase not in TERMINAL_PHASES

    def row(self) -> dict[str, Any]:
        """Column values; the hash is computed once per facts object (``FactsMemo`` keeps the
        object of an unchanged pod from one sync to the next)."""
        data = _shallow(self)
        digest = self.__dict__.get("_digest")
        if digest is None:
            digest = self.__dict__["_digest"] = facts_digest(data)
        data["content_hash"] = digest
        return data


@dataclass
class Snapshot:
    nodes: dict[str, NodeFacts] = field(default_factory=dict)
    workloads: dict[tuple[str, str, str], WorkloadFacts] = field(default_factory=dict)
    pods: dict[str, PodFacts] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


# --- helpers -----------------------------------------------------------------------------


def _shallow(facts: Any) -> dict[str, Any]:
    """Field values without dataclasses.asdict's deep copy (rows are built once and dropped)."""
    names = _FIELD_NAMES.get(type(facts))
    if names is None:
        names = _FIELD_NAMES[type(facts)] = tuple(f.name for f in fields(facts))
    return {name: getattr(facts, name) for name in names}


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}


def _canonical_resources(value: Any, where: str, errors: list[str]) -> dict[str, Quantity]:
    """Parse a ResourceList, dropping (and reporting) the entries that are not quantities."""
    parsed: dict[str, Quantity] = {}
    if not isinstance(value, Mapping):
        return parsed
    for name, text in value.items():
        try:
            parsed[str(name)] = parse_quantity(text if isinstance(text, str) else str(text))
        except QuantityError as exc:
            errors.append(f"{where}: {name}: {exc}")
    return parsed


def _strings(resources: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(q) for name, q in sorted(resources.items())}


def _milli(resources: Mapping[str, Quantity], name: str) -> int:
    q = resources.get(name)
    return q.milli_value() if q is not None else 0


def _whole(resources: Mapping[str, Quantity], name: str) -> int:
    q = resources.get(name)
    return q.value() if q is not None else 0


# --- nodes -------------------------------------------------------------------------------


def node_facts(obj: Mapping[str, Any], errors: list[str]) -> NodeFacts | None:
    """Facts of a v1 Node; None (with an error) when it has no name."""
    meta = _meta(obj)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        errors.append("node without metadata.name skipped")
        return None
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    where = f"node {name}"
    capacity = _canonical_resources(status.get("capacity"), f"{where} status.capacity", errors)
    allocatable = _canonical_resources(status.get("allocatable"), f"{where} status.allocatable", errors)
    conditions = [
        {k: str(c.get(k, "")) for k in ("type", "status", "reason", "message")}
        for c in status.get("conditions") or []
        if isinstance(c, Mapping)
    ]
    node_info = status.get("nodeInfo") if isinstance(status.get("nodeInfo"), Mapping) else {}
    return NodeFacts(
        name=name,
        uid=str(meta.get("uid") or ""),
        labels=_str_map(meta.get("labels")),
        taints=[dict(t) for t in spec.get("taints") or [] if isinstance(t, Mapping)],
        unschedulable=bool(spec.get("unschedulable")),
        ready=any(c["type"] == "Ready" and c["status"] == "True" for c in conditions),
        conditions=conditions,
        capacity=_strings(capacity),
        allocatable=_strings(allocatable),
        cpu_capacity_milli=_milli(capacity, "cpu"),
        cpu_allocatable_milli=_milli(allocatable, "cpu"),
        memory_allocatable_bytes=_whole(allocatable, "memory"),
        gpu_allocatable=_whole(allocatable, GPU),
        pods_allocatable=_whole(allocatable, "pods"),
        cpu_topology=_cpu_topology(_str_map(meta.get("annotations")).get(CPU_TOPOLOGY_ANNOTATION), where, errors),
        kubelet_version=str(node_info.get("kubeletVersion") or ""),
    )


def _cpu_topology(text: str | None, where: str, errors: list[str]) -> list[list[int]] | None:
    if not text:
        return None
    rows = _parse_topology(text)
    if rows is None:
        errors.append(f"{where}: annotation {CPU_TOPOLOGY_ANNOTATION} is not {{\"cpus\": [[cpu, socket, numa, core], ...]}}")
    return rows


@lru_cache(maxsize=256)
def _parse_topology(text: str) -> list[list[int]] | None:
    """Nodes of one machine model publish the same topology: parse each text once."""
    try:
        rows = json.loads(text)["cpus"]
        if all(isinstance(r, list) and len(r) == 4 and all(isinstance(x, int) for x in r) for r in rows):
            return rows
    except (ValueError, KeyError, TypeError):
        pass
    return None


def apply_node_metrics(nodes: Mapping[str, NodeFacts], metrics: Iterable[Mapping[str, Any]], errors: list[str]) -> None:
    for item in metrics:
        node = nodes.get(str(_meta(item).get("name", "")))
        if node is None:
            continue
        usage = _canonical_resources(item.get("usage"), f"node {node.name} metrics", errors)
        node.cpu_usage_milli = _milli(usage, "cpu") if "cpu" in usage else None
        node.memory_usage_bytes = _whole(usage, "memory") if "memory" in usage else None
        node.usage_time = parse_time(item.get("timestamp")) if usage else None


# --- pods and workloads --------------------------------------------------------------------


def _controller(meta: Mapping[str, Any]) -> tuple[str, str]:
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return "", ""


def _finished_at(status: Mapping[str, Any]) -> str | None:
    times = [
        s["state"]["terminated"].get("finishedAt")
        for s in status.get("containerStatuses") or []
        if isinstance(s, Mapping) and isinstance(s.get("state"), Mapping) and isinstance(s["state"].get("terminated"), Mapping)
    ]
    times = [t for t in times if isinstance(t, str)]
    return max(times) if times else None


@dataclass(frozen=True, slots=True)
class _PodResources:
    """What a pod's facts say of its requests and limits (shared by pods with the same parts:
    never changed in place)."""

    requests: dict[str, str]
    limits: dict[str, str]
    cpu_request_milli: int
    memory_request_bytes: int
    gpu_request: int

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> _PodResources:
        requests, limits = pod_requests(pod), pod_limits(pod)
        return cls(_strings(requests), _strings(limits), _milli(requests, "cpu"), _whole(requests, "memory"), _whole(requests, GPU))


_NO_RESOURCES = _PodResources({}, {}, 0, 0, 0)


class _ResourceMemo:
    """Requests and limits of pods whose specs share the parts they are computed from (the very
    same container list objects: replicas as the simulator, or an informer cache, hands them
    out), computed once per such part set. The memo keeps those parts alive, so an id it is
    keyed on cannot be reused by another object while it lives."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, ...], tuple[tuple[Any, ...], _PodResources]] = {}

    def get(self, pod: Mapping[str, Any], spec: Mapping[str, Any]) -> _PodResources:
        get = spec.get
        parts = (get("containers"), get("initContainers"), get("resources"), get("overhead"))
        if not isinstance(parts[0], list) or spec is not pod.get("spec"):  # nothing shared worth keying on
            return _PodResources.of(pod)
        key = (id(parts[0]), id(parts[1]), id(parts[2]), id(parts[3]))
        known = self._known.get(key)
        if known is not None:
            return known[1]
        resources = _PodResources.of(pod)
        self._known[key] = (parts, resources)
        return resources


def pod_facts(obj: Mapping[str, Any], errors: list[str], memo: _ResourceMemo | None = None) -> PodFacts | None:
    meta = _meta(obj)
    name, namespace, uid = meta.get("name"), meta.get("namespace") or "default", meta.get("uid")
    if not isinstance(name, str) or not isinstance(uid, str) or not uid:
        errors.append(f"pod {name or '?'} without name or uid skipped")
        return None
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    try:
        resources = memo.get(obj, spec) if memo is not None else _PodResources.of(obj)
    except (QuantityError, PodSpecError) as exc:
        errors.append(f"pod {namespace}/{name}: {exc}")
        resources = _NO_RESOURCES
    owner_kind, owner_name = _controller(meta)
    phase = str(status.get("phase") or "Pending")
    return PodFacts(
        namespace=str(namespace), name=name, uid=uid, node_name=str(spec.get("nodeName") or ""),
        owner_kind=owner_kind, owner_name=owner_name, labels=_str_map(meta.get("labels")), phase=phase,
        requests=resources.requests, limits=resources.limits, cpu_request_milli=resources.cpu_request_milli,
        memory_request_bytes=resources.memory_request_bytes, gpu_request=resources.gpu_request,
        started_at=status.get("startTime") if isinstance(status.get("startTime"), str) else None,
        finished_at=_finished_at(status) if phase in TERMINAL_PHASES else None,
    )


def _workload_status(kind: str, replicas: int, ready: int, status: Mapping[str, Any]) -> str:
    if kind == "Job":
        if status.get("succeeded") and not status.get("active"):
            return "Complete"
        return "Failed" if status.get("failed") and not status.get("active") else "Running"
    if replicas == 0:
        return "ScaledDown"
    return "Available" if ready >= replicas else ("Degraded" if ready else "Unavailable")


def workload_facts(obj: Mapping[str, Any], errors: list[str]) -> WorkloadFacts | None:
    meta = _meta(obj)
    kind, name = str(obj.get("kind", "")), meta.get("name")
    namespace = str(meta.get("namespace") or "default")
    if not isinstance(name, str) or not name:
        errors.append(f"{kind or 'workload'} without metadata.name skipped")
        return None
    where = f"{kind} {namespace}/{name}"
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    try:
        replicas = workload_replicas(obj)
        template = workload_pod_template(obj)
        requests, limits = pod_requests(template), pod_limits(template)
    except (QuantityError, PodSpecError, UnsupportedWorkloadError, ValueError) as exc:
        errors.append(f"{where}: {exc}")
        return None
    ready = int(status.get("readyReplicas") or status.get("active") or 0) if isinstance(status, Mapping) else 0
    return WorkloadFacts(
        namespace=namespace, api_version=str(obj.get("apiVersion", "")), kind=kind, name=name, uid=str(meta.get("uid") or ""),
        labels=_str_map(meta.get("labels")), replicas=replicas, ready_replicas=ready,
        pod_requests=_strings(requests), pod_limits=_strings(limits),
        cpu_request_milli=_milli(requests, "cpu"), memory_request_bytes=_whole(requests, "memory"), gpu_request=_whole(requests, GPU),
        status=_workload_status(kind, replicas, ready, status),
    )


# --- whole snapshot ------------------------------------------------------------------------


class FactsMemo:
    """Facts of the nodes and pods an informer cache keeps from one sync to the next.

    The cache hands out the very same dict for an object that did not change (a watch event
    replaces it), so facts keyed on the dict's identity are computed once per change instead
    of once per sync: a watched 10,000-node cluster is written a moment after each change,
    and parsing every object again was most of that moment. Each build keeps only the
    objects it saw (and holds them, so no id is reused by another dict while keyed on); facts
    whose object reported an error are not kept, so the error is reported every sync.
    """

    def __init__(self) -> None:
        self._nodes: dict[int, tuple[Mapping[str, Any], NodeFacts]] = {}
        self._pods: dict[int, tuple[Mapping[str, Any], PodFacts]] = {}
        self._seen_nodes: dict[int, tuple[Mapping[str, Any], NodeFacts]] = {}
        self._seen_pods: dict[int, tuple[Mapping[str, Any], PodFacts]] = {}

    def node(self, obj: Mapping[str, Any], errors: list[str]) -> NodeFacts | None:
        """A copy of the node's facts (a build adds its pods' requests to them)."""
        known = self._nodes.get(id(obj))
        if known is None or known[0] is not obj:
            reported = len(errors)
            facts = node_facts(obj, errors)
            if facts is None or len(errors) > reported:
                return facts
            known = (obj, facts)
        self._seen_nodes[id(obj)] = known
        copied = copy.copy(known[1])  # shallow: a build rebinds fields of it, never changes one in place
        copied.__dict__["_base"] = known[1]
        return copied

    def pod(self, obj: Mapping[str, Any], errors: list[str], resources: _ResourceMemo,
            replica_set_owner: Mapping[tuple[str, str], tuple[str, str]]) -> PodFacts | None:
        """The pod's facts, owned by the workload above its ReplicaSet (``_owned``)."""
        known = self._pods.get(id(obj))
        if known is None or known[0] is not obj:
            reported = len(errors)
            facts = pod_facts(obj, errors, resources)
            if facts is None or len(errors) > reported:
                return _owned(facts, replica_set_owner)
            known = (obj, facts)
        owned = _owned(known[1], replica_set_owner)
        if owned is not known[1] and known[1].__dict__.get("_owned") == (owned.owner_kind, owned.owner_name):
            owned = known[1].__dict__["_owned_facts"]  # the same rewrite as last time: its row is known
        else:
            known[1].__dict__.update(_owned=(owned.owner_kind, owned.owner_name), _owned_facts=owned)
        self._seen_pods[id(obj)] = known
        return owned

    def built(self) -> None:
        """A build is over: keep what it saw, drop the rest."""
        self._nodes, self._seen_nodes = self._seen_nodes, {}
        self._pods, self._seen_pods = self._seen_pods, {}


#: Pods between two calls of ``build_snapshot``'s ``between``.
BETWEEN_EVERY = 2000


def build_snapshot(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    workloads: Iterable[Mapping[str, Any]],
    metrics: Iterable[Mapping[str, Any]] = (),
    memo: FactsMemo | None = None,
    between: Callable[[], None] | None = None,
) -> Snapshot:
    """Everything one sync writes, with per-node requested totals from the pods on it
    (``memo``: facts kept from the previous build of the same informer cache; ``between``:
    called every ``BETWEEN_EVERY`` pods, as ``Connector.between``)."""
    snap = Snapshot()
    for obj in nodes:
        facts = memo.node(obj, snap.errors) if memo is not None else node_facts(obj, snap.errors)
        if facts is not None:
            snap.nodes[facts.name] = facts
    apply_node_metrics(snap.nodes, metrics, snap.errors)
    replica_set_owner: dict[tuple[str, str], tuple[str, str]] = {}
    for obj in workloads:
        owner = _controller(_meta(obj))
        if obj.get("kind") == "ReplicaSet" and owner[0]:
            replica_set_owner[(str(_meta(obj).get("namespace") or "default"), str(_meta(obj).get("name")))] = owner
            continue
        facts = workload_facts(obj, snap.errors)
        if facts is not None:
            snap.workloads[facts.key] = facts
    resources = _ResourceMemo()
    for i, obj in enumerate(pods):
        if between is not None and i % BETWEEN_EVERY == 0:
            between()
        if memo is not None:
            facts = memo.pod(obj, snap.errors, resources, replica_set_owner)
        else:
            facts = _owned(pod_facts(obj, snap.errors, resources), replica_set_owner, in_place=True)
        if facts is not None:
            snap.pods[facts.uid] = facts
    if memo is not None:
        memo.built()
    _sum_requested(snap)
    return snap


def _owned(facts: PodFacts | None, replica_set_owner: Mapping[tuple[str, str], tuple[str, str]], *,
           in_place: bool = False) -> PodFacts | None:
    """A pod of a ReplicaSet that a Deployment owns counts as the Deployment's: a copy of facts
    a memo keeps, the facts themselves when only this build has them (a million pods: no copies)."""
    if facts is None or facts.owner_kind != "ReplicaSet":
        return facts
    owner = replica_set_owner.get((facts.namespace, facts.owner_name))
    if owner is None:
        return facts
    if in_place:
        facts.owner_kind, facts.owner_name = owner
        return facts
    return replace(facts, owner_kind=owner[0], owner_name=owner[1])


def _sum_requested(snap: Snapshot) -> None:
    """Each node's pods' requests, added in pod order. A requests dict pods share (replicas'
    ``_PodResources``) is parsed once: the snapshot holds it, so its id names it meanwhile."""
    totals: dict[str, dict[str, Quantity]] = {}
    parsed: dict[int, list[tuple[str, Quantity]]] = {}
    for pod in snap.pods.values():
        node = snap.nodes.get(pod.node_name) if pod.holds_node_resources else None
        if node is None:
            continue
        node.pod_count += 1
        node.cpu_requested_milli += pod.cpu_request_milli
        node.memory_requested_bytes += pod.memory_request_bytes
        node.gpu_requested += pod.gpu_request
        per_node = totals.setdefault(node.name, {})
        quantities = parsed.get(id(pod.requests))
        if quantities is None:
            quantities = parsed[id(pod.requests)] = [(resource, parse_quantity(text)) for resource, text in pod.requests.items()]
        for resource, q in quantities:
            per_node[resource] = per_node[resource] + q if resource in per_node else q
    for name, resources in totals.items():
        snap.nodes[name].requested = _strings(resources)


def parse_time(text: Any) -> datetime | None:
    """RFC 3339 timestamps as the API server writes them (``Z`` suffix included); None for
    anything else (a malformed object's timestamp never stops a sync)."""
    return _parse_time_text(text) if isinstance(text, str) and text else None


@lru_cache(maxsize=4096)
def _parse_time_text(text: str) -> datetime | None:
    """Kept per text: a workload's pods start at the same second, and a sync reads a million."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
