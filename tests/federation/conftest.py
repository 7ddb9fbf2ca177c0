"""Federation fixtures: a small simulated fleet synced into the inventory, and objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from federation.models import PropagationPolicy
from federation.scheduler import ClusterInfo, ClusterSnapshot, SchedulingUnit, schedule
from fleet.models import Cluster
from fleet.services import connector_for
from fleet.simstore import config_for
from fleet.simulator import demo_fleet
from fleet.sync import sync_cluster


def assert_plain_path_like_schedule(unit: SchedulingUnit, clusters: list[ClusterInfo]) -> dict[str, int]:
    """A snapshot schedules ``unit`` as :func:`schedule` does, result or exception; returns its stats."""
    snapshot = ClusterSnapshot(clusters)
    try:
        want: Any = schedule(unit, clusters).to_dict()
    except Exception as exc:  # noqa: BLE001 - whatever schedule() does, the snapshot must do
        with pytest.raises(type(exc)):
            snapshot.schedule(unit)
    else:
        assert snapshot.schedule(unit).to_dict() == want
    return snapshot.stats


def sync(cluster: Cluster) -> None:
    with connector_for(cluster) as connector:
        sync_cluster(cluster, connector)


@pytest.fixture
def fleet3(db) -> list[Cluster]:
    """Three unevenly sized simulated clusters (1-second ticks so rollouts progress fast)."""
    clusters = []
    for spec in demo_fleet(seed=11, clusters=3, nodes=240):
        config = config_for(spec) | {"tick_seconds": 1, "workloads_per_100_nodes": 10}
        cluster = Cluster.objects.create(name=spec.name, connector="simulated", connector_config=config,
                                         labels={"topology.kubernetes.io/region": spec.region})
        sync(cluster)
        clusters.append(cluster)
    return clusters


def deployment(name: str = "web", replicas: int = 30, image: str = "nginx:1.27", *, namespace: str = "shop",
               cpu: str = "100m", memory: str = "128Mi", labels: dict[str, str] | None = None,
               max_surge: Any = None, max_unavailable: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "app", "image": image,
                                                  "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}},
        },
    }
    if max_surge is not None or max_unavailable is not None:
        rolling = {}
        if max_surge is not None:
            rolling["maxSurge"] = max_surge
        if max_unavailable is not None:
            rolling["maxUnavailable"] = max_unavailable
        obj["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling}
    return copy.deepcopy(obj)


@pytest.fixture
def spread_policy(db) -> PropagationPolicy:
    return PropagationPolicy.objects.create(namespace="", name="spread", spec={"schedulingMode": "Divide"})
