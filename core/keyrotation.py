"""Re-encrypt every stored secret with the first of ``MERIDIAN_ENCRYPTION_KEYS``.

Rotating a key (``docs/backup.md``): prepend a new key, restart, run
``manage.py meridian_rotate_keys``, and drop an old key only once no stored value and no
backup still needs it. Each ``EncryptedTextField`` column is walked in primary-key batches,
one short transaction per batch; a value is rewritten only if it is still what was read
(compare-and-set), so a user saving a kubeconfig meanwhile is never overwritten. Nothing is
audited or re-timestamped: the secret did not change, only its ciphertext.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from cryptography.fernet import Fernet, InvalidToken
from django.db import models, transaction
from django.db.models.functions import Cast

from .fields import PREFIX, cipher, configured_keys, encrypted_fields, fernet_key

#: Outcomes counted per field.
CURRENT, ROTATED, ENCRYPTED, UNDECRYPTABLE, CHANGED = "current", "rotated", "encrypted", "undecryptable", "changed"


def field_label(model: type[models.Model], field: models.Field) -> str:
    return f"{model._meta.label}.{field.name}"


def rotate(*, batch_size: int = 500, dry_run: bool = False,
           progress: Callable[[str, Counter], None] | None = None) -> dict[str, Counter]:
    """Rewrite every encrypted value not already under the first key; returns counts per field:
    ``current`` (already under the first key), ``rotated`` (was under another configured key),
    ``encrypted`` (stored before encryption existed), ``undecryptable`` (no configured key opens
    it: left as it is), ``changed`` (rewritten by someone else meanwhile: already current)."""
    keys = configured_keys()
    primary = Fernet(fernet_key(keys[0]))
    every = cipher()
    report: dict[str, Counter] = {}
    for model, field in encrypted_fields():
        counts = report.setdefault(field_label(model, field), Counter())
        rows = (model._base_manager.annotate(_stored=Cast(field.attname, models.TextField()))
                .exclude(_stored="").exclude(_stored__isnull=True).order_by("pk"))
        last = None
        while True:
            page = rows if last is None else rows.filter(pk__gt=last)
            batch = list(page.values_list("pk", "_stored")[:batch_size])
            if not batch:
                break
            last = batch[-1][0]
            with transaction.atomic(using=rows.db):
                for pk, stored in batch:
                    if not stored.startswith(PREFIX):
                        outcome, new = ENCRYPTED, PREFIX + primary.encrypt(stored.encode()).decode()
                    else:
                        token = stored[len(PREFIX):].encode()
                        try:
                            primary.decrypt(token)
                        except InvalidToken:
                            pass
                        else:
                            counts[CURRENT] += 1
                            continue
                        try:
                            outcome, new = ROTATED, PREFIX + every.rotate(token).decode()
                        except InvalidToken:
                            counts[UNDECRYPTABLE] += 1
                            continue
                    if dry_run:
                        counts[outcome] += 1
                        continue
                    written = (model._base_manager.annotate(_stored=Cast(field.attname, models.TextField()))
                               .filter(pk=pk, _stored=stored).update(**{field.attname: new}))
                    counts[outcome if written else CHANGED] += 1
            if progress is not None:
                progress(field_label(model, field), counts)
    return report
