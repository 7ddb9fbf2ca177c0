"""Users' API tokens: revoking one is a change like any other (audited, in one transaction)."""

from __future__ import annotations

from django.db import transaction

from .audit import record_change
from .models import APIToken


def revoke_token(token: APIToken) -> None:
    with transaction.atomic():
        record_change(token, "delete", verb="revoke_token", before={"name": token.name, "key_prefix": token.key_prefix})
        token.delete()
