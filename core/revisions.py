"""Writing, finding and comparing revisions (``core.models.Revision``), the same for every app.

A service that changes a versioned thing calls ``write_revision`` in the change's
transaction; a rollback finds the old revision with ``revision_to_restore`` (refusing a
missing one, or one that records a deletion, with the same codes everywhere) and writes a
new revision with ``rollback_of`` set.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Max, Model, QuerySet
from django.utils.translation import gettext as _

from .context import current_actor
from .diff import Change, diff
from .errors import Refused
from .models import Revision


def next_number(revisions: QuerySet) -> int:
    return (revisions.aggregate(n=Max("number"))["n"] or 0) + 1


def write_revision(revisions: QuerySet, *, owner: Model, owner_field: str, action: str, reason: str = "",
                   rollback_of: int | None = None, **spec: Any) -> Revision:
    """The next revision of ``owner`` (``revisions`` is its related manager's queryset)."""
    model = revisions.model
    return model.objects.create(**{owner_field: owner}, number=next_number(revisions), action=action, reason=reason,
                                rollback_of=rollback_of, created_by=current_actor().name[:150], **spec)


def require_reason(reason: str, message: str | None = None) -> str:
    if not (reason or "").strip():
        raise Refused("reason_required", message or _("Say why you roll back."), field="reason")
    return reason.strip()


def revision_to_restore(revisions: QuerySet, number: int, owner: Any) -> Revision:
    """Revision ``number`` of ``owner``, if it holds a spec a rollback can restore."""
    old = revisions.filter(number=number).first()
    if old is None:
        raise Refused("unknown_revision", _("%(owner)s has no revision %(number)s.") % {"owner": owner, "number": number},
                      field="revision")
    if old.action in (Revision.Action.DELETE, Revision.Action.RESTORE):
        raise Refused("unknown_revision", _("Revision %(number)s records a deletion; pick a revision with a spec.")
                      % {"number": number}, field="revision")
    return old


def compare(revisions: QuerySet, a: int, b: int, owner: Any) -> dict[str, Any]:
    """``{"a", "b", "changes"}`` between two revisions of one owner; a missing one names its parameter."""
    found = {r.number: r for r in revisions.filter(number__in=[a, b])}
    errors = {name: _("%(owner)s has no revision %(number)s.") % {"owner": owner, "number": number}
              for name, number in (("a", a), ("b", b)) if number not in found}
    if errors:
        raise Refused.from_errors(errors)
    return {"a": a, "b": b, "changes": diff_revisions(found[a], found[b])}


def diff_revisions(a: Revision, b: Revision) -> list[Change]:
    return diff(a.spec(), b.spec())
