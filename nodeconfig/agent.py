"""The agent side of node config (upstream's "KCC SDK" over HTTP): what a node gets, what it reports.

Polls dominate: 100k nodes every 30 s. The ETag of every node sits in Redis (``etags``),
refreshed by the reconciler after each commit, and agent tokens are cached there by hash,
so a poll whose ``If-None-Match`` still holds is answered from two Redis reads (see
``fastpath``). Redis is only a cache: without it every poll and report is answered from
the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from core import live
from core.errors import Refused
from fleet.models import Cluster, Node

from .models import TARGET_LIVE, ConfigType, NodeConfig
from .planning import deep_merge, node_etag

MAX_ERROR_LENGTH = 2000


# ---------------------------------------------------------------------------- effective config

def _types() -> list[ConfigType]:
    return list(ConfigType.objects.order_by("name"))


def effective_config(node: Node) -> tuple[dict[str, Any], str]:
    """Per type: target, revision, hash and the body merged over the type's default; and the ETag."""
    rows = {row.config_type_id: row for row in NodeConfig.objects.filter(node=node).select_related(
        "target", "revision", "base_revision")}
    configs: dict[str, Any] = {}
    for config_type in _types():
        row = rows.get(config_type.pk)
        if row is None or not row.config_hash or row.revision is None:
            configs[config_type.name] = {"apiVersion": config_type.api_version, "target": None, "revision": None,
                                         "hash": config_type.default_hash, "config": config_type.default_config}
            continue
        body = config_type.default_config or {}
        if row.base_revision is not None:
            body = deep_merge(body, row.base_revision.config)
        configs[config_type.name] = {
            "apiVersion": config_type.api_version, "target": row.target.name if row.target else None,
            "revision": row.revision.number, "hash": row.config_hash, "config": deep_merge(body, row.revision.config),
        }
    defaults = {t.name: t.default_hash for t in _types()}
    etag = node_etag((name, defaults[name], entry["target"], entry["revision"], entry["hash"]) for name, entry in configs.items())
    return {"cluster": node.cluster.name, "node": node.name, "configs": configs}, etag


# ---------------------------------------------------------------------------- status reports

def parse_report(body: Any) -> tuple[dict[str, str], dict[str, str]]:
    """``{"applied": {type: hash}, "errors": {type: message}}``, both optional."""
    if not isinstance(body, Mapping):
        raise Refused("invalid", _("The report must be a JSON object."), field="non_field_errors")
    unknown = set(body) - {"applied", "errors"}
    if unknown:
        raise Refused("invalid", _("Unknown field; a report has only 'applied' and 'errors'."), field=sorted(unknown)[0])
    parts = []
    for name in ("applied", "errors"):
        value = body.get(name) or {}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise Refused("invalid", _("Must be an object of config type name to string."), field=name)
        parts.append(dict(value))
    applied, errors = parts
    for kind, digest in applied.items():
        if len(digest) > 64:
            raise Refused("invalid", _("%(type)s: a hash is at most 64 characters.") % {"type": kind}, field="applied")
    return applied, errors


def record_reports(cluster: Cluster, reports: Mapping[str, tuple[dict[str, str], dict[str, str]]],
                   *, now: datetime | None = None) -> int:
    """Store what agents applied or failed, per node and type; returns the rows changed.

    Types the node has no target for are accepted and ignored: the agent runs the default.
    """
    now = now or timezone.now()
    type_ids = {t.name: t.pk for t in _types()}
    unknown = {kind for applied, errors in reports.values() for kind in (*applied, *errors)} - set(type_ids)
    if unknown:
        raise Refused("invalid", _("Unknown config type %(name)s.") % {"name": repr(sorted(unknown)[0])}, field="applied")
    changed: list[NodeConfig] = []
    names = list(reports)
    with transaction.atomic():
        for start in range(0, len(names), 5000):
            chunk = names[start : start + 5000]
            rows = NodeConfig.objects.filter(cluster=cluster, node__name__in=chunk).select_related("node", "config_type")
            for row in rows:
                applied, errors = reports[row.node.name]
                kind = row.config_type.name
                if kind not in applied and kind not in errors:
                    continue
                new_applied = applied.get(kind, row.applied_hash)
                new_error = (errors.get(kind) or "")[:MAX_ERROR_LENGTH] if kind in errors else (
                    "" if new_applied == row.config_hash else row.error)
                if (new_applied, new_error) != (row.applied_hash, row.error):
                    row.applied_hash, row.error, row.reported_at = new_applied, new_error, now
                    changed.append(row)
        for start in range(0, len(changed), 2000):
            NodeConfig.objects.bulk_update(changed[start : start + 2000], ["applied_hash", "error", "reported_at"])
        targets = {row.target_id for row in changed} | {row.restored_from_id for row in changed if row.restored_from_id}
        live.mark(TARGET_LIVE, targets)
    return len(changed)
