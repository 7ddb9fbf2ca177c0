"""Pod resource totals and ResourceQuota usage, computed the way Kubernetes computes them.

``pod_requests``/``pod_limits`` follow ``k8s.io/component-helpers/resource`` ``PodRequests``/
``PodLimits`` and ``quota_usage`` follows the ResourceQuota pod evaluator's ``Usage``
(``pkg/quota/v1/evaluator/core/pods.go``), so numbers shown by the console match what the
scheduler and the quota admission plugin will decide.  Pods are plain dicts in API JSON
casing (``spec.initContainers``, ``restartPolicy: Always`` sidecars, ``spec.overhead``,
pod-level ``spec.resources``, ``status.containerStatuses[].allocatedResources``...).

Upstream rules reproduced:

* Containers are summed.  Init containers run one at a time, each next to the restartable
  ("sidecar") init containers started before it, so the pod needs
  ``max(sum(containers) + sum(sidecars), max_i(init_i + sum(sidecars before i)))`` per
  resource.  Limits use the same formula: a resource that some container leaves unlimited
  is still reported from the containers that do set it, and a resource no container limits
  is absent from the result (absent means unlimited).
* Pod-level ``spec.resources`` replaces the container total for cpu, memory and
  ``hugepages-*`` (the only resources pod-level resources support), unless
  ``skip_pod_level_resources``.  Pod-level limits apply as soon as pod-level requests *or*
  limits name a supported resource, as upstream's ``IsPodLevelResourcesSet`` decides.
* ``spec.overhead`` is added to every request, but only to limits that are set and non-zero.
* ``use_status_resources`` follows the in-place resize logic: per resource, the pod needs
  ``max(spec, actuated, allocated)`` where each is aggregated over containers with the
  formula above (``status.containerStatuses[].resources`` is "actuated",
  ``allocatedResources`` is "allocated"); while a ``PodResizePending`` condition says
  ``Infeasible`` the spec is ignored.  Limits use ``max(spec, actuated)``.

Simplifications, all features that are off by default in current Kubernetes:
pod-level in-place resize (``InPlacePodLevelResourcesVerticalScaling``, which would read
``status.resources``/``status.allocatedResources`` of the pod itself), DRA node-allocatable
claim statuses, and ``NonMissingContainerRequests`` are not modelled.

Quantities may be strings, JSON numbers or null (the API accepts all three; null is zero).  Strings are stripped of
surrounding whitespace first, as the API server's JSON decoding does; a float is read through
its shortest ``repr``, which is the JSON text for any float ``json.loads`` produced except
exponent spellings (``1e3`` arrives as ``1000.0`` and so prints as DecimalSI).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from kube.labels import is_valid_label_key
from kube.quantity import Quantity, QuantityError, parse_quantity

__all__ = [
    "PodSpecError",
    "ResourceList",
    "UnsupportedWorkloadError",
    "pod_limits",
    "pod_requests",
    "quota_usage",
    "register_workload_kind",
    "validate_pod_resources",
    "workload_components",
    "workload_kind",
    "workload_pod_template",
    "workload_replicas",
    "workload_usage",
]

ResourceList = dict[str, Quantity]
Manifest = Mapping[str, Any]

_RESTART_ALWAYS = "Always"
_HUGEPAGES_PREFIX = "hugepages-"
_REQUESTS_PREFIX = "requests."
_LIMITS_PREFIX = "limits."
_DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
_POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
_QUOTA_TRACKED = ("cpu", "memory", "ephemeral-storage")
_TERMINAL_PHASES = frozenset({"Failed", "Succeeded"})

_ONE = Quantity.from_int(1)
_ZERO = Quantity.from_int(0)



class PodSpecError(ValueError):
    """The object does not have the shape of the Kubernetes object it should be."""


class UnsupportedWorkloadError(ValueError):
    """No pod template/replica rule is registered for this apiVersion/kind."""


# ---------------------------------------------------------------------------------------
# Reading the dict


def _mapping(value: Any, where: str) -> Mapping[str, Any] | None:
    """A JSON object, or None for an absent/null field (Go's nil)."""
    if value is None or isinstance(value, Mapping):
        return value
    raise PodSpecError(f"{where} must be an object, got {type(value).__name__}")


def _sequence(value: Any, where: str) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return value
    raise PodSpecError(f"{where} must be a list, got {type(value).__name__}")


def _string(value: Any, where: str) -> str:
    """A string field, with Go's zero value for absent/null."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise PodSpecError(f"{where} must be a string, got {type(value).__name__}")


def _quantity(value: Any, where: str) -> Quantity:
    """Decode one quantity the way the API server decodes a JSON string, number or null (zero)."""
    if isinstance(value, Quantity):
        return value
    if value is None:
        return _ZERO
    if isinstance(value, str):
        text = str.strip(value)
    elif isinstance(value, bool):
        raise QuantityError(f"{where}: invalid quantity {value!r}: expected a string or a number", value)
    elif isinstance(value, int):
        return Quantity.from_int(value)
    elif isinstance(value, float) and math.isfinite(value):
        text = float.__repr__(value)
    elif isinstance(value, Decimal) and Decimal.is_finite(value):
        text = Decimal.__str__(value)
    else:
        raise QuantityError(f"{where}: invalid quantity {_short(value)}: expected a string or a number", value)
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        raise QuantityError(f"{where}: {exc}", value) from None


_SAFE_REPR_TYPES = (str, bytes, int, float, bool, type(None), Decimal)


def _short(value: Any) -> str:
    """repr() for built-in types only: an arbitrary object's ``__repr__`` could raise."""
    if type(value) not in _SAFE_REPR_TYPES:
        return f"<{type(value).__name__} object>"
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + "..."


def _resource_list(value: Any, where: str) -> ResourceList | None:
    """A ResourceList field; None keeps Go's nil-versus-empty distinction the resize rules need."""
    raw = _mapping(value, where)
    if raw is None:
        return None
    result: ResourceList = {}
    for name, amount in raw.items():
        if not isinstance(name, str):
            raise PodSpecError(f"{where} has a non-string resource name {_short(name)}")
        result[name] = _quantity(amount, f"{where}[{name!r}]")
    return result


def _pod(pod: Any) -> Mapping[str, Any]:
    if not isinstance(pod, Mapping):
        raise PodSpecError(f"a pod must be a mapping, got {type(pod).__name__}")
    return pod


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return _mapping(obj.get(key), key) or {}


@dataclass(frozen=True, slots=True)
class _Container:
    name: str
    restartable: bool
    resources: ResourceList | None


@dataclass(frozen=True, slots=True)
class _Status:
    actuated: ResourceList | None
    allocated: ResourceList | None


def _named_entries(section: Mapping[str, Any], section_name: str, key: str) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """The objects listed at ``section[key]`` (a container or a container status), each with its path and name."""
    for index, raw in enumerate(_sequence(section.get(key), f"{section_name}.{key}")):
        where = f"{section_name}.{key}[{index}]"
        entry = _mapping(raw, where)
        if entry is None:
            raise PodSpecError(f"{where} must be an object, got null")
        yield where, entry, _string(entry.get("name"), f"{where}.name")


def _containers(spec: Mapping[str, Any], key: str, field: str) -> list[_Container]:
    """Containers of ``spec[key]`` with their ``resources[field]`` parsed."""
    result = []
    for where, container, name in _named_entries(spec, "spec", key):
        policy = _string(container.get("restartPolicy"), f"{where}.restartPolicy")
        resources = _mapping(container.get("resources"), f"{where}.resources") or {}
        label = f"container {name!r}" if name else where
        result.append(
            _Container(name, policy == _RESTART_ALWAYS, _resource_list(resources.get(field), f"{label}: resources.{field}"))
        )
    return result


def _statuses(status: Mapping[str, Any], field: str) -> dict[str, _Status]:
    """Container statuses by name, regular ones winning, as upstream's findContainerStatus searches."""
    found: dict[str, _Status] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for where, entry, name in _named_entries(status, "status", key):
            if name in found:
                continue
            label = f"status of container {name!r}" if name else where
            resources = _mapping(entry.get("resources"), f"{where}.resources")
            actuated = None if resources is None else _resource_list(resources.get(field), f"{label}: resources.{field}")
            allocated = None
            if field == "requests":
                allocated = _resource_list(entry.get("allocatedResources"), f"{label}: allocatedResources")
            found[name] = _Status(actuated, allocated)
    return found


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    """Upstream IsPodResizeInfeasible: the first PodResizePending condition decides."""
    for index, raw in enumerate(_sequence(status.get("conditions"), "status.conditions")):
        condition = _mapping(raw, f"status.conditions[{index}]") or {}
        if _string(condition.get("type"), f"status.conditions[{index}].type") == "PodResizePending":
            return _string(condition.get("reason"), f"status.conditions[{index}].reason") == "Infeasible"
    return False


# ---------------------------------------------------------------------------------------
# ResourceList arithmetic (upstream addResourceList / maxResourceList / max)


def _add_into(target: ResourceList, source: ResourceList | None) -> None:
    if source:
        for name, amount in source.items():
            current = target.get(name)
            target[name] = amount if current is None else current + amount


def _max_into(target: ResourceList, source: ResourceList | None) -> None:
    """Keep the larger value per resource; on a tie the one already there stays (and its format)."""
    if source:
        for name, amount in source.items():
            current = target.get(name)
            if current is None or amount > current:
                target[name] = amount


def _max_of(first: ResourceList, *others: ResourceList) -> ResourceList:
    result = dict(first)
    for other in others:
        _max_into(result, other)
    return result


def _aggregate(
    containers: list[_Container],
    init_containers: list[_Container],
    pick: Callable[[_Container], ResourceList | None],
) -> ResourceList:
    """The sidecar-aware pod total (KEP-753) of whatever ``pick`` reads from each container."""
    total: ResourceList = {}
    for container in containers:
        _add_into(total, pick(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in init_containers:
        own = pick(container)
        if container.restartable:
            _add_into(total, own)
            _add_into(sidecars, own)
            during = sidecars
        else:
            during = {}
            _add_into(during, own)
            _add_into(during, sidecars)
        _max_into(init_peak, during)
    _max_into(total, init_peak)
    return total


def _spec_resources(container: _Container) -> ResourceList | None:
    return container.resources


def _container_totals(pod: Mapping[str, Any], field: str, use_status: bool) -> ResourceList:
    spec = _section(pod, "spec")
    containers = _containers(spec, "containers", field)
    init_containers = _containers(spec, "initContainers", field)
    declared = _aggregate(containers, init_containers, _spec_resources)
    if not use_status:
        return declared
    status = _section(pod, "status")
    infeasible = _resize_infeasible(status)
    statuses = _statuses(status, field)
    if not statuses and not infeasible:  # allocation and runtime fall back to the spec: both are ``declared``
        return declared
    if field == "limits":
        actuated = _aggregate(containers, init_containers, _status_or_spec(statuses, infeasible, "actuated"))
        return dict(actuated) if infeasible else _max_of(declared, actuated)
    allocated = _aggregate(containers, init_containers, _status_or_spec(statuses, infeasible, "allocated"))
    actuated = _aggregate(containers, init_containers, _status_or_spec(statuses, infeasible, "actuated", "allocated"))
    return _max_of(actuated, allocated) if infeasible else _max_of(declared, actuated, allocated)


def _status_or_spec(statuses: dict[str, _Status], infeasible: bool, *reports: str) -> Callable[[_Container], ResourceList | None]:
    """What a container has, as upstream's containerAllocatedRequests (``"allocated"``), containerActuatedRequests
    (``"actuated", "allocated"``) and containerActuatedLimits (``"actuated"``: limits have no allocation) read it:
    the first of ``reports`` its status has, else the spec unless the resize is infeasible."""

    def pick(container: _Container) -> ResourceList | None:
        status = statuses.get(container.name)
        if status is not None:
            for report in reports:
                found = getattr(status, report)
                if found is not None:
                    return found
        return None if infeasible else container.resources

    return pick


# ---------------------------------------------------------------------------------------
# Pod totals


def _is_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(_HUGEPAGES_PREFIX)


def _names_pod_level_resource(resources: Mapping[str, Any], field: str) -> bool:
    raw = _mapping(resources.get(field), f"spec.resources.{field}") or {}
    return any(isinstance(name, str) and _is_pod_level_resource(name) for name in raw)


def _apply_pod_level(totals: ResourceList, resources: Mapping[str, Any], field: str) -> None:
    pod_level = _resource_list(resources.get(field), f"spec.resources.{field}") or {}
    for name, amount in pod_level.items():
        if _is_pod_level_resource(name):
            totals[name] = amount


def _pod_totals(pod: Mapping[str, Any], field: str, pod_level_when: tuple[str, ...], skip_pod_level_resources: bool,
                use_status_resources: bool) -> tuple[ResourceList, Mapping[str, Any]]:
    """The containers' ``field`` totals, replaced by pod-level resources where the pod names
    one in any of ``pod_level_when`` (upstream: requests for PodRequests, either for PodLimits);
    and the pod's spec."""
    pod = _pod(pod)
    totals = _container_totals(pod, field, use_status_resources)
    spec = _section(pod, "spec")
    resources = _mapping(spec.get("resources"), "spec.resources")
    if not skip_pod_level_resources and resources is not None and any(
            _names_pod_level_resource(resources, name) for name in pod_level_when):
        _apply_pod_level(totals, resources, field)
    return totals, spec


def pod_requests(
    pod: Mapping[str, Any],
    *,
    exclude_overhead: bool = False,
    skip_pod_level_resources: bool = False,
    use_status_resources: bool = False,
) -> ResourceList:
    """What the scheduler reserves for the pod (upstream ``PodRequests``)."""
    totals, spec = _pod_totals(pod, "requests", ("requests",), skip_pod_level_resources, use_status_resources)
    if not exclude_overhead:
        _add_into(totals, _resource_list(spec.get("overhead"), "spec.overhead"))
    return totals


def pod_limits(
    pod: Mapping[str, Any],
    *,
    exclude_overhead: bool = False,
    skip_pod_level_resources: bool = False,
    use_status_resources: bool = False,
) -> ResourceList:
    """The pod's effective limits (upstream ``PodLimits``); an absent resource is unlimited."""
    totals, spec = _pod_totals(pod, "limits", ("requests", "limits"), skip_pod_level_resources, use_status_resources)
    if not exclude_overhead:
        for name, amount in (_resource_list(spec.get("overhead"), "spec.overhead") or {}).items():
            current = totals.get(name)
            if current is not None and not current.is_zero():
                totals[name] = current + amount
    return totals


# ---------------------------------------------------------------------------------------
# ResourceQuota usage


def _is_extended_resource(name: str) -> bool:
    """Upstream IsExtendedResourceName: outside kubernetes.io and valid once prefixed with ``requests.``."""
    native = "/" not in name or "kubernetes.io/" in name
    if native or name.startswith(_REQUESTS_PREFIX):
        return False
    return is_valid_label_key(_REQUESTS_PREFIX + name)  # IsQualifiedName, as a label key is


def _is_quota_extended_resource(name: str) -> bool:
    """Upstream IsDRAExtendedResourceName: extended resources plus DRA device-class names."""
    return _is_extended_resource(name) or name.startswith(_DEVICE_CLASS_PREFIX)


def _compute_usage(requests: ResourceList, limits: ResourceList) -> ResourceList:
    """Upstream podComputeUsageHelper: which quota names a pod's totals are charged to.

    Extended resources and hugepages are charged only as requests (no overcommit, so
    there is no ``limits.<name>`` quota for them); hugepages also under their bare name.
    """
    usage: ResourceList = {"pods": _ONE}
    for name in _QUOTA_TRACKED:
        if name in requests:
            usage[name] = requests[name]
            usage[_REQUESTS_PREFIX + name] = requests[name]
        if name in limits:
            usage[_LIMITS_PREFIX + name] = limits[name]
    for name, amount in requests.items():
        if name.startswith(_HUGEPAGES_PREFIX):
            usage[name] = amount
            usage[_REQUESTS_PREFIX + name] = amount
        if _is_quota_extended_resource(name):
            usage[_REQUESTS_PREFIX + name] = amount
    return usage


def _parse_timestamp(value: Any, where: str) -> datetime:
    text = _string(value, where)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise PodSpecError(f"{where} must be an RFC 3339 timestamp, got {text!r}") from None
    if moment.tzinfo is None:
        raise PodSpecError(f"{where} must be an RFC 3339 timestamp with a UTC offset, got {text!r}")
    return moment


def _counts_for_quota(pod: Mapping[str, Any], now: datetime | None) -> bool:
    """Upstream QuotaV1Pod: terminal pods, and pods deleted longer ago than their grace period, are free."""
    phase = _string(_section(pod, "status").get("phase"), "status.phase")
    if phase in _TERMINAL_PHASES:
        return False
    metadata = _section(pod, "metadata")
    deleted_at, grace = metadata.get("deletionTimestamp"), metadata.get("deletionGracePeriodSeconds")
    if deleted_at is None or grace is None:
        return True
    if isinstance(grace, bool) or not isinstance(grace, int):
        raise PodSpecError(f"metadata.deletionGracePeriodSeconds must be an integer, got {type(grace).__name__}")
    deadline_base = _parse_timestamp(deleted_at, "metadata.deletionTimestamp")
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        raise ValueError("now must be a timezone-aware datetime")
    try:
        deadline = deadline_base + timedelta(seconds=grace)
    except OverflowError:
        return grace > 0
    return not now > deadline


def quota_usage(pod: Mapping[str, Any], *, now: datetime | None = None) -> ResourceList:
    """The ResourceQuota pod evaluator's ``Usage()`` with today's default feature gates.

    ``count/pods`` is always 1.  A pod that is terminal (phase Succeeded/Failed) or whose
    deletion grace period has passed (judged at ``now``, default the current time) is
    charged nothing else; otherwise ``pods`` is 1 and the compute resources come from
    ``pod_requests``/``pod_limits`` with status resources (InPlacePodVerticalScaling, GA)
    and pod-level resources (PodLevelResources, beta and on) taken into account.
    """
    pod = _pod(pod)
    usage: ResourceList = {"count/pods": _ONE}
    if not _counts_for_quota(pod, now):
        return usage
    requests = pod_requests(pod, use_status_resources=True)
    limits = pod_limits(pod, use_status_resources=True)
    _add_into(usage, _compute_usage(requests, limits))
    return usage


# ---------------------------------------------------------------------------------------
# Validation (pkg/apis/core/validation: validateResourceRequirements)

_IS_NEGATIVE = "must be greater than or equal to 0"
_IS_NOT_INTEGER = "must be an integer"


def _overcommit_allowed(name: str) -> bool:
    """Upstream IsOvercommitAllowed: native resources other than hugepages."""
    native = "/" not in name or "kubernetes.io/" in name
    return native and not name.startswith(_HUGEPAGES_PREFIX)


def _requirement_errors(resources: Mapping[str, Any], path: str, *, limits_only: bool = False) -> list[str]:
    """The quantity rules of upstream ``validateResourceRequirements`` for one ``resources`` object.

    Every request and limit must be non-negative (``ValidateNonnegativeQuantity``), extended
    resources whole numbers (``IsIntegerResourceName``), a request at most its limit, and a
    resource that cannot be overcommitted (extended resources, hugepages) needs a limit equal
    to its request. Resource names and hugepage divisibility are not checked here.
    """
    errors: list[str] = []
    parsed: dict[str, ResourceList] = {}
    for field in ("limits",) if limits_only else ("limits", "requests"):
        raw = _mapping(resources.get(field), f"{path}.{field}") or {}
        parsed[field] = {}
        for name, value in raw.items():
            where = f"{path}.{field}[{name}]"
            try:
                amount = _quantity(value, where)
            except QuantityError as exc:
                errors.append(f"{where}: Invalid value: {_short(value)}: {exc}")
                continue
            parsed[field][str(name)] = amount
            if amount.sign() < 0:
                errors.append(f'{where}: Invalid value: "{amount}": {_IS_NEGATIVE}')
            elif _is_extended_resource(str(name)) and amount.milli_value() % 1000:
                errors.append(f'{where}: Invalid value: "{amount}": {_IS_NOT_INTEGER}')
    limits = parsed.get("limits", {})
    for name, request in parsed.get("requests", {}).items():
        limit = limits.get(name)
        if limit is not None:
            if request != limit and not _overcommit_allowed(name):
                errors.append(f'{path}.requests: Invalid value: "{request}": must be equal to {name} limit of {limit}')
            elif request > limit:
                errors.append(f'{path}.requests: Invalid value: "{request}": must be less than or equal to {name} limit of {limit}')
        elif not _overcommit_allowed(name):
            errors.append(f"{path}.limits: Required value: Limit must be set for non overcommitable resources")
    return errors


def validate_pod_resources(pod: Mapping[str, Any], path: str = "") -> list[str]:
    """The resource errors the API server's pod validation reports for ``pod`` (a Pod or a pod
    template), as ``field.Error`` strings with field paths below ``path``; empty when valid.

    The rules of upstream ``validateResourceRequirements`` for every container and init
    container, the pod-level ``spec.resources`` and ``spec.overhead``: a negative quantity
    ``must be greater than or equal to 0``, an extended resource ``must be an integer``, a
    request must not exceed its limit (must equal it where overcommit is not allowed).
    Quantities themselves are parsed as ``ParseQuantity`` does, so ``"1e400"`` or a number of
    400 digits is valid here, exactly as it is for the API server.
    """
    pod = _pod(pod)
    prefix = f"{path}." if path else ""
    spec = _section(pod, "spec")
    errors: list[str] = []
    for key in ("initContainers", "containers"):
        for index, raw in enumerate(_sequence(spec.get(key), f"{prefix}spec.{key}")):
            container = _mapping(raw, f"{prefix}spec.{key}[{index}]") or {}
            resources = _mapping(container.get("resources"), f"{prefix}spec.{key}[{index}].resources") or {}
            errors += _requirement_errors(resources, f"{prefix}spec.{key}[{index}].resources")
    pod_level = _mapping(spec.get("resources"), f"{prefix}spec.resources")
    if pod_level is not None:
        errors += _requirement_errors(pod_level, f"{prefix}spec.resources")
    overhead = _mapping(spec.get("overhead"), f"{prefix}spec.overhead")
    if overhead is not None:
        errors += _requirement_errors({"limits": overhead}, f"{prefix}spec.overhead", limits_only=True)
    return [e.replace(".overhead.limits[", ".overhead[") for e in errors]


# ---------------------------------------------------------------------------------------
# Workloads

ReplicasFn = Callable[[Manifest], int]
TemplateFn = Callable[[Manifest], Manifest]
RolesFn = Callable[[Manifest], Iterable[Manifest]]


@dataclass(frozen=True, slots=True)
class _WorkloadKind:
    replicas_fn: ReplicasFn
    template_fn: TemplateFn
    roles_fn: RolesFn | None


_WORKLOAD_KINDS: dict[str, _WorkloadKind] = {}


def register_workload_kind(
    api_group_kind: str,
    replicas_fn: ReplicasFn,
    template_fn: TemplateFn,
    *,
    roles_fn: RolesFn | None = None,
) -> None:
    """Teach the workload functions a kind, keyed ``"<api group>/<Kind>"`` (core kinds: ``"<Kind>"``).

    ``replicas_fn`` and ``template_fn`` receive the object, or with ``roles_fn`` each role
    it yields, for kinds that run several pod templates (Kubeflow's ``tfReplicaSpecs``).
    Registering an existing key replaces it.  KeyError/TypeError/AttributeError/IndexError
    raised by these functions are reported as :class:`PodSpecError`.
    """
    if not isinstance(api_group_kind, str) or not api_group_kind:
        raise ValueError("api_group_kind must be a non-empty string such as 'apps/Deployment'")
    for name, fn in (("replicas_fn", replicas_fn), ("template_fn", template_fn), ("roles_fn", roles_fn)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be callable")
    _WORKLOAD_KINDS[api_group_kind] = _WorkloadKind(replicas_fn, template_fn, roles_fn)


def workload_kind(obj: Manifest) -> str:
    """The registry key of ``obj``: ``apps/v1`` + ``Deployment`` gives ``"apps/Deployment"``."""
    if not isinstance(obj, Mapping):
        raise PodSpecError(f"a workload must be a mapping, got {type(obj).__name__}")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        raise UnsupportedWorkloadError("a workload needs string apiVersion and kind fields to be identified")
    group = api_version.rpartition("/")[0]
    return f"{group}/{kind}" if group else kind


def _call(key: str, what: str, fn: Callable[[Manifest], Any], arg: Manifest) -> Any:
    try:
        return fn(arg)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise PodSpecError(f"{key}: cannot read the {what} from this object ({exc!r})") from exc


def workload_components(obj: Manifest) -> list[tuple[int, Manifest]]:
    """``(replicas, pod template)`` for each pod template the workload runs."""
    key = workload_kind(obj)
    entry = _WORKLOAD_KINDS.get(key)
    if entry is None:
        known = ", ".join(sorted(_WORKLOAD_KINDS))
        raise UnsupportedWorkloadError(f"no workload rule for {key!r}; known kinds: {known}")
    roles = [obj] if entry.roles_fn is None else list(_call(key, "roles", entry.roles_fn, obj))
    components = []
    for role in roles:
        replicas = _call(key, "replica count", entry.replicas_fn, role)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise PodSpecError(f"{key}: the replica count must be a non-negative integer, got {_short(replicas)}")
        template = _call(key, "pod template", entry.template_fn, role)
        if not isinstance(template, Mapping):
            raise PodSpecError(f"{key}: the pod template must be an object, got {type(template).__name__}")
        components.append((replicas, template))
    return components


def workload_replicas(obj: Manifest) -> int:
    """Pods the workload runs, summed over its templates."""
    return sum(replicas for replicas, _ in workload_components(obj))


def workload_pod_template(obj: Manifest) -> Manifest:
    """The workload's pod template; for multi-role kinds (TFJob) the first role's, in spec order."""
    components = workload_components(obj)
    if not components:
        raise PodSpecError(f"{workload_kind(obj)}: the object defines no pod template")
    return components[0][1]


def workload_usage(obj: Manifest) -> ResourceList:
    """Quota usage of the whole workload: each template's spec as a pending pod, times its replicas.

    It is the workload's desired footprint: a bare Pod is counted from its spec even when it
    has already finished, and a template's metadata cannot mark it as deleted.
    """
    total: ResourceList = {}
    for replicas, template in workload_components(obj):
        pending = {"spec": template.get("spec")}
        _add_into(total, {name: amount * replicas for name, amount in quota_usage(pending).items()})
    return total


def _count(value: Any, where: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PodSpecError(f"{where} must be a non-negative integer, got {_short(value)}")
    return value


def _spec_replicas(obj: Manifest) -> int:
    """``spec.replicas``, which the API server defaults to 1."""
    return _count(_section(obj, "spec").get("replicas"), "spec.replicas", 1)


def _spec_template(obj: Manifest) -> Manifest:
    template = _mapping(_section(obj, "spec").get("template"), "spec.template")
    if template is None:
        raise PodSpecError("spec.template is missing")
    return template


def _job_pods(job: Manifest) -> int:
    """Pods the Job controller keeps running: none while suspended, else ``spec.parallelism``
    (default 1) capped at the completions still outstanding when ``spec.completions`` is set.

    Backoff and finished-job conditions are not modelled; a finished Job with completions
    has none outstanding anyway.
    """
    spec = _section(job, "spec")
    if spec.get("suspend") is True:
        return 0
    parallelism = _count(spec.get("parallelism"), "spec.parallelism", 1)
    if spec.get("completions") is None:
        return parallelism
    completions = _count(spec.get("completions"), "spec.completions", 1)
    succeeded = _count(_section(job, "status").get("succeeded"), "status.succeeded", 0)
    return min(parallelism, max(completions - succeeded, 0))


def _rollout_template(rollout: Manifest) -> Manifest:
    spec = _section(rollout, "spec")
    if spec.get("template") is None and spec.get("workloadRef") is not None:
        raise PodSpecError(
            "argoproj.io/Rollout: spec.workloadRef points at another object; its pod template is not in this Rollout"
        )
    return _spec_template(rollout)


def _tfjob_roles(job: Manifest) -> list[Manifest]:
    replica_specs = _mapping(_section(job, "spec").get("tfReplicaSpecs"), "spec.tfReplicaSpecs")
    if replica_specs is None:
        raise PodSpecError("kubeflow.org/TFJob: spec.tfReplicaSpecs is missing")
    roles = []
    for role, replica_spec in replica_specs.items():
        entry = _mapping(replica_spec, f"spec.tfReplicaSpecs[{role!r}]")
        if entry is None:
            raise PodSpecError(f"spec.tfReplicaSpecs[{role!r}] must be an object, got null")
        roles.append(entry)
    return roles


def _role_replicas(role: Manifest) -> int:
    """A Kubeflow replica spec's ``replicas``, which the training operator defaults to 1."""
    return _count(role.get("replicas"), "replicas", 1)


def _role_template(role: Manifest) -> Manifest:
    template = _mapping(role.get("template"), "template")
    if template is None:
        raise PodSpecError("a tfReplicaSpecs role has no template")
    return template


def _itself(obj: Manifest) -> Manifest:
    return obj


def _one(_: Manifest) -> int:
    return 1


for _key in ("apps/Deployment", "apps/StatefulSet", "apps/ReplicaSet", "ReplicationController"):
    register_workload_kind(_key, _spec_replicas, _spec_template)
register_workload_kind("batch/Job", _job_pods, _spec_template)
register_workload_kind("Pod", _one, _itself)
register_workload_kind("argoproj.io/Rollout", _spec_replicas, _rollout_template)
register_workload_kind("kubeflow.org/TFJob", _role_replicas, _role_template, roles_fn=_tfjob_roles)
del _key
