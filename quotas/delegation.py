"""Who may change which part of the quota tree.

Holders of the model permissions (operators, admins) manage the whole tree. A group's
owners manage its subtree and nothing above it: they may create children anywhere below
(or directly under) a group they own, and resize, move quota between or delete the groups
strictly below it; resizing their own group would take from its parent, above them.
"""

from __future__ import annotations

from typing import Literal

from .models import QuotaGroup

Verb = Literal["add", "change", "delete"]


def owned_paths(user) -> list[str]:
    if not getattr(user, "is_authenticated", False):
        return []
    return list(user.owned_quota_groups.values_list("path", flat=True))


def may_manage(user, verb: Verb, group: QuotaGroup | None) -> bool:
    """``group`` is the parent for ``add`` (None: a new root) and the group itself otherwise."""
    if user.has_perm(f"quotas.{verb}_quotagroup"):
        return True
    if group is None:
        return False
    paths = owned_paths(user)
    if verb == "add":
        return any(group.path.startswith(path) for path in paths)
    return any(group.path.startswith(path) and group.path != path for path in paths)


def manages_anything(user) -> bool:
    return user.has_perm("quotas.add_quotagroup") or bool(owned_paths(user))
