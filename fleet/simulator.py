"""A deterministic fleet simulator (in the spirit of KWOK) for the demo, tests and benchmarks.

A simulated cluster is a pure function of its ``ClusterSpec`` (seed included), the current
*tick* (``int(now // tick_seconds)``) and the objects applied to it (the overlay). Nothing
is kept between calls, so any process — web, worker, benchmark — sees the same cluster
without sharing state, and a seed reproduces a fleet exactly. Output is Kubernetes API
objects as plain dicts, so the inventory sync handles it exactly like a real cluster.

Motion over time: node usage follows a diurnal curve with per-node phase and noise; every
churn window (``CHURN_TICKS`` ticks) a few nodes leave, a few spare nodes join, a few change
their ``pool`` label or go NotReady; Job runs start, finish (``Succeeded`` with finish times)
and are replaced by the next run; an applied Deployment whose pod template changed rolls out
over several ticks as the kube-controller-manager would (see ``rollout_step``), from the
history the connector records on it as annotations (``ROLLOUT_FROM`` …).
"""

from __future__ import annotations

import json
import math
import random
from hashlib import blake2b
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from kube.hashing import fnv32a
from kube.jsonpatch import merge_patch

from .inventory import CPU_TOPOLOGY_ANNOTATION, GPU

CHURN_TICKS = 40
EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: creation times are stable across runs
TOPOLOGY_ANNOTATION = CPU_TOPOLOGY_ANNOTATION


@dataclass(frozen=True)
class MachineModel:
    name: str
    cores: int  # logical CPUs
    memory_gi: int
    numa_per_socket: int
    weight: int


#: Machine models A1–A4 (logical CPUs, memory), as the seed documents name them.
MACHINE_MODELS = (
    MachineModel("A1", 32, 128, 1, 2),
    MachineModel("A2", 48, 192, 1, 3),
    MachineModel("A3", 64, 256, 2, 4),
    MachineModel("A4", 96, 384, 2, 3),
)
GPU_MODELS = (("T4", 4), ("V100", 8), ("A30", 8), ("A100", 8))
POOLS = ("online", "online", "offline", "mixed")
NAMESPACES = ("search", "ads", "payments", "ml-training", "recsys", "video", "infra")
WORDS = ("api", "gateway", "cache", "indexer", "ranker", "feed", "auth", "billing", "ingest", "render", "etl", "trainer")
QUOTA_GROUPS = ("vision", "vision-detection", "vision-ocr", "search-core", "ads-serving", "recsys-online")
CPU_CHOICES = ("500m", "1", "2", "2", "4", "4", "8", "16")
MEMORY_CHOICES = ("1Gi", "2Gi", "4Gi", "8Gi", "16Gi", "32Gi")
SYSTEM_RESERVED_MILLI = 500
SYSTEM_RESERVED_MI = 2048


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    region: str
    node_count: int
    seed: int
    zones: int = 3
    gpu_fraction: float = 0.1
    workloads_per_100_nodes: int = 40
    churn_rate: float = 0.002
    label_change_rate: float = 0.002
    not_ready_rate: float = 0.003
    tick_seconds: float = 15.0
    kubernetes_version: str = "v1.31.4"

    def tick(self, now: float) -> int:
        return int(now // self.tick_seconds)


def demo_fleet(seed: int = 7, clusters: int = 5, nodes: int = 2000) -> list[ClusterSpec]:
    """A small fleet of unevenly sized clusters whose node counts add up to ``nodes``."""
    regions = ("bj", "sh", "gz", "sz", "hz")
    rng = random.Random(f"demo:{seed}")
    weights = [rng.uniform(0.5, 1.5) for _ in range(clusters)]
    sizes = [max(1, int(nodes * w / sum(weights))) for w in weights]
    sizes[0] += nodes - sum(sizes)
    return [ClusterSpec(name=f"{regions[i % len(regions)]}-{i // len(regions) + 1}", region=regions[i % len(regions)],
                        node_count=sizes[i], seed=seed * 1000 + i) for i in range(clusters)]


def large_fleet(seed: int = 42, clusters: int = 500, nodes: int = 200_000) -> list[ClusterSpec]:
    regions = ("bj", "sh", "gz", "sz", "hz", "cd", "wh", "xa")
    per, extra = divmod(nodes, clusters)
    return [ClusterSpec(name=f"{regions[i % len(regions)]}-{i:03d}", region=regions[i % len(regions)],
                        node_count=per + (1 if i < extra else 0), seed=seed * 100_000 + i) for i in range(clusters)]


def unit(*parts: object) -> float:
    """A stable pseudo-random number in [0, 1) for the given parts: BLAKE2 (fast, in C, well
    mixed — CRC-32 is linear and correlates similar inputs) and the same in every process."""
    return int.from_bytes(blake2b(":".join(map(str, parts)).encode(), digest_size=4).digest()) / 2**32


@lru_cache(maxsize=8192)
def iso(seconds: float) -> str:
    """RFC 3339 in UTC, as the API server writes times (kept: a cluster's pods and metrics
    repeat a few instants)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=16)
def cpu_topology(model: MachineModel) -> str:
    """Linux-style numbering: thread 0 of every core first, then their hyper-thread siblings."""
    sockets, physical = 2, model.cores // 2
    per_socket = physical // sockets
    per_numa = per_socket // model.numa_per_socket
    rows = []
    for thread in range(2):
        for core in range(physical):
            socket = core // per_socket
            numa = socket * model.numa_per_socket + (core % per_socket) // per_numa
            rows.append([thread * physical + core, socket, numa, core])
    return json.dumps({"cpus": rows}, separators=(",", ":"))


# --- nodes -----------------------------------------------------------------------------------


@dataclass
class SimNode:
    """The scheduling view of a node, plus the object the API would return."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    cpu_milli: int
    memory_mi: int
    gpus: int
    schedulable: bool
    ready: bool
    used_cpu: int = 0
    used_memory: int = 0
    used_gpus: int = 0
    pods: int = 0
    obj: dict[str, Any] = field(default_factory=dict)


def _model_for(rng_value: float) -> MachineModel:
    total = sum(m.weight for m in MACHINE_MODELS)
    acc = 0.0
    for model in MACHINE_MODELS:
        acc += model.weight / total
        if rng_value < acc:
            return model
    return MACHINE_MODELS[-1]


def _node(spec: ClusterSpec, index: int, window: int, patches: Mapping[str, Mapping[str, Any]]) -> SimNode:
    model = _model_for(unit(spec.seed, index, "model"))
    name = f"{spec.name}-{model.name.lower()}-{index:05d}"
    zone = f"{spec.region}-{'abcdefgh'[index % spec.zones]}"
    pool = POOLS[int(unit(spec.seed, index, "pool") * len(POOLS))]
    if unit(spec.seed, index, window, "relabel") < spec.label_change_rate * 20:
        pool = POOLS[int(unit(spec.seed, index, window, "pool") * len(POOLS))]
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/region": spec.region, "topology.kubernetes.io/zone": zone,
        "node.kubernetes.io/instance-type": f"{model.name.lower()}.{model.cores}c{model.memory_gi}g",
        "machineModel": model.name, "diskMode": "hdd" if unit(spec.seed, index, "disk") < 0.4 else "ssd", "pool": pool,
    }
    taints: list[dict[str, str]] = []
    gpus = 0
    if unit(spec.seed, index, "gpu") < spec.gpu_fraction:
        gpu_model, gpus = GPU_MODELS[int(unit(spec.seed, index, "gpumodel") * len(GPU_MODELS))]
        labels["gpuModel"] = gpu_model
        taints.append({"key": GPU, "value": "present", "effect": "NoSchedule"})
    schedulable = unit(spec.seed, index, "cordon") >= 0.005
    ready = unit(spec.seed, index, window, "ready") >= spec.not_ready_rate
    node = SimNode(name, labels, taints, model.cores * 1000 - SYSTEM_RESERVED_MILLI, model.memory_gi * 1024 - SYSTEM_RESERVED_MI,
                   gpus, schedulable, ready)
    node.obj = _node_object(spec, index, model, node)
    patch = patches.get(name)
    if patch:
        node.obj = merge_patch(node.obj, patch)
        node.labels = dict(node.obj["metadata"].get("labels") or {})
        node.schedulable = not node.obj.get("spec", {}).get("unschedulable", False)
        node.taints = list(node.obj.get("spec", {}).get("taints") or [])
    return node


def _node_object(spec: ClusterSpec, index: int, model: MachineModel, node: SimNode) -> dict[str, Any]:
    capacity = {"cpu": str(model.cores), "memory": f"{model.memory_gi}Gi", "pods": "110", "ephemeral-storage": "1800Gi"}
    allocatable = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mi}Mi", "pods": "110", "ephemeral-storage": "1700Gi"}
    if node.gpus:
        capacity[GPU] = allocatable[GPU] = str(node.gpus)
    spec_obj: dict[str, Any] = {"podCIDR": f"10.{index // 256 % 256}.{index % 256}.0/24"}
    if node.taints:
        spec_obj["taints"] = node.taints
    if not node.schedulable:
        spec_obj["unschedulable"] = True
    condition = {"type": "Ready", "status": "True" if node.ready else "False",
                 "reason": "KubeletReady" if node.ready else "NodeStatusUnknown",
                 "message": "kubelet is posting ready status" if node.ready else "Kubelet stopped posting node status."}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": node.name, "uid": _uid(spec.seed, "node", index), "labels": node.labels,
            "annotations": {TOPOLOGY_ANNOTATION: cpu_topology(model)},
            "creationTimestamp": iso(EPOCH + index * 37),
        },
        "spec": spec_obj,
        "status": {"capacity": capacity, "allocatable": allocatable, "conditions": [condition],
                   "nodeInfo": {"kubeletVersion": spec.kubernetes_version, "containerRuntimeVersion": "containerd://1.7.22",
                                "osImage": "Debian GNU/Linux 12 (bookworm)", "architecture": "amd64"}},
    }


def _uid(*parts: object) -> str:
    """A stable RFC 4122-shaped uid for the given parts: BLAKE2 in C, one call per object (the
    simulator makes one per pod, so four pure-Python FNV loops here were a third of a cluster's build)."""
    h = blake2b(repr(parts).encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def node_indices(spec: ClusterSpec, window: int) -> list[int]:
    """Which node indices exist in a churn window: most base nodes, minus leavers, plus joiners.

    A cluster without churn keeps exactly its nodes: no spare joins it either."""
    spare = max(1, int(spec.node_count * spec.churn_rate * 5)) if spec.churn_rate > 0 else 0
    present = [i for i in range(spec.node_count) if unit(spec.seed, i, window, "leave") >= spec.churn_rate]
    present += [i for i in range(spec.node_count, spec.node_count + spare) if unit(spec.seed, i, window, "join") < 0.5]
    return present


# --- workloads -------------------------------------------------------------------------------

WORKLOAD_API = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


def _container(name: str, cpu: str, memory: str, gpus: int = 0) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    limits = {"cpu": cpu, "memory": memory}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    return {"name": name, "image": f"registry.example.com/{name}:1.{len(name)}", "resources": {"requests": requests, "limits": limits}}


def _base_workload(spec: ClusterSpec, index: int, tick: int) -> dict[str, Any]:
    rng = random.Random(f"{spec.seed}:workload:{index}")
    kind = rng.choices(("Deployment", "StatefulSet", "Job"), weights=(70, 15, 15))[0]
    namespace = rng.choice(NAMESPACES)
    name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{index}"
    labels = {"app": name, "team": namespace}
    gpus = rng.choice((1, 2, 4, 8)) if rng.random() < 0.06 else 0
    pod_spec: dict[str, Any] = {"containers": [_container(name, rng.choice(CPU_CHOICES), rng.choice(MEMORY_CHOICES), gpus)]}
    if gpus:
        gpu_model = rng.choice(GPU_MODELS)[0]
        pod_spec["nodeSelector"] = {"gpuModel": gpu_model}
        pod_spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
        labels["biz.group.resource.quota"] = rng.choice(QUOTA_GROUPS[:3])
        labels["biz.group.resource.quota/gpu-type"] = gpu_model
    elif rng.random() < 0.4:
        labels["biz.group.resource.quota"] = rng.choice(QUOTA_GROUPS)
        if rng.random() < 0.5:
            model = rng.choice(MACHINE_MODELS).name
            labels["biz.group.resource.quota/cpu-type"] = model
            pod_spec["nodeSelector"] = {"machineModel": model}
    if rng.random() < 0.15:
        pod_spec["initContainers"] = [dict(_container("log-agent", "100m", "128Mi"), restartPolicy="Always")]
    template = {"metadata": {"labels": dict(labels)}, "spec": pod_spec}
    obj: dict[str, Any] = {
        "apiVersion": WORKLOAD_API[kind], "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": _uid(spec.seed, "workload", index), "labels": labels,
                     "creationTimestamp": iso(EPOCH + index * 61), "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template},
    }
    if kind == "Job":
        period = rng.randint(60, 240)
        run = tick // period
        obj["metadata"]["name"] = f"{name}-{run}"
        obj["metadata"]["uid"] = _uid(spec.seed, "job", index, run)
        obj["metadata"]["creationTimestamp"] = iso(run * period * spec.tick_seconds)
        obj["metadata"]["annotations"] = {"sim.meridian.io/run-start-tick": str(run * period),
                                          "sim.meridian.io/run-ticks": str(rng.randint(period // 3, period - 5))}
        obj["spec"].update(parallelism=rng.randint(1, 8), completions=None, backoffLimit=2)
        obj["spec"].pop("completions")
        pod_spec["restartPolicy"] = "Never"
    else:
        obj["spec"]["replicas"] = rng.randint(4, 28) if kind == "Deployment" else rng.randint(2, 8)
        if kind == "StatefulSet":
            obj["spec"]["serviceName"] = name
    return obj


# --- Deployment rollouts -------------------------------------------------------------------

#: Annotations ``SimulatedConnector.apply`` keeps on a stored Deployment (the connector owns
#: them: whatever a caller sends under these keys is replaced). When an apply changes the
#: pod template (by ``template_hash``), it records the hash and the body of the template the
#: rollout starts from and the tick of that apply; ``deployment.kubernetes.io/revision``
#: counts template changes like the kube-controller-manager's (1 on create).
ROLLOUT_FROM = "sim.meridian.io/rollout-from"
ROLLOUT_FROM_TEMPLATE = "sim.meridian.io/rollout-from-template"
ROLLOUT_START = "sim.meridian.io/rollout-start-tick"
#: New pods already available when the rollout was re-based (its strategy or size changed).
ROLLOUT_READY_BASE = "sim.meridian.io/rollout-ready-base"
#: Old pods left and new pods existing at the re-base: a controller never recreates old pods
#: nor deletes new ones because the fenceposts changed.
ROLLOUT_OLD_CAP = "sim.meridian.io/rollout-old-cap"
ROLLOUT_NEW_FLOOR = "sim.meridian.io/rollout-new-floor"
REVISION = "deployment.kubernetes.io/revision"
ROLLOUT_ANNOTATIONS = (ROLLOUT_FROM, ROLLOUT_FROM_TEMPLATE, ROLLOUT_START, ROLLOUT_READY_BASE, ROLLOUT_OLD_CAP,
                       ROLLOUT_NEW_FLOOR, REVISION)
#: What a re-base records, besides the start tick.
REBASE_ANNOTATIONS = (ROLLOUT_READY_BASE, ROLLOUT_OLD_CAP, ROLLOUT_NEW_FLOOR)
DEFAULT_MAX_SURGE = DEFAULT_MAX_UNAVAILABLE = "25%"


def template_hash(template: Any) -> str:
    """A pod template's ``pod-template-hash``: FNV-1a of its sorted JSON, 8 hex digits. Names
    the template's ReplicaSet (``<deployment>-<hash>``) and labels its pods."""
    return f"{fnv32a(json.dumps(template, sort_keys=True).encode()):08x}"


def scaled_value(value: Any, total: int, *, round_up: bool, default: str) -> int:
    """An IntOrString resolved against ``total`` like Kubernetes' GetScaledValueFromIntOrPercent:
    an integer as it is, ``"N%"`` as N% of ``total`` rounded up or down; missing or malformed
    values take ``default``, negative ones count as 0."""
    if value is None or isinstance(value, bool):
        value = default
    if isinstance(value, (int, float)):
        return max(0, int(value))
    text = str(value).strip()
    try:
        if not text.endswith("%"):
            return max(0, int(text))
        percent = max(0, int(text[:-1]))
    except ValueError:
        return scaled_value(default, total, round_up=round_up, default=default)
    return -(-percent * total // 100) if round_up else percent * total // 100


def deployment_strategy(spec: Mapping[str, Any], replicas: int) -> tuple[bool, int, int]:
    """``(recreate, maxSurge, maxUnavailable)`` of a Deployment spec for ``replicas`` pods, as
    Kubernetes resolves its fenceposts: defaults 25% / 25%, surge rounds up, unavailability
    rounds down, and if both come to 0 unavailability becomes 1. Recreate has 0 / 0."""
    strategy = spec.get("strategy") if isinstance(spec.get("strategy"), Mapping) else {}
    if strategy.get("type") == "Recreate":
        return True, 0, 0
    rolling = strategy.get("rollingUpdate") if isinstance(strategy.get("rollingUpdate"), Mapping) else {}
    surge = scaled_value(rolling.get("maxSurge"), replicas, round_up=True, default=DEFAULT_MAX_SURGE)
    unavailable = scaled_value(rolling.get("maxUnavailable"), replicas, round_up=False, default=DEFAULT_MAX_UNAVAILABLE)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return False, surge, unavailable


@dataclass(frozen=True)
class RolloutStep:
    """Where a rollout stands at one tick: ``old`` pods still on the previous template (all
    available: they ran before the rollout), ``new`` pods on the current one, of which
    ``ready`` are available (the others were created this tick and are starting)."""

    old: int
    new: int
    ready: int

    @property
    def done(self) -> bool:
        return self.old == 0 and self.ready == self.new

    @property
    def available(self) -> int:
        return self.old + self.ready


def _pace(surge: int, unavailable: int) -> int:
    return max(1, max(0, surge) + max(0, unavailable))


def rollout_step(replicas: int, surge: int, unavailable: int, steps: int, *, recreate: bool = False,
                 base: int = 0, old_cap: int | None = None, new_floor: int = 0) -> RolloutStep:
    """The rollout of ``replicas`` pods, ``steps`` ticks after the apply that changed the template.

    Each tick is one sync of the Deployment controller: (1) the new pods created at the
    previous tick become available; (2) the old ReplicaSet is scaled down as far as
    ``replicas - unavailable`` available pods allow; (3) the new ReplicaSet is scaled up as far
    as ``replicas + surge`` pods allow. With ``pace = surge + unavailable`` (at least 1) that
    comes to, at step k ≥ 0 (k = 0 is the tick of the apply)::

        ready = min(n, k·pace)               new pods available
        old   = max(0, n − unavailable − ready)
        new   = min(n, n + surge − old)      = min(n, (k+1)·pace)

    so at every step ``old + new ≤ n + surge`` and ``old + ready ≥ n − unavailable`` (for
    ``unavailable ≤ n``; above it, at least 0), up to ``pace`` pods move per tick (surge pods
    become available before old ones go, so ``unavailable = 0`` still progresses), and the
    rollout is done at step ``ceil(n / pace)`` (``rollout_ticks``). Recreate kills every old
    pod and creates every new one at step 0; they are available from step 1.

    ``base`` new pods were already available when the rollout was re-based (its strategy or
    size changed mid-way, see ``SimulatedConnector``), ``old_cap`` old pods were left and
    ``new_floor`` new pods existed: progress never goes backwards, old pods are never
    recreated and new ones never deleted, so right after a re-base to smaller fenceposts the
    pods may exceed them until the rollout catches up, as with a real controller.
    """
    n, k = max(0, replicas), max(0, steps)
    if recreate:
        return RolloutStep(0, n, n if k >= 1 else 0)
    if surge <= 0 and unavailable <= 0:
        unavailable = 1
    surge, unavailable = max(0, surge), max(0, unavailable)
    ready = min(n, max(0, base) + k * _pace(surge, unavailable))
    old = max(0, n - unavailable - ready)
    if old_cap is not None:
        old = min(old, max(0, old_cap))
    new = min(n, max(n + surge - old, new_floor))
    return RolloutStep(old, new, min(ready, new))


def rollout_ticks(replicas: int, surge: int, unavailable: int, *, recreate: bool = False, base: int = 0) -> int:
    """How many ticks after its start a rollout is done (``rollout_step(...).done``)."""
    n = max(0, replicas - max(0, base))
    if n == 0:
        return 0
    if recreate:
        return 1
    if surge <= 0 and unavailable <= 0:
        unavailable = 1
    return -(-n // _pace(surge, unavailable))


def rebase_of(annotations: Mapping[str, Any]) -> dict[str, Any]:
    """``rollout_step`` keyword arguments recorded by the last re-base (none before one)."""
    if ROLLOUT_READY_BASE not in annotations:
        return {}
    return {"base": annotation_int(annotations, ROLLOUT_READY_BASE, 0),
            "old_cap": annotation_int(annotations, ROLLOUT_OLD_CAP, 0),
            "new_floor": annotation_int(annotations, ROLLOUT_NEW_FLOOR, 0)}


def _created_step(ordinal: int, surge: int, unavailable: int, recreate: bool, base: int = 0) -> int:
    """The step of a rollout at which its new pod ``ordinal`` was created (pods of the base
    existed before the rollout was re-based)."""
    if recreate:
        return 0
    if ordinal < base:
        return -1
    if surge <= 0 and unavailable <= 0:
        unavailable = 1
    return (ordinal - base) // _pace(surge, unavailable)


def annotation_int(annotations: Mapping[str, Any], key: str, default: int) -> int:
    try:
        return int(annotations.get(key, default))
    except (TypeError, ValueError):
        return default


def rollout_of(annotations: Mapping[str, Any], current_hash: str) -> tuple[str, int, Any] | None:
    """``(from hash, start tick, from template or None)`` recorded on a Deployment, or None."""
    old_hash, start = annotations.get(ROLLOUT_FROM), annotations.get(ROLLOUT_START)
    if not isinstance(old_hash, str) or not old_hash or old_hash == current_hash or start is None:
        return None
    try:
        start_tick = int(start)
    except (TypeError, ValueError):
        return None
    try:
        old_template = json.loads(annotations.get(ROLLOUT_FROM_TEMPLATE) or "null")
    except (TypeError, ValueError):
        old_template = None
    return old_hash, start_tick, old_template if isinstance(old_template, Mapping) else None


# --- placement -----------------------------------------------------------------------------


#: The placement engine: given the node objects pods may go to and the Meridian cluster whose
#: scheduling policy places them (None: the default policy, as in pure use without a
#: database), a function placing replicas of one template (v1 Pod dicts equal but for their
#: names) one after another, returning the chosen node's name per pod, or None where it fits
#: nowhere. The scheduling app registers kube-scheduler's cycle under the cluster's policy
#: (``scheduling.fleet_placer``) when Django starts: fleet sits below scheduling in the layers, so
#: it is handed the engine rather than importing it.
PlacementEngine = Callable[[list[Mapping[str, Any]], "str | None"], Callable[[list[Mapping[str, Any]]], "list[str | None]"]]
_placement_engine: PlacementEngine | None = None


def set_placement_engine(engine: PlacementEngine | None) -> None:
    global _placement_engine
    _placement_engine = engine


class Placer:
    """Places pods with the registered placement engine (the scheduling framework, under the
    cluster's policy when ``cluster`` names it, else the default policy) over the cluster's
    ready, schedulable nodes, each placement assumed so the next pod sees it. Deterministic:
    the engine breaks ties by scan order and the cluster is rebuilt from the seed in the same
    order every time. Pure: the engine only reads the node objects.
    ``place`` keeps the node's ``used_*`` counters, which the simulated metrics read."""

    def __init__(self, nodes: list[SimNode], cluster: str | None = None) -> None:
        if _placement_engine is None:
            raise RuntimeError("no placement engine registered: the scheduling app registers it when Django starts "
                               "(or call scheduling.fleet_placer.register())")
        self.nodes = nodes
        usable = [n for n in nodes if n.schedulable and n.ready]
        self._by_name = {n.name: n for n in usable}
        self._place = _placement_engine([n.obj for n in usable], cluster)

    def place(self, pod_key: str, pod_spec: Mapping[str, Any], cpu: int, memory: int, gpus: int) -> SimNode | None:
        return self.place_replicas(pod_key.partition("/")[0], [pod_key.partition("/")[2]], pod_spec, cpu, memory, gpus)[0]

    def place_replicas(self, namespace: str, names: list[str], pod_spec: Mapping[str, Any], cpu: int, memory: int,
                       gpus: int) -> list[SimNode | None]:
        """Place the pods ``names`` of one template in order (the engine keeps one plan for
        the run); the node per pod, or None where it fits nowhere."""
        chosen = self._place([{"metadata": {"name": name, "namespace": namespace}, "spec": pod_spec} for name in names])
        placed: list[SimNode | None] = []
        for node_name in chosen:
            node = self._by_name[node_name] if node_name is not None else None
            if node is not None:
                node.used_cpu += cpu
                node.used_memory += memory
                node.used_gpus += gpus
                node.pods += 1
            placed.append(node)
        return placed


def _milli(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def _mebi(text: str) -> int:
    units = {"Mi": 1, "Gi": 1024, "Ki": 1 / 1024}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text) // 2**20


def _pod_demand(pod_spec: Mapping[str, Any]) -> tuple[int, int, int]:
    """CPU (m), memory (Mi) and GPUs a pod holds on its node (containers + sidecars)."""
    cpu = memory = gpus = 0
    for container in list(pod_spec.get("containers") or []) + [
        c for c in pod_spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"
    ]:
        requests = container.get("resources", {}).get("requests", {})
        cpu += _milli(str(requests.get("cpu", "0")))
        memory += _mebi(str(requests.get("memory", "0")))
        gpus += int(requests.get(GPU, 0))
    return cpu, memory, gpus


# --- the cluster -----------------------------------------------------------------------------


@dataclass
class ClusterState:
    tick: int
    nodes: list[SimNode]
    workloads: list[dict[str, Any]]
    replica_sets: list[dict[str, Any]]
    pods: list[dict[str, Any]]


class SimulatedCluster:
    """The cluster at a tick. ``overlay`` holds objects applied through the connector; Nodes
    in it are merge patches onto the generated nodes (kind ``Node``), workloads join the
    simulation and get their pods placed — under the scheduling policy of the Meridian
    cluster of the spec's name when ``registered`` (it is a cluster of the inventory), else the
    default policy."""

    def __init__(self, spec: ClusterSpec, overlay: Iterable[Mapping[str, Any]] = (), *, registered: bool = False) -> None:
        self.spec = spec
        self.registered = registered
        self.overlay = list(overlay)
        self._state: ClusterState | None = None
        #: Called between workloads while building (``Connector.between``): raises to stop.
        self.between: Callable[[], None] | None = None

    def server_info(self) -> tuple[str, tuple[str, ...]]:
        resources = {"v1/nodes", "v1/pods", "v1/namespaces", "v1/configmaps", "v1/secrets", "v1/services", "apps/v1/deployments",
                     "apps/v1/statefulsets", "apps/v1/replicasets", "batch/v1/jobs", "metrics.k8s.io/v1beta1/nodes",
                     "config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs",
                     "config.katalyst.kubewharf.io/v1alpha1/adminqosconfigurations"}
        return self.spec.kubernetes_version, tuple(sorted(resources))

    def state(self, tick: int) -> ClusterState:
        if self._state is None or self._state.tick != tick:
            self._state = self._build(tick)
        return self._state

    def nodes(self, tick: int) -> list[dict[str, Any]]:
        return [n.obj for n in self.state(tick).nodes]

    def workloads(self, tick: int) -> list[dict[str, Any]]:
        return self.state(tick).workloads

    def replica_sets(self, tick: int) -> list[dict[str, Any]]:
        return self.state(tick).replica_sets

    def pods(self, tick: int) -> list[dict[str, Any]]:
        return self.state(tick).pods

    def node_metrics(self, tick: int) -> list[dict[str, Any]]:
        """Usage drifts with a diurnal curve per node, never above what the node can give."""
        seconds = tick * self.spec.tick_seconds
        day = 2 * math.pi * (seconds % 86_400) / 86_400
        metrics = []
        for node in self.state(tick).nodes:
            phase = unit(self.spec.seed, node.name, "phase") * 2 * math.pi
            wave = 0.55 + 0.25 * math.sin(day + phase) + 0.1 * (unit(self.spec.seed, node.name, tick) - 0.5)
            base_cpu = 200 + node.used_cpu * wave
            cpu = int(min(node.cpu_milli, base_cpu))
            memory = int(min(node.memory_mi, 1024 + node.used_memory * (0.6 + 0.2 * wave)))
            metrics.append({
                "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
                "metadata": {"name": node.name}, "timestamp": iso(seconds), "window": "20s",
                "usage": {"cpu": f"{cpu}m", "memory": f"{memory * 1024}Ki"},
            })
        return metrics

    # -- building ----------------------------------------------------------------------------

    def _overlay(self, kind: str) -> list[Mapping[str, Any]]:
        return [o for o in self.overlay if o.get("kind") == kind]

    def _build(self, tick: int) -> ClusterState:
        window = tick // CHURN_TICKS
        patches = {o["metadata"]["name"]: o.get("patch", o) for o in self._overlay("NodePatch")}
        nodes = [_node(self.spec, i, window, patches) for i in node_indices(self.spec, window)]
        count = max(1, self.spec.node_count * self.spec.workloads_per_100_nodes // 100)
        workloads = [_base_workload(self.spec, i, tick) for i in range(count)]
        workloads += sorted(
            (dict(o) for o in self.overlay if o.get("kind") in WORKLOAD_API),
            key=lambda o: (o["metadata"].get("namespace", ""), o["kind"], o["metadata"]["name"]),
        )
        placer = Placer(nodes, self.spec.name if self.registered else None)
        replica_sets: list[dict[str, Any]] = []
        pods: list[dict[str, Any]] = [_bound_pod(o, placer) for o in self.overlay
                                      if o.get("kind") == "Pod" and o.get("apiVersion") == "v1"]
        # Long-lived pods are placed before the Jobs' (which start and finish every few ticks),
        # so a bound pod stays on its node as in Kubernetes: placed in workload order, a Job
        # that finished moved every pod placed after it (at 10,000 nodes, 7,441 of 7,582 pods
        # in one tick; now ~100 a tick, Jobs' own pods, which may still move when another Job
        # ends). Listed in workload order all the same.
        runs: dict[int, tuple[list, list]] = {}
        for index in sorted(range(len(workloads)), key=lambda i: workloads[i]["kind"] == "Job"):
            if self.between is not None:
                self.between()
            runs[index] = ([], [])
            self._run(workloads[index], tick, placer, *runs[index])
        for index in range(len(workloads)):
            replica_sets += runs[index][0]
            pods += runs[index][1]
        pod_patches = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o.get("patch", {})
                       for o in self._overlay("PodPatch")}
        if pod_patches:
            for pod in pods:
                meta = pod["metadata"]
                patch = pod_patches.get((meta.get("namespace", ""), meta["name"]))
                if patch:
                    meta.update({field: dict(value) for field, value in patch.items() if field in ("annotations", "labels")})
        return ClusterState(tick, nodes, workloads, replica_sets, pods)

    def _run(self, workload: dict[str, Any], tick: int, placer: Placer, replica_sets: list, pods: list) -> None:
        if workload["kind"] == "Deployment":
            self._run_deployment(workload, tick, placer, replica_sets, pods)
            return
        meta, spec = workload["metadata"], workload.setdefault("spec", {})
        template = spec.get("template") or {}
        pod_spec = template.get("spec") or {"containers": []}
        kind, namespace = workload["kind"], meta.get("namespace", "default")
        owner_kind, owner_name, owner_uid = kind, meta["name"], meta.get("uid", "")
        count, finished_at = _pod_count(workload, tick, self.spec.tick_seconds)
        demand = _pod_demand(pod_spec)
        placed = 0
        names = [f"{owner_name}-{ordinal}" for ordinal in range(count)] if kind == "StatefulSet" else \
            [f"{owner_name}-{suffix}" for suffix in _suffixes(owner_uid, count)]
        nodes = placer.place_replicas(namespace, names, pod_spec, *demand) if finished_at is None else [None] * count
        for name, node in zip(names, nodes, strict=True):
            node_name = node.name if node else (_finished_node(placer, name) if finished_at else "")
            placed += node is not None
            pods.append(_pod(namespace, name, template, pod_spec, owner_kind, owner_name, owner_uid, node_name, finished_at,
                             meta.get("creationTimestamp") or iso(EPOCH)))
        workload["status"] = _workload_status(kind, count, placed, finished_at)

    def _run_deployment(self, workload: dict[str, Any], tick: int, placer: Placer, replica_sets: list, pods: list) -> None:
        """A Deployment's ReplicaSets and pods. Without a rollout in progress: one ReplicaSet
        with every pod on the current template. During one (``rollout_of`` its annotations,
        ``rollout_step`` the progress): the old ReplicaSet (the recorded template, or the
        current one's pod spec if it was not recorded) with ``old`` pods, then the new one with
        ``new`` pods, the first ``ready`` of them available. Pod names are per ReplicaSet and
        ordinal, so pods keep their names from tick to tick; a scaled-down ReplicaSet loses
        its highest ordinals. New pods of a rollout are created at the tick of their step."""
        meta, spec = workload["metadata"], workload.setdefault("spec", {})
        template = spec.get("template")
        replicas = int(spec.get("replicas", 1))
        recreate, surge, unavailable = deployment_strategy(spec, replicas)
        annotations = meta.get("annotations") or {}
        revision = annotation_int(annotations, REVISION, 1)
        current_hash = template_hash(template)
        rollout = rollout_of(annotations, current_hash)
        base = annotation_int(annotations, ROLLOUT_READY_BASE, 0)
        step = rollout_step(replicas, surge, unavailable, tick - rollout[1], recreate=recreate, **rebase_of(annotations)) \
            if rollout else RolloutStep(0, replicas, replicas)
        created = meta.get("creationTimestamp") or iso(EPOCH)
        tick_seconds = self.spec.tick_seconds
        sets: list[tuple[str, Any, int, int, int, Any]] = []  # hash, template, pods, ready pods, revision, creation time
        if rollout and not step.done:
            old_hash, _, old_template = rollout
            sets.append((old_hash, old_template if old_template is not None else template, step.old, step.old,
                         max(1, revision - 1), lambda ordinal: created))
        if rollout:
            start = rollout[1]
            sets.append((current_hash, template, step.new, step.ready, revision,
                         lambda ordinal: iso((start + _created_step(ordinal, surge, unavailable, recreate, base)) * tick_seconds)))
        else:
            sets.append((current_hash, template, step.new, step.ready, revision, lambda ordinal: created))
        namespace = meta.get("namespace", "default")
        available, new_rs = 0, ""
        for pod_hash, pod_template, count, ready_count, rs_revision, created_at in sets:
            rs = _replica_set(workload, pod_hash, pod_template, count, rs_revision)
            replica_sets.append(rs)
            new_rs = rs_name = rs["metadata"]["name"]
            rs_uid = rs["metadata"]["uid"]
            body = pod_template if isinstance(pod_template, Mapping) else {}
            pod_spec = body.get("spec") or {"containers": []}
            labels = {**((body.get("metadata") or {}).get("labels") or {}), "pod-template-hash": pod_hash}
            demand = _pod_demand(pod_spec)
            rs_available = 0
            names = [f"{rs_name}-{suffix}" for suffix in _suffixes(rs_uid, count)]
            for ordinal, (name, node) in enumerate(zip(names, placer.place_replicas(namespace, names, pod_spec, *demand), strict=True)):
                ready = ordinal < ready_count
                rs_available += node is not None and ready
                pods.append(_pod(namespace, name, body, pod_spec, "ReplicaSet", rs_name, rs_uid, node.name if node else "", None,
                                 created_at(ordinal), ready=ready, labels=labels))
            rs["status"] = {"replicas": count, "fullyLabeledReplicas": count, "readyReplicas": rs_available,
                            "availableReplicas": rs_available, "observedGeneration": 1}
            available += rs_available
        finished = None
        if rollout:
            finished = iso((rollout[1] + rollout_ticks(replicas, surge, unavailable, recreate=recreate, base=base)) * tick_seconds)
        workload["status"] = _deployment_status(workload, step, available, replicas - (0 if recreate else unavailable), new_rs,
                                                created, iso(tick * tick_seconds), finished)


def _replica_set(deployment: Mapping[str, Any], pod_hash: str, template: Any, replicas: int, revision: int) -> dict[str, Any]:
    meta = deployment["metadata"]
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"{meta['name']}-{pod_hash}", "namespace": meta.get("namespace", "default"),
                     "uid": _uid(meta.get("uid", ""), pod_hash), "labels": {"pod-template-hash": pod_hash},
                     "annotations": {REVISION: str(revision)},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                                          "uid": meta.get("uid", ""), "controller": True}]},
        "spec": {"replicas": replicas, "template": template},
    }


def _deployment_status(deployment: Mapping[str, Any], step: RolloutStep, available: int, minimum: int, new_rs: str,
                       created: str, now: str, finished: str | None) -> dict[str, Any]:
    """A Deployment's status as the controller computes it: ``replicas`` all pods (old + new),
    ``updatedReplicas`` the new ones, ``ready``/``availableReplicas`` pods available and
    placed, ``unavailableReplicas`` (when not 0) pods minus available ones, as Kubernetes
    counts it (a surge pod still starting counts), ``observedGeneration`` the generation, and
    the ``Available`` (at least ``replicas - maxUnavailable`` available; Recreate: all) and
    ``Progressing`` (``ReplicaSetUpdated`` while rolling or while pods of the new ReplicaSet
    are not placed, then ``NewReplicaSetAvailable``) conditions. Condition times: Progressing
    changed ``now`` while rolling, else when the rollout ``finished`` (the creation time
    without a rollout); Available at creation.

    The rollout's pace does not wait for placement: pods that find no node stay Pending and
    are missing from ``availableReplicas``, so the fenceposts hold given the capacity."""
    meta = deployment["metadata"]
    pods = step.old + step.new
    complete = step.done and available >= step.new
    updated_at = now if not step.done else (finished or created)
    if available >= minimum:
        available_condition = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                               "message": "Deployment has minimum availability."}
    else:
        available_condition = {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                               "message": "Deployment does not have minimum availability."}
    available_condition.update(lastUpdateTime=created, lastTransitionTime=created)
    progressing = {"type": "Progressing", "status": "True", "lastUpdateTime": updated_at, "lastTransitionTime": created}
    if complete:
        progressing.update(reason="NewReplicaSetAvailable", message=f'ReplicaSet "{new_rs}" has successfully progressed.')
    else:
        progressing.update(reason="ReplicaSetUpdated", message=f'ReplicaSet "{new_rs}" is progressing.')
    status: dict[str, Any] = {"observedGeneration": int(meta.get("generation") or 1), "replicas": pods,
                              "updatedReplicas": step.new, "readyReplicas": available, "availableReplicas": available}
    if pods > available:
        status["unavailableReplicas"] = pods - available
    status["conditions"] = [available_condition, progressing]
    return status


def _pod_count(workload: Mapping[str, Any], tick: int, tick_seconds: float) -> tuple[int, str | None]:
    """How many pods a workload runs now, and when they finished (Jobs past their run length)."""
    spec = workload.get("spec") or {}
    if workload["kind"] != "Job":
        return int(spec.get("replicas", 1)), None
    annotations = workload["metadata"].get("annotations") or {}
    parallelism = int(spec.get("parallelism", 1))
    if "sim.meridian.io/run-start-tick" not in annotations:
        return parallelism, None
    end = int(annotations["sim.meridian.io/run-start-tick"]) + int(annotations["sim.meridian.io/run-ticks"])
    return parallelism, (iso(end * tick_seconds) if tick >= end else None)


def _finished_node(placer: Placer, name: str) -> str:
    nodes = placer.nodes
    return nodes[fnv32a(name.encode()) % len(nodes)].name if nodes else ""


_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _suffixes(uid: str, count: int) -> list[str]:
    """The name suffixes of an owner's pods 0..count-1: five letters of FNV-1a of ``uid:ordinal``
    (the owner's prefix hashed once: a million pods a fleet build)."""
    alphabet, size = _SUFFIX_ALPHABET, len(_SUFFIX_ALPHABET)
    prefix = fnv32a(f"{uid}:".encode())
    suffixes = []
    for ordinal in range(count):
        h = fnv32a(str(ordinal).encode(), prefix)
        suffixes.append(alphabet[h % size] + alphabet[(h >> 5) % size] + alphabet[(h >> 10) % size]
                        + alphabet[(h >> 15) % size] + alphabet[(h >> 20) % size])
    return suffixes


def _pod(namespace: str, name: str, template: Mapping[str, Any], pod_spec: Mapping[str, Any], owner_kind: str, owner_name: str,
         owner_uid: str, node_name: str, finished_at: str | None, created: str, *, ready: bool = True,
         labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A pod as the API shows it: Succeeded once finished, Running on a node (``ready=False``:
    started but not ready yet, as a new pod of a rollout is in its first tick), else Pending."""
    phase = "Succeeded" if finished_at else ("Running" if node_name else "Pending")
    container_state: dict[str, Any] = (
        {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": created, "finishedAt": finished_at}}
        if finished_at else ({"running": {"startedAt": created}} if node_name else {"waiting": {"reason": "Unschedulable"}})
    )
    spec = dict(pod_spec)
    if node_name:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [
        {"name": c["name"], "ready": phase == "Running" and ready, "state": container_state}
        for c in pod_spec.get("containers", [])]}
    if node_name:
        status["startTime"] = created
        if not ready and not finished_at:
            status["conditions"] = [{"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                                     "message": "containers with unready status: "
                                                f"[{' '.join(c['name'] for c in pod_spec.get('containers', []))}]"}]
    else:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/N nodes are available: insufficient resources or no matching node."}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": _uid(owner_uid, name),
                     "labels": dict(labels if labels is not None else (template.get("metadata") or {}).get("labels") or {}),
                     "creationTimestamp": created,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner_name, "uid": owner_uid, "controller": True}]},
        "spec": spec,
        "status": status,
    }


def _bound_pod(obj: Mapping[str, Any], placer: Placer) -> dict[str, Any]:
    """A pod applied through the connector, bound by ``spec.nodeName`` (no scheduling): it runs
    there while the node exists and is ready, holding its requests like any other pod."""
    pod = json.loads(json.dumps(obj))
    spec = pod.setdefault("spec", {})
    node = next((n for n in placer.nodes if n.name == spec.get("nodeName")), None)
    created = pod["metadata"].get("creationTimestamp") or iso(EPOCH)
    running = node is not None and node.ready
    if node is not None:
        cpu, memory, gpus = _pod_demand(spec)
        node.used_cpu += cpu
        node.used_memory += memory
        node.used_gpus += gpus
        node.pods += 1
    state: dict[str, Any] = {"running": {"startedAt": created}} if running else {"waiting": {"reason": "ContainerCreating"}}
    pod["status"] = {"phase": "Running" if running else "Pending", "startTime": created,
                     "containerStatuses": [{"name": c.get("name", ""), "ready": running, "state": state}
                                           for c in spec.get("containers") or []]}
    return pod


def _workload_status(kind: str, count: int, placed: int, finished_at: str | None) -> dict[str, Any]:
    if kind == "Job":
        if finished_at:
            return {"succeeded": count, "active": 0, "completionTime": finished_at}
        return {"active": placed}
    return {"replicas": count, "readyReplicas": placed, "availableReplicas": placed, "updatedReplicas": count}


# --- simulated node agents ----------------------------------------------------------------

AGENT_ERRORS = (
    "failed to apply: cgroup v2 not mounted on /sys/fs/cgroup",
    "failed to apply: qos-agent is restarting (CrashLoopBackOff)",
    "failed to apply: config validation failed: reclaim ratio out of range",
)


@dataclass(frozen=True)
class AgentReport:
    applied_hash: str | None
    error: str | None
    reported_at: float


def agent_report(spec: ClusterSpec, node_name: str, config_type: str, config_hash: str, published_at: float, now: float, *,
                 failure_rate: float = 0.01, delay: tuple[float, float] = (2.0, 20.0)) -> AgentReport | None:
    """What a node's agent has reported for a published config: None until it has polled
    (a per-node delay), then either the applied hash or an error, deterministically."""
    key = (spec.seed, node_name, config_type, config_hash)
    wait = delay[0] + (delay[1] - delay[0]) * unit(*key, "delay")
    if now < published_at + wait:
        return None
    if unit(*key, "fail") < failure_rate:
        return AgentReport(None, AGENT_ERRORS[int(unit(*key, "why") * len(AGENT_ERRORS))], published_at + wait)
    return AgentReport(config_hash, None, published_at + wait)
