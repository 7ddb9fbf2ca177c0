"""Operators' and the scheduler's changes to a node's CPUs: allocate exclusive CPUs, place a
shared instance, release, release-isolate, and the node's settings (reserved CPUs, overcommit
ratio).

Each one under the node's row lock (``store.lock_node``), checked by the pure rules, written
with its ``CPUClaim`` rows and a guarded version bump, audited in the same transaction, and
delivered to the cluster by a job (``store.request_delivery``): pods get ``alloc-status``,
``custom-cgroup-info``, ...; the node ``cpu-sharepool``. A refusal is the API's one error body
(``Refused`` 400, ``Conflict`` 409), the same on the pages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _

from core import concurrency
from core.audit import record_change
from core.context import current_actor
from core.errors import Conflict, NotFound, Refused

from ..models import NodeCPU
from . import state as cpustate
from .cpuset import SAME_CORE_FIRST, STRATEGIES, AllocationError, CPUSetFormatError, format_cpuset, parse_cpuset
from .state import DEFAULT_CONTAINERS, SharedInstance
from .store import Row, claim_cpus, lock_node, request_delivery, row_snapshot, save_state, state_of

NAME_MAX = 253


# ------------------------------------------------------------------------------- validation


def _instance(namespace: str, name: str, uid: str = "") -> tuple[str, str, str]:
    errors = {}
    for key, value in (("namespace", namespace), ("name", name)):
        if not isinstance(value, str) or not value.strip():
            errors[key] = _("Required.")
        elif len(value) > NAME_MAX or "/" in value:
            errors[key] = _("At most %(count)s characters, without '/'.") % {"count": NAME_MAX}
    if errors:
        raise Refused.from_errors(errors)
    return namespace.strip(), name.strip(), (uid or "").strip()[:64]


def _refusal(reason: str) -> Conflict:
    """A pure refusal reason as the API's one error body (409: the node cannot take it now)."""
    if "machineMaxList" in reason:
        code = "machine_max"
    elif "of sellable CPUs" in reason:
        code = "instance_cap"
    elif "already on the node" in reason:
        code = "exists"
    elif reason.startswith(("invalid", "unknown")):
        return Refused("invalid", reason, field="request")  # type: ignore[return-value]
    else:
        code = "insufficient_cpu"
    return Conflict(code, reason, field="request")


def _containers(containers: Sequence[str] | None) -> list[str]:
    names = [str(c).strip() for c in (containers or DEFAULT_CONTAINERS) if str(c).strip()]
    if not names:
        raise Refused("invalid", _("Name at least one container."), field="containers")
    return names


def parse_machine_max(value: Any) -> dict[str, int] | None:
    """``machineMaxList`` as the seed writes it (``[{"key": app, "value": n}]``) or a mapping."""
    if value in (None, "", [], {}):
        return None
    items = value.items() if isinstance(value, Mapping) else (
        (item.get("key"), item.get("value")) for item in value if isinstance(item, Mapping)) if isinstance(value, list) else None
    if items is None:
        raise Refused("invalid", _('machineMaxList is [{"key": <app>, "value": <max per node>}].'), field="machine_max")
    result = {}
    for key, limit in items:
        if not isinstance(key, str) or not key or isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise Refused("invalid", _("machineMaxList entry %(key)s: %(limit)s is not a positive integer.") % {
                "key": repr(key), "limit": repr(limit)}, field="machine_max")
        result[key] = limit
    return result


# -------------------------------------------------------------------------------- allocator


def _lock_with_rows(node: NodeCPU, instance: str) -> tuple[NodeCPU, list[Row], Row | None]:
    """The node locked (its version checked, as every write does), its rows, and ``instance``'s
    row if it has one (a released row still removing its annotations is replaced)."""
    locked = lock_node(node)
    concurrency.check(locked)
    rows = list(locked.allocations.all())
    return locked, rows, next((r for r in rows if r.instance == instance), None)


def allocate_exclusive(
    node: NodeCPU, *, namespace: str, name: str, request: int, strategy: str = SAME_CORE_FIRST, app: str = "",
    uid: str = "", machine_max: Mapping[str, int] | None = None, exclude_reserved: bool = True,
    containers: Sequence[str] | None = None, release_isolate: bool = False, reason: str = "",
) -> Row:
    """Give an instance dedicated CPUs on the node (refused with the first reason when a rule says no)."""
    namespace, name, uid = _instance(namespace, name, uid)
    if strategy not in STRATEGIES:
        raise Refused("invalid", _("Unknown strategy %(strategy)s (one of %(strategies)s).") % {
            "strategy": repr(strategy), "strategies": ", ".join(STRATEGIES)}, field="strategy")
    names = _containers(containers)
    instance = f"{namespace}/{name}"
    with transaction.atomic():
        locked, rows, existing = _lock_with_rows(node, instance)
        if existing is not None and existing.active:
            raise Conflict("exists", _("%(instance)s already holds CPUs on node %(node)s (%(mode)s).") % {
                "instance": instance, "node": locked.name, "mode": existing.mode}, field="name")
        state = state_of(locked, rows)
        try:
            new_state, allocation = state.allocate_exclusive(
                instance, request, strategy, app, machine_max=machine_max, release_isolate=release_isolate,
                exclude_reserved=exclude_reserved, containers=names)
        except AllocationError as exc:
            raise _refusal(str(exc)) from exc
        problems = cpustate.check_exclusive(new_state, allocation, strategy=strategy)
        if problems:
            raise Conflict("unsafe_cpuset", problems[0], field="request")
        if existing is not None:  # a released row still removing its annotations: this one replaces them
            existing.delete()
        cpus = sorted(allocation.cpus)
        row = Row.objects.create(
            node_cpu=locked, namespace=namespace, pod_name=name, pod_uid=uid, app=app, mode=Row.Mode.EXCLUSIVE,
            strategy=strategy, request=len(cpus), cpus=cpus, cpuset=format_cpuset(cpus), exclude_reserved=exclude_reserved,
            release_isolate=release_isolate, containers=names, created_by=current_actor().name[:150])
        claim_cpus(locked, row)
        save_state(locked, new_state)
        record_change(row, "create", verb="allocate", after=row_snapshot(row), reason=reason)
        request_delivery(locked)
    return row


def place_shared(
    node: NodeCPU, *, namespace: str, name: str, request_milli: int, limit_milli: int = 0, app: str = "", uid: str = "",
    machine_max: Mapping[str, int] | None = None, containers: Sequence[str] | None = None, reason: str = "",
) -> Row:
    """Put a shared instance on the node's share pool, within the sellable rules."""
    namespace, name, uid = _instance(namespace, name, uid)
    names = _containers(containers)
    instance = f"{namespace}/{name}"
    if limit_milli and limit_milli < request_milli:
        raise Refused("invalid", _("The CPU limit must not be below the request."), field="limit_milli")
    with transaction.atomic():
        locked, rows, existing = _lock_with_rows(node, instance)
        if existing is not None and existing.active:
            raise Conflict("exists", _("%(instance)s is already on node %(node)s (%(mode)s).") % {
                "instance": instance, "node": locked.name, "mode": existing.mode}, field="name")
        try:
            shared = SharedInstance(instance, request_milli, limit_milli, app)
            new_state = state_of(locked, rows).place_shared(shared, machine_max)
        except AllocationError as exc:
            raise _refusal(str(exc)) from exc
        if existing is not None:
            existing.delete()
        row = Row.objects.create(node_cpu=locked, namespace=namespace, pod_name=name, pod_uid=uid, app=app,
                                 mode=Row.Mode.SHARED, request_milli=request_milli, limit_milli=limit_milli, containers=names,
                                 created_by=current_actor().name[:150])
        save_state(locked, new_state)
        record_change(row, "create", verb="place_shared", after=row_snapshot(row), reason=reason)
        request_delivery(locked)
    return row


def _active_row(locked: NodeCPU, instance: str) -> Row:
    namespace, _slash, name = instance.partition("/")
    row = locked.allocations.filter(namespace=namespace, pod_name=name).exclude(delivery=Row.Delivery.RELEASING).first()
    if row is None:
        raise NotFound("not_found", _("%(instance)s holds nothing on node %(node)s.") % {
            "instance": instance, "node": locked.name}, field="instance")
    return row


def release(node: NodeCPU, instance: str, *, reason: str = "") -> Row:
    """Give the instance's CPUs back to the share pool; its annotations are removed by delivery."""
    with transaction.atomic():
        locked = lock_node(node)
        concurrency.check(locked)
        row = _active_row(locked, instance)
        before = row_snapshot(row)
        row.claims.all().delete()
        row.delivery = Row.Delivery.RELEASING
        row.save(update_fields=["delivery", "updated"])
        save_state(locked, state_of(locked, locked.allocations.all()))
        record_change(row, "delete", verb="release", before=before, reason=reason)
        request_delivery(locked)
    return row


def set_release_isolate(node: NodeCPU, instance: str, on: bool, *, reason: str = "") -> Row:
    """Big-sale emergency: let an exclusive instance run on every CPU but the reserved ones (reversible).

    The allocation, the share pool and the sellable figures do not change; only the cpuset its
    containers are bound to (``custom-cgroup-info``) does.
    """
    with transaction.atomic():
        locked = lock_node(node)
        concurrency.check(locked)
        row = _active_row(locked, instance)
        if row.mode != Row.Mode.EXCLUSIVE or row.disputed:
            raise Refused("not_exclusive", _("%(instance)s is not an exclusive instance; release-isolate applies to "
                                             "exclusive instances only.") % {"instance": instance}, field="instance")
        if row.release_isolate == on:
            return row
        row.release_isolate = on
        row.delivery = Row.Delivery.PENDING
        row.save(update_fields=["release_isolate", "delivery", "updated"])
        save_state(locked, state_of(locked, locked.allocations.all()))
        record_change(row, "action", verb="release_isolate_on" if on else "release_isolate_off",
                      before={"release_isolate": not on}, after={"release_isolate": on}, reason=reason)
        request_delivery(locked)
    return row


# ---------------------------------------------------------------------------- node settings


def configure(node: NodeCPU, *, reserved_cpus: str | None = None, overcommit_ratio: Any = None, reason: str = "") -> NodeCPU:
    """Change the node's reserved CPUs and/or overcommit ratio (written back to its annotations).

    Reserved CPUs must exist and must not be held by an exclusive instance; the ratio must be
    positive; and the shared instances already sold must still fit the sellable rules.
    """
    errors: dict[str, str] = {}
    with transaction.atomic():
        locked = lock_node(node)
        concurrency.check(locked)
        rows = list(locked.allocations.all())
        before = {"reserved_cpus": locked.reserved_cpus, "overcommit_ratio": str(locked.overcommit_ratio)}
        if reserved_cpus is not None:
            try:
                wanted = parse_cpuset(reserved_cpus)
            except CPUSetFormatError as exc:
                errors["reserved_cpus"] = str(exc)
            else:
                held = {cpu for r in rows if r.active and r.mode == Row.Mode.EXCLUSIVE for cpu in r.cpus}
                unknown = set(wanted) - {row[0] for row in locked.topology}
                if unknown:
                    errors["reserved_cpus"] = _("The node has no CPU(s) %(cpus)s.") % {"cpus": format_cpuset(unknown)}
                elif set(wanted) & held:
                    errors["reserved_cpus"] = _("CPU(s) %(cpus)s are held by exclusive instances; release them first.") % {
                        "cpus": format_cpuset(set(wanted) & held)}
                else:
                    locked.reserved_cpus = format_cpuset(wanted)
        if overcommit_ratio is not None:
            try:
                ratio = Decimal(str(overcommit_ratio)).quantize(Decimal("0.001"))
                if ratio <= 0 or ratio > 1000:
                    raise InvalidOperation
            except (InvalidOperation, ValueError):
                errors["overcommit_ratio"] = _("A positive number (at most 1000), e.g. 1, 1.5 or 2.")
            else:
                locked.overcommit_ratio = ratio
        if errors:
            raise Refused.from_errors(errors)
        state = state_of(locked, rows)
        if state.sellable.sold > state.sellable.capacity:
            raise Conflict("oversold", _("With these settings the node would sell %(sold)s exclusive CPUs but only "
                                         "%(sellable)s are sellable.") % {
                "sold": state.sellable.sold, "sellable": max(0, state.sellable.capacity)}, field="reserved_cpus")
        after = {"reserved_cpus": locked.reserved_cpus, "overcommit_ratio": str(locked.overcommit_ratio)}
        if after == before:
            return locked
        locked.save(update_fields=["reserved_cpus", "overcommit_ratio", "updated"])
        save_state(locked, state)
        record_change(locked, "update", verb="configure", before=before, after=after, reason=reason)
        request_delivery(locked)
    return locked
