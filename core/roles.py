"""The three roles and the permissions each holds.

Roles are Django groups, so one permission system serves the UI, the API and websocket
subscriptions alike. Permissions are re-granted after every migration, so a model added
by a later app is covered without a data migration of its own:

- viewer: ``view_*`` on every Meridian model;
- operator: viewer, plus the verbs operators use (``OPERATOR_PERMISSIONS``);
- admin: every permission of Meridian's apps and of user management.
"""

from __future__ import annotations

from typing import Any

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
#: Roles a binding may hold on part of the fleet (``core.scopes``): admin is never scoped.
SCOPED_ROLES = (VIEWER, OPERATOR)

MERIDIAN_APPS = ("core", "fleet", "nodeconfig", "quotas", "federation", "scheduling", "console")
ADMIN_EXTRA_APPS = ("auth",)

#: Operational actions granted to operators, as ``app_label.codename``. Apps extend this
#: in their AppConfig.ready() with ``grant_to_operators``.
OPERATOR_PERMISSIONS: set[str] = {"core.cancel_job"}


def grant_to_operators(*perms: str) -> None:
    OPERATOR_PERMISSIONS.update(perms)


def role_grants(role: str, permission: str) -> bool:
    """Does ``role`` hold ``permission`` (``app.codename``)? The rules ``role_permissions`` writes
    into the groups, asked without the database: what a scoped binding of the role grants."""
    app_label, _, codename = permission.partition(".")
    if app_label not in MERIDIAN_APPS:
        return role == ADMIN and app_label in ADMIN_EXTRA_APPS
    if role == ADMIN or codename.startswith("view_"):
        return role in ROLES
    return role == OPERATOR and permission in OPERATOR_PERMISSIONS


def role_permissions(permission_model: Any) -> dict[str, Any]:
    """Querysets of the permissions each role should hold."""
    from django.db.models import Q

    meridian = permission_model.objects.filter(content_type__app_label__in=MERIDIAN_APPS)
    viewer = meridian.filter(codename__startswith="view_")
    operator_q = Q()
    for perm in OPERATOR_PERMISSIONS:
        app_label, codename = perm.split(".", 1)
        operator_q |= Q(content_type__app_label=app_label, codename=codename)
    operator = viewer | meridian.filter(operator_q)
    admin = permission_model.objects.filter(content_type__app_label__in=MERIDIAN_APPS + ADMIN_EXTRA_APPS)
    return {VIEWER: viewer, OPERATOR: operator, ADMIN: admin}


def sync_role_permissions(group_model: Any, permission_model: Any) -> None:
    """Create the role groups if missing and set their permissions to exactly the rules above."""
    for role, perms in role_permissions(permission_model).items():
        group, _ = group_model.objects.get_or_create(name=role)
        group.permissions.set(perms)


def sync_role_permissions_handler(sender: Any, **kwargs: Any) -> None:
    """post_migrate: runs once per app; only the last app's run sees every permission."""
    from django.contrib.auth.models import Group, Permission

    if kwargs.get("using", "default") != "default":
        return
    sync_role_permissions(Group, Permission)


def user_role(user: Any) -> str | None:
    """The highest role a user holds (superusers count as admin)."""
    if not user or not user.is_authenticated:
        return None
    if user.is_superuser:
        return ADMIN
    names = {group.name for group in user.groups.all()}  # prefetched in lists of users
    return next((role for role in reversed(ROLES) if role in names), None)
