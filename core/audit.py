"""The audit helper every mutating service function calls, and the one way entries go.

Written explicitly (not from model signals) because bulk writes bypass signals and
because a change is more than a row diff: it has a verb and a reason. The log is
append-only (``core.models.ObjectChange``): ``expire`` — the retention task's — is the only
path that deletes, and nothing changes an entry.
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import connection, models, transaction

from .context import current_actor
from .models import AUDIT_RETENTION, ObjectChange

#: The session setting the PostgreSQL trigger (migration ``core.0005``) reads: DELETE on the
#: audit table is refused unless it is ``on``, which only ``expire`` sets, for its transaction.
RETENTION_SETTING = "meridian.audit_retention"

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
        data[field.name] = json_safe(field.value_from_object(instance))
    return data


def json_safe(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
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
        before=json_safe(before) if before is not None else None,
        after=json_safe(after) if after is not None else None,
        reason=reason,
    )


def expire(before: dt.datetime) -> int:
    """Delete the entries older than ``before``: the retention task's path, the only one.

    In one transaction that says so to the database (``SET LOCAL``, switched off again after
    the one DELETE, so no other statement inherits it) and to the ORM guard (a context
    variable); everything else that deletes or changes an entry is refused.
    """
    marker = AUDIT_RETENTION.set(True)
    try:
        with transaction.atomic():
            _retention_setting("on")
            deleted, _ = ObjectChange.objects.filter(time__lt=before).delete()
            _retention_setting("off")  # called inside an outer transaction, it would last until that one's end
    finally:
        AUDIT_RETENTION.reset(marker)
    return deleted


def _retention_setting(value: str) -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL {RETENTION_SETTING} = '{value}'")
