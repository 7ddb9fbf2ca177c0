"""Model fields for secrets: encrypted at rest, plaintext only in memory.

``EncryptedTextField`` stores ``enc:v1:<Fernet token>``. Keys come from
``MERIDIAN_ENCRYPTION_KEYS`` (the first encrypts, every one decrypts, so a key is rotated by
prepending a new one and re-saving), else from ``SECRET_KEY``; each is stretched to a
Fernet key with SHA-256. A leaked database dump or backup then holds no usable kubeconfig.
A value no configured key opens reads as ``Undecryptable`` (an empty string that knows why),
so callers refuse to use it instead of falling back to some other credential.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models

logger = logging.getLogger(__name__)
PREFIX = "enc:v1:"


class Undecryptable(str):
    """A stored secret none of the configured keys can open (the keys changed): reads as "",
    and saving the row writes the ciphertext back unchanged, so nothing is lost."""

    ciphertext: str

    def __new__(cls, ciphertext: str) -> Undecryptable:
        value = super().__new__(cls, "")
        value.ciphertext = ciphertext
        return value


def fernet_key(secret: str) -> bytes:
    return base64.urlsafe_b64encode(hashlib.sha256(f"meridian-secrets:{secret}".encode()).digest())


@functools.lru_cache(maxsize=4)
def _cipher(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(fernet_key(k)) for k in keys])


def configured_keys() -> tuple[str, ...]:
    """The secrets keys derive from, first (encrypting) first: ``MERIDIAN_ENCRYPTION_KEYS``, or
    ``SECRET_KEY`` alone when that is unset (then SECRET_KEY is not among the keys otherwise)."""
    return tuple(getattr(settings, "MERIDIAN_ENCRYPTION_KEYS", None) or [settings.SECRET_KEY])


def cipher() -> MultiFernet:
    return _cipher(configured_keys())


def key_fingerprint(secret: str) -> str:
    """A short public name for a key (hashed twice over: it tells keys apart, it opens nothing)."""
    return hashlib.sha256(b"meridian-key-fingerprint:" + fernet_key(secret)).hexdigest()[:16]


def opening_key(stored: str, keys: tuple[str, ...] | None = None) -> str | None:
    """The fingerprint of the configured key that opens a stored value, "plaintext" for one
    written before encryption, None when no configured key opens it."""
    if not stored.startswith(PREFIX):
        return "plaintext"
    token = stored[len(PREFIX):].encode()
    for key in keys if keys is not None else configured_keys():
        try:
            Fernet(fernet_key(key)).decrypt(token)
        except InvalidToken:
            continue
        return key_fingerprint(key)
    return None


def encrypted_fields() -> list[tuple[type[models.Model], models.Field]]:
    """Every ``EncryptedTextField`` of every installed model (concrete, not proxies)."""
    from django.apps import apps

    return [(model, field) for model in apps.get_models() if not model._meta.proxy
            for field in model._meta.concrete_fields if isinstance(field, EncryptedTextField)]


def encrypt(plain: str) -> str:
    return PREFIX + cipher().encrypt(plain.encode()).decode()


def decrypt(stored: str) -> str:
    if not stored.startswith(PREFIX):
        return stored  # written before encryption; the migration encrypts these
    try:
        return cipher().decrypt(stored[len(PREFIX):].encode()).decode()
    except InvalidToken:
        logger.error("a stored secret cannot be decrypted with MERIDIAN_ENCRYPTION_KEYS / SECRET_KEY")
        return Undecryptable(stored)


class EncryptedTextField(models.TextField):
    """A text column holding ciphertext; the model attribute holds the plaintext."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return value if value in (None, "") else decrypt(value)

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, Undecryptable):
            return value.ciphertext
        value = super().get_prep_value(value)
        if value in (None, ""):
            return value
        return value if value.startswith(PREFIX) else encrypt(value)
