"""People and their roles: create a user, change their role, deactivate or reactivate them.

Every change is audited like any other (``core.audit``), in the transaction that makes it,
and every rule is checked before anything is written: a refused change leaves no user half
made (created without its role, say). Roles are ``core.roles``' groups; a user holds one of
them (or none: signed in, but reading nothing). An admin cannot take away their own admin
role or deactivate themselves, so the last person able to administer cannot lock everyone out
by a slip of the mouse.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from .audit import record_change
from .context import current_actor
from .errors import Conflict, Refused
from .roles import ADMIN, ROLES, user_role


def user_snapshot(user: Any) -> dict[str, Any]:
    """What the audit log keeps of a user: never the password hash."""
    return {"username": user.get_username(), "email": user.email, "first_name": user.first_name,
            "last_name": user.last_name, "is_active": user.is_active, "role": user_role(user)}


def create_user(*, username: str, password: str, email: str = "", first_name: str = "", last_name: str = "",
                role: str | None = None) -> Any:
    """A new active user holding ``role`` (None: no role); refused, with nothing written, for a
    taken or malformed name, a weak password (Django's validators) or an unknown role."""
    model = get_user_model()
    errors: dict[str, list[str]] = {}
    candidate = model(username=username, email=email, first_name=first_name, last_name=last_name)
    try:
        candidate.clean_fields(exclude=["password"])
    except ValidationError as exc:
        errors.update({field: list(messages) for field, messages in exc.message_dict.items()})
    if email:
        try:
            validate_email(email)
        except ValidationError as exc:
            errors.setdefault("email", list(exc.messages))
    try:
        password_validation.validate_password(password, candidate)
    except ValidationError as exc:
        errors["password"] = list(exc.messages)
    if role not in (None, "", *ROLES):
        errors["role"] = [_("Must be one of %(roles)s, or none.") % {"roles": ", ".join(ROLES)}]
    if model.objects.filter(username=username).exists():
        errors["username"] = [_("A user named %(name)s already exists.") % {"name": repr(username)}]
    if errors:
        raise Refused.from_errors(errors)
    try:
        with transaction.atomic():
            user = model.objects.create_user(username=username, password=password, email=email,
                                             first_name=first_name, last_name=last_name)
            if role:
                user.groups.add(Group.objects.get(name=role))
            record_change(user, "create", after=user_snapshot(user))
    except IntegrityError as exc:
        raise Conflict("already_exists", _("A user named %(name)s already exists.") % {"name": repr(username)},
                       field="username") from exc
    return user


def set_role(user: Any, role: str | None, *, reason: str = "") -> Any:
    """Give ``user`` exactly ``role`` (None: no role), replacing the roles they held."""
    if role not in (None, "", *ROLES):
        raise Refused("invalid_role", _("Must be one of %(roles)s, or none.") % {"roles": ", ".join(ROLES)}, field="role")
    _not_yourself(user, demoting=role != ADMIN, message=_("You cannot take away your own admin role: ask another admin."))
    with transaction.atomic():
        locked = get_user_model().objects.select_for_update().get(pk=user.pk)
        before = user_snapshot(locked)
        locked.groups.remove(*Group.objects.filter(name__in=ROLES))
        if role:
            locked.groups.add(Group.objects.get(name=role))
        record_change(locked, "update", verb="set_role", before=before, after=user_snapshot(locked), reason=reason)
    return locked


def set_active(user: Any, active: bool, *, reason: str = "") -> Any:
    """Deactivate (no login, no API token works: ``core.authentication`` refuses inactive users)
    or reactivate ``user``; the tokens stay, so reactivating restores them."""
    if not active:
        _not_yourself(user, demoting=True, message=_("You cannot deactivate yourself: ask another admin."))
    with transaction.atomic():
        locked = get_user_model().objects.select_for_update().get(pk=user.pk)
        before = user_snapshot(locked)
        locked.is_active = active
        locked.save(update_fields=["is_active"])
        record_change(locked, "update", verb="activate_user" if active else "deactivate_user", before=before,
                      after=user_snapshot(locked), reason=reason)
    return locked


def _not_yourself(user: Any, *, demoting: bool, message: str) -> None:
    actor = current_actor().user
    if demoting and actor is not None and getattr(actor, "pk", None) == user.pk and user_role(user) == ADMIN:
        raise Refused("self_lockout", message)
