"""The one permission system: pages, the REST API and websocket subscriptions ask the same question.

An *action* on a model is a Django permission ``<app>.<action>_<model>``: the CRUD ones
(``view``, ``add``, ``change``, ``delete``) and the verbs each model declares in
``Meta.permissions`` with the same shape (``rollback_configtarget``,
``rollout_federatedobject``, ``cordon_cluster``, …). Roles (``core.roles``) grant them
fleet-wide. An *object constraint* (NetBox's ObjectPermission, in code) grants an action on
some objects only: ``register_constraint(QuotaGroup, ("change", …), owned_subtree)`` lets a
group's owners manage their subtree and nothing else.

- ``may(user, action, obj)``: one object (``obj=None``: the model-wide permission);
- ``restrict(queryset, user, action)``: the objects the user may act on (lists, lookups);
- ``may_any(user, action, model)``: some object at least (whether to offer a form);
- ``RolePermission``: DRF's permission class doing the same for every viewset and API view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.apps import apps
from django.core.exceptions import PermissionDenied
from django.db.models import Model, Q, QuerySet
from rest_framework.permissions import SAFE_METHODS, BasePermission

#: (app_label, model_name) → action → constraint(user) → Q over the model, or None (no grant)
Constraint = Callable[[Any], Q | None]
_constraints: dict[tuple[str, str], dict[str, list[Constraint]]] = {}

METHOD_ACTIONS = {"GET": "view", "HEAD": "view", "OPTIONS": "view", "POST": "add", "PUT": "change", "PATCH": "change",
                  "DELETE": "delete"}


def permission_name(model: type[Model] | Model, action: str) -> str:
    meta = model._meta
    return f"{meta.app_label}.{action}_{meta.model_name}"


def register_constraint(model: type[Model], actions: Iterable[str], constraint: Constraint) -> None:
    """Grant ``actions`` on the objects ``constraint(user)`` selects (call from AppConfig.ready)."""
    by_action = _constraints.setdefault((model._meta.app_label, model._meta.model_name), {})
    for action in actions:
        by_action.setdefault(action, []).append(constraint)


def _active(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def constraint_q(user: Any, model: type[Model] | Model, action: str) -> Q | None:
    """The objects the constraints grant ``action`` on, or None when none do."""
    meta = model._meta
    granted: Q | None = None
    for constraint in _constraints.get((meta.app_label, meta.model_name), {}).get(action, ()):
        q = constraint(user)
        if q is not None:
            granted = q if granted is None else granted | q
    return granted


def may(user: Any, action: str, obj: Model | type[Model]) -> bool:
    """May ``user`` do ``action`` to ``obj`` (a model class: anywhere, by role)?"""
    if not _active(user):
        return False
    if user.has_perm(permission_name(obj, action)):
        return True
    if isinstance(obj, type) or obj.pk is None:
        return False
    q = constraint_q(user, obj, action)
    return q is not None and type(obj)._default_manager.filter(q, pk=obj.pk).exists()


def stays_within(user: Any, action: str, obj: Model | None) -> None:
    """After a write by a user who holds ``action`` on some objects only: its object, re-read,
    must still be one of them (not moved to another cluster, namespace or subtree, not created
    outside), else ``PermissionDenied`` — raised inside the write's transaction, rolling it back."""
    if not isinstance(obj, Model) or obj.pk is None:
        return
    fresh = type(obj)._default_manager.filter(pk=obj.pk).first()
    if fresh is not None and not may(user, action, fresh):
        raise PermissionDenied("This would put the object outside the part of the fleet you manage.")


def may_any(user: Any, action: str, model: type[Model]) -> bool:
    """May ``user`` do ``action`` to at least some objects of ``model``?"""
    if not _active(user):
        return False
    if user.has_perm(permission_name(model, action)):
        return True
    q = constraint_q(user, model, action)
    return q is not None and model._default_manager.filter(q).exists()


def restrict(queryset: QuerySet, user: Any, action: str = "view") -> QuerySet:
    """The part of ``queryset`` on which ``user`` may do ``action``."""
    if not _active(user):
        return queryset.none()
    if user.has_perm(permission_name(queryset.model, action)):
        return queryset
    q = constraint_q(user, queryset.model, action)
    return queryset.filter(q) if q is not None else queryset.none()


class RolePermission(BasePermission):
    """DRF: model permissions (reads need ``view`` too), verbs, object constraints, read-only tokens.

    - a viewset's extra action declares its verb: ``@action(..., verb="rollback")`` needs
      ``<app>.rollback_<model>`` on the object (or model-wide for list actions);
    - views without a queryset declare ``required_permissions`` (HTTP method → permission names;
      ``HEAD`` and ``OPTIONS`` follow ``GET``; an empty list: any signed-in user), held
      fleet-wide — or, for a view that restricts what it shows and checks each object itself
      (``scoped_rules = True``), on some objects at least;
    - otherwise the HTTP method maps to view/add/change/delete on the view's model; a user
      whose constraints grant the action on some objects passes here and is checked per
      object (``has_object_permission``) and by ``restrict`` on the queryset;
    - read-only API tokens never pass an unsafe method, except a ``preview`` action (it commits nothing).

    Whatever it cannot decide it refuses: a method without a rule, a view without a model or
    rules, a queryset that cannot be built (its lookup of a parent object failed). A new view
    that forgot its rule answers 403 rather than serving everyone.
    """

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not _active(user):
            return False
        if request.method not in SAFE_METHODS and not is_preview(view) and not token_may_write(request):
            return False
        explicit = getattr(view, "required_permissions", None)
        if explicit is not None:
            needed = explicit_rule(explicit, request.method)
            if needed is None:
                return False
            if getattr(view, "scoped_rules", False):
                return all(holds_somewhere(user, permission) for permission in needed)
            return user.has_perms(needed)
        action = view_action(request, view)
        model = view_model(view)
        if action is None or model is None:
            return False
        return may_any_or_role(user, action, model)

    def has_object_permission(self, request, view, obj) -> bool:
        if getattr(view, "required_permissions", None) is not None or not isinstance(obj, Model):
            return True
        action = view_action(request, view)
        return action is not None and may(request.user, action, obj)


#: Methods that read like GET when a view's ``required_permissions`` does not name them.
READ_ALIASES = {"HEAD": "GET", "OPTIONS": "GET"}


def explicit_rule(rules: Mapping[str, Iterable[str]], method: str) -> tuple[str, ...] | None:
    """The permissions ``required_permissions`` asks of ``method`` (None: no rule, refused)."""
    needed = rules.get(method)
    if needed is None and method in READ_ALIASES:
        needed = rules.get(READ_ALIASES[method])
    return None if needed is None else tuple(needed)


def holds_somewhere(user: Any, permission: str) -> bool:
    """``app.action_model`` held fleet-wide or, through a constraint, on some objects."""
    if user.has_perm(permission):
        return True
    app_label, _, codename = permission.partition(".")
    action, _, model_name = codename.rpartition("_")
    try:
        model = apps.get_model(app_label, model_name)
    except LookupError:
        return False
    return constraint_q(user, model, action) is not None


def may_any_or_role(user: Any, action: str, model: type[Model]) -> bool:
    """The method-level check: by role, or through a constraint on some object (checked per object later)."""
    if user.has_perm(permission_name(model, action)):
        return True
    return constraint_q(user, model, action) is not None


def view_action(request, view) -> str | None:
    """The action a request asks for: the view's declared verb, else by HTTP method (None: a
    method no action stands for)."""
    verb = getattr(view, "verb", None)
    if verb:
        return verb
    return METHOD_ACTIONS.get(request.method)


def view_model(view) -> type[Model] | None:
    """The model a view serves, from its queryset (None: it has none, or building it failed)."""
    queryset = getattr(view, "queryset", None)
    if queryset is None and hasattr(view, "get_queryset"):
        try:
            queryset = view.get_queryset()
        except Exception:  # a lookup the queryset needs failed (a parent object): nothing to grant on
            return None
    return getattr(queryset, "model", None)


def is_preview(view) -> bool:
    """Is this request's action a preview (commits nothing)? ``is True``: a viewset may have a
    *method* named ``preview`` (a bound method is truthy, and would open every write of that
    viewset to read-only tokens)."""
    return getattr(view, "preview", False) is True


def token_may_write(request) -> bool:
    token = getattr(request, "auth", None)
    return getattr(token, "write_enabled", True)

