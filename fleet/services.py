"""Changes to the fleet inventory, each audited; and the connector of a cluster."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core import events
from core.audit import record_change, snapshot
from core.jobs import create_job

from .connectors.base import Connector, ConnectorError
from .models import Cluster


def connector_for(cluster: Cluster) -> Connector:
    """The connector a cluster is configured with; ConnectorError(reason="config") when unusable."""
    if cluster.connector == Cluster.ConnectorKind.SIMULATED:
        return _simulated_connector(cluster)
    if cluster.connector == Cluster.ConnectorKind.KUBERNETES:
        return _kubernetes_connector(cluster)
    raise ConnectorError(f"unknown connector kind {cluster.connector!r}", reason="config")


def _simulated_connector(cluster: Cluster) -> Connector:
    from .connectors.simulated import MemoryObjectStore, SimulatedConnector
    from .simstore import DatabaseObjectStore, spec_for

    store = DatabaseObjectStore(cluster) if cluster.pk else MemoryObjectStore()
    return SimulatedConnector(spec_for(cluster), store=store)


def _kubernetes_connector(cluster: Cluster) -> Connector:
    from .connectors.kubernetes import KubernetesConnector, KubernetesConnectorConfig

    settings = cluster.connector_config or {}
    config = KubernetesConnectorConfig(
        kubeconfig_path=settings.get("kubeconfig_path") or None,
        context=settings.get("context") or None,
        in_cluster=bool(settings.get("in_cluster")),
        kubeconfig_content=cluster.credentials or None,
    )
    return KubernetesConnector(config)


def check_connection(cluster: Cluster) -> None:
    """Reach the cluster once; raises ConnectorError saying why it cannot be reached."""
    connector = connector_for(cluster)
    try:
        connector.server_info()
    finally:
        connector.close()


def register_cluster(cluster: Cluster) -> Cluster:
    """Save a validated, reachable cluster and queue its first sync."""
    with transaction.atomic():
        cluster.save()
        record_change(cluster, "create", after=snapshot(cluster))
        request_sync(cluster)
        events.publish("fleet", "cluster.registered", {"cluster": cluster.name})
    return cluster


def update_cluster(cluster: Cluster, changes: dict[str, Any]) -> Cluster:
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        before = snapshot(locked)
        for field, value in changes.items():
            setattr(locked, field, value)
        locked.save()
        record_change(locked, "update", before=before, after=snapshot(locked))
        events.publish(f"cluster-{locked.name}", "cluster.updated", {"cluster": locked.name})
    return locked


def delete_cluster(cluster: Cluster) -> None:
    with transaction.atomic():
        record_change(cluster, "delete", before=snapshot(cluster))
        name = cluster.name
        cluster.delete()
        events.publish("fleet", "cluster.deleted", {"cluster": name})


def request_sync(cluster: Cluster):
    """A job for one cluster's sync, sent to the cluster's shard after commit."""
    from .tasks import sync_cluster_task

    job = create_job("fleet.sync", params={"cluster": cluster.name}, obj=cluster)
    transaction.on_commit(lambda: sync_cluster_task.delay(cluster.name, job_id=job.pk))
    return job
