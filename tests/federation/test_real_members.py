"""A federated Deployment on real member clusters, end to end over HTTP: two clusters registered
from kubeconfigs and synced through the Kubernetes connector against ``tests.kubeapi``'s API
servers, the object submitted, and the reconcile jobs run by a real worker. The API servers run
no controllers: each member's status is written by the test as a Deployment controller would,
through the status subresource."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import Job
from federation import services
from federation.models import FederatedObject, PropagationPolicy
from federation.reconcile import RECONCILE_TASK
from federation.render import TEMPLATE_HASH_ANNOTATION
from federation.tasks import object_shard_key, reconcile_object_task
from fleet import informer
from fleet.services import SYNC_TASK, register_cluster
from fleet.tasks import cluster_shard_key
from tests.kubeapi import ApiServer, registration, serve
from tests.workers import shard_worker, wait_for_job

from .conftest import deployment

TOKEN = "member-token"
DEPLOYMENTS = "apps/v1/deployments"


def node(i: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i:02d}", "labels": {}},
            "status": {"allocatable": {"cpu": cpu, "memory": "256Gi", "pods": "110"}, "capacity": {"cpu": cpu, "memory": "256Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def report_ready(api: ApiServer) -> None:
    """What a member's Deployment controller would write: every replica updated and ready."""
    obj = api.object(DEPLOYMENTS, "web", "shop")
    replicas = obj["spec"]["replicas"]
    obj["status"] = {"observedGeneration": obj["metadata"]["generation"], "replicas": replicas, "updatedReplicas": replicas,
                     "readyReplicas": replicas, "availableReplicas": replicas}
    api.put(DEPLOYMENTS, obj)


@pytest.mark.django_db(transaction=True)
def test_a_federated_deployment_reaches_real_members(purge_shard_queues):
    informer.forget()
    small, big = ApiServer(token=TOKEN), ApiServer(token=TOKEN)
    for i in range(10):
        small.put("v1/nodes", node(i, "16"))
        big.put("v1/nodes", node(i, "64"))
    PropagationPolicy.objects.create(namespace="", name="spread", spec={"schedulingMode": "Divide"})
    with serve(small) as small_url, serve(big) as big_url:
        with shard_worker(cluster_shard_key("k8s-small"), cluster_shard_key("k8s-big")):
            for name, url in (("k8s-small", small_url), ("k8s-big", big_url)):
                cluster = register_cluster(registration(name, url, TOKEN))
                assert wait_for_job(Job.objects.get(kind=SYNC_TASK, object_id=str(cluster.pk))).status == Job.Status.SUCCEEDED

        with shard_worker(object_shard_key(0, "shop/web")):
            fed, created = services.submit(deployment("web", replicas=40), propagation_policy="spread")
            assert created and object_shard_key(fed.pk, fed.key) == object_shard_key(0, "shop/web")
            job = wait_for_job(Job.objects.filter(kind=RECONCILE_TASK, task_args=[fed.pk, fed.key]).latest("pk"))
            assert job.status == Job.Status.SUCCEEDED, job.error

            members = {name: api.object(DEPLOYMENTS, "web", "shop") for name, api in (("k8s-small", small), ("k8s-big", big))}
            replicas = {name: obj["spec"]["replicas"] for name, obj in members.items()}
            assert sum(replicas.values()) == 40 and replicas["k8s-big"] > replicas["k8s-small"] > 0, replicas
            fed.refresh_from_db()
            assert fed.placement == replicas
            for obj in members.values():
                assert obj["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION] == fed.template_hash
                assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
                assert "status" not in obj, "a member's status is its controller's, written through /status"
            assert small.count("PATCH", "/apis/apps/v1/namespaces/shop/deployments/web", fieldManager="meridian-federation") == 1

            report_ready(small)
            report_ready(big)
            again = wait_for_job(reconcile_object_task.delay(fed.pk, fed.key).id)
            assert again.status == Job.Status.SUCCEEDED, again.error
    fed = FederatedObject.objects.get(pk=fed.pk)
    assert fed.status["availableReplicas"] == fed.status["readyReplicas"] == 40
    assert set(fed.status["clusters"]) == {"k8s-small", "k8s-big"}
