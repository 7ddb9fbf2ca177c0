"""Quota groups as ``meridian.io/v1`` documents (``core.documents``), written through
``quotas.services`` like the REST API: ``spec.parent`` (immutable), ``spec.hard`` (stored
canonical, so ``1000m`` and ``1`` are the same quota), ``spec.owners`` (usernames). A batch
applies parents before their children and deletes children first; the tree rules (a child
carved out of its parent's remaining) are the services' own.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from core.documents import Document, DocumentKind, Rendered, only_fields, register
from core.errors import Refused

from . import services
from .models import QuotaGroup

FIELDS = ("parent", "hard", "owners")


def _render(group: QuotaGroup) -> Rendered:
    return Rendered(name=group.name, description=group.description,
                    spec={"parent": group.parent.name if group.parent_id else None, "hard": dict(group.hard),
                          "owners": sorted(user.username for user in group.owners.all())})


def _normalize(document: Document, live: QuotaGroup | None) -> dict[str, Any]:
    only_fields(document, FIELDS, required=("hard",))
    parent, owners = document.spec.get("parent") or None, document.spec.get("owners") or []
    if parent is not None and not isinstance(parent, str):
        raise Refused("invalid", _("The parent is a quota group's name."), field="parent")
    if not isinstance(owners, list) or not all(isinstance(o, str) for o in owners):
        raise Refused("invalid", _("Owners are a list of usernames."), field="owners")
    return {"parent": parent, "hard": services.canonical_hard(document.spec.get("hard")), "owners": sorted(set(owners))}


def _save(document: Document, spec: dict[str, Any], live: QuotaGroup | None, reason: str) -> QuotaGroup:
    if live is None:
        return services.create_group(name=document.name, parent=spec["parent"], hard=spec["hard"],
                                     description=document.description, owners=spec["owners"], reason=reason)
    return services.update_group(live, hard=spec["hard"], description=document.description, owners=spec["owners"],
                                 parent=spec["parent"], reason=reason)[0]


def _creator(document: Document) -> QuotaGroup | type[QuotaGroup]:
    """As the REST API asks: ``add`` under the parent (its owners may add there), else at the root."""
    parent = document.spec.get("parent")
    return (QuotaGroup.objects.filter(name=parent).first() if isinstance(parent, str) and parent else None) or QuotaGroup


QUOTA_GROUP = DocumentKind(
    kind="QuotaGroup", model=QuotaGroup, order=40,
    find=lambda d: QuotaGroup.objects.select_related("parent").filter(name=d.name).first(),
    render=_render, normalize=_normalize, save=_save,
    remove=lambda group, reason: services.delete_group(group, reason=reason),
    listing=lambda: QuotaGroup.objects.select_related("parent").prefetch_related("owners").order_by("path"),
    parent=lambda d: ("", d.spec["parent"]) if isinstance(d.spec.get("parent"), str) and d.spec["parent"] else None,
    creator=_creator,
)


def register_documents() -> None:
    register(QUOTA_GROUP)
