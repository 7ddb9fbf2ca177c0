"""Users' API tokens: issuing and revoking one is a change like any other (audited, in one
transaction). The raw key is returned once by ``issue_token`` and stored nowhere."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction

from .audit import record_change
from .models import APIToken


def issue_token(user, *, name: str = "", write_enabled: bool = True, ttl: timedelta | None = None) -> tuple[APIToken, str]:
    """A new token for ``user`` and its raw key (shown once: only its hash is kept)."""
    with transaction.atomic():
        token, raw = APIToken.issue(user, name=name, write_enabled=write_enabled, ttl=ttl)
        record_change(token, "create", verb="issue_token",
                      after={"user": user.get_username(), "name": name, "key_prefix": token.key_prefix,
                             "write_enabled": write_enabled, "expires": token.expires.isoformat() if token.expires else None})
    return token, raw


def revoke_token(token: APIToken) -> None:
    with transaction.atomic():
        record_change(token, "delete", verb="revoke_token", before={"name": token.name, "key_prefix": token.key_prefix})
        token.delete()
