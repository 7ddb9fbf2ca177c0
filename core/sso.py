"""Single sign-on: a person the identity provider vouches for becomes (or stays) a Meridian user
with the rights their provider groups map to. The protocol is ``core.oidc``'s; this is what
Meridian does with the claims, each change audited like any other.

- ``sign_in(claims)``: the ID token's claims → the user linked to (``iss``, ``sub``)
  (``core.models.Identity``), created at the first sign-in with the username of
  ``MERIDIAN_OIDC_USERNAME_CLAIM`` and no usable password (a local user of that name is never
  taken over: refused, an admin renames one of them) and updated (email, name) at each;
  a user deactivated in Meridian stays out. Then ``apply_groups``.
- ``apply_groups(user, groups)``: ``MERIDIAN_OIDC_GROUP_ROLES`` maps provider groups to a
  global role (the highest mapped; none when no group maps) and to scoped bindings
  (``core.bindings``), applied at every sign-in, at every session re-check
  (``core.middleware.OIDCSessionMiddleware``) and whenever an access token's groups differ
  from the last ones seen: a group removed at the provider removes the right. Without a
  mapping, roles are managed in Meridian and only the identity is kept.
- ``user_for_claims(claims)``: the user an API access token acts as (the same link; created on
  first use when the token names a username).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import checks
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from . import bindings, users
from .audit import record_change
from .context import acting_as
from .errors import Refused
from .models import Identity, RoleBinding
from .roles import ROLES, user_role

#: What a session signed in through the provider keeps: the ID token (the logout's hint), the
#: refresh token (to re-check the user with the provider) and when it was last checked.
SESSION_ID_TOKEN, SESSION_REFRESH_TOKEN, SESSION_CHECKED = "oidc_id_token", "oidc_refresh_token", "oidc_checked"

#: Keys of a mapping entry → the scope kind of the binding it makes.
SCOPE_KEYS = {"clusters": RoleBinding.Scope.CLUSTERS, "cluster_selector": RoleBinding.Scope.CLUSTERS,
              "quota_groups": RoleBinding.Scope.QUOTA, "namespaces": RoleBinding.Scope.NAMESPACES}
RANK = {role: rank for rank, role in enumerate(ROLES)}


# ------------------------------------------------------------------------------------- mapping


def _entries(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def mapped(groups: Iterable[str]) -> tuple[str | None, list[bindings.Grant]]:
    """The global role and the scoped grants ``groups`` map to."""
    config: Mapping[str, Any] = settings.MERIDIAN_OIDC_GROUP_ROLES or {}
    role: str | None = None
    grants: list[bindings.Grant] = []
    for group in sorted(set(groups)):
        for entry in _entries(config.get(group, [])):
            if isinstance(entry, str):
                role = entry if role is None or RANK[entry] > RANK[role] else role
            elif isinstance(entry, Mapping):
                grants += _grants(group, entry)
    return role, grants


def _grants(group: str, entry: Mapping[str, Any]) -> list[bindings.Grant]:
    found = []
    clusters, selector = entry.get("clusters") or [], entry.get("cluster_selector") or ""
    if clusters or selector:
        found.append(bindings.Grant(entry["role"], RoleBinding.Scope.CLUSTERS, tuple(clusters), selector, group))
    for key, kind in (("quota_groups", RoleBinding.Scope.QUOTA), ("namespaces", RoleBinding.Scope.NAMESPACES)):
        if entry.get(key):
            found.append(bindings.Grant(entry["role"], kind, tuple(entry[key]), "", group))
    return found


def mapping_problems(config: Any) -> list[str]:
    """What is wrong with a ``MERIDIAN_OIDC_GROUP_ROLES`` value (a system check reports it)."""
    if not config:
        return []
    if not isinstance(config, Mapping):
        return ["MERIDIAN_OIDC_GROUP_ROLES must be a JSON object: provider group → role or bindings"]
    problems = []
    for group, value in config.items():
        for entry in _entries(value):
            if isinstance(entry, str):
                if entry not in ROLES:
                    problems.append(f"group {group!r}: {entry!r} is not one of {', '.join(ROLES)}")
                continue
            if not isinstance(entry, Mapping) or not set(entry) & set(SCOPE_KEYS) or set(entry) - {"role", *SCOPE_KEYS}:
                problems.append(f"group {group!r}: a scoped entry is {{\"role\", and one or more of {', '.join(SCOPE_KEYS)}}}")
                continue
            for grant in _grants(str(group), entry):
                try:
                    bindings.validate(grant)
                except Refused as exc:
                    problems.append(f"group {group!r}: {exc.detail} {exc.errors or ''}".strip())
    return problems


# ------------------------------------------------------------------------------------- users


def _claim(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""


def groups_of(claims: Mapping[str, Any]) -> list[str] | None:
    """The groups claim (None when the token carries none: nothing to apply)."""
    value = claims.get(settings.MERIDIAN_OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return sorted({str(v) for v in value})
    return None


def sign_in(claims: Mapping[str, Any]) -> Any:
    """The user the ID token's claims sign in (see the module docstring), rights applied."""
    with transaction.atomic():
        identity = _identity(claims, create=True)
        user = identity.user
        _update_profile(user, claims)
        groups = groups_of(claims)
        if groups is not None:
            apply_groups(user, groups)
            identity.groups = groups
        identity.last_seen = timezone.now()
        identity.save(update_fields=["groups", "last_seen"])
    return user


def user_for_claims(claims: Mapping[str, Any]) -> Any:
    """The user an access token acts as; its groups applied when they changed since last seen."""
    identity = Identity.objects.select_related("user").filter(issuer=claims.get("iss"), subject=claims.get("sub")).first()
    groups = groups_of(claims)
    if identity is not None and (groups is None or groups == identity.groups):
        _refuse_inactive(identity.user)
        return identity.user
    with transaction.atomic():
        identity = _identity(claims, create=True)
        if groups is not None and groups != identity.groups:
            apply_groups(identity.user, groups)
            identity.groups = groups
            identity.save(update_fields=["groups"])
    return identity.user


def apply_groups(user: Any, groups: list[str]) -> None:
    """The global role and SSO bindings ``groups`` map to, when a mapping is configured."""
    if not settings.MERIDIAN_OIDC_GROUP_ROLES:
        return
    role, grants = mapped(groups)
    why = f"single sign-on groups: {', '.join(groups) or 'none'}"
    # Not as the user: the provider decides, so "you cannot take away your own admin role" does not apply.
    with acting_as(f"sso:{user.get_username()}", source="ui"):
        if user_role(user) != role and not user.is_superuser:
            users.set_role(user, role, reason=why)
        bindings.replace_sso(user, grants)


def _identity(claims: Mapping[str, Any], *, create: bool) -> Identity:
    issuer, subject = _claim(claims, "iss"), _claim(claims, "sub")
    if not issuer or not subject:
        raise Refused("invalid_token", _("The provider's token names no issuer or subject."))
    found = Identity.objects.select_for_update().select_related("user").filter(issuer=issuer, subject=subject)
    identity = found.first()
    if identity is None:
        if not create:
            raise Refused("unknown_identity", _("No Meridian user signs in as this person."))
        try:
            with transaction.atomic():  # two first requests at once (API calls): one creates, the other reads it
                identity = Identity.objects.create(issuer=issuer, subject=subject, user=_new_user(claims), groups=[])
        except IntegrityError:
            identity = found.get()
    _refuse_inactive(identity.user)
    return identity


def _refuse_inactive(user: Any) -> None:
    if not user.is_active:
        raise Refused("inactive", _("%(name)s is deactivated in Meridian: an admin reactivates them.") % {
            "name": user.get_username()})


def _new_user(claims: Mapping[str, Any]) -> Any:
    model = get_user_model()
    username = _claim(claims, settings.MERIDIAN_OIDC_USERNAME_CLAIM) or _claim(claims, "sub")
    username = username[: model._meta.get_field("username").max_length]
    if model.objects.filter(username=username).exists():
        raise Refused("username_taken", _("A Meridian user named %(name)s exists and is not this provider's person: an "
                                          "admin renames or removes the local user first.") % {"name": repr(username)})
    user = model(username=username, **_profile(claims))
    user.set_unusable_password()
    user.save()
    with acting_as(f"sso:{username}", user=user, source="ui"):
        record_change(user, "create", verb="sso_first_sign_in", after=users.user_snapshot(user),
                      reason=f"first sign-in through {_claim(claims, 'iss')}")
    return user


def _profile(claims: Mapping[str, Any]) -> dict[str, str]:
    first, last = _claim(claims, "given_name"), _claim(claims, "family_name")
    if not (first or last) and _claim(claims, "name"):
        first, _, last = _claim(claims, "name").partition(" ")
    return {"email": _claim(claims, "email")[:254], "first_name": first[:150], "last_name": last[:150]}


def _update_profile(user: Any, claims: Mapping[str, Any]) -> None:
    profile = _profile(claims)
    changed = [field for field, value in profile.items() if value and getattr(user, field) != value]
    if changed:
        before = users.user_snapshot(user)
        for field in changed:
            setattr(user, field, profile[field])
        user.save(update_fields=changed)
        with acting_as(f"sso:{user.get_username()}", user=user, source="ui"):
            record_change(user, "update", verb="sso_profile", before=before, after=users.user_snapshot(user))


def check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check`` (and every start): the group mapping is well formed."""
    return [checks.Error(problem, id="meridian.E010") for problem in mapping_problems(settings.MERIDIAN_OIDC_GROUP_ROLES)]
