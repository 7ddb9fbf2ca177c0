"""The REST permission policy: model permissions for everything, view included."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission, DjangoModelPermissions


class RolePermission(DjangoModelPermissions):
    """Django model permissions, with reads needing ``view_*`` too.

    Views without a queryset declare ``required_permissions`` (a mapping of HTTP method
    to permission list) or are open to any authenticated user for safe methods only.
    Read-only API tokens never pass an unsafe method.
    """

    perms_map = {
        "GET": ["%(app_label)s.view_%(model_name)s"],
        "OPTIONS": [],
        "HEAD": ["%(app_label)s.view_%(model_name)s"],
        "POST": ["%(app_label)s.add_%(model_name)s"],
        "PUT": ["%(app_label)s.change_%(model_name)s"],
        "PATCH": ["%(app_label)s.change_%(model_name)s"],
        "DELETE": ["%(app_label)s.delete_%(model_name)s"],
    }

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method not in SAFE_METHODS and not _token_may_write(request):
            return False
        action_perms = _action_permissions(view)
        if action_perms is not None:
            return user.has_perms(action_perms)
        explicit = getattr(view, "required_permissions", None)
        if explicit is not None:
            return user.has_perms(explicit.get(request.method, ()))
        if getattr(view, "queryset", None) is None and not hasattr(view, "get_queryset"):
            return request.method in SAFE_METHODS
        return super().has_permission(request, view)


def _action_permissions(view) -> list[str] | None:
    """Extra actions declare the verb they need: ``@action(..., action_permissions=[...])``.

    DRF passes an action's extra kwargs to that route's view instance, so the attribute is
    set only on the action's own route (the base viewset defaults it to None).
    """
    perms = getattr(view, "action_permissions", None)
    return list(perms) if perms is not None else None


def _token_may_write(request) -> bool:
    token = getattr(request, "auth", None)
    return getattr(token, "write_enabled", True)


class IsAuthenticatedReadOnly(BasePermission):
    """Any signed-in user may read; nobody writes through this view."""

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated and request.method in SAFE_METHODS)
