"""Contexts: which Meridian to talk to and as whom, kept in one YAML file.

The file is ``$MERIDIAN_CONFIG``, else ``$XDG_CONFIG_HOME/meridian/config.yaml`` (by default
``~/.config/meridian/config.yaml``), written with mode 0600 because it holds API tokens::

    current-context: prod
    contexts:
      prod:
        server: https://meridian.example.com
        user: ada                # who logged in (informational)
        token: <API token>
        ca-file: /etc/ssl/meridian-ca.pem   # optional; insecure-skip-tls-verify: true to skip checks

Flags and environment override the file for one command: ``--server``/``MERIDIAN_SERVER``,
``--token``/``MERIDIAN_TOKEN``, ``--context``/``MERIDIAN_CONTEXT``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ConfigError(Exception):
    """The config file or a context in it is unusable; the message says how to fix it."""


@dataclass
class Context:
    name: str
    server: str
    token: str = ""
    user: str = ""
    ca_file: str = ""
    insecure: bool = False

    def as_yaml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"server": self.server}
        if self.user:
            data["user"] = self.user
        if self.token:
            data["token"] = self.token
        if self.ca_file:
            data["ca-file"] = self.ca_file
        if self.insecure:
            data["insecure-skip-tls-verify"] = True
        return data


@dataclass
class Config:
    path: Path
    current: str = ""
    contexts: dict[str, Context] = field(default_factory=dict)

    def context(self, name: str | None = None) -> Context:
        """The named context, else the current one."""
        wanted = name or self.current
        if not wanted:
            raise ConfigError("No context is set: add one with `meridian context add NAME --server URL`, "
                              "or pass --server and --token.")
        if wanted not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise ConfigError(f"No context named {wanted!r} in {self.path} (known: {known}).")
        return self.contexts[wanted]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"current-context": self.current,
                "contexts": {name: ctx.as_yaml() for name, ctx in sorted(self.contexts.items())}}
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            yaml.safe_dump(data, handle, sort_keys=False)
        os.replace(tmp, self.path)


def config_path() -> Path:
    explicit = os.environ.get("MERIDIAN_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "meridian" / "config.yaml"


def load(path: Path | None = None) -> Config:
    """The config file (an empty config when there is none yet)."""
    path = path or config_path()
    if not path.exists():
        return Config(path=path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"Cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("contexts") or {}, dict):
        raise ConfigError(f"{path} is not a meridian config file (expected current-context and contexts).")
    contexts = {}
    for name, entry in (data.get("contexts") or {}).items():
        if not isinstance(entry, dict) or not entry.get("server"):
            raise ConfigError(f"Context {name!r} in {path} has no server.")
        contexts[str(name)] = Context(name=str(name), server=str(entry["server"]), token=str(entry.get("token") or ""),
                                      user=str(entry.get("user") or ""), ca_file=str(entry.get("ca-file") or ""),
                                      insecure=bool(entry.get("insecure-skip-tls-verify")))
    return Config(path=path, current=str(data.get("current-context") or ""), contexts=contexts)
