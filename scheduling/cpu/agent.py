"""What a node agent reads about its node's CPUs (``agent_views``: ``GET /api/agent/v1/clusters/
{cluster}/nodes/{node}/cpuset``): the share pool and every instance's cpuset — the annotations'
content, for agents that apply cgroups themselves — with an ETag from the node's row, and the
key its body is cached under in Redis."""

from __future__ import annotations

from typing import Any

from ..models import NodeCPU
from .cpuset import format_cpuset
from .state import DEFAULT_CONTAINERS, SharedInstance
from .store import Row, content_digest, state_of

#: Agents' cpuset answers, cached in Redis under their ETag (``agent_views``).
AGENT_BODY_KEY = "meridian:scheduling:cpuset:{etag}"


def forget_agent_bodies(**_: Any) -> int:
    """After the database was restored (``core.backup.database_restored``): versions rewound, so
    the next allocation's ETag can name a body cached for the replaced database's same version."""
    from core.redis import delete_matching

    return delete_matching(AGENT_BODY_KEY.format(etag="*"))


def agent_etag(node: NodeCPU) -> str:
    """Changes whenever the payload can: every allocation change bumps ``version``. The row's
    creation time makes it one row's (bodies are cached in Redis by ETag: a database rebuilt
    from scratch, whose ids and versions start over, must not be served another's)."""
    return '"cpu-' + content_digest([node.pk, node.created.isoformat(), node.version, node.reserved_cpus,
                                     str(node.overcommit_ratio), node.topology_digest, node.io_queues])[:24] + '"'


def agent_payload(node: NodeCPU, cluster: str) -> dict[str, Any]:
    """What a node agent applies: the share pool and every instance's cpuset (the annotations' content)."""
    rows = list(node.allocations.all())
    state = state_of(node, rows)
    instances = []
    for row in sorted((r for r in rows if r.active), key=lambda r: r.instance):
        item: dict[str, Any] = {"namespace": row.namespace, "name": row.pod_name, "uid": row.pod_uid, "app": row.app,
                                "mode": row.mode}
        if row.mode == Row.Mode.EXCLUSIVE and not row.disputed:
            effective = format_cpuset(state.effective_cpuset(row.instance))
            item |= {"cpus": row.cpus, "cpuset": row.cpuset, "strategy": row.strategy, "releaseIsolate": row.release_isolate,
                     "excludeReserved": row.exclude_reserved,
                     "containers": {name: {"cpuset": effective} for name in row.containers or DEFAULT_CONTAINERS}}
        elif row.mode == Row.Mode.EXCLUSIVE:
            item |= {"cpus": row.cpus, "cpuset": row.cpuset, "disputed": True}
        else:
            shared = SharedInstance(row.instance, row.request_milli, row.limit_milli, row.app)
            pool = format_cpuset(state.share_pool)
            item |= {"cpuShares": shared.cpu_shares, "cfsQuotaUs": shared.cfs_quota_us,
                     "containers": {name: {"cpuset": pool} for name in row.containers or DEFAULT_CONTAINERS}}
        instances.append(item)
    return {"cluster": cluster, "node": node.name, "version": node.version,
            "reserved": node.reserved_cpus, "sharePool": {"cpuIDs": sorted(state.share_pool),
                                                          "cpuset": format_cpuset(state.share_pool)},
            "instances": instances}
