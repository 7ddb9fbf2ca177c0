"""Meridian's CPU co-location plugins (scheduling.md, Part B), over plain node and pod dicts.

``CPUSetExclusive`` (filter + score)
    For pods with ``cpu-isolate-mode: exclusive``: a node passes when it can give the pod its
    CPU request as dedicated CPUs now (``cpu.fit.fits_exclusive``: the 2/3 per-instance cap,
    the sellable exclusive CPUs ``min(a, b)``, the free CPUs, ``machineMaxList``); the reason
    otherwise, e.g. ``"Insufficient exclusive cpu"``. A node without a CPU topology fails
    with ``"node(s) had no CPU topology"`` (UnschedulableAndUnresolvable). Score:
    ``cpu.fit.score_exclusive`` (best fit, locality, little stranding; 0..100). Other pods:
    PreFilter/PreScore Skip.
``CPUSetShared`` (filter)
    For other pods with a CPU request or limit on nodes that have a CPU topology: the node
    passes while the exclusive CPUs already sold stay sellable with the pod counted
    (``cpu.fit.fits_shared``), and ``machineMaxList`` allows it. Nodes without a topology pass.

Args (both): ``machineMaxList: [{"key": <app>, "value": <max per node>}]`` (the seed's
``resourceSet.spec.scheduleConfig.policy.machineMaxList``), ``appLabel`` (pod label naming
the app, default ``app``).

Node convention (what the node dict carries, all in ``metadata.annotations``):

* ``scheduling.meridian.io/cpu-topology``: ``{"cpus": [[cpu, socket, numa, core], ...]}``
  (required; published by the node, or the fleet simulator);
* ``scheduling.meridian.io/io-queue-cpus``, ``scheduling.meridian.io/reserved-cpus``,
  ``scheduling.meridian.io/cpu-overcommit-ratio`` (optional, as the node publishes them);
* ``scheduling.meridian.io/cpu-state`` (optional): Meridian's stored state of the node, for
  snapshots built from the database (``cpu_state_annotation``): ``{"exclusive": {"ns/name":
  {"cpus": [...], "app": ..., "strategy": ...}}, "shared": {"ns/name": {"requestMilli": n,
  "limitMilli": n, "app": ...}}, "disputed": {"ns/name": [...]}}``.

The pods on the node add to that state as their annotations say (``alloc-status`` holds
CPUs; ``cpu.state.rebuild_state``); an exclusive pod without ``alloc-status`` — one the
placement engine has just *assumed* there, or one not allocated yet — is allocated in pod
order with its ``alloc-spec`` strategy, exactly as Meridian's allocator would, so the next
pod of a simulation sees those CPUs gone. Pods named in ``cpu-state`` are not counted twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scheduling.args import as_mapping, check_fields
from scheduling.cluster import ClusterState, NodeInfo, PodInfo
from scheduling.cpu.cpuset import (
    IO_QUEUES_ANNOTATION,
    SAME_CORE_FIRST,
    TOPOLOGY_ANNOTATION,
    AllocationError,
    CPUTopology,
    IOQueueDistribution,
    TopologyError,
)
from scheduling.cpu.fit import fits_exclusive, fits_shared, score_exclusive
from scheduling.cpu.state import (
    ALLOC_SPEC,
    CPU_ISOLATE_MODE,
    EXCLUSIVE,
    ExclusiveAllocation,
    NodeCPUState,
    SharedInstance,
    StateError,
    parse_alloc_spec,
    rebuild_state,
)
from scheduling.plugins.base import NodeCheck, Plugin, Scorer
from scheduling.status import SKIP, UNRESOLVABLE, ArgsError, FieldError, Skip, Status

__all__ = ["CPU_STATE_ANNOTATION", "CPUSetExclusive", "CPUSetShared", "cpu_state_annotation", "node_cpu_state"]

CPU_STATE_ANNOTATION = "scheduling.meridian.io/cpu-state"
NO_TOPOLOGY = "node(s) had no CPU topology"
UNSCHEDULABLE = "Unschedulable"


# ------------------------------------------------------------------------ node state


def cpu_state_annotation(state: NodeCPUState) -> str:
    """The ``cpu-state`` annotation of a state (instances only; topology and settings travel in
    their own annotations)."""
    return json.dumps({
        "exclusive": {k: {"cpus": sorted(a.cpus), "app": a.app, "strategy": a.strategy} for k, a in state.exclusive.items()},
        "shared": {k: {"requestMilli": s.request_milli, "limitMilli": s.limit_milli, "app": s.app} for k, s in state.shared.items()},
        "disputed": {k: sorted(v) for k, v in state.disputed.items()},
    }, separators=(",", ":"), sort_keys=True)


def _annotations(node: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = node.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


_TOPOLOGIES: dict[tuple[str, str], CPUTopology] = {}


def _topology(annotations: Mapping[str, Any]) -> CPUTopology | None:
    text = annotations.get(TOPOLOGY_ANNOTATION)
    if not isinstance(text, str) or not text:
        return None
    queues = annotations.get(IO_QUEUES_ANNOTATION)
    queues = queues if isinstance(queues, str) else ""
    key = (text, queues)
    topology = _TOPOLOGIES.get(key)
    if topology is None:
        try:
            topology = CPUTopology.from_annotation(text)
            if queues:
                try:
                    topology = topology.with_io_queues(IOQueueDistribution.from_annotation(queues))
                except TopologyError:
                    pass  # an invalid distribution is ignored, as the reconciler refuses it
        except TopologyError:
            return None
        if len(_TOPOLOGIES) > 256:
            _TOPOLOGIES.clear()
        _TOPOLOGIES[key] = topology
    return topology


def _base(topology: CPUTopology, annotations: Mapping[str, Any], seed: NodeCPUState) -> NodeCPUState:
    """The ``cpu-state`` annotation's instances on the node's topology and settings."""
    text = annotations.get(CPU_STATE_ANNOTATION)
    if not isinstance(text, str) or not text:
        return seed
    try:
        data = json.loads(text)
        exclusive = {k: ExclusiveAllocation(k, frozenset(v["cpus"]), v.get("strategy") or SAME_CORE_FIRST, v.get("app", ""))
                     for k, v in (data.get("exclusive") or {}).items()}
        shared = {k: SharedInstance(k, int(v.get("requestMilli", 0)), int(v.get("limitMilli", 0)), v.get("app", ""))
                  for k, v in (data.get("shared") or {}).items()}
        disputed = {k: frozenset(v) for k, v in (data.get("disputed") or {}).items()}
        return NodeCPUState(topology, seed.reserved, exclusive, shared, seed.overcommit_ratio, disputed=disputed)
    except (ValueError, TypeError, KeyError, AttributeError, StateError):
        return seed


def node_cpu_state(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> NodeCPUState | None:
    """The node's CPU state from its annotations and the pods on it (see the module docstring)."""
    annotations = _annotations(node)
    topology = _topology(annotations)
    if topology is None:
        return None
    pods = [p for p in pods if isinstance(p, Mapping)]
    try:
        seed = rebuild_state(topology, pods, node_annotations={k: v for k, v in annotations.items() if isinstance(v, str)})
    except (StateError, ValueError):
        return None
    state = _base(topology, annotations, NodeCPUState(topology, seed.state.reserved, overcommit_ratio=seed.state.overcommit_ratio))
    known = set(state.exclusive) | set(state.shared) | set(state.disputed)
    for key, allocation in seed.state.exclusive.items():
        if key not in known and not allocation.cpus & state.held:
            state = state.with_exclusive(allocation)
    for key, instance in seed.state.shared.items():
        if key not in known and key not in state.exclusive:
            state = state.with_shared(instance)
    by_key = {_key(p): p for p in pods}
    for key in seed.unallocated:
        if key in known or key in state.exclusive:
            continue
        pod = by_key.get(key)
        request = _exclusive_request(PodInfo(pod)) if pod is not None else None
        if not request:
            continue
        try:
            state, _ = state.allocate_exclusive(key, request, _strategy(pod) or SAME_CORE_FIRST, _app(pod, "app"))
        except AllocationError:
            continue  # it does not fit any more: it holds nothing (the scheduler would not have put it here)
    return state


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _app(pod: Mapping[str, Any], label: str) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(label, "")) if isinstance(labels, Mapping) else ""


def _strategy(pod: Mapping[str, Any]) -> str | None:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ALLOC_SPEC)
    if not isinstance(text, str) or not text:
        return SAME_CORE_FIRST
    try:
        return parse_alloc_spec(text)
    except ValueError:
        return None


def _exclusive_request(pod: PodInfo) -> int | None:
    """The pod's CPU request in whole CPUs (exclusive CPUs are whole), None when it is not whole."""
    milli = pod.plain_requests.get("cpu", 0)
    if milli <= 0 or milli % 1000:
        return None
    return milli // 1000


def _state_for(cluster: ClusterState, node: NodeInfo) -> NodeCPUState | None:
    """Cached per node and change of its pods or annotations (``NodeInfo.generation``)."""
    key = ("cpu-state", node.index, node.generation)
    if key not in cluster.cache:
        for old in [k for k in cluster.cache if isinstance(k, tuple) and k[:2] == ("cpu-state", node.index)]:
            del cluster.cache[old]
        cluster.cache[key] = node_cpu_state(node.node, [p.pod for p in node.pods])
    return cluster.cache[key]


# ------------------------------------------------------------------------ args


def _machine_max(raw: Mapping[str, Any]) -> tuple[dict[str, int], str]:
    check_fields(raw, ("machineMaxList", "appLabel"))
    items = raw.get("machineMaxList") or []
    if not isinstance(items, list):
        raise ArgsError([FieldError.invalid("machineMaxList", type(items).__name__, "must be a list")])
    result: dict[str, int] = {}
    errors: list[FieldError | str] = []
    for i, item in enumerate(items):
        path = f"machineMaxList[{i}]"
        if not isinstance(item, Mapping):
            errors.append(FieldError.invalid(path, type(item).__name__, "must be an object"))
            continue
        key, value = item.get("key"), item.get("value")
        if not isinstance(key, str) or not key:
            errors.append(FieldError.required(f"{path}.key"))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(FieldError.invalid(f"{path}.value", value, "must be a positive integer"))
        if isinstance(key, str) and key and isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            result[key] = value
    label = raw.get("appLabel", "app")
    if not isinstance(label, str) or not label:
        errors.append(FieldError.invalid("appLabel", label, "must be a non-empty string"))
    if errors:
        raise ArgsError(errors)
    return result, label


def _exclusive(pod: PodInfo) -> bool:
    return pod.annotations.get(CPU_ISOLATE_MODE) == EXCLUSIVE


# ------------------------------------------------------------------------ plugins


class CPUSetExclusive(Plugin):
    name = "CPUSetExclusive"
    has_filter = True
    has_score = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.machine_max, self.app_label = _machine_max(as_mapping(args, ""))

    def _request(self, pod: PodInfo) -> tuple[int, str] | Status | Skip:
        """The exclusive pod's (CPUs, strategy); SKIP for a pod that is not exclusive."""
        if not _exclusive(pod):
            return SKIP
        strategy = _strategy(pod.pod)
        if strategy is None:
            return Status.of(UNRESOLVABLE, f"pod's {ALLOC_SPEC} names no CPU allocation strategy")
        request = _exclusive_request(pod)
        if request is None:
            return Status.of(UNRESOLVABLE, "exclusive pod's cpu request is not a whole number of CPUs")
        return request, strategy

    def prefilter(self, cluster: ClusterState, pod: PodInfo) -> NodeCheck | Status | Skip:
        wanted = self._request(pod)
        if not isinstance(wanted, tuple):
            return wanted
        request, strategy = wanted
        app = str(pod.labels.get(self.app_label, ""))

        def check(node: NodeInfo) -> Status | None:
            state = _state_for(cluster, node)
            if state is None:
                return Status.of(UNRESOLVABLE, NO_TOPOLOGY)
            fit = fits_exclusive(state, request, strategy, app, self.machine_max)
            return None if fit.ok else Status.of(UNSCHEDULABLE, fit.reason)

        return check

    def prescore(self, cluster: ClusterState, pod: PodInfo) -> Scorer | Skip:
        wanted = self._request(pod)
        if not isinstance(wanted, tuple):
            return SKIP
        request, strategy = wanted

        def scorer(nodes: Sequence[NodeInfo]) -> list[int]:
            out = []
            for node in nodes:
                state = _state_for(cluster, node)
                out.append(score_exclusive(state, request, strategy) if state is not None else 0)
            return out

        return scorer


class CPUSetShared(Plugin):
    name = "CPUSetShared"
    has_filter = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.machine_max, self.app_label = _machine_max(as_mapping(args, ""))

    def prefilter(self, cluster: ClusterState, pod: PodInfo) -> NodeCheck | Status | Skip:
        if _exclusive(pod):
            return SKIP
        limits = _limit_milli(pod)
        request = pod.plain_requests.get("cpu", 0)
        if not request and not limits:
            return SKIP
        app = str(pod.labels.get(self.app_label, ""))
        instance = SharedInstance(f"{pod.namespace or 'default'}/{pod.name}", request, limits, app)

        def check(node: NodeInfo) -> Status | None:
            state = _state_for(cluster, node)
            if state is None:
                return None
            fit = fits_shared(state, instance, self.machine_max)
            return None if fit.ok else Status.of(UNSCHEDULABLE, fit.reason)

        return check


def _limit_milli(pod: PodInfo) -> int:
    from kube.resources import pod_limits

    try:
        limit = pod_limits(pod.pod).get("cpu")
    except ValueError:
        return 0
    return limit.milli_value() if limit is not None else 0

