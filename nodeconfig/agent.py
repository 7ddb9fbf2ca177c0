"""The agent side of node config (upstream's "KCC SDK" over HTTP): what a node gets, what it reports.

Polls dominate: 100k nodes every 30 s. The ETag of every node sits in Redis, refreshed by
the reconciler after each commit, and agent tokens are cached there by hash, so a poll
whose ``If-None-Match`` still holds is answered from two Redis reads (see ``fastpath``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from django.db import transaction
from django.utils import timezone

from core.redis import get_redis
from fleet.models import Cluster, Node

from .models import ConfigType, NodeConfig
from .planning import deep_merge, node_etag
from .reconcile import mark_dirty

ETAG_KEY = "meridian:nodeconfig:etag:{cluster}/{node}"
BODY_KEY = "meridian:nodeconfig:configs:{etag}"
#: ETags also expire, so one changed behind the reconciler's back (a restored database)
#: heals within the hour; each node then costs one full poll per hour.
ETAG_SECONDS = 3600
MAX_ERROR_LENGTH = 2000


class ReportError(ValueError):
    """A status report that cannot be recorded; ``field`` names the part at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def etag_key(cluster: str, node: str) -> str:
    return ETAG_KEY.format(cluster=cluster, node=node)


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


def remember(cluster: str, node: str, etag: str, configs: Mapping[str, Any]) -> None:
    """Cache the node's ETag and the configs it names, for the fast path.

    The ETag is set only if absent: a reconciler's newer one, written after its commit,
    always wins over this request's possibly older read. The configs are keyed by the
    content-addressed ETag, so caching them can never serve a wrong body.
    """
    with get_redis().pipeline(transaction=False) as pipe:
        pipe.set(etag_key(cluster, node), etag, nx=True, ex=ETAG_SECONDS)
        pipe.set(BODY_KEY.format(etag=etag), orjson.dumps(configs), ex=ETAG_SECONDS)
        pipe.execute()


def refresh_etags(node_ids: Sequence[int]) -> None:
    """Recompute the ETags of these nodes from their rows (called after the rows commit)."""
    types = {t.pk: (t.name, t.default_hash) for t in _types()}
    redis = get_redis()
    for start in range(0, len(node_ids), 5000):
        chunk = node_ids[start : start + 5000]
        served: dict[int, dict[int, tuple]] = defaultdict(dict)
        for node_id, type_id, digest, target, revision in NodeConfig.objects.filter(
                node_id__in=chunk, revision__isnull=False).exclude(config_hash="").values_list(
                "node_id", "config_type_id", "config_hash", "target__name", "revision__number"):
            served[node_id][type_id] = (target, revision, digest)
        with redis.pipeline(transaction=False) as pipe:
            for node_id, cluster, name in Node.objects.filter(pk__in=chunk).values_list("pk", "cluster__name", "name"):
                entries = ((kind, default, *served[node_id].get(type_id, (None, None, default)))
                           for type_id, (kind, default) in types.items())
                pipe.set(etag_key(cluster, name), node_etag(entries), ex=ETAG_SECONDS)
            pipe.execute()


def refresh_all_etags() -> None:
    """After a config type changes (its default is in every node's ETag)."""
    ids = list(Node.objects.values_list("pk", flat=True))
    refresh_etags(ids)


# ---------------------------------------------------------------------------- status reports

def parse_report(body: Any) -> tuple[dict[str, str], dict[str, str]]:
    """``{"applied": {type: hash}, "errors": {type: message}}``, both optional."""
    if not isinstance(body, Mapping):
        raise ReportError("non_field_errors", "The report must be a JSON object.")
    unknown = set(body) - {"applied", "errors"}
    if unknown:
        raise ReportError(sorted(unknown)[0], "Unknown field; a report has only 'applied' and 'errors'.")
    parts = []
    for name in ("applied", "errors"):
        value = body.get(name) or {}
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ReportError(name, "Must be an object of config type name to string.")
        parts.append(dict(value))
    applied, errors = parts
    for kind, digest in applied.items():
        if len(digest) > 64:
            raise ReportError("applied", f"{kind}: a hash is at most 64 characters.")
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
        raise ReportError("applied", f"Unknown config type {sorted(unknown)[0]!r}.")
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
        targets = {row.target_id for row in changed}
        transaction.on_commit(lambda: mark_dirty(targets))
    return len(changed)
