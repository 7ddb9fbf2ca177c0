"""The audit helper every mutating service function calls.

Written explicitly (not from model signals) because bulk writes bypass signals and
because a change is more than a row diff: it has a verb and a reason.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import models

from .context import current_actor
from .models import ObjectChange

#: Field names never written to the audit log, whatever model they are on.
SECRET_FIELDS = frozenset({"password", "key_hash", "token_hash", "kubeconfig", "credentials", "secret"})


def snapshot(instance: models.Model, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """A JSON-safe dict of a model's concrete fields, secrets left out.

    Models may declare ``audit_exclude`` to hide more fields.
    """
    hidden = SECRET_FIELDS | set(exclude) | set(getattr(instance, "audit_exclude", ()))
    data: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        if field.name in hidden:
            continue
        data[field.name] = _json_safe(field.value_from_object(instance))
    return data


def _json_safe(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def record_change(
    instance: models.Model | None,
    action: str,
    *,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    verb: str = "",
    reason: str = "",
    object_type: ContentType | None = None,
    object_id: str | int | None = None,
    object_repr: str | None = None,
) -> ObjectChange:
    """Write one audit entry attributed to the current actor.

    Call it inside the same transaction as the change, so a rolled-back change leaves no entry.
    """
    if action not in ObjectChange.Action.values:
        raise ValueError(f"unknown audit action {action!r}")
    actor = current_actor()
    if instance is not None:
        object_type = object_type or ContentType.objects.get_for_model(instance, for_concrete_model=False)
        object_id = instance.pk if object_id is None else object_id
        object_repr = object_repr or str(instance)
    user = actor.user if actor.user is not None and getattr(actor.user, "pk", None) else None
    return ObjectChange.objects.create(
        user=user,
        actor=actor.name[:150],
        source=actor.source,
        request_id=actor.request_id,
        action=action,
        verb=verb,
        object_type=object_type,
        object_id="" if object_id is None else str(object_id),
        object_repr=(object_repr or "")[:200],
        before=_json_safe(before) if before is not None else None,
        after=_json_safe(after) if after is not None else None,
        reason=reason,
    )
