"""The scheduler's view of a cluster, built from plain v1 dicts and updated pod by pod.

This is kube-scheduler's ``NodeInfo``/``PodInfo``/snapshot reduced to what the in-tree plugins and
Meridian's own read, computed once per pod and kept incrementally so the placement engine can
"assume" a pod in O(terms) instead of rebuilding anything:

* ``NodeInfo``: allocatable (cpu in millicores, the rest in units, ``pods`` as the allowed pod
  count, scalar resources as upstream's ``IsScalarResourceName`` selects them), the summed
  ``Requested`` and ``NonZeroRequested`` of its pods, its pods, and Meridian's usage report.
* ``PodInfo``: the pod's requests as each plugin needs them (``PodRequests`` with status resources
  for pods already placed, without for the incoming pod's fit check, with the scheduler's 100m /
  200Mi non-zero defaults for scoring), its parsed affinity terms and tolerations.
* ``AffinityIndex``: inter-pod (anti-)affinity aggregated per distinct term and per distinct pod
  label set, the two-phase structure the seed describes (``scheduling.md``).

Requests come from ``kube.resources.pod_requests`` (init containers, sidecars, overhead, pod-level
resources); the non-zero defaults are applied the way ``NonMissingContainerRequests`` does, by
filling each container's missing cpu/memory request before calling it.  Pods in phase
Succeeded/Failed are left out, as the scheduler's informer filters them.

Meridian's usage-report conventions (read by the ``MostAvailable`` plugin):

* node annotation ``scheduling.meridian.io/usage``: JSON object of resource -> quantity actually in
  use at the last report, e.g. ``{"cpu": "12", "memory": "40Gi"}``;
* node annotation ``scheduling.meridian.io/usage-time``: RFC 3339 time of that report;
* pod annotation ``scheduling.meridian.io/placed-at`` (RFC 3339), else the ``lastTransitionTime`` of
  its ``PodScheduled`` condition when true (the API server sets it when it binds the pod), else
  ``metadata.creationTimestamp``: when the pod was placed.  A pod placed after the report (or any pod, when the node has no
  report) is not in the usage yet, so its virtual request still counts against the node; a pod
  with no time at all is taken as covered by the report.  Pods the engine assumes count as placed
  after every report;
* pod annotation ``scheduling.meridian.io/virtual-request``: JSON object of resource -> quantity,
  the expected real usage; resources it does not name fall back to the pod's requests.  A
  malformed annotation is ignored (falls back to the requests) rather than failing scheduling.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cached_property
from typing import Any

from kube.quantity import Quantity, QuantityError, parse_quantity
from kube.resources import PodSpecError, pod_requests
from kube.taints import Toleration, parse_tolerations
from scheduling.selectors import AffinityTerm, PodTerms, parse_pod_terms

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "PLACED_AT_ANNOTATION",
    "USAGE_ANNOTATION",
    "USAGE_TIME_ANNOTATION",
    "VIRTUAL_REQUEST_ANNOTATION",
    "AffinityIndex",
    "ClusterState",
    "NodeInfo",
    "PodInfo",
    "amount",
    "amount_of",
    "is_extended_resource_name",
    "is_scalar_resource_name",
]

DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

USAGE_ANNOTATION = "scheduling.meridian.io/usage"
USAGE_TIME_ANNOTATION = "scheduling.meridian.io/usage-time"
PLACED_AT_ANNOTATION = "scheduling.meridian.io/placed-at"
VIRTUAL_REQUEST_ANNOTATION = "scheduling.meridian.io/virtual-request"

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_NATIVE_PREFIX = "kubernetes.io/"
_POD_LEVEL = ("cpu", "memory")
_DEFAULT_NON_ZERO = {
    "cpu": Quantity.from_milli(DEFAULT_MILLI_CPU_REQUEST),
    "memory": Quantity.from_int(DEFAULT_MEMORY_REQUEST),
}


# ------------------------------------------------------------------------ resource names


def _is_qualified_name(text: str) -> bool:
    from kube.labels import validate_label_key  # label keys are qualified names

    return not validate_label_key(text)


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: a domain-prefixed, non-native, quota-able name."""
    if "/" not in name or _NATIVE_PREFIX in name or name.startswith("requests."):
        return False
    return _is_qualified_name("requests." + name)


def is_scalar_resource_name(name: str) -> bool:
    """``schedutil.IsScalarResourceName``: extended, hugepages, kubernetes.io/ native or volume-attach."""
    return (
        name.startswith(("hugepages-", "attachable-volumes-"))
        or ("/" in name and _NATIVE_PREFIX in name)
        or is_extended_resource_name(name)
    )


_SCALAR_CACHE: dict[str, bool] = {}


def scalar(name: str) -> bool:
    found = _SCALAR_CACHE.get(name)
    if found is None:
        found = _SCALAR_CACHE[name] = is_scalar_resource_name(name)
    return found


def amount(name: str, quantity: Quantity) -> int:
    """The int64 upstream stores: millicores for cpu, ``Value()`` (rounded up) for the rest."""
    return quantity.milli_value() if name == "cpu" else quantity.value()


def amount_of(name: str, value: Any) -> int:
    """``amount`` of a quantity as JSON carries it (a string, a number, or None for zero);
    ``QuantityError`` (a ``ValueError``) when it is none."""
    return amount(name, _quantity(value))


def _quantity(value: Any) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if value is None:
        return Quantity.from_int(0)
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}", value)
    if isinstance(value, int):
        return Quantity.from_int(value)
    if isinstance(value, float):
        return parse_quantity(repr(value))
    return parse_quantity(str(value).strip())


class Res:
    """``framework.Resource`` without the pod count: cpu (milli), memory, ephemeral-storage, scalars."""

    __slots__ = ("cpu", "eph", "mem", "scalars")

    def __init__(self, cpu: int = 0, mem: int = 0, eph: int = 0, scalars: dict[str, int] | None = None) -> None:
        self.cpu = cpu
        self.mem = mem
        self.eph = eph
        self.scalars = scalars if scalars is not None else {}

    @classmethod
    def from_list(cls, rl: Mapping[str, Quantity]) -> Res:
        res = cls()
        for name, q in rl.items():
            if name == "cpu":
                res.cpu = q.milli_value()
            elif name == "memory":
                res.mem = q.value()
            elif name == "ephemeral-storage":
                res.eph = q.value()
            elif scalar(name):
                res.scalars[name] = q.value()
        return res

    def is_zero(self) -> bool:
        return not self.cpu and not self.mem and not self.eph and not self.scalars

    def get(self, name: str) -> int:
        return _amount(name, self.cpu, self.mem, self.eph, self.scalars)


def _amount(name: str, cpu: int, mem: int, eph: int, scalars: Mapping[str, int]) -> int:
    """The amount of resource ``name`` among cpu, memory, ephemeral storage and the scalars
    (a ``Res``'s, or a node's requested totals)."""
    if name == "cpu":
        return cpu
    if name == "memory":
        return mem
    if name == "ephemeral-storage":
        return eph
    return scalars.get(name, 0)


# ------------------------------------------------------------------------ pods


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)  # Python 3.11 reads the trailing "Z" too
    except ValueError:
        return None


def _scheduled_at(pod: Mapping[str, Any]) -> datetime | None:
    """When the API server bound the pod: its true ``PodScheduled`` condition's transition time."""
    conditions = _section(pod, "status").get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return _parse_time(condition.get("lastTransitionTime"))
    return None


def _fill_missing(container: Mapping[str, Any], defaults: Mapping[str, Quantity]) -> Mapping[str, Any]:
    resources = _section(container, "resources")
    requests = _section(resources, "requests")
    missing = {k: v for k, v in defaults.items() if k not in requests}
    if not missing:
        return container
    return {**container, "resources": {**resources, "requests": {**requests, **missing}}}


def _with_default_requests(pod: Mapping[str, Any], defaults: Mapping[str, Quantity]) -> Mapping[str, Any]:
    """The pod as ``NonMissingContainerRequests`` sees it: every container (init ones too) that
    leaves cpu or memory unset gets the default, explicit zeros are kept."""
    if not defaults:
        return pod
    spec = _section(pod, "spec")
    new_spec = dict(spec)
    filled = False
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if isinstance(containers, list) and containers:
            new_spec[key] = [_fill_missing(c, defaults) if isinstance(c, Mapping) else c for c in containers]
            filled = filled or any(new is not old for new, old in zip(new_spec[key], containers, strict=True))
    return {**pod, "spec": new_spec} if filled else pod  # the same pod: its requests need not be summed again


#: PodInfo's cached values that depend only on what ``PodInfo.sibling`` requires to be equal.
_SHAPE_DERIVED = ("group_key", "terms", "tolerations", "_requests", "_has_status", "_all_defaults", "requested", "non_zero",
                  "fit_request", "plain_requests", "virtual_request", "resource_key")


#: What ``PodInfo.__init__`` reads that siblings share (all it reads but name and nodeName).
_SIBLING_FIELDS = ("namespace", "labels", "annotations", "phase", "has_pod_affinity")


class PodInfo:
    """One pod as the plugins read it; every derived value is computed on first use and kept."""

    def __init__(self, pod: Mapping[str, Any]) -> None:
        if not isinstance(pod, Mapping):
            raise PodSpecError(f"a pod must be a mapping, got {type(pod).__name__}")
        self.pod = pod
        meta = _section(pod, "metadata")
        spec = _section(pod, "spec")
        self.name: str = str(meta.get("name") or "")
        self.namespace: str = str(meta.get("namespace") or "")
        labels = meta.get("labels")
        self.labels: Mapping[str, str] = labels if isinstance(labels, Mapping) else {}
        annotations = meta.get("annotations")
        self.annotations: Mapping[str, str] = annotations if isinstance(annotations, Mapping) else {}
        self.node_name: str = str(spec.get("nodeName") or "")
        self.phase: str = str(_section(pod, "status").get("phase") or "")
        affinity = _section(spec, "affinity")
        self.has_pod_affinity = bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))
        self.assumed = False  # set by the engine: placed after every usage report
        # Shared by this pod and its siblings (``sibling``): the key of the engine's per-shape
        # plugin outcomes (``Plugin.pod_only``); None until a sibling is made.
        self.shape: object | None = None
        self._shared: tuple[int, dict[str, Any]] | None = None  # ``sibling``'s copy, and how many attributes it saw

    def sibling(self, pod: Mapping[str, Any]) -> PodInfo:
        """A PodInfo for ``pod``, which the caller knows has this pod's namespace, labels,
        annotations, status and spec but for ``nodeName``: another replica of the same
        template, or this pod once bound. The derived values (requests, parsed affinity terms,
        tolerations) are shared rather than computed again: they are never mutated, and
        computing them is most of a scheduling cycle's cost when replicas are placed in bulk."""
        if not isinstance(pod, Mapping):
            raise PodSpecError(f"a pod must be a mapping, got {type(pod).__name__}")
        if self.shape is None:
            self.shape = object()
        derived, shared = self.__dict__, self._shared
        if shared is None or shared[0] != len(derived):  # gathered again once a derived value was added
            values = {name: derived[name] for name in _SIBLING_FIELDS}
            values.update((name, derived[name]) for name in _SHAPE_DERIVED if name in derived)
            shared = self._shared = (len(derived), values)
        info = PodInfo.__new__(PodInfo)  # what ``__init__`` reads of the pod is this pod's, but for two fields
        info.__dict__.update(shared[1])
        info.pod, info.assumed, info.shape, info._shared = pod, False, self.shape, None
        info.name = str(_section(pod, "metadata").get("name") or "")
        info.node_name = str(_section(pod, "spec").get("nodeName") or "")
        return info

    @property
    def terminal(self) -> bool:
        return self.phase in _TERMINAL_PHASES

    @cached_property
    def group_key(self) -> tuple[str, frozenset[tuple[str, str]]]:
        return (self.namespace, frozenset(self.labels.items()))

    @cached_property
    def terms(self) -> PodTerms:
        return parse_pod_terms(self.pod)

    @cached_property
    def tolerations(self) -> tuple[Toleration, ...]:
        return parse_tolerations(_section(self.pod, "spec").get("tolerations"))

    # -- requests ---------------------------------------------------------------------------

    @cached_property
    def _requests(self) -> Mapping[str, Quantity]:
        """``PodRequests`` with status resources: the one call most derived values share."""
        return pod_requests(self.pod, use_status_resources=True)

    @cached_property
    def _has_status(self) -> bool:
        return bool(_section(self.pod, "status"))

    def _with_defaults(self, defaults: Mapping[str, Quantity]) -> Mapping[str, Quantity]:
        filled = _with_default_requests(self.pod, defaults)
        if filled is self.pod:  # every container names cpu and memory: nothing to default
            return self._requests
        return pod_requests(filled, use_status_resources=True)

    @cached_property
    def _all_defaults(self) -> Mapping[str, Quantity]:
        return self._with_defaults(_DEFAULT_NON_ZERO)

    @cached_property
    def requested(self) -> Res:
        """What the pod adds to its node's ``Requested`` (status resources count, as upstream)."""
        return Res.from_list(self._requests)

    @cached_property
    def non_zero(self) -> tuple[int, int]:
        """``PodInfo.CalculateResource``'s Non0CPU / Non0Mem."""
        requests = self._requests
        spec_resources = _section(_section(self.pod, "spec"), "resources")
        pod_level = any(name in _POD_LEVEL or name.startswith("hugepages-") for name in _section(spec_resources, "requests"))
        if not pod_level:
            non0 = self._all_defaults
        else:
            defaults = {k: v for k, v in _DEFAULT_NON_ZERO.items() if k not in requests}
            non0 = self._with_defaults(defaults) if defaults else requests
        zero = Quantity.from_int(0)
        return non0.get("cpu", zero).milli_value(), non0.get("memory", zero).value()

    @cached_property
    def fit_request(self) -> Res:
        """``computePodResourceRequest``: what NodeResourcesFit checks against free capacity
        (the pod is not running yet, so its status resources do not count)."""
        return self.requested if not self._has_status else Res.from_list(pod_requests(self.pod))

    def score_request(self, name: str, non_zero: bool) -> int:
        """``calculatePodResourceRequest``: with ``non_zero`` the 100m/200Mi defaults apply."""
        q = (self._all_defaults if non_zero else self._requests).get(name)
        return 0 if q is None else amount(name, q)

    @cached_property
    def resource_key(self) -> tuple[Any, ...]:
        """Everything about the pod that the resource filter and the resource scores read (the
        request it must fit, with and without the non-zero defaults): the key of the engine's
        per-node verdict and score caches for node-local plugins."""
        fit = self.fit_request
        defaults = tuple(sorted((name, amount(name, q)) for name, q in self._all_defaults.items()))
        return (fit.cpu, fit.mem, fit.eph, tuple(sorted(fit.scalars.items())), self.non_zero,
                tuple(sorted(self.plain_requests.items())), defaults)

    @cached_property
    def plain_requests(self) -> dict[str, int]:
        return {name: amount(name, q) for name, q in self._requests.items()}

    @cached_property
    def placed_at(self) -> datetime | None:
        meta = _section(self.pod, "metadata")
        return (_parse_time(self.annotations.get(PLACED_AT_ANNOTATION)) or _scheduled_at(self.pod)
                or _parse_time(meta.get("creationTimestamp")))

    @cached_property
    def virtual_request(self) -> dict[str, int]:
        """``VirtualRequest``: the annotation's estimate per resource, else the request."""
        result = dict(self.plain_requests)
        raw = self.annotations.get(VIRTUAL_REQUEST_ANNOTATION)
        if isinstance(raw, str) and raw:
            try:
                parsed = json.loads(raw)
                if isinstance(parsed, Mapping):
                    for name, value in parsed.items():
                        result[str(name)] = amount(str(name), _quantity(value))
            except (ValueError, QuantityError):
                pass
        return result


# ------------------------------------------------------------------------ nodes


class NodeInfo:
    """One node with the aggregates upstream keeps in ``framework.NodeInfo``."""

    __slots__ = (
        "_virtual_since",
        "alloc",
        "alloc_cpu",
        "alloc_eph",
        "alloc_mem",
        "alloc_pods",
        "alloc_scalars",
        "generation",
        "index",
        "labels",
        "name",
        "node",
        "nz_cpu",
        "nz_mem",
        "pods",
        "req_cpu",
        "req_eph",
        "req_mem",
        "req_scalars",
        "taints",
        "usage",
        "usage_time",
    )

    def __init__(self, position: int, node: Mapping[str, Any]) -> None:
        if not isinstance(node, Mapping):
            raise TypeError(f"a node must be a mapping, got {type(node).__name__}")
        meta = _section(node, "metadata")
        self.index = position
        self.node = node
        self.name: str = str(meta.get("name") or "")
        labels = meta.get("labels")
        self.labels: Mapping[str, str] = labels if isinstance(labels, Mapping) else {}
        taints = _section(node, "spec").get("taints")
        self.taints: list[Mapping[str, Any]] = [t for t in taints if isinstance(t, Mapping)] if isinstance(taints, list) else []
        alloc: dict[str, int] = {}
        self.alloc_scalars: dict[str, int] = {}
        self.alloc_pods = 0
        for name, raw in _section(_section(node, "status"), "allocatable").items():
            value = amount(name, _quantity(raw))
            if name == "pods":
                self.alloc_pods = value
            elif name in ("cpu", "memory", "ephemeral-storage") or scalar(name):
                alloc[name] = value
                if name not in ("cpu", "memory", "ephemeral-storage"):
                    self.alloc_scalars[name] = value
        self.alloc = alloc
        self.alloc_cpu = alloc.get("cpu", 0)
        self.alloc_mem = alloc.get("memory", 0)
        self.alloc_eph = alloc.get("ephemeral-storage", 0)
        self.req_cpu = self.req_mem = self.req_eph = 0
        self.req_scalars: dict[str, int] = {}
        self.nz_cpu = self.nz_mem = 0
        self.pods: list[PodInfo] = []
        self.generation = 0  # bumped by every add and remove: caches of the node's pods key on it
        self.usage, self.usage_time = self._usage_report(meta)
        self._virtual_since: dict[str, int] | None = None

    @staticmethod
    def _usage_report(meta: Mapping[str, Any]) -> tuple[dict[str, int] | None, datetime | None]:
        annotations = meta.get("annotations")
        if not isinstance(annotations, Mapping):
            return None, None
        raw = annotations.get(USAGE_ANNOTATION)
        if not isinstance(raw, str) or not raw:
            return None, None
        try:
            parsed = json.loads(raw)
            usage = {str(k): amount(str(k), _quantity(v)) for k, v in parsed.items()} if isinstance(parsed, Mapping) else None
        except (ValueError, QuantityError):
            usage = None
        return usage, _parse_time(annotations.get(USAGE_TIME_ANNOTATION)) if usage is not None else None

    def requested(self, name: str) -> int:
        return _amount(name, self.req_cpu, self.req_mem, self.req_eph, self.req_scalars)

    def since_report(self, pod: PodInfo) -> bool:
        """Whether ``pod`` is too recent to be in the node's last usage report."""
        if self.usage is None or pod.assumed:
            return True
        placed = pod.placed_at
        return placed is not None and self.usage_time is not None and placed > self.usage_time

    def add(self, pod: PodInfo) -> None:
        req = pod.requested
        self.req_cpu += req.cpu
        self.req_mem += req.mem
        self.req_eph += req.eph
        for name, value in req.scalars.items():
            self.req_scalars[name] = self.req_scalars.get(name, 0) + value
        nz_cpu, nz_mem = pod.non_zero
        self.nz_cpu += nz_cpu
        self.nz_mem += nz_mem
        self.pods.append(pod)
        self.generation += 1
        self._virtual_since = None

    def remove(self, pod: PodInfo) -> None:
        """Undo ``add`` (the pod object ``add`` was given): a pod deleted or gone elsewhere."""
        self.pods.remove(pod)
        req = pod.requested
        self.req_cpu -= req.cpu
        self.req_mem -= req.mem
        self.req_eph -= req.eph
        for name, value in req.scalars.items():
            left = self.req_scalars.get(name, 0) - value
            if left:
                self.req_scalars[name] = left
            else:
                self.req_scalars.pop(name, None)
        nz_cpu, nz_mem = pod.non_zero
        self.nz_cpu -= nz_cpu
        self.nz_mem -= nz_mem
        self.generation += 1
        self._virtual_since = None

    def report_usage(self, usage: Mapping[str, int] | None, at: datetime | None) -> None:
        """A new usage report (engine units: cpu in millicores), as the annotations would carry it."""
        self.usage = dict(usage) if usage is not None else None
        self.usage_time = at if usage is not None else None
        self._virtual_since = None

    @property
    def virtual_since(self) -> dict[str, int]:
        """Summed ``VirtualRequest`` of the pods placed since the last usage report; computed on
        first use after a change, since only the load-aware plugin reads it."""
        if self._virtual_since is None:
            totals: dict[str, int] = {}
            for pod in self.pods:
                if self.since_report(pod):
                    for name, value in pod.virtual_request.items():
                        totals[name] = totals.get(name, 0) + value
            self._virtual_since = totals
        return self._virtual_since


# ------------------------------------------------------------------------ inter-pod affinity index


class Group:
    """Existing pods sharing a namespace and label set: one selector test covers them all."""

    __slots__ = ("labels", "namespace", "nodes")

    def __init__(self, namespace: str, labels: Mapping[str, str]) -> None:
        self.namespace = namespace
        self.labels = labels
        self.nodes: Counter[int] = Counter()


class AffinityIndex:
    """Existing pods' inter-pod affinity, aggregated once (phase one of the two-phase scoring).

    * ``groups``: pods by (namespace, labels) with a per-node count, so an incoming pod's term is
      tested once per distinct label set, not once per pod;
    * ``required_anti`` / ``required_affinity``: each distinct term of existing pods -> how many
      pods carry it per value of its topology key;
    * ``preferred``: each distinct (term, signed weight) of existing pods' preferred affinity (+)
      and anti-affinity (-) -> pod count per topology value.

    Summing per distinct term gives exactly upstream's per-pod sums (integer addition commutes).
    """

    def __init__(self) -> None:
        self.groups: dict[tuple[str, frozenset[tuple[str, str]]], Group] = {}
        self.required_anti: dict[AffinityTerm, Counter[str]] = {}
        self.required_affinity: dict[AffinityTerm, Counter[str]] = {}
        self.preferred: dict[tuple[AffinityTerm, int], Counter[str]] = {}

    @staticmethod
    def _count(table: dict[Any, Counter[str]], key: Any, term: AffinityTerm, node: NodeInfo) -> None:
        value = node.labels.get(term.topology_key)
        if value is None:
            return
        counter = table.get(key)
        if counter is None:
            counter = table[key] = Counter()
        counter[value] += 1

    @staticmethod
    def _uncount(table: dict[Any, Counter[str]], key: Any, term: AffinityTerm, node: NodeInfo) -> None:
        value = node.labels.get(term.topology_key)
        counter = table.get(key) if value is not None else None
        if counter is None:
            return
        counter[value] -= 1
        if counter[value] <= 0:
            del counter[value]
            if not counter:
                del table[key]

    def _counted(self, terms: PodTerms) -> Iterator[tuple[dict[Any, Counter[str]], Any, AffinityTerm]]:
        """Each count a pod's terms make, as (table, key, term): what ``add`` adds and ``remove`` takes back."""
        for term in terms.required_anti_affinity:
            yield self.required_anti, term, term
        for term in terms.required_affinity:
            yield self.required_affinity, term, term
        for wt in terms.preferred_affinity:
            yield self.preferred, (wt.term, wt.weight), wt.term
        for wt in terms.preferred_anti_affinity:
            yield self.preferred, (wt.term, -wt.weight), wt.term

    def remove(self, pod: PodInfo, node: NodeInfo) -> None:
        """Undo ``add``: every count the pod added, taken back."""
        group = self.groups.get(pod.group_key)
        if group is not None:
            group.nodes[node.index] -= 1
            if group.nodes[node.index] <= 0:
                del group.nodes[node.index]
                if not group.nodes:
                    del self.groups[pod.group_key]
        if pod.has_pod_affinity:
            for table, key, term in self._counted(pod.terms):
                self._uncount(table, key, term, node)

    def add(self, pod: PodInfo, node: NodeInfo) -> None:
        group = self.groups.get(pod.group_key)
        if group is None:
            group = self.groups[pod.group_key] = Group(pod.namespace, pod.labels)
        group.nodes[node.index] += 1
        if pod.has_pod_affinity:
            for table, key, term in self._counted(pod.terms):
                self._count(table, key, term, node)


# ------------------------------------------------------------------------ the cluster


class NodeColumns:
    """Per-node cpu/memory allocatable, requested (plain and non-zero) and pod counts, one
    numpy array each, indexed by node position. The scores read them with the same integer and
    IEEE-double arithmetic as the per-node functions, so the results are identical; every value
    stays below 2**55 (``LIMIT``) so that ``x * 100`` cannot overflow 64 bits."""

    LIMIT = 2**55
    FIELDS = ("alloc_cpu", "alloc_mem", "alloc_pods", "req_cpu", "req_mem", "nz_cpu", "nz_mem", "pods")

    def __init__(self, rows: list[tuple[int, ...]]) -> None:
        import numpy as np  # only the engine's vectorised path needs it

        #: One row per node, one column per ``FIELDS`` entry: a scan window is one gather.
        self.table = np.array(rows, dtype=np.int64).reshape(len(rows), len(self.FIELDS))

    @staticmethod
    def row(node: NodeInfo) -> tuple[int, ...]:
        return (node.alloc_cpu, node.alloc_mem, node.alloc_pods, node.req_cpu, node.req_mem, node.nz_cpu, node.nz_mem, len(node.pods))

    @classmethod
    def representable(cls, values: Sequence[int]) -> bool:
        return -cls.LIMIT < min(values) and max(values) < cls.LIMIT

    @classmethod
    def of(cls, nodes: Sequence[NodeInfo]) -> NodeColumns | None:
        rows = [cls.row(node) for node in nodes]
        if not all(cls.representable(row) for row in rows):
            return None
        return cls(rows)

    def update(self, node: NodeInfo) -> None:
        """Take the node's numbers after a pod was added or removed; past the limit, the columns retire."""
        row = self.row(node)
        if not self.representable(row):
            raise OverflowError  # ``ClusterState.add_pod`` drops the columns
        self.table[node.index] = row


class ClusterState:
    """Nodes and the pods placed on them; ``add_pod`` is the engine's "assume", ``remove_pod``
    takes a pod away again (deleted, or its bind failed).

    ``changes`` lists the positions of the nodes whose pods changed, in order: the engine's
    per-node caches of node-local verdicts and scores forget those nodes. Several schedulers
    (one per policy) may share one state, so they see each other's placements and caches stay
    right whichever of them assumed a pod. A long-lived state drops the list now and then
    (``trim_changes``); ``change_epoch`` then moves, and every cache built before starts over.
    """

    def __init__(self, nodes: Sequence[Mapping[str, Any]], namespaces: Iterable[Mapping[str, Any]] = (), *,
                 skip_unreadable: bool = False) -> None:
        """``skip_unreadable``: leave out a node whose quantities do not parse, instead of raising
        (each node read once: checking them first read every node twice)."""
        self.nodes: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        for node in nodes:
            try:
                info = NodeInfo(len(self.nodes), node)
            except ValueError:
                if skip_unreadable:
                    continue
                raise
            if info.name in self.by_name:
                raise ValueError(f"duplicate node name {info.name!r}")
            self.nodes.append(info)
            self.by_name[info.name] = info
        self.namespaces: dict[str, Mapping[str, str]] = {}
        for ns in namespaces:
            meta = _section(ns, "metadata")
            labels = meta.get("labels")
            self.namespaces[str(meta.get("name") or "")] = labels if isinstance(labels, Mapping) else {}
        self.affinity = AffinityIndex()
        self.total_alloc: dict[str, int] = {}
        for info in self.nodes:
            for name, value in info.alloc.items():
                self.total_alloc[name] = self.total_alloc.get(name, 0) + value
        self.total_req: dict[str, int] = {}
        self.cache: dict[Any, Any] = {}  # plugin caches keyed on static node data (labels, taints)
        self.pod_count = 0
        self.changes: list[int] = []
        self.change_epoch = 0
        self._columns: NodeColumns | None | bool = False  # False: not built yet; None: not representable
        self._change_array: Any = None  # ``changes`` as numpy, converted as it grows (``changed_since``)
        self._converted = 0

    def columns(self) -> NodeColumns | None:
        """The nodes' cpu/memory numbers as arrays (built on first use, then kept current by
        ``add_pod``), for the placement engine's vectorised scoring of many nodes at once; None
        when a quantity is too large for exact 64-bit arithmetic (the engine then scores node by node)."""
        if self._columns is False:
            self._columns = NodeColumns.of(self.nodes)
        return self._columns  # type: ignore[return-value]

    @classmethod
    def build(
        cls,
        nodes: Sequence[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any] | PodInfo],
        namespaces: Iterable[Mapping[str, Any]] = (),
    ) -> ClusterState:
        state = cls(nodes, namespaces)
        for pod in pods:
            info = pod if isinstance(pod, PodInfo) else PodInfo(pod)
            node = state.by_name.get(info.node_name)
            if node is not None and not info.terminal:
                state.add_pod(info, node)
        return state

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.namespaces.get(namespace, {})

    def add_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        node.add(pod)
        self.affinity.add(pod, node)
        req = pod.requested
        totals = self.total_req
        totals["cpu"] = totals.get("cpu", 0) + req.cpu
        totals["memory"] = totals.get("memory", 0) + req.mem
        totals["ephemeral-storage"] = totals.get("ephemeral-storage", 0) + req.eph
        for name, value in req.scalars.items():
            totals[name] = totals.get(name, 0) + value
        self.pod_count += 1
        self._columns_follow(node)

    def remove_pod(self, pod: PodInfo, node: NodeInfo) -> None:
        """Take back what ``add_pod(pod, node)`` added (the same PodInfo), and note the node changed."""
        node.remove(pod)
        self.affinity.remove(pod, node)
        req = pod.requested
        totals = self.total_req
        totals["cpu"] = totals.get("cpu", 0) - req.cpu
        totals["memory"] = totals.get("memory", 0) - req.mem
        totals["ephemeral-storage"] = totals.get("ephemeral-storage", 0) - req.eph
        for name, value in req.scalars.items():
            totals[name] = totals.get(name, 0) - value
        self.pod_count -= 1
        self.changes.append(node.index)
        self._columns_follow(node)

    def trim_changes(self) -> None:
        """Forget the change list (every per-node cache built on it starts over)."""
        self.changes = []
        self.change_epoch += 1
        self._converted = 0

    def changed_since(self, seen: int) -> Any:
        """``changes[seen:]`` as a numpy array: each entry is converted once, however many of
        the engine's per-shape memos read it."""
        import numpy as np

        count = len(self.changes)
        if count > self._converted:
            array = self._change_array
            if array is None or len(array) < count:
                grown = np.empty(max(count, 2 * (0 if array is None else len(array)), 1024), dtype=np.intp)
                if array is not None:
                    grown[:self._converted] = array[:self._converted]
                self._change_array = array = grown
            array[self._converted:count] = self.changes[self._converted:count]
            self._converted = count
        return self._change_array[seen:count] if count > seen else np.empty(0, dtype=np.intp)

    def _columns_follow(self, node: NodeInfo) -> None:
        if self._columns:
            try:
                self._columns.update(node)  # type: ignore[union-attr]
            except OverflowError:
                self._columns = None
