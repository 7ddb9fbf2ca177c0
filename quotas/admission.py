"""Whole-workload admission against quota groups, decided in batches.

Kubernetes' ResourceQuota admission evaluates concurrent requests in batches against one
read of the quotas; so does this module. ``decide_batch`` reads the ledger entries the
requests concern, locks every group involved (``SELECT ... FOR UPDATE``; SQLite
transactions are IMMEDIATE, hence exclusive), re-reads the entries under the lock, then
decides the requests one after another against running totals, and writes each changed
group and the ledger once. The check and the commit share the lock, so no interleaving of
requests, batches or reconciles can admit more than ``hard``. A dry run is checked against
the running totals but adds nothing. The statements are ``quotas.ledger``'s plain SQL: a
round trip to lock and read, one to write and commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from django.utils import timezone

from core import sql
from fleet.models import Cluster
from kube.admission import AdmissionRequest
from kube.resources import (
    PodSpecError,
    UnsupportedWorkloadError,
    validate_pod_resources,
    workload_components,
    workload_kind,
)

from . import accounting as acc
from . import ledger
from .models import QuotaGroup
from .status import parsed

SCALABLE = {"deployments": "Deployment", "statefulsets": "StatefulSet", "replicasets": "ReplicaSet", "rollouts": "Rollout"}
HPA_RESOURCE = "horizontalpodautoscalers"
Key = tuple[int, str, str, str]  # cluster id, namespace, kind, name


@dataclass
class Decision:
    """What the webhook answers; ``group`` is the quota group that decided, if any."""

    allowed: bool
    message: str = ""
    group: str | None = None
    warnings: list[str] = field(default_factory=list)
    delta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    """A ledger row as admission needs it (``QuotaCharge`` without the ORM)."""

    pk: int | None
    group: str
    api_version: str
    spec_replicas: int
    hpa_max_replicas: int | None
    per_replica: acc.ResourceList
    charge: acc.ResourceList

    @property
    def replicas(self) -> int:
        return max(self.spec_replicas, self.hpa_max_replicas or 0)

    def rescaled(self, *, spec_replicas: int | None = None, hpa_max: Any = ...) -> Entry:
        entry = replace(self, spec_replicas=self.spec_replicas if spec_replicas is None else spec_replicas,
                        hpa_max_replicas=self.hpa_max_replicas if hpa_max is ... else hpa_max)
        return replace(entry, charge=acc.scaled(entry.per_replica, entry.replicas))


class InvalidWorkload(PodSpecError):
    """A workload the API server's own validation refuses (a negative request, a request above
    its limit, …): denied with its field errors, and it never reaches the ledger."""

    def __init__(self, obj: Mapping[str, Any], errors: Sequence[str]) -> None:
        kind, name = _described(obj)
        super().__init__(f'{kind} "{name}" is invalid: ' + "; ".join(errors))
        self.errors = list(errors)


def _described(obj: Mapping[str, Any]) -> tuple[str, str]:
    """``Deployment.apps`` and the name, as the API server words an invalid object."""
    kind = str(obj.get("kind") or "object")
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    metadata = obj.get("metadata")
    name = metadata.get("name", "") if isinstance(metadata, Mapping) else ""
    return (f"{kind}.{group}" if group else kind), str(name)


def _template_path(obj: Mapping[str, Any], template: Mapping[str, Any]) -> str:
    """Where a workload keeps the pod template ``workload_components`` returned (for field errors)."""
    if template is obj:
        return ""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    if spec.get("template") is template:
        return "spec.template"
    roles = spec.get("tfReplicaSpecs")
    if isinstance(roles, Mapping):
        for role, entry in roles.items():
            if isinstance(entry, Mapping) and entry.get("template") is template:
                return f"spec.tfReplicaSpecs[{role}].template"
    return "template"


def validate_workload(obj: Mapping[str, Any], components: Sequence[tuple[int, Mapping[str, Any]]]) -> None:
    """Refuse what pod-spec validation refuses in any of the workload's pod templates.

    The API server validates a Deployment's template before its webhooks are called, but
    custom resources (Argo Rollouts, TFJobs) only by their schema, which takes ``cpu: "-100"``:
    without this a negative request would be charged as negative usage and free quota that
    other workloads then take.
    """
    errors: list[str] = []
    for _, template in components:
        errors += validate_pod_resources(template, _template_path(obj, template))
    if errors:
        raise InvalidWorkload(obj, errors)


class Outside(Exception):
    """The request is not bizrq's business (no group label, a kind it does not count)."""


class _Moved(Exception):
    """Entries name groups the batch did not lock (they moved, or were not read before
    locking): start over, locking these too."""

    def __init__(self, names: set[str]) -> None:
        super().__init__(", ".join(sorted(names)))
        self.names = names


# ---------------------------------------------------------------------------- planning (pure)

def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    metadata = (obj or {}).get("metadata") or {}
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


_POD_CHARGES: dict[bytes, acc.ResourceList] = {}
_POD_CHARGES_LIMIT = 1024
_POD_CHARGE_KEY_MAX = 16 * 1024


def _pod_charge(spec: Any, labels: Mapping[str, Any], validate: Callable[[], None]) -> acc.ResourceList:
    """One replica's charge: the pod template's quota usage plus its model copies.

    Memoised on the pod spec and the model labels, the only inputs: computing the usage of a
    template costs more than the rest of a decision, and a fleet's workloads (and every
    update of one workload) repeat a handful of templates. The result is shared, so it is
    never mutated (the accounting functions all return new maps). ``validate`` runs before a
    spec is first charged, so only valid specs are memoised and a hit needs no validation.
    """
    try:
        key = orjson.dumps([spec, [labels.get(name) for name in acc.MODEL_LABELS.values()]])
    except TypeError:  # not plain JSON (an integer beyond 64 bits): no memo
        key = b""
    charge = _POD_CHARGES.get(key) if key else None
    if charge is None:
        validate()
        charge = acc.workload_charge_of({"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": dict(labels)}, "spec": spec})
        if key and len(key) <= _POD_CHARGE_KEY_MAX:
            if len(_POD_CHARGES) >= _POD_CHARGES_LIMIT:
                _POD_CHARGES.clear()
            _POD_CHARGES[key] = charge
    return charge


def entry_of_manifest(obj: Mapping[str, Any], group: str, pk: int | None = None) -> Entry:
    """The charge of a workload manifest: all templates × replicas, model copies by label.

    A template the API server would refuse raises ``InvalidWorkload``.
    """
    components = workload_components(obj)
    replicas = sum(r for r, _ in components)
    if len(components) != 1:
        validate_workload(obj, components)
        return Entry(pk=pk, group=group, api_version=str(obj.get("apiVersion")), spec_replicas=replicas,
                     hpa_max_replicas=None, per_replica={}, charge=acc.workload_charge_of(obj))
    per_replica = _pod_charge(components[0][1].get("spec"), _labels(obj), lambda: validate_workload(obj, components))
    return Entry(pk=pk, group=group, api_version=str(obj.get("apiVersion")), spec_replicas=replicas,
                 hpa_max_replicas=None, per_replica=per_replica, charge=acc.scaled(per_replica, replicas))


def request_key(cluster_id: int, request: AdmissionRequest) -> Key:
    """The workload a request concerns; ``Outside`` when bizrq does not count it."""
    resource = request.resource.get("resource", "")
    if request.sub_resource == "scale":
        if resource not in SCALABLE or request.operation != "UPDATE":
            raise Outside
        return cluster_id, request.namespace, SCALABLE[resource], request.name
    if resource == HPA_RESOURCE and not request.sub_resource:
        ref = (((request.object if request.operation != "DELETE" else request.old_object) or {}).get("spec") or {}).get(
            "scaleTargetRef") or {}
        return cluster_id, request.namespace, str(ref.get("kind", "")), str(ref.get("name", ""))
    obj = request.object if request.operation != "DELETE" else request.old_object
    if request.sub_resource or obj is None:
        raise Outside
    try:
        workload_kind(obj)
    except UnsupportedWorkloadError:
        raise Outside from None
    return cluster_id, request.namespace, str(obj.get("kind")), request.name or str((obj.get("metadata") or {}).get("name", ""))


def plan(request: AdmissionRequest, entry: Entry | None) -> Entry | None:
    """The entry the workload has if the request is admitted (None: released)."""
    resource = request.resource.get("resource", "")
    if request.sub_resource == "scale":
        return _plan_scale(request, entry)
    if resource == HPA_RESOURCE:
        return _plan_hpa(request, entry)
    if request.operation == "DELETE":
        if entry is None:
            raise Outside
        return None
    group = acc.group_of(_labels(request.object))
    if group is None:
        if entry is None:
            raise Outside
        return None
    try:
        new = entry_of_manifest(request.object, group, entry.pk if entry else None)
    except UnsupportedWorkloadError:
        raise Outside from None
    if entry is not None and entry.hpa_max_replicas and new.per_replica:
        new = replace(new, hpa_max_replicas=entry.hpa_max_replicas)
        new = replace(new, charge=acc.scaled(new.per_replica, new.replicas))
    return new


def _plan_scale(request: AdmissionRequest, entry: Entry | None) -> Entry:
    if entry is None:
        raise Outside
    replicas = ((request.object or {}).get("spec") or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise PodSpecError(f"spec.replicas of the Scale must be a non-negative integer, got {replicas!r}")
    if not entry.per_replica:
        raise PodSpecError(f"{request.name} runs several pod templates; scale it through its own object")
    return entry.rescaled(spec_replicas=replicas)


def _plan_hpa(request: AdmissionRequest, entry: Entry | None) -> Entry:
    if entry is None or not entry.per_replica:
        raise Outside
    if request.operation == "DELETE":
        return entry.rescaled(hpa_max=None)
    maximum = ((request.object or {}).get("spec") or {}).get("maxReplicas")
    if isinstance(maximum, bool) or not isinstance(maximum, int) or maximum < 1:
        raise PodSpecError(f"spec.maxReplicas must be a positive integer, got {maximum!r}")
    return entry.rescaled(hpa_max=maximum)


@dataclass
class GroupState:
    """A locked group's running totals while a batch is decided."""

    pk: int
    hard: acc.ResourceList
    used: acc.ResourceList
    self_used: acc.ResourceList
    changed: bool = False


def evaluate(groups: Mapping[str, GroupState], old: Entry | None, new: Entry | None, *, commit: bool) -> Decision:
    """Check one workload's change of charge against the running totals; apply it if ``commit``."""
    if new is not None and new.group not in groups:
        return Decision(allowed=False, group=new.group, message=f'quota group "{new.group}" (label {acc.GROUP_LABEL}) does not exist')
    deltas: dict[str, acc.ResourceList] = {}
    for name in {e.group for e in (old, new) if e is not None}:
        state = groups[name]
        keys = list(state.hard)
        added = acc.tracked(new.charge, keys) if new is not None and new.group == name else {}
        removed = acc.tracked(old.charge, keys) if old is not None and old.group == name else {}
        deltas[name] = acc.usage_delta(added, removed)
        exceeded = acc.check_admission(state.hard, state.used, deltas[name])
        if exceeded:
            return Decision(allowed=False, group=name, message=acc.denial_message(name, exceeded),
                            delta=acc.canonical(deltas[name]))
    decider = (new or old).group if (new or old) else None
    decision = Decision(allowed=True, group=decider, delta=acc.canonical(deltas.get(decider or "", {})))
    if commit:
        for name, delta in deltas.items():
            stored = {k: v for k, v in delta.items() if k in groups[name].hard}  # a cash base is checked, not stored
            if stored:
                state = groups[name]
                state.used, state.self_used, state.changed = acc.add(state.used, stored), acc.add(state.self_used, stored), True
    return decision


# ---------------------------------------------------------------------------- the database

def _entry(row: ledger.ChargeRow) -> Entry:
    return Entry(pk=row.pk, group=row.group, api_version=row.api_version, spec_replicas=row.spec_replicas,
                 hpa_max_replicas=row.hpa_max_replicas, per_replica=parsed(row.per_replica), charge=parsed(row.charge))


def _entries(rows: Iterable[ledger.ChargeRow]) -> dict[Key, Entry]:
    return {row.key: _entry(row) for row in rows}


def _group_names(items: Sequence[tuple[Cluster, AdmissionRequest]], entries: Mapping[Key, Entry]) -> set[str]:
    """Every group the batch may touch: the entries' groups and the groups the objects name."""
    names = {e.group for e in entries.values()}
    for _, request in items:
        group = acc.group_of(_labels(request.object)) if request.operation != "DELETE" else None
        if group is not None:
            names.add(group)
    return names


def decide_batch(items: Sequence[tuple[Cluster, AdmissionRequest]], *, attempts: int = 5) -> list[Decision]:
    """Decide the requests in order, as if one after another, in one transaction."""
    extra: set[str] = set()
    for _ in range(attempts):
        try:
            return _decide_once(items, extra)
        except _Moved as moved:
            extra |= moved.names
    return [Decision(allowed=False, message="the workload's quota group changed concurrently; try again") for _ in items]


def _keys(items: Sequence[tuple[Cluster, AdmissionRequest]]) -> list[Key | Decision]:
    keys: list[Key | Decision] = []
    for cluster, request in items:
        try:
            keys.append(request_key(cluster.pk, request))
        except Outside:
            keys.append(Decision(allowed=True))
    return keys


def _creates_only(items: Sequence[tuple[Cluster, AdmissionRequest]]) -> bool:
    """Plain creates name their groups in their labels: no ledger read is needed to lock."""
    return all(r.operation == "CREATE" and not r.sub_resource and r.resource.get("resource") != HPA_RESOURCE
               for _, r in items)


def _decide_once(items: Sequence[tuple[Cluster, AdmissionRequest]], extra: set[str]) -> list[Decision]:
    keys = _keys(items)
    wanted = {k for k in keys if not isinstance(k, Decision)}
    if not wanted:
        return list(keys)  # type: ignore[arg-type]
    names = _group_names(items, {} if _creates_only(items) else _entries(ledger.read_charges(wanted))) | extra
    with sql.batch_transaction() as tx:
        locked, rows = ledger.lock_and_read(tx, names, wanted)
        entries = _entries(rows)
        missing = _group_names(items, entries) - names
        if missing:
            raise _Moved(missing)
        groups = {g.name: GroupState(g.pk, parsed(g.hard), parsed(g.used), parsed(g.self_used)) for g in locked}
        decisions, final = _run(items, keys, entries, groups)
        _write(tx, groups, entries, final)
    return decisions


def _run(items, keys, entries: Mapping[Key, Entry], groups: dict[str, GroupState]):
    """Plan and decide in order against what the batch admitted so far; the final entry per key."""
    final: dict[Key, Entry | None] = dict(entries)
    decisions: list[Decision] = []
    for (_, request), key in zip(items, keys, strict=True):
        if isinstance(key, Decision):
            decisions.append(key)
            continue
        old = final.get(key)
        try:
            new = plan(request, old)
        except Outside:
            decisions.append(Decision(allowed=True))
            continue
        except InvalidWorkload as exc:
            decisions.append(Decision(allowed=False, message=str(exc)))
            continue
        except (PodSpecError, acc.QuotaSpecError, ValueError) as exc:
            decisions.append(Decision(allowed=False, message=f"cannot compute the quota usage of this object: {exc}"))
            continue
        decision = evaluate(groups, old, new, commit=not request.dry_run)
        if decision.allowed and not request.dry_run:
            final[key] = new
        decisions.append(decision)
    return decisions, final


def _write(tx: sql.BatchTransaction, groups: Mapping[str, GroupState], entries: Mapping[Key, Entry],
           final: Mapping[Key, Entry | None]) -> None:
    """The changed groups' statuses, and every ledger row the batch created, changed or released."""
    statuses = [(state.pk, acc.canonical(state.used), acc.canonical(state.self_used), acc.fill_level(state.hard, state.used))
                for state in groups.values() if state.changed]
    charges, deleted = [], []
    for key, entry in final.items():
        old = entries.get(key)
        if entry is old:
            continue
        if entry is None:
            deleted.append(old.pk)  # type: ignore[union-attr]
            continue
        charges.append(ledger.NewCharge(
            pk=old.pk if old is not None else None, group_id=groups[entry.group].pk, key=key,
            api_version=entry.api_version, replicas=entry.replicas, spec_replicas=entry.spec_replicas,
            hpa_max_replicas=entry.hpa_max_replicas, per_replica=acc.canonical(entry.per_replica),
            charge=acc.canonical(entry.charge)))
    ledger.write(tx, statuses, charges, deleted, timezone.now())


# ---------------------------------------------------------------------------- entry points

def admit(cluster: Cluster, request: AdmissionRequest) -> Decision:
    """Decide one AdmissionReview request and, unless it is a dry run, commit its charge."""
    return decide_batch([(cluster, request)])[0]


def what_if(manifest: Mapping[str, Any], *, group: str | None = None) -> Decision:
    """Would this workload be admitted now, as a new workload? Reads, locks and commits nothing."""
    if not isinstance(manifest, Mapping):
        return Decision(allowed=False, message="The workload must be a JSON/YAML object.")
    name = group or acc.group_of(_labels(manifest))
    if name is None:
        return Decision(allowed=True, message=f"The workload has no {acc.GROUP_LABEL} label: bizrq does not limit it.")
    try:
        new = entry_of_manifest(manifest, name)
    except InvalidWorkload as exc:
        return Decision(allowed=False, group=name, message=str(exc))
    except (PodSpecError, UnsupportedWorkloadError, acc.QuotaSpecError, ValueError) as exc:
        return Decision(allowed=False, message=f"cannot compute the quota usage of this object: {exc}")
    row = QuotaGroup.objects.filter(name=name).values_list("pk", "hard", "used", "self_used").first()
    groups = {name: GroupState(row[0], parsed(row[1]), parsed(row[2]), parsed(row[3]))} if row else {}
    return evaluate(groups, None, new, commit=False)
