"""Who may change which part of the quota tree: owners' object constraints, and quota bindings.

Holders of the model permissions (operators, admins) manage the whole tree. A group's
owners manage its subtree and nothing above it: they may create children anywhere below
(or directly under) a group they own — ``add`` is asked of the *parent* — and resize, move
quota between, roll back or delete the groups strictly below it (resizing their own group
would take from its parent, above them); they see their subtree. These are object
constraints of the one permission system (``core.permissions.register_constraint``), so
pages, the API and websocket subscriptions ask ``may(user, action, group)`` alike.

A scoped role binding on a quota subtree (``core.scopes``, kind ``quota``) follows the same
tree rule: its role's actions on the named groups' subtrees, except that changing, deleting or
rolling back the named group itself (which takes from or gives back to its parent) stays with
whoever holds the parent; a cluster binding reaches the charges of its clusters' workloads.
"""

from __future__ import annotations

from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Q


def owned_paths(user: Any) -> list[str]:
    if not getattr(user, "is_authenticated", False):
        return []
    return list(user.owned_quota_groups.values_list("path", flat=True))


def within_owned(user: Any) -> Q | None:
    """The groups a user owns and everything below them (``view``; ``add`` under them)."""
    paths = owned_paths(user)
    return reduce(or_, (Q(path__startswith=p) for p in paths)) if paths else None


def below_owned(user: Any) -> Q | None:
    """Everything strictly below the groups a user owns (``change``, ``delete``, ``rollback``)."""
    paths = owned_paths(user)
    return reduce(or_, (Q(path__startswith=p) & ~Q(path=p) for p in paths)) if paths else None


def subtree_q(binding: Any, via: str, action: str) -> Q:
    """A quota binding's groups: the named ones and everything below, or strictly below for
    the actions that would move quota across the subtree's root."""
    from .models import QuotaGroup

    paths = list(QuotaGroup.objects.filter(name__in=binding.names).values_list("path", flat=True))
    strict = action in ("change", "delete", "rollback")
    q = reduce(or_, ((Q(path__startswith=p) & ~Q(path=p)) if strict else Q(path__startswith=p) for p in paths),
               Q(pk__in=[]))
    return q if not via else Q(**{f"{via}__in": QuotaGroup.objects.filter(q).values("pk")})


def register_scope() -> None:
    from core import scopes
    from core.models import RoleBinding

    from .models import CashSample, QuotaCharge, QuotaGroup, QuotaGroupRevision

    scopes.register_kind(RoleBinding.Scope.QUOTA, subtree_q)
    scopes.register_scoped(QuotaGroup, RoleBinding.Scope.QUOTA, subject=True)
    for model in (QuotaCharge, CashSample, QuotaGroupRevision):
        scopes.register_scoped(model, RoleBinding.Scope.QUOTA, via="group")
    scopes.register_scoped(QuotaCharge, RoleBinding.Scope.CLUSTERS, via="cluster")


def register() -> None:
    from core.permissions import register_constraint

    from .models import QuotaGroup

    register_constraint(QuotaGroup, ("view", "add"), within_owned)
    register_constraint(QuotaGroup, ("change", "delete", "rollback"), below_owned)
