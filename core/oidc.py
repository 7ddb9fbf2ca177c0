"""OpenID Connect with the company's identity provider: the protocol, no Meridian records.

- **Sign-in** (``client()``): Authlib's Django client for the authorization code flow with
  PKCE (S256), state and nonce, the ID token validated against the provider's keys (discovery
  at ``<issuer>/.well-known/openid-configuration``), and RP-initiated logout. ``core.sso``
  turns the claims into a user; ``core.sso_views`` are the pages.
- **Access tokens on the API** (``validate_access_token``): a JWT the provider signed, checked
  with joserfc (Authlib's JOSE library) against the provider's JWKS: the signature with an
  asymmetric algorithm only, the issuer, an audience in ``MERIDIAN_OIDC_AUDIENCE`` (none set:
  no access token is accepted), expiry and not-before with ``LEEWAY``.
- **Keys** (``signing_keys``): the JWKS is cached per process for ``MERIDIAN_OIDC_JWKS_SECONDS``;
  a token signed by a key the cache does not know (``kid``) fetches it again at once — at most
  every ``UNKNOWN_KID_REFETCH_SECONDS``, so tokens with made-up key ids cannot hammer the
  provider — which is how a key rotation is followed, and a removed key stops verifying once
  the cache renews.
- **Re-checking a session** (``refresh``): the refresh-token grant, which a provider refuses for
  a user it disabled or a session it ended; its new ID token carries the current groups.

Nothing here is hand-written JOSE: parsing, signatures and claim rules are joserfc's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from authlib.integrations.django_client import OAuth
from django.conf import settings
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

#: Asymmetric signatures only: never ``none``, never a shared secret an API client could know.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
#: Clock skew tolerated on ``exp``, ``nbf`` and ``iat``, in seconds.
LEEWAY = 30
#: A token naming a key id the cache does not know refetches the JWKS at most this often.
UNKNOWN_KID_REFETCH_SECONDS = 10.0
HTTP_TIMEOUT = 10.0


class InvalidToken(Exception):
    """A token Meridian does not accept; ``str()`` says why, for the 401's detail."""


def enabled() -> bool:
    """Single sign-on is configured (``MERIDIAN_OIDC_ISSUER`` and ``MERIDIAN_OIDC_CLIENT_ID``)."""
    return bool(settings.MERIDIAN_OIDC_ISSUER and settings.MERIDIAN_OIDC_CLIENT_ID)


def issuer() -> str:
    return settings.MERIDIAN_OIDC_ISSUER.rstrip("/")


def origin() -> str:
    """The provider's origin (scheme, host, port): what the pages' CSP lets forms lead to."""
    parts = urlsplit(issuer())
    return f"{parts.scheme}://{parts.netloc}"


# ---------------------------------------------------------------------------------- the client

_registry: OAuth | None = None
_registry_lock = threading.Lock()


def client() -> Any:
    """Authlib's client for the provider (discovery read once per process, then cached)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            registry = OAuth()
            registry.register(
                "meridian", client_id=settings.MERIDIAN_OIDC_CLIENT_ID,
                client_secret=settings.MERIDIAN_OIDC_CLIENT_SECRET or None,
                server_metadata_url=f"{issuer()}/.well-known/openid-configuration",
                client_kwargs={"scope": settings.MERIDIAN_OIDC_SCOPES, "code_challenge_method": "S256",
                               "timeout": HTTP_TIMEOUT},
            )
            _registry = registry
        return _registry.create_client("meridian")


def metadata() -> Mapping[str, Any]:
    """The provider's discovery document."""
    return client().load_server_metadata()


def forget() -> None:
    """Drop the cached client, discovery and keys (settings changed: tests, a reload)."""
    global _registry
    with _registry_lock:
        _registry = None
    with _keys.lock:
        _keys.keyset, _keys.fetched, _keys.source = None, 0.0, ""


# ---------------------------------------------------------------------------------- keys


@dataclass
class _KeyCache:
    keyset: KeySet | None = None
    fetched: float = 0.0
    source: str = ""
    lock: threading.Lock = threading.Lock()


_keys = _KeyCache()


def signing_keys(*, unknown_kid: bool = False) -> KeySet:
    """The provider's public keys: cached ``MERIDIAN_OIDC_JWKS_SECONDS``, fetched again early
    when a token names a key the cache lacks (``unknown_kid``), at most every
    ``UNKNOWN_KID_REFETCH_SECONDS``."""
    uri = metadata()["jwks_uri"]
    with _keys.lock:
        age = time.monotonic() - _keys.fetched
        stale = _keys.keyset is None or _keys.source != uri or age > settings.MERIDIAN_OIDC_JWKS_SECONDS
        if stale or (unknown_kid and age >= UNKNOWN_KID_REFETCH_SECONDS):
            response = httpx.get(uri, timeout=HTTP_TIMEOUT, headers={"Accept": "application/json"})
            response.raise_for_status()
            _keys.keyset = KeySet.import_key_set(response.json())
            _keys.fetched, _keys.source = time.monotonic(), uri
        return _keys.keyset


def validate_jwt(raw: str, audiences: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The claims of a JWT the provider signed for one of ``audiences``, or ``InvalidToken``."""
    if not audiences:
        raise InvalidToken("this Meridian accepts no provider tokens (MERIDIAN_OIDC_AUDIENCE is empty)")
    registry = JWSRegistry(algorithms=list(ALGORITHMS))
    try:
        try:
            token = jwt.decode(raw, signing_keys(), algorithms=list(ALGORITHMS), registry=registry)
        except InvalidKeyIdError:
            token = jwt.decode(raw, signing_keys(unknown_kid=True), algorithms=list(ALGORITHMS), registry=registry)
        claims = jwt.JWTClaimsRegistry(
            leeway=LEEWAY, iss={"essential": True, "value": issuer()}, aud={"essential": True, "values": list(audiences)},
            exp={"essential": True}, sub={"essential": True},
        )
        claims.validate(token.claims)
    except InvalidKeyIdError:
        raise InvalidToken("signed with a key the provider does not publish") from None
    except JoseError as exc:
        raise InvalidToken(_reason(exc)) from None
    except (ValueError, TypeError):
        raise InvalidToken("not a JSON Web Token") from None
    return dict(token.claims)


def _reason(exc: JoseError) -> str:
    name = type(exc).__name__
    return {"ExpiredTokenError": "expired", "BadSignatureError": "bad signature",
            "InvalidClaimError": f"invalid claim ({exc.description or exc})",
            "MissingClaimError": f"missing claim ({exc.description or exc})"}.get(name, f"rejected ({exc.error})")


def validate_access_token(raw: str) -> dict[str, Any]:
    """An access token presented as ``Authorization: Bearer``: the provider's, for Meridian."""
    return validate_jwt(raw, tuple(settings.MERIDIAN_OIDC_AUDIENCE))


def looks_like_jwt(raw: str) -> bool:
    """Three dot-separated parts: a provider's token rather than a cluster's bearer key."""
    return raw.count(".") == 2 and all(raw.split("."))


# ---------------------------------------------------------------------------------- sessions


class Refused(Exception):
    """The provider refused to renew a session: the user is disabled there, or signed out."""


def refresh(refresh_token: str) -> dict[str, Any]:
    """The refresh-token grant: new tokens, the ID token's claims under ``claims`` (validated,
    audience = our client id), or ``Refused`` when the provider says no."""
    response = httpx.post(metadata()["token_endpoint"], timeout=HTTP_TIMEOUT,
                          data={"grant_type": "refresh_token", "refresh_token": refresh_token},
                          auth=(settings.MERIDIAN_OIDC_CLIENT_ID, settings.MERIDIAN_OIDC_CLIENT_SECRET or ""))
    if response.status_code in (400, 401, 403):
        raise Refused(response.json().get("error", "refused") if _is_json(response) else "refused")
    response.raise_for_status()
    tokens = response.json()
    if tokens.get("id_token"):
        try:
            tokens["claims"] = validate_jwt(tokens["id_token"], (settings.MERIDIAN_OIDC_CLIENT_ID,))
        except InvalidToken as exc:
            raise Refused(f"the renewed ID token is invalid: {exc}") from None
    return tokens


def _is_json(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("application/json")
