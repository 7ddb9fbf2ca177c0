"""Kubernetes objects as YAML documents, the way kubectl prints them: one ``---`` per object,
fields in the order given (apiVersion, kind, metadata, spec, status), block style."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

__all__ = ["dump_documents"]


def dump_documents(objects: Iterable[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all([dict(o) for o in objects], sort_keys=False, default_flow_style=False)
