"""Every change to the quota tree (admission of workloads lives in ``admission``, re-exported here).

Writes lock the group rows they change (``SELECT ... FOR UPDATE`` on PostgreSQL; on SQLite
every transaction is IMMEDIATE and so already exclusive), ancestors before descendants and
otherwise by primary key, so concurrent writers queue instead of deadlocking. A check and
its write happen under the same lock, so a child is never carved out of quota a concurrent
admission just took. Every change is audited with its before and after and leaves a revision
(``QuotaGroupRevision``: the group's history). A refusal is ``core.errors.Refused`` with the
input it is about (``hard.limits.cpu``); a writer holding a stale ETag is refused too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from core import concurrency, revisions
from core.audit import record_change
from core.errors import Refused

from . import accounting as acc
from .admission import Decision, admit, what_if  # noqa: F401  (the API of every quota change)
from .models import QuotaGroup, QuotaGroupRevision, group_name
from .status import children_hard_of, ledger_self_used, lock, parsed, status_of, write_status

# ---------------------------------------------------------------------------- tree

def _parse_hard(hard: Any) -> acc.ResourceList:
    try:
        parsed_hard = acc.parse_hard(hard)
    except acc.QuotaSpecError as exc:
        raise Refused("invalid_hard", exc.message, field=exc.field) from exc
    if not parsed_hard:  # a group that limits nothing would admit everything: the page, the API and a form post alike
        raise Refused("hard_required", _("Name at least one resource and its quantity, e.g. limits.cpu: 10."), field="hard")
    return parsed_hard


def canonical_hard(hard: Any) -> dict[str, str]:
    """``hard`` as a group stores it (canonical quantities), or the refusal a write would give."""
    return acc.canonical(_parse_hard(hard))


def _tree_refusal(exc: acc.TreeError) -> Refused:
    return Refused(exc.code, exc.message, field=exc.field)


def _audit(group: QuotaGroup) -> dict[str, Any]:
    return {"name": group.name, "parent": group.parent.name if group.parent_id else None, "description": group.description,
            "hard": dict(group.hard), "owners": sorted(group.owners.values_list("username", flat=True)) if group.pk else []}


def _revise(group: QuotaGroup, action: str, reason: str, *, rollback_of: int | None = None) -> QuotaGroupRevision:
    state = _audit(group)
    return revisions.write_revision(group.revisions.all(), owner=group, owner_field="group", action=action, reason=reason,
                                    rollback_of=rollback_of, parent_name=state["parent"] or "",
                                    description=state["description"], hard=state["hard"], owners=state["owners"])


def _check_name(name: str) -> None:
    try:
        group_name(name)
    except ValidationError as exc:
        raise Refused("invalid_name", " ".join(exc.messages), field="name") from exc


def _users(usernames: Sequence[str] | None) -> list[Any] | None:
    if usernames is None:
        return None
    users = list(get_user_model().objects.filter(username__in=list(usernames)))
    missing = sorted(set(usernames) - {u.username for u in users})
    if missing:
        raise Refused("unknown_owner", _("No user named %(name)s.") % {"name": repr(missing[0])}, field="owners")
    return users


def create_group(*, name: str, parent: str | None, hard: Any, description: str = "", owners: Sequence[str] = (),
                 reason: str = "") -> QuotaGroup:
    """Create a group; a child's quota is carved out of its parent's remaining in the same transaction."""
    _check_name(name)
    new_hard = _parse_hard(hard)
    users = _users(owners)
    try:
        with transaction.atomic():
            parent_row = None
            if parent:
                parent_row = lock([parent]).get(parent)
                if parent_row is None:
                    raise Refused("unknown_parent", _('The parent quota group "%(name)s" does not exist.') % {"name": parent},
                                  field="parent")
                try:
                    acc.validate_child_hard(parent_row.name, parsed(parent_row.hard), parsed(parent_row.used), new_hard)
                except acc.TreeError as exc:
                    raise _tree_refusal(exc) from exc
            group = QuotaGroup(name=name, parent=parent_row, description=description, hard=acc.canonical(new_hard),
                               path=f"{parent_row.path if parent_row else '/'}{name}/",
                               depth=parent_row.depth + 1 if parent_row else 0)
            group.used, group.self_used = status_of(new_hard, {}, [])
            group.save()
            if users:
                group.owners.set(users)
            if parent_row is not None:
                write_status(parent_row, parsed(parent_row.self_used))
            record_change(group, "create", after=_audit(group), reason=reason)
            _revise(group, QuotaGroupRevision.Action.CREATE, reason)
    except IntegrityError as exc:
        raise Refused("exists", _('A quota group named "%(name)s" already exists.') % {"name": name}, field="name") from exc
    return group


def update_group(group: QuotaGroup, *, hard: Any = None, description: str | None = None, owners: Sequence[str] | None = None,
                 parent: Any = ..., reason: str = "", rollback_of: int | None = None) -> tuple[QuotaGroup, list[str]]:
    """Resize (checked against the parent's remaining and the children's keys), describe, delegate.

    ``parent`` is immutable: passing a different one is refused. Returns the warnings (a
    shrink below what is in use is allowed; admissions then fail until usage drops).
    """
    if parent is not ... and (parent or None) != (group.parent.name if group.parent_id else None):
        raise Refused("immutable_parent", _("A quota group's parent cannot change; create a new group instead."), field="parent")
    new_hard = _parse_hard(hard) if hard is not None else None
    users = _users(owners)
    with transaction.atomic():
        locked = lock([group.parent_id, group.pk], by="pk")
        row = locked.get(group.pk)
        if row is None:
            raise Refused("gone", _('The quota group "%(name)s" no longer exists.') % {"name": group.name})
        concurrency.check(row)
        parent_row = locked.get(row.parent_id)
        before = _audit(row)
        warnings: list[str] = []
        if new_hard is not None and new_hard != parsed(row.hard):
            children = children_hard_of(row)
            try:
                warnings = acc.validate_resize(
                    row.name, parsed(row.hard), new_hard, parent=parent_row.name if parent_row else None,
                    parent_hard=parsed(parent_row.hard) if parent_row else None,
                    parent_used=parsed(parent_row.used) if parent_row else None,
                    children_hard=children, self_used=ledger_self_used(row))
            except acc.TreeError as exc:
                raise _tree_refusal(exc) from exc
            row.hard = acc.canonical(new_hard)
            row.save(update_fields=["hard", "updated"])
            write_status(row, ledger_self_used(row), children)
            if parent_row is not None:
                write_status(parent_row, parsed(parent_row.self_used))
        if description is not None and description != row.description:
            row.description = description
            row.save(update_fields=["description", "updated"])
        if users is not None:
            row.owners.set(users)
        after = _audit(row)
        if after != before:
            record_change(row, "update", verb="rollback" if rollback_of else "", before=before, after=after, reason=reason)
            _revise(row, QuotaGroupRevision.Action.ROLLBACK if rollback_of else QuotaGroupRevision.Action.UPDATE, reason,
                    rollback_of=rollback_of)
    return row, warnings


def rollback_group(group: QuotaGroup, number: int, *, reason: str) -> QuotaGroupRevision:
    """Restore an earlier revision's hard, description and owners, checked like any resize."""
    revisions.require_reason(reason)
    old = revisions.revision_to_restore(group.revisions.all(), number, group)
    owners = list(get_user_model().objects.filter(username__in=old.owners).values_list("username", flat=True))
    row, _warnings = update_group(group, hard=old.hard, description=old.description, owners=owners, reason=reason,
                                  rollback_of=number)
    latest = row.revisions.order_by("-number").first()
    if latest is None or latest.rollback_of != number:
        raise Refused("unchanged", _("Revision %(number)s is what %(group)s is now; nothing to restore.") % {
            "number": number, "group": group}, field="revision")
    return latest


def delete_group(group: QuotaGroup, *, reason: str = "") -> None:
    """Delete a leaf; its hard returns to the parent (whose ``used`` drops by it)."""
    with transaction.atomic():
        locked = lock([group.parent_id, group.pk], by="pk")
        row = locked.get(group.pk)
        if row is None:
            return
        concurrency.check(row)
        if QuotaGroup.objects.filter(parent=row).exists():
            raise Refused("not_leaf", _('"%(name)s" has child groups; delete them first (only leaves can be deleted).') % {
                "name": row.name})
        before = _audit(row)
        record_change(row, "delete", before=before, reason=reason)
        row.delete()
        parent_row = locked.get(group.parent_id)
        if parent_row is not None:
            write_status(parent_row, parsed(parent_row.self_used))


def move_quota(source: QuotaGroup, target: QuotaGroup, amount: Any, *, reason: str = "") -> tuple[QuotaGroup, QuotaGroup]:
    """Move part of one group's hard to a sibling in one transaction (the parent's used is unchanged)."""
    if source.pk == target.pk:
        raise Refused("same_group", _("Choose two different sibling groups."), field="target")
    if source.parent_id != target.parent_id:
        raise Refused("not_siblings", _('"%(source)s" and "%(target)s" are not siblings; quota moves only between siblings.')
                      % {"source": source.name, "target": target.name}, field="target")
    try:
        moved = acc.parse_hard(amount)
    except acc.QuotaSpecError as exc:  # the same rules as hard, about the amount
        raise Refused("invalid_amount", exc.message, field="amount" + exc.field.removeprefix("hard")) from exc
    if not moved:
        raise Refused("amount", _("Name at least one resource to move."), field="amount")
    with transaction.atomic():
        locked = lock([source.pk, target.pk], by="pk")
        src, dst = locked[source.pk], locked[target.pk]
        concurrency.check(src)
        try:
            acc.validate_move(src.name, dst.name, moved, source_hard=parsed(src.hard), source_used=parsed(src.used),
                              target_hard=parsed(dst.hard))
        except acc.TreeError as exc:
            raise _tree_refusal(exc) from exc
        for row, sign in ((src, -1), (dst, 1)):
            before = _audit(row)
            hard = parsed(row.hard)
            row.hard = acc.canonical(acc.add(hard, moved) if sign > 0 else acc.subtract(hard, moved))
            row.save(update_fields=["hard", "updated"])
            write_status(row, parsed(row.self_used))
            why = reason or f"moved {acc.canonical(moved)} from {src.name} to {dst.name}"
            record_change(row, "update", verb="move_quota", before=before, after=_audit(row), reason=why)
            _revise(row, QuotaGroupRevision.Action.UPDATE, why)
    return src, dst


