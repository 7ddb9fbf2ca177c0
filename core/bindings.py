"""Scoped role bindings: grant a user a role on part of the fleet, revoke it, and the single
sign-on mapping's replacement of its own bindings. Every change is audited in its transaction.

What a binding means is ``core.scopes``' (the role's permissions on the objects in scope);
here are the rules of writing one: a role that may be scoped (viewer, operator: never admin),
a known scope kind, something in scope (names, or for clusters a selector that parses), at
most ``MAX_NAMES`` names. Names need not exist yet: a binding on cluster ``a-3`` applies once
that cluster is registered, as an Argo CD project names destinations before they exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils.translation import gettext as _

from kube.labels import SelectorError, parse_selector

from .audit import record_change, snapshot
from .context import current_actor
from .errors import Refused
from .models import RoleBinding
from .roles import SCOPED_ROLES

MAX_NAMES = 200


@dataclass(frozen=True)
class Grant:
    """What a binding holds, before it is written: the Administration's form and the SSO
    mapping both describe bindings this way."""

    role: str
    scope: str
    names: tuple[str, ...] = ()
    selector: str = ""
    group: str = ""

    def key(self) -> tuple[str, str, tuple[str, ...], str, str]:
        return self.role, self.scope, tuple(sorted(self.names)), self.selector, self.group


def validate(grant: Grant) -> Grant:
    """The grant, cleaned (names stripped, deduplicated, sorted); ``Refused`` naming the field."""
    errors: dict[str, list[str]] = {}
    if grant.role not in SCOPED_ROLES:
        errors["role"] = [_("A scoped role is one of %(roles)s (admin is never scoped).") % {"roles": ", ".join(SCOPED_ROLES)}]
    if grant.scope not in RoleBinding.Scope.values:
        errors["scope"] = [_("Must be one of %(values)s.") % {"values": ", ".join(RoleBinding.Scope.values)}]
    names = tuple(sorted({str(name).strip() for name in grant.names if str(name).strip()}))
    if len(names) > MAX_NAMES:
        errors["names"] = [_("At most %(count)s names in one binding.") % {"count": MAX_NAMES}]
    if any(len(name) > 253 for name in names):
        errors["names"] = [_("A name is at most 253 characters.")]
    selector = grant.selector.strip()
    if selector and grant.scope != RoleBinding.Scope.CLUSTERS:
        errors["selector"] = [_("Only a cluster binding selects by labels.")]
    elif selector:
        try:
            if not parse_selector(selector).requirements:
                errors["selector"] = [_("An empty selector would select every cluster: name them, or grant the role.")]
        except SelectorError as exc:
            errors["selector"] = [str(exc)]
    if not names and not selector and "selector" not in errors:
        errors["names"] = [_("Name what the role is held on (or, for clusters, give a label selector).")]
    if errors:
        raise Refused.from_errors(errors)
    return Grant(grant.role, grant.scope, names, selector, grant.group)


def binding_snapshot(binding: RoleBinding) -> dict[str, Any]:
    return snapshot(binding) | {"user": binding.user.get_username()}


def grant(user: Any, wanted: Grant, *, reason: str = "") -> RoleBinding:
    """Give ``user`` a role on a scope (managed in the Administration section)."""
    clean = validate(wanted)
    with transaction.atomic():
        binding = _create(user, clean, RoleBinding.Source.MANUAL)
        record_change(binding, "create", verb="grant_scoped_role", after=binding_snapshot(binding), reason=reason)
    return binding


def revoke(binding: RoleBinding, *, reason: str = "") -> None:
    """Take a binding away. An SSO binding comes back at the user's next sign-in while the
    provider still lists the group: change the group at the provider instead."""
    with transaction.atomic():
        record_change(binding, "delete", verb="revoke_scoped_role", before=binding_snapshot(binding), reason=reason)
        binding.delete()


def replace_sso(user: Any, grants: Sequence[Grant]) -> bool:
    """Make the user's single sign-on bindings exactly ``grants`` (from their groups at this
    sign-in): added ones and removed ones are audited; the manual ones stay. True if anything changed."""
    wanted = {g.key(): g for g in (validate(g) for g in grants)}
    with transaction.atomic():
        held = {_key(b): b for b in RoleBinding.objects.select_for_update().filter(user=user, source=RoleBinding.Source.SSO)}
        for key, binding in held.items():
            if key not in wanted:
                record_change(binding, "delete", verb="revoke_scoped_role", before=binding_snapshot(binding),
                              reason=f"single sign-on: no longer in group {binding.group}")
                binding.delete()
        for key, clean in wanted.items():
            if key not in held:
                binding = _create(user, clean, RoleBinding.Source.SSO)
                record_change(binding, "create", verb="grant_scoped_role", after=binding_snapshot(binding),
                              reason=f"single sign-on: member of group {clean.group}")
    return held.keys() != wanted.keys()


def _create(user: Any, clean: Grant, source: str) -> RoleBinding:
    return RoleBinding.objects.create(user=user, role=clean.role, scope=clean.scope, names=list(clean.names),
                                      selector=clean.selector, source=source, group=clean.group,
                                      created_by=current_actor().name[:150])


def _key(binding: RoleBinding) -> tuple[str, str, tuple[str, ...], str, str]:
    return binding.role, binding.scope, tuple(sorted(binding.names)), binding.selector, binding.group


def describe(bindings: Iterable[RoleBinding]) -> list[str]:
    """One line per binding, for pages and ``/api/v1/auth/me/``."""
    return [str(binding) for binding in bindings]
