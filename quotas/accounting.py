"""The arithmetic of business-group resource quotas (bizrq), free of Django and of storage.

Everything that decides whether quota is available lives here as pure functions over
``{resource name: Quantity}`` maps, so the webhook, the API, the reconciler and the what-if
page cannot disagree about a number, and the rules can be tested without a database.

Resource names follow Kubernetes ResourceQuota (``limits.cpu``, ``requests.nvidia.com/gpu``,
``pods``, ``count/pods`` ...) with two bizrq families on top:

* model-specific keys ``<base>.<model>`` (``limits.cpu.A4``, ``requests.nvidia.com/gpu.A30``):
  a workload labelled with a model is charged its usage of ``<base>`` a second time under the
  model key, so both the model limit and the base limit bind;
* cash keys ``cash/<base>`` (``cash/limits.cpu``): a budget of resource-hours, accrued by the
  reconciler into ``self_used["cash/<base>"]``; once spent, new usage of ``<base>`` is refused.

Quantities keep Kubernetes semantics (``kube.quantity``); no float is ever involved.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from kube.quantity import Quantity, QuantityError, parse_quantity

from .display import is_binary, readable
from kube.resources import PodSpecError, workload_usage

__all__ = [
    "CASH_PREFIX",
    "GROUP_LABEL",
    "MODEL_LABELS",
    "Exceeded",
    "PodSpan",
    "QuotaSpecError",
    "ResourceList",
    "TreeError",
    "accrue_cash",
    "add",
    "burn_rate",
    "canonical",
    "cash_base",
    "check_admission",
    "children_used",
    "denial_message",
    "group_of",
    "group_status",
    "model_kind",
    "parse_hard",
    "prefix_resource",
    "projected_exhaustion",
    "scaled",
    "subtract",
    "tracked",
    "usage_delta",
    "validate_child_hard",
    "validate_move",
    "validate_resize",
    "workload_charge",
    "workload_charge_of",
]

GROUP_LABEL = "biz.group.resource.quota"
MODEL_LABELS = {
    "cpu": "biz.group.resource.quota/cpu-type",
    "memory": "biz.group.resource.quota/memory-type",
    "gpu": "biz.group.resource.quota/gpu-type",
}
CASH_PREFIX = "cash/"

ResourceList = dict[str, Quantity]

_ZERO = Quantity.from_int(0)
_REQUESTS = "requests."
_LIMITS = "limits."
_HUGEPAGES = "hugepages-"
_DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
_GPU_NAME = "gpu"
_MICROS_PER_HOUR = 3_600_000_000

# Bases whose model copies are chosen by the cpu-type / memory-type labels.  GPU bases are
# open-ended (any vendor's ``<domain>/gpu``), so they are recognised by shape instead.
_FIXED_MODEL_BASES = {
    "cpu": "cpu",
    "requests.cpu": "cpu",
    "limits.cpu": "cpu",
    "memory": "memory",
    "requests.memory": "memory",
    "limits.memory": "memory",
}

# Upstream IsStandardQuotaResourceName (without the hugepages prefixes, checked apart).
_STANDARD_QUOTA_NAMES = frozenset({
    "cpu", "memory", "ephemeral-storage",
    "requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
    "persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers",
})
# Upstream IsIntegerResourceName for names a quota can hold: object counts are whole numbers.
_INTEGER_QUOTA_NAMES = frozenset({
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
    "configmaps", "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})
# What the ResourceQuota pod evaluator can charge a pod, i.e. what can burn cash over time.
_POD_CHARGED_NAMES = frozenset({
    "pods", "count/pods", "cpu", "memory", "ephemeral-storage",
    "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage",
})

_QUALIFIED_PART = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]").fullmatch
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*").fullmatch
_MODEL = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?").fullmatch
_MODEL_MAX = 63


# ---------------------------------------------------------------------------------------
# Resource names


def _is_qualified_name(value: str) -> bool:
    """Upstream ``validation.IsQualifiedName``: the shape every quota resource name must have."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or _DNS1123_SUBDOMAIN(prefix) is None):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_PART(name) is not None


def _is_extended_resource(name: str) -> bool:
    """Upstream ``IsExtendedResourceName``: a vendor resource such as ``nvidia.com/gpu``."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith(_REQUESTS):
        return False
    return _is_qualified_name(_REQUESTS + name)


def _is_model(value: str) -> bool:
    """A model is a label value (it comes from a label), and never empty."""
    return 0 < len(value) <= _MODEL_MAX and _MODEL(value) is not None


def _is_quota_name(key: str) -> bool:
    """Upstream ``ValidateResourceQuotaResourceName``: qualified, and standard unless prefixed."""
    if not _is_qualified_name(key):
        return False
    if "/" in key:
        return True
    return key in _STANDARD_QUOTA_NAMES or key.startswith((_HUGEPAGES, _REQUESTS + _HUGEPAGES))


def _is_pod_charged(key: str) -> bool:
    """Whether the pod evaluator can ever put this key in a charge (so cash on it can accrue)."""
    if key in _POD_CHARGED_NAMES or key.startswith((_HUGEPAGES, _REQUESTS + _HUGEPAGES)):
        return True
    if key.startswith(_REQUESTS):
        rest = key[len(_REQUESTS):]
        return _is_extended_resource(rest) or (rest.startswith(_DEVICE_CLASS_PREFIX) and _is_qualified_name(rest))
    return False


def _gpu_kind(base: str) -> bool:
    """``requests.<x>``/``limits.<x>`` where ``<x>`` is an extended resource named ``.../gpu``."""
    for prefix in (_REQUESTS, _LIMITS):
        if base.startswith(prefix):
            rest = base[len(prefix):]
            return rest.rpartition("/")[2] == _GPU_NAME and _is_extended_resource(rest)
    return False


def model_kind(base: str) -> str | None:
    """Which model label (``cpu``/``memory``/``gpu``) picks model copies of ``base``, if any."""
    kind = _FIXED_MODEL_BASES.get(base)
    if kind is not None:
        return kind
    return "gpu" if _gpu_kind(base) else None


def prefix_resource(key: str) -> str | None:
    """The base a model-specific key also counts toward, or None for any other key.

    The model is split off at a known base rather than at the last dot, because both models
    (``v1.2``) and vendor domains (``nvidia.com``) contain dots: ``requests.nvidia.com/gpu``
    is a base, not the model ``com/gpu`` of ``requests.nvidia``.
    """
    if key.startswith(CASH_PREFIX):
        return None
    for base in _FIXED_MODEL_BASES:
        if key.startswith(base + ".") and _is_model(key[len(base) + 1:]):
            return base
    head, slash, tail = key.rpartition("/")
    if slash and tail.startswith(_GPU_NAME + ".") and _is_model(tail[len(_GPU_NAME) + 1:]):
        base = f"{head}/{_GPU_NAME}"
        if _gpu_kind(base):
            return base
    return None


def cash_base(key: str) -> str | None:
    """The resource a cash key budgets over time, or None for a key that is not cash."""
    if key.startswith(CASH_PREFIX) and len(key) > len(CASH_PREFIX):
        return key[len(CASH_PREFIX):]
    return None


# ---------------------------------------------------------------------------------------
# Parsing a group's hard


class QuotaSpecError(ValueError):
    """A ``hard`` map the API must refuse; ``field`` points the form/API error at the key."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return self.message


def _key_problem(key: str) -> str | None:
    """Why ``key`` cannot be in a hard map, or None when it can."""
    base = cash_base(key)
    if key.startswith(CASH_PREFIX):
        if base is None:
            return f"{key!r} names no resource; write cash/<resource>, e.g. cash/limits.cpu"
        if cash_base(base) is not None:
            return f"{key!r}: cash of cash is meaningless; write cash/<resource>, e.g. cash/limits.cpu"
        model_base = prefix_resource(base)
        if model_base is not None:
            return (f"{key!r}: cash is budgeted per resource, not per model; "
                    f"use cash/{model_base} (model usage counts toward {model_base})")
        if not _is_pod_charged(base):
            return (f"{key!r}: {base!r} is not a resource workloads are charged over time; "
                    "cash applies to pod resources such as limits.cpu, requests.cpu or requests.nvidia.com/gpu")
        return None
    if prefix_resource(key) is not None or _is_quota_name(key):
        return None
    return (f"{key!r} is not a ResourceQuota resource name (e.g. limits.cpu, requests.nvidia.com/gpu, pods, "
            "count/deployments.apps), a model-specific one (e.g. limits.cpu.A4) or a cash one (e.g. cash/limits.cpu)")


def _hard_value(key: str, value: Any) -> Quantity:
    """One hard amount as the API receives it: a quantity string or a JSON number."""
    field = f"hard.{key}"
    if isinstance(value, bool) or value is None:
        raise QuotaSpecError(field, f"{key}: expected a quantity such as \"10\", \"500m\" or \"4Gi\", got {value!r}")
    try:
        if isinstance(value, int):
            amount = Quantity.from_int(value)
        elif isinstance(value, float) and math.isfinite(value):
            amount = parse_quantity(float.__repr__(value))
        elif isinstance(value, str):
            amount = parse_quantity(value.strip())
        else:
            raise QuotaSpecError(field, f"{key}: expected a quantity such as \"10\", \"500m\" or \"4Gi\", "
                                        f"got a {type(value).__name__}")
    except QuantityError as exc:
        raise QuotaSpecError(field, f"{key}: {exc}") from None
    if amount.sign() < 0:
        raise QuotaSpecError(field, f"{key}: must be greater than or equal to 0, got {amount}")
    if key in _INTEGER_QUOTA_NAMES and amount.milli_value() % 1000:
        raise QuotaSpecError(field, f"{key}: must be a whole number, got {amount}")
    return amount


def parse_hard(hard: Mapping[str, Any]) -> ResourceList:
    """Validate a group's ``hard`` as submitted, so nothing unparseable is ever stored."""
    if not isinstance(hard, Mapping):
        raise QuotaSpecError("hard", f"hard must be an object mapping resource names to quantities, "
                                     f"got {type(hard).__name__}")
    result: ResourceList = {}
    for key, value in hard.items():
        if not isinstance(key, str):
            raise QuotaSpecError("hard", f"resource names must be strings, got {type(key).__name__}")
        problem = _key_problem(key)
        if problem is not None:
            raise QuotaSpecError(f"hard.{key}", problem)
        result[key] = _hard_value(key, value)
    return result


def canonical(resources: Mapping[str, Quantity]) -> dict[str, str]:
    """The stored/JSON form: canonical strings, sorted keys, so equal maps serialise equally."""
    return {key: str(resources[key]) for key in sorted(resources)}


# ---------------------------------------------------------------------------------------
# ResourceList arithmetic


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """Per-key sum over the union; a key missing on one side counts as zero."""
    result = dict(a)
    for key, amount in b.items():
        current = result.get(key)
        result[key] = amount if current is None else current + amount
    return result


def subtract(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """Per-key difference over the union; a key missing on one side counts as zero."""
    result = dict(a)
    for key, amount in b.items():
        result[key] = result.get(key, _ZERO) - amount
    return result


def scaled(resources: Mapping[str, Quantity], factor: int) -> ResourceList:
    """Per-replica usage times a replica count (integers only: replicas are whole)."""
    if isinstance(factor, bool) or not isinstance(factor, int):
        raise TypeError(f"factor must be an int, got {type(factor).__name__}")
    return {key: amount * factor for key, amount in resources.items()}


def usage_delta(new: Mapping[str, Quantity], old: Mapping[str, Quantity]) -> ResourceList:
    """What an update changes; unchanged keys are dropped so they neither deny nor get written."""
    return {key: amount for key, amount in subtract(new, old).items() if not amount.is_zero()}


def tracked(charge: Mapping[str, Quantity], hard_keys: Iterable[str]) -> ResourceList:
    """The part of a charge a group accounts for.

    Like ResourceQuota, a group only tracks resources its hard names.  A ``cash/<base>`` key
    also makes ``<base>`` tracked: the cash check needs the delta of ``<base>`` to know whether
    a request adds usage, even when the group has no plain limit on ``<base>``.
    """
    keys = set(hard_keys)
    keys.update(base for base in map(cash_base, list(keys)) if base is not None)
    return {key: amount for key, amount in charge.items() if key in keys}


# ---------------------------------------------------------------------------------------
# Workloads


def group_of(labels: Mapping[str, str] | None) -> str | None:
    """The quota group a workload belongs to; a blank label means "not under bizrq"."""
    if not isinstance(labels, Mapping):
        return None
    value = labels.get(GROUP_LABEL)
    if not isinstance(value, str):
        return None
    return value.strip() or None


def _model_of(labels: Mapping[str, str], kind: str) -> str | None:
    value = labels.get(MODEL_LABELS[kind])
    if not isinstance(value, str):
        return None
    return value.strip() or None


def workload_charge(usage: Mapping[str, Quantity], labels: Mapping[str, str] | None) -> ResourceList:
    """A workload's usage plus its model-specific copies.

    The base keys stay: model usage counts toward its prefix resource, so ``limits.cpu: 10``
    still binds a workload labelled ``cpu-type: A4``.
    """
    charge: ResourceList = dict(usage)
    if not isinstance(labels, Mapping):
        return charge
    models = {kind: _model_of(labels, kind) for kind in MODEL_LABELS}
    for base, amount in usage.items():
        kind = model_kind(base)
        model = models.get(kind) if kind is not None else None
        if model is not None:
            charge[f"{base}.{model}"] = amount
    return charge


def workload_charge_of(manifest: Mapping[str, Any]) -> ResourceList:
    """The full charge of a workload manifest: replicas × pod template, model copies by its labels."""
    usage = workload_usage(manifest)
    metadata = manifest.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise PodSpecError(f"metadata must be an object, got {type(metadata).__name__}")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise PodSpecError(f"metadata.labels must be an object, got {type(labels).__name__}")
    return workload_charge(usage, labels)


# ---------------------------------------------------------------------------------------
# Admission


@dataclass(frozen=True)
class Exceeded:
    """One reason to deny: enough to tell the user what to shrink or whom to ask."""

    resource: str
    requested: Quantity
    used: Quantity
    hard: Quantity
    cash: bool = False


def _cash_request(base: str, delta: Mapping[str, Quantity]) -> Quantity | None:
    """The new usage of ``base`` a request adds (model keys included), or None if it adds none.

    A model switch (A4 -> A3) leaves the base delta at zero but still starts new A3 usage.
    """
    own = delta.get(base)
    if own is not None and own.sign() > 0:
        return own
    growing = [amount for key, amount in delta.items() if amount.sign() > 0 and prefix_resource(key) == base]
    return max(growing) if growing else None


def check_admission(
    hard: Mapping[str, Quantity], used: Mapping[str, Quantity], delta: Mapping[str, Quantity]
) -> list[Exceeded]:
    """Every limit the delta would break; empty means admit.

    Only growth is judged: a scale-down must pass even when the group is over hard (after a
    manual shrink), or the owner could never get back under it.
    """
    exceeded: list[Exceeded] = []
    for key in sorted(hard):
        limit = hard[key]
        spent = used.get(key, _ZERO)
        base = cash_base(key)
        if base is not None:
            request = _cash_request(base, delta)
            if request is not None and spent >= limit:
                exceeded.append(Exceeded(key, request, spent, limit, cash=True))
            continue
        request = delta.get(key)
        if request is not None and request.sign() > 0 and spent + request > limit:
            exceeded.append(Exceeded(key, request, spent, limit))
    return exceeded


def denial_message(group: str, exceeded: Sequence[Exceeded]) -> str:
    """ResourceQuota's "exceeded quota: requested/used/limited", per resource, in the units
    people read (``2,959.7``, not ``2959690m``; ``5,000``, not ``5k``; memory in ``Gi``)."""
    if not exceeded:
        raise ValueError("denial_message needs at least one exceeded resource")
    parts = []
    for item in exceeded:
        binary = is_binary(item.resource)
        used, hard = readable(str(item.used), binary), readable(str(item.hard), binary)
        if item.cash:
            parts.append(f"{item.resource} exhausted: used {used}, hard {hard}")
        else:
            parts.append(f"{item.resource} requested {readable(str(item.requested), binary)}, used {used}, hard {hard}")
    return f'exceeded quota group "{group}": ' + "; ".join(parts)


# ---------------------------------------------------------------------------------------
# The tree


class TreeError(ValueError):
    """A create/resize/move the tree rules refuse; ``code`` is stable for API clients."""

    def __init__(self, code: str, field: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return self.message


def _remaining(hard: Mapping[str, Quantity], used: Mapping[str, Quantity], key: str) -> Quantity:
    return hard.get(key, _ZERO) - used.get(key, _ZERO)


def _shown(amount: Quantity) -> Quantity:
    """Remaining quota as a person reads it: an over-used group has nothing left, not -3."""
    return amount if amount.sign() > 0 else _ZERO


def _check_parent_keys(parent: str, parent_hard: Mapping[str, Quantity], child_hard: Mapping[str, Quantity]) -> None:
    """A child limits everything its parent limits, or its workloads would escape the parent's limit."""
    for key in sorted(parent_hard):
        if key not in child_hard:
            raise TreeError("missing_key", f"hard.{key}",
                            f'parent "{parent}" limits {key}, so the child must limit it too')


def _check_parent_covers(parent: str, parent_hard: Mapping[str, Quantity], parent_used: Mapping[str, Quantity],
                         asks: Mapping[str, Quantity], asking: Callable[[Quantity], str]) -> None:
    """Each positive ask on a key the parent limits must fit in the parent's remaining.

    ``asking`` phrases the ask for the message ("the child asks for 4").
    """
    for key in sorted(asks):
        ask = asks[key]
        if key not in parent_hard or ask.sign() <= 0:
            continue
        left = _remaining(parent_hard, parent_used, key)
        if ask > left:
            raise TreeError(
                "insufficient", f"hard.{key}",
                f'parent "{parent}" has {_shown(left)} of {key} left (hard {parent_hard[key]}, '
                f"used {parent_used.get(key, _ZERO)}); " + asking(ask),
            )


def validate_child_hard(parent: str, parent_hard: Mapping[str, Quantity], parent_used: Mapping[str, Quantity],
                        child_hard: Mapping[str, Quantity]) -> None:
    """Creating a child carves its hard out of the parent; keys the parent lacks are free."""
    _check_parent_keys(parent, parent_hard, child_hard)
    _check_parent_covers(parent, parent_hard, parent_used, child_hard, lambda ask: f"the child asks for {ask}")


def _shrink_warning(key: str, amount: Quantity, in_use: Quantity) -> str:
    base = cash_base(key)
    if base is not None:
        return (f"{key} {amount} is below what has been spent ({in_use}): "
                f"new usage of {base} will be refused until it is raised")
    return f"{key} {amount} is below what is in use ({in_use}): admissions will fail until usage drops"


def validate_resize(name: str, old_hard: Mapping[str, Quantity], new_hard: Mapping[str, Quantity], *,
                    parent: str | None, parent_hard: Mapping[str, Quantity] | None,
                    parent_used: Mapping[str, Quantity] | None, children_hard: Sequence[Mapping[str, Quantity]],
                    self_used: Mapping[str, Quantity]) -> list[str]:
    """Refuse resizes that break the tree; warn (but allow) shrinking below what is in use.

    The seed lets an owner shrink below usage on purpose (to drain a group): admissions then
    fail until usage drops, which the warnings tell the UI to say.
    """
    if parent is not None:
        _check_parent_keys(parent, parent_hard or {}, new_hard)
    for key in sorted(set(new_hard) - set(old_hard)):
        if any(key not in child for child in children_hard):
            raise TreeError("children_missing_key", f"hard.{key}",
                            f'"{name}" cannot start limiting {key}: its children must limit every resource '
                            "their parent limits; add it to every child first")
    if parent is not None:
        growth = {key: amount for key, amount in usage_delta(new_hard, old_hard).items() if key in new_hard}
        _check_parent_covers(parent, parent_hard or {}, parent_used or {}, growth,
                             lambda ask: f'"{name}" asks for {ask} more')
    in_use = children_used(self_used, children_hard)
    warnings = []
    for key in sorted(new_hard):
        amount, before = new_hard[key], old_hard.get(key)
        current = in_use.get(key, _ZERO)
        if amount < current and (before is None or amount < before):
            warnings.append(_shrink_warning(key, amount, current))
    return warnings


def validate_move(source: str, target: str, amount: Mapping[str, Quantity], *,
                  source_hard: Mapping[str, Quantity], source_used: Mapping[str, Quantity],
                  target_hard: Mapping[str, Quantity]) -> None:
    """A sibling move may only hand over quota the source is not using."""
    if source == target:
        raise TreeError("same_group", "target", "choose two different sibling groups")
    if not amount:
        raise TreeError("amount", "amount", "name at least one resource to move")
    for key in sorted(amount):
        moved = amount[key]
        if moved.sign() <= 0:
            raise TreeError("amount", f"amount.{key}", f"{key}: the amount to move must be greater than 0, got {moved}")
        for group, hard in ((source, source_hard), (target, target_hard)):
            if key not in hard:
                raise TreeError("missing_key", f"amount.{key}", f'"{group}" does not limit {key}, so it cannot be moved')
        spent = source_used.get(key, _ZERO)
        if source_hard[key] - moved < spent:
            free = _shown(source_hard[key] - spent)
            raise TreeError("insufficient", f"amount.{key}",
                            f'"{source}" can give at most {free} of {key} (hard {source_hard[key]}, used {spent}); '
                            f"asked to move {moved}")


def children_used(self_used: Mapping[str, Quantity], children_hard: Iterable[Mapping[str, Quantity]]) -> ResourceList:
    """A child's hard is carved out of its parent, used or not, so it counts as the parent's use."""
    total = dict(self_used)
    for child in children_hard:
        total = add(total, child)
    return total


#: A key limited to zero but in use reads as twice full (a shrink below usage), as on the tree.
OVER_ZERO = 2.0


def fill_level(hard: Mapping[str, Quantity], used: Mapping[str, Quantity]) -> float:
    """The group's fullest resource, used/hard (cash keys included: a spent budget is a limit
    reached). Stored with the status so "near the limit" is one indexed SQL filter at 5,000 groups."""
    level = 0.0
    for key, limit in hard.items():
        spent = used.get(key, _ZERO)
        if limit.sign() <= 0:
            level = max(level, OVER_ZERO if spent.sign() > 0 else 0.0)
        else:
            level = max(level, float(spent.as_decimal() / limit.as_decimal()))
    return round(level, 4)


def group_status(hard: Mapping[str, Quantity], self_used: Mapping[str, Quantity],
                 children_hard: Iterable[Mapping[str, Quantity]]) -> tuple[ResourceList, ResourceList]:
    """``(used, self_used)`` as status shows them: exactly the keys of hard, zero when unused.

    Cash is no different: ``self_used["cash/…"]`` is what the group's own pods spent (the
    reconciler accrues it), and the children's cash hard is carved out like any other key.
    """
    total = children_used(self_used, children_hard)
    used = {key: total.get(key, _ZERO) for key in hard}
    own = {key: self_used.get(key, _ZERO) for key in hard}
    return used, own


# ---------------------------------------------------------------------------------------
# Cash


@dataclass(frozen=True)
class PodSpan:
    """A pod's per-pod charge and the time it held it; ``started`` None means it never ran."""

    charge: Mapping[str, Quantity]
    started: datetime | None
    finished: datetime | None


def _micros(span: timedelta) -> int:
    return (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds


def _overlap_micros(pod: PodSpan, since: datetime, until: datetime) -> int:
    if pod.started is None:
        return 0
    start = max(pod.started, since)
    end = until if pod.finished is None else min(pod.finished, until)
    return _micros(end - start) if end > start else 0


def accrue_cash(pods: Iterable[PodSpan], cash_keys: Iterable[str], since: datetime, until: datetime) -> ResourceList:
    """Resource-hours the pods spent in ``[since, until)``, per cash key.

    Summed exactly and rounded up to a milli unit-hour once per key, like Kubernetes'
    ``MilliValue``: a budget is never under-charged.  Each call rounds on its own, so a
    reconciler that accrues every few minutes over-charges at most 0.001 per key per call.
    """
    bases: dict[str, str] = {}
    for key in cash_keys:
        base = cash_base(key)
        if base is None:
            raise ValueError(f"{key!r} is not a cash key (cash/<resource>)")
        bases[key] = base
    totals = {key: Fraction(0) for key in bases}
    for pod in pods:
        micros = _overlap_micros(pod, since, until)
        if not micros:
            continue
        for key, base in bases.items():
            amount = pod.charge.get(base)
            if amount is not None:
                totals[key] += Fraction(amount.as_decimal()) * micros
    return {key: Quantity.from_milli(math.ceil(total * 1000 / _MICROS_PER_HOUR)) for key, total in totals.items()}


def burn_rate(samples: Sequence[tuple[datetime, Quantity]]) -> Decimal | None:
    """Units per hour between the earliest and the latest sample, for the burn-down projection."""
    if len(samples) < 2:
        return None
    first = min(samples, key=lambda sample: sample[0])
    last = max(samples, key=lambda sample: sample[0])
    micros = _micros(last[0] - first[0])
    if micros <= 0:
        return None
    return (last[1] - first[1]).as_decimal() * _MICROS_PER_HOUR / micros


def projected_exhaustion(hard: Quantity, used: Quantity, rate_per_hour: Decimal | None, now: datetime) -> datetime | None:
    """When the budget runs out at the current rate; None when it never will (or not before 9999)."""
    if used >= hard:
        return now
    if rate_per_hour is None or rate_per_hour <= 0:
        return None
    hours = (hard - used).as_decimal() / rate_per_hour
    try:
        return now + timedelta(microseconds=int(hours * _MICROS_PER_HOUR))
    except OverflowError:
        return None
