"""A real OpenID Connect provider for tests: ``tests/oidc/provider.mjs`` (panva's ``oidc-provider``,
installed by ``make test`` with ``npm ci --prefix tests/oidc``) in a Node process on a free
loopback port, with users, groups, clients and signing keys chosen here.

``OIDCProvider`` starts it, restarts it with other keys (a key rotation), changes a user's
groups or disables them through its test-only control endpoint, and runs the authorization
code flow with PKCE over plain HTTP (``login``), as a command-line tool would, to get a user's
tokens without a browser.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx
import pytest
from joserfc.jwk import RSAKey

from tests.servers import free_port

HERE = Path(__file__).resolve().parent / "oidc"
#: The resource (RFC 8707) Meridian accepts access tokens for, and one it does not.
AUDIENCE = "https://meridian.test/api"
OTHER_AUDIENCE = "https://other.test/api"
#: A command-line client (public, PKCE) whose access tokens live 2 s: the expiry test's.
CLI, SHORT_LIVED = "meridian-cli", "meridian-cli-short"
PASSWORD = "provider-password-1"


def signing_key(kid: str) -> dict[str, Any]:
    """A fresh RSA signing key as a private JWK."""
    return RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256", "use": "sig"}, private=True).as_dict(private=True)


@dataclass
class User:
    username: str
    groups: list[str] = field(default_factory=list)
    disabled: bool = False

    def as_config(self) -> dict[str, Any]:
        return {"id": f"sub-{self.username}", "username": self.username, "password": PASSWORD, "groups": self.groups,
                "email": f"{self.username}@example.com", "name": self.username.title(), "disabled": self.disabled}


@dataclass
class Tokens:
    access_token: str
    id_token: str
    refresh_token: str | None
    raw: dict[str, Any]


class OIDCProvider:
    """One provider process; ``issuer`` is its URL, ``meridian_url`` where its web client returns."""

    def __init__(self, workdir: Path, users: list[User], meridian_url: str = "http://127.0.0.1:1") -> None:
        self.workdir = workdir
        self.users = {user.username: user for user in users}
        self.meridian_url = meridian_url.rstrip("/")
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.control_token = secrets.token_urlsafe(16)
        self.client_id, self.client_secret = "meridian", secrets.token_urlsafe(24)
        self.keys = [signing_key("key-1")]
        self.process: subprocess.Popen | None = None

    # ------------------------------------------------------------------ process

    def config(self) -> dict[str, Any]:
        callback = f"{self.meridian_url}/accounts/oidc/callback/"
        loopback = "http://127.0.0.1/cli/callback"
        return {
            "port": self.port, "issuer": self.issuer, "controlToken": self.control_token,
            "jwks": {"keys": self.keys},
            "users": [user.as_config() for user in self.users.values()],
            "defaultResource": AUDIENCE,
            "resources": {AUDIENCE: {"default": 600, "ttl": {SHORT_LIVED: 2}}, OTHER_AUDIENCE: {"default": 600}},
            "clients": [
                {"client_id": self.client_id, "client_secret": self.client_secret, "redirect_uris": [callback],
                 "post_logout_redirect_uris": [f"{self.meridian_url}/accounts/login/"],
                 "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]},
                *({"client_id": cli, "token_endpoint_auth_method": "none", "application_type": "native",
                   "redirect_uris": [loopback], "grant_types": ["authorization_code", "refresh_token"],
                   "response_types": ["code"]} for cli in (CLI, SHORT_LIVED)),
            ],
        }

    def start(self) -> OIDCProvider:
        node = shutil.which("node")
        if node is None or not (HERE / "node_modules" / "oidc-provider").is_dir():
            pytest.fail("the test OIDC provider is not installed: npm ci --prefix tests/oidc (make test does it)")
        path = self.workdir / "provider.json"
        path.write_text(json.dumps(self.config()))
        log = (self.workdir / "provider.log").open("ab")
        self.process = subprocess.Popen([node, str(HERE / "provider.mjs"), str(path)], stdout=log, stderr=log, cwd=HERE)
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the OIDC provider did not start:\n{self.log()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def rotate(self, keys: list[dict[str, Any]]) -> None:
        """Serve and sign with ``keys`` from now on (the first signs), as a provider rotating its
        keys does: restarted on the same port, its users and clients kept, sessions gone."""
        self.stop()
        self.keys = keys
        self.start()

    def log(self) -> str:
        path = self.workdir / "provider.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    # ------------------------------------------------------------------ users

    def change_user(self, username: str, *, groups: list[str] | None = None, disabled: bool | None = None) -> None:
        """What an identity admin does at the provider: a group removed, an account disabled."""
        change = {k: v for k, v in {"groups": groups, "disabled": disabled}.items() if v is not None}
        response = httpx.post(f"{self.issuer}/_test/users/{username}", json=change,
                              headers={"Authorization": f"Bearer {self.control_token}"}, timeout=5)
        response.raise_for_status()
        user = self.users[username]
        user.groups = groups if groups is not None else user.groups
        user.disabled = disabled if disabled is not None else user.disabled

    # ------------------------------------------------------------------ flows

    def login(self, username: str, *, client_id: str = CLI, resource: str = AUDIENCE, password: str = PASSWORD) -> Tokens:
        """The authorization code flow with PKCE for a public client, through the provider's own
        login form, over HTTP: what a command-line tool does in a browser, without one."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        redirect_uri = "http://127.0.0.1/cli/callback"
        params = {"client_id": client_id, "response_type": "code", "redirect_uri": redirect_uri,
                  "scope": "openid profile email groups api", "state": secrets.token_urlsafe(8),
                  "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource}
        with httpx.Client(base_url=self.issuer, timeout=10, follow_redirects=False) as http:
            response = http.get("/auth", params=params)
            code = None
            for _ in range(10):
                location = response.headers.get("location", "")
                if location.startswith(redirect_uri):
                    query = parse_qs(urlparse(location).query)
                    if "error" in query:
                        raise RuntimeError(f"the provider refused: {query}")
                    code = query["code"][0]
                    break
                if response.status_code in (302, 303):
                    response = http.get(urljoin(self.issuer + "/", location))
                    continue
                action = re.search(r'action="([^"]+/login)"', response.text)
                if response.status_code != 200 or action is None:
                    raise RuntimeError(f"unexpected answer from the provider: {response.status_code} {response.text[:300]}")
                response = http.post(action.group(1), data={"username": username, "password": password})
                if response.status_code == 200:
                    raise RuntimeError(f"the provider refused the login: {response.text[:300]}")
            if code is None:
                raise RuntimeError("no authorization code came back")
            answer = http.post("/token", data={"grant_type": "authorization_code", "code": code, "client_id": client_id,
                                               "redirect_uri": redirect_uri, "code_verifier": verifier, "resource": resource})
            answer.raise_for_status()
            body = answer.json()
        return Tokens(body["access_token"], body.get("id_token", ""), body.get("refresh_token"), body)


@pytest.fixture
def oidc_users() -> list[User]:
    """The provider's people, overridable per module: an admin, an operator, a viewer, and a
    team-a operator whose group maps to a scoped binding."""
    return [User("alice", ["meridian-admins"]), User("oscar", ["meridian-operators"]), User("vic", ["meridian-viewers"]),
            User("tess", ["team-a-ops"]), User("nobody", [])]


GROUP_ROLES = {
    "meridian-admins": "admin", "meridian-operators": "operator", "meridian-viewers": "viewer",
    "team-a-ops": {"role": "operator", "clusters": ["a-1", "a-2"]},
}


def configure_meridian(settings, provider: OIDCProvider, **overrides: Any) -> None:
    """Point Meridian's SSO settings at ``provider`` (the in-thread server sees them at once)."""
    from core import oidc

    values = {"MERIDIAN_OIDC_ISSUER": provider.issuer, "MERIDIAN_OIDC_CLIENT_ID": provider.client_id,
              "MERIDIAN_OIDC_CLIENT_SECRET": provider.client_secret,
              "MERIDIAN_OIDC_SCOPES": "openid email profile groups offline_access",
              "MERIDIAN_OIDC_AUDIENCE": [AUDIENCE], "MERIDIAN_OIDC_GROUP_ROLES": GROUP_ROLES} | overrides
    for name, value in values.items():
        setattr(settings, name, value)
    oidc.forget()  # discovery and keys are cached per process


@pytest.fixture
def oidc_provider(tmp_path, oidc_users) -> Iterator[OIDCProvider]:
    """A provider whose web client returns nowhere in particular (API and token tests)."""
    provider = OIDCProvider(tmp_path, oidc_users).start()
    yield provider
    provider.stop()
