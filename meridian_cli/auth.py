"""How ``meridian login`` gets an API token. Each way is a ``LoginMethod``: it talks to the
server and returns the token and who it belongs to; ``login`` then stores both in a context.

Today: a username and password (``POST /api/v1/auth/token/``) or a token made elsewhere (the
console's API token page, ``meridian token create``), checked with ``GET /api/v1/auth/me/``.
Single sign-on (issue 29, built in parallel) adds the OIDC device flow as one more method —
``meridian login --sso``: ask the server for a device code, show the verification URL and
user code, poll until the identity provider says yes, receive a Meridian token — without
changing contexts, storage or any other command.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Protocol

from .client import Client


@dataclass(frozen=True)
class Credentials:
    token: str
    user: str


class LoginMethod(Protocol):
    def login(self, client: Client) -> Credentials: ...


@dataclass(frozen=True)
class PasswordLogin:
    """Exchange a username and password for a token named after this machine."""

    username: str
    password: str
    read_only: bool = False

    def login(self, client: Client) -> Credentials:
        body = client.post("auth/token/", {"username": self.username, "password": self.password,
                                           "name": f"meridian-cli@{socket.gethostname()}"[:100],
                                           "write_enabled": not self.read_only})
        return Credentials(token=body["token"], user=self.username)


@dataclass(frozen=True)
class TokenLogin:
    """A token made elsewhere; the server says whose it is (and whether it works)."""

    token: str

    def login(self, client: Client) -> Credentials:
        me = client.request("GET", "auth/me/", headers={"Authorization": f"Token {self.token}"}).json()
        return Credentials(token=self.token, user=str(me.get("username") or ""))


class DeviceFlowNotAvailable(Exception):
    """The OIDC device flow is not there yet (issue 29)."""


@dataclass(frozen=True)
class DeviceFlowLogin:
    """Placeholder for the OIDC device flow; see the module docstring."""

    def login(self, client: Client) -> Credentials:
        raise DeviceFlowNotAvailable("Single sign-on (the OIDC device flow) arrives with Meridian's SSO support; "
                                     "log in with --username (and a password) or --token meanwhile.")
