"""Node config on a cluster running Katalyst's agents, end to end over HTTP: a cluster
registered from a kubeconfig, synced through the Kubernetes connector, a target saved, and the
reconcile and push jobs run by a real worker against ``tests.kubeapi``'s API server, which keeps
a Katalyst object's status only behind its status subresource, as a real one does."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from core.models import Job
from fleet.connectors.kubernetes import KubernetesConnector, KubernetesConnectorConfig
from fleet.models import Node
from fleet.services import SYNC_TASK, register_cluster
from nodeconfig.models import ConfigType, NodeConfig
from nodeconfig.reconcile import PUSH_TASK
from nodeconfig.services import RECONCILE_TASK, TargetSpec, delete_target, save_target
from nodeconfig.tasks import cluster_shard_key
from tests.kubeapi import ApiServer, kubeconfig, registration, serve
from tests.workers import shard_worker, wait_for_job

from .conftest import type_key

TOKEN = "emulated-cluster-token"
CNC = "config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs"
TARGETS = "config.katalyst.kubewharf.io/v1alpha1/adminqosconfigurations"
KCC = "config.katalyst.kubewharf.io/v1alpha1/katalystcustomconfigs"


def node(name: str, disk: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"diskMode": disk}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}, "capacity": {"cpu": "32", "memory": "128Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def read_status(url: str, path: str) -> dict[str, Any]:
    """GET through the status subresource, as Katalyst's agents read their CNC."""
    request = urllib.request.Request(f"{url}{path}/status", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


@pytest.fixture
def api_server():
    api = ApiServer(token=TOKEN)
    for i in range(12):
        api.put("v1/nodes", node(f"k-{i:02d}", "hdd" if i % 3 == 0 else "ssd"))
    with serve(api) as url:
        yield api, url


def test_the_emulator_keeps_status_only_behind_the_subresource(api_server, tmp_path):
    """What made CNC pushes silently empty on real clusters: status written with the object."""
    api, url = api_server
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(url, TOKEN))
    cnc = {"apiVersion": "config.katalyst.kubewharf.io/v1alpha1", "kind": "CustomNodeConfig", "metadata": {"name": "k-00"},
           "spec": {}, "status": {"katalystCustomConfigList": [{"configName": "x", "hash": "abc"}]}}
    with KubernetesConnector(KubernetesConnectorConfig(kubeconfig_path=str(path), request_timeout=5)) as connector:
        stored = connector.apply(cnc)
        assert "status" not in stored and "status" not in api.object(CNC, "k-00")
        stored = connector.apply_status(cnc)
        assert stored["status"] == cnc["status"] == read_status(url, "/apis/config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs/k-00")["status"]
        connector.apply({**cnc, "spec": {"note": "changed"}, "status": {}})
        assert api.object(CNC, "k-00")["status"] == cnc["status"], "a write to the object leaves its status alone"
    assert api.count("PATCH", "/customnodeconfigs/k-00/status") == 1


@pytest.mark.django_db(transaction=True)
def test_a_target_reaches_the_agents_of_a_real_cluster(api_server, purge_shard_queues):
    api, url = api_server
    config_type = ConfigType.objects.get(name="AdminQoSConfiguration")
    with shard_worker(cluster_shard_key("k8s-1"), type_key(config_type)):
        cluster = register_cluster(registration("k8s-1", url, TOKEN))
        synced = wait_for_job(Job.objects.get(kind=SYNC_TASK, object_id=str(cluster.pk)))
        assert synced.status == Job.Status.SUCCEEDED, synced.error
        hdd = sorted(Node.objects.filter(cluster=cluster, labels__diskMode="hdd").values_list("name", flat=True))
        assert hdd == ["k-00", "k-03", "k-06", "k-09"]

        target, _ = save_target(config_type, TargetSpec(name="hdd", node_label_selector="diskMode=hdd",
                                                        config={"eviction": {"memoryHigh": 0.8}}))
        assert wait_for_job(Job.objects.get(kind=RECONCILE_TASK, object_id=str(target.pk))).status == Job.Status.SUCCEEDED
        push = wait_for_job(Job.objects.get(kind=PUSH_TASK))
    assert push.status == Job.Status.SUCCEEDED, push.error
    assert push.task_args == ["k8s-1", hdd] and push.result == {"written": 4, "removed": 0}

    target.refresh_from_db()
    hashes = dict(NodeConfig.objects.filter(target=target).values_list("node__name", "config_hash"))
    assert set(hashes) == set(hdd) and set(hashes.values()) == {target.config_hash}
    for name in hdd:  # what an agent reads: its CNC's status, naming the target and its hash
        entries = read_status(url, f"/apis/config.katalyst.kubewharf.io/v1alpha1/customnodeconfigs/{name}")["status"][
            "katalystCustomConfigList"]
        assert entries == [{"configType": {"group": "config.katalyst.kubewharf.io", "version": "v1alpha1",
                                           "resource": "adminqosconfigurations"},
                            "configNamespace": "default", "configName": "hdd", "hash": target.config_hash}]
    assert api.object(CNC, "k-01") is None, "nodes the change did not touch are not written"

    stored = api.object(TARGETS, "hdd", "default")
    assert stored["spec"]["nodeLabelSelector"] == "diskMode=hdd" and stored["spec"]["config"] == {"eviction": {"memoryHigh": 0.8}}
    assert stored["status"] | {"conditions": []} == {
        "targetNodes": 4, "canaryNodes": 4, "updatedTargetNodes": 4, "updatedNodes": 4, "currentHash": target.config_hash,
        "observedGeneration": stored["metadata"]["generation"], "conditions": []}
    kcc = api.object(KCC, "adminqosconfigurations", "default")
    assert kcc["spec"]["targetType"] == {"group": "config.katalyst.kubewharf.io", "version": "v1alpha1",
                                         "resource": "adminqosconfigurations"}
    assert kcc["spec"]["nodeLabelSelectorAllowedKeyList"] == config_type.allowed_keys

    # Deleted in Meridian, the target leaves the cluster too: Katalyst's controllers read the
    # object there, and would go on matching nodes with it.
    with shard_worker(cluster_shard_key("k8s-1"), type_key(config_type), purge=False):
        delete_target(target, reason="retired")
        reconciled = wait_for_job(Job.objects.filter(kind=RECONCILE_TASK, object_id=str(target.pk)).latest("pk"))
        assert reconciled.status == Job.Status.SUCCEEDED, reconciled.error
        pushed = wait_for_job(Job.objects.filter(kind=PUSH_TASK).exclude(pk=push.pk).get())
    assert pushed.status == Job.Status.SUCCEEDED, pushed.error
    assert pushed.task_args == ["k8s-1", hdd] and api.object(TARGETS, "hdd", "default") is None
    assert pushed.result == {"written": len(hdd), "removed": 1}
    assert api.object(CNC, "k-00")["status"]["katalystCustomConfigList"] == []
