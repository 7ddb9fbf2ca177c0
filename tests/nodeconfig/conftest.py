"""A small fleet with hand-picked labels, and helpers to run the reconciler like the worker does."""

from __future__ import annotations

import pytest

from fleet.models import Cluster, Node
from nodeconfig.models import ConfigTarget, ConfigType
from nodeconfig.reconcile import reconcile_targets

MODELS = ("A1", "A2", "A3", "A4")


def make_nodes(cluster: Cluster, count: int) -> list[Node]:
    nodes = []
    for i in range(count):
        labels = {"kubernetes.io/hostname": f"{cluster.name}-n{i:03d}", "machineModel": MODELS[i % 4],
                  "diskMode": "hdd" if i % 3 == 0 else "ssd", "pool": "online" if i % 2 else "offline"}
        nodes.append(Node(cluster=cluster, name=f"{cluster.name}-n{i:03d}", labels=labels, ready=True))
    return Node.objects.bulk_create(nodes)


@pytest.fixture(autouse=True)
def clean_agent_cache():
    """Redis outlives each test's rolled-back database: drop the ETags and token cache."""
    yield
    from core.redis import get_redis

    redis = get_redis()
    keys = list(redis.scan_iter("meridian:nodeconfig:*", count=1000))
    if keys:
        redis.delete(*keys)


@pytest.fixture
def fleet(db):
    bj = Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 12, "seed": 3})
    sh = Cluster.objects.create(name="sh-1", connector="simulated", connector_config={"node_count": 6, "seed": 4})
    make_nodes(bj, 12)
    make_nodes(sh, 6)
    return {"bj-1": bj, "sh-1": sh}


@pytest.fixture
def admin_qos(db) -> ConfigType:
    return ConfigType.objects.get(name="AdminQoSConfiguration")


def settle(target: ConfigTarget | int) -> None:
    """Run what the worker runs after a target change (the task body, synchronously)."""
    target = target if isinstance(target, ConfigTarget) else ConfigTarget.objects.get(pk=target)
    reconcile_targets(target.config_type, [target.pk])
