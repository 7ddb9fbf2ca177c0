"""Scoped roles: a role held on part of the fleet, as object constraints of the one permission system.

A ``RoleBinding`` gives a user a role (viewer or operator) on a *scope*: clusters (by name or
label selector), a quota subtree, federation namespaces. Apps say, in ``AppConfig.ready``,

- what a scope kind selects (``register_kind``): fleet, which clusters a cluster binding names;
  quotas, which groups a subtree binding covers; core, which namespaces;
- which of their models a kind reaches, and through which relation
  (``register_scoped(Node, "clusters", via="cluster")``);
- which models are *subjects* whose jobs and audit entries a scoped user reads
  (``subject=True``; ``register_records(Job)`` scopes a record model by its
  ``object_type``/``object_id``).

Each declaration becomes a ``core.permissions.register_constraint`` for every action of the
model, granting exactly what the binding's role grants (``core.roles.role_grants``), on the
objects in scope. So ``may``, ``restrict`` and ``may_any_or_role`` — pages, the REST API, CSV
exports, websocket subscriptions — treat a bound user without code of their own: a list shows
the objects in scope, a detail outside it is a 404 (API) or 403 (pages), a verb outside it is
refused. Model-wide questions (``may(user, action, Model)``) stay the fleet-wide role's: a
scoped operator is no fleet-wide operator.

A user's bindings are read once per user object (like Django's permission cache): a change
applies from their next request (a websocket: from the next connection).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db.models import CharField, Model, Q
from django.db.models.functions import Cast

from .models import RoleBinding
from .permissions import permission_name, register_constraint
from .roles import role_grants

#: (binding, path from the scoped model to what the kind selects — "" for itself —, action) → Q
#: over the scoped model. The action lets a kind narrow some actions (a quota subtree's root is
#: viewed but not resized: that would take from its parent, outside the scope).
Select = Callable[[RoleBinding, str, str], Q]
#: ``via`` of a model every binding of the kind reaches whole (schemas, like node config types).
EVERYTHING = "*"

_kinds: dict[str, Select] = {}
_scoped: dict[type[Model], list[tuple[str, str]]] = {}
_subjects: list[type[Model]] = []
_constrained: set[tuple[type[Model], str]] = set()
CACHE_ATTRIBUTE = "_meridian_role_bindings"


def register_kind(kind: str, select: Select) -> None:
    """Say what a binding of ``kind`` (a ``RoleBinding.Scope``) selects."""
    if kind not in RoleBinding.Scope.values:
        raise ValueError(f"unknown scope kind {kind!r}")
    _kinds[kind] = select


def register_scoped(model: type[Model], kind: str, *, via: str = "", subject: bool = False) -> None:
    """Bindings of ``kind`` reach ``model``'s objects through ``via`` (a lookup path to what the
    kind selects: ``"cluster"``, ``"node_cpu__cluster"``, ``"object"``; empty: the model is what
    the kind selects; ``EVERYTHING``: all of them, for definitions that are no fleet data).
    ``subject``: its jobs and audit entries are in scope too."""
    _scoped.setdefault(model, []).append((kind, via))
    if subject and model not in _subjects:
        _subjects.append(model)
    _constrain(model, _scoped_q)


def register_records(model: type[Model]) -> None:
    """``model`` records things about other objects (``object_type``, ``object_id``): a scoped
    user may act on the records of the subjects in their scope."""
    _constrain(model, _records_q)


def _constrain(model: type[Model], build: Callable[[type[Model], str, Any], Q | None]) -> None:
    for action in model_actions(model):
        if (model, action) not in _constrained:
            _constrained.add((model, action))
            register_constraint(model, (action,), partial(build, model, action))


def model_actions(model: type[Model]) -> list[str]:
    """Every action a model has a permission for: CRUD and the verbs of ``Meta.permissions``."""
    meta = model._meta
    suffix = f"_{meta.model_name}"
    verbs = [codename.removesuffix(suffix) for codename, _ in meta.permissions if codename.endswith(suffix)]
    return [*meta.default_permissions, *verbs]


def bindings_of(user: Any) -> list[RoleBinding]:
    """The user's bindings, read once per user object."""
    if not (user and getattr(user, "is_authenticated", False) and user.is_active and user.pk):
        return []
    cached = getattr(user, CACHE_ATTRIBUTE, None)
    if cached is None:
        cached = list(RoleBinding.objects.filter(user_id=user.pk))
        setattr(user, CACHE_ATTRIBUTE, cached)
    return cached


def forget(user: Any) -> None:
    """Drop the cached bindings (after changing them for this very user object)."""
    if hasattr(user, CACHE_ATTRIBUTE):
        delattr(user, CACHE_ATTRIBUTE)


def granting(user: Any, permission: str) -> list[RoleBinding]:
    """The user's bindings whose role holds ``permission``."""
    return [binding for binding in bindings_of(user) if role_grants(binding.role, permission)]


def _scoped_q(model: type[Model], action: str, user: Any) -> Q | None:
    granted: Q | None = None
    for binding in granting(user, permission_name(model, action)):
        for kind, via in _scoped.get(model, ()):
            if kind == binding.scope and kind in _kinds:
                q = Q() if via == EVERYTHING else _kinds[kind](binding, via, action)
                granted = q if granted is None else granted | q
    return granted


def _records_q(model: type[Model], action: str, user: Any) -> Q | None:
    granted: Q | None = None
    for binding in granting(user, permission_name(model, action)):
        for subject in _subjects:
            for kind, via in _scoped[subject]:
                if kind != binding.scope or kind not in _kinds or via == EVERYTHING:
                    continue
                ids = (subject._default_manager.filter(_kinds[kind](binding, via, "view"))
                       .annotate(_scope_id=Cast("pk", CharField())).values("_scope_id"))
                q = Q(object_type=ContentType.objects.get_for_model(subject), object_id__in=ids)
                granted = q if granted is None else granted | q
    return granted


def in_scope(user: Any) -> bool:
    """Does the user hold any scoped binding (pages offer what scoped users can reach)?"""
    return bool(bindings_of(user))


def names_q(field: str) -> Select:
    """A kind whose binding names values of a plain field (namespaces): ``field`` is appended to ``via``."""

    def select(binding: RoleBinding, via: str, action: str) -> Q:
        path = f"{via}__{field}" if via else field
        return Q(**{f"{path}__in": [str(name) for name in binding.names]})

    return select
