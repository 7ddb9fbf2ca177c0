"""Quantities the API server refuses never reach the ledger: negative requests and limits are
denied with the API server's own reason, on every path that charges (the webhook, the
what-if, the inventory), so they can never free quota for other workloads.

Quantities ``ParseQuantity`` accepts stay accepted however large (``1e400``, 400 digits):
Kubernetes takes them too, and the quota then judges them like any other request.
"""

from __future__ import annotations

import copy

import pytest
from django.utils import timezone

from fleet.models import Workload
from kube.quantity import parse_quantity
from kube.resources import validate_pod_resources
from quotas import services
from quotas.models import QuotaCharge, QuotaGroup
from quotas.reconcile import refresh_groups, sync_ledger

from .conftest import deployment, post_review, review

pytestmark = pytest.mark.django_db
NEGATIVE = "must be greater than or equal to 0"
CHECK = "/api/v1/quotas/groups/check/"


def used(name: str) -> dict[str, str]:
    return QuotaGroup.objects.get(name=name).used


def rollout(name: str, **kwargs) -> dict:
    """An Argo Rollout: a custom resource, so only its schema (which takes "-100") was checked."""
    manifest = deployment(name, **kwargs)
    manifest["apiVersion"], manifest["kind"] = "argoproj.io/v1alpha1", "Rollout"
    return manifest


def rollout_review(manifest: dict, **kwargs) -> dict:
    return review(manifest, resource=("argoproj.io", "v1alpha1", "rollouts"), kind=("argoproj.io", "v1alpha1", "Rollout"),
                  **kwargs)


def test_a_negative_cpu_is_denied_and_cannot_free_quota_for_others(client, webhook_token, ads):
    """The finding: cpu "-100" was admitted, drove used to -100, and 22 more 5-CPU workloads fit under hard 10."""
    negative = post_review(client, webhook_token, review(deployment("sneaky", cpu="-100")))
    assert negative["allowed"] is False and negative["status"]["code"] == 403
    message = negative["status"]["message"]
    assert message.startswith('Deployment.apps "sneaky" is invalid: ')
    assert f'spec.template.spec.containers[0].resources.limits[cpu]: Invalid value: "-100": {NEGATIVE}' in message
    assert f'spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "-100": {NEGATIVE}' in message
    assert used("ads") == {"limits.cpu": "0", "limits.cpu.A4": "0", "pods": "0"} and not QuotaCharge.objects.exists()

    admitted = [post_review(client, webhook_token, review(deployment(f"five-{i}", cpu="5")))["allowed"] for i in range(23)]
    assert admitted == [True, True] + [False] * 21, "two 5-CPU workloads fit under hard 10, not 24"
    assert used("ads")["limits.cpu"] == "10"


def test_a_negative_rollout_is_denied_too(client, webhook_token, ads):
    denied = post_review(client, webhook_token, rollout_review(rollout("canary", cpu="-100")))
    assert denied["allowed"] is False and 'Rollout.argoproj.io "canary" is invalid' in denied["status"]["message"]
    assert NEGATIVE in denied["status"]["message"]
    assert post_review(client, webhook_token, rollout_review(rollout("fine", cpu="4")))["allowed"] is True
    assert used("ads")["limits.cpu"] == "4"


def test_an_update_to_a_negative_quantity_keeps_the_old_charge(client, webhook_token, ads):
    old = deployment("web", cpu="4")
    assert post_review(client, webhook_token, review(old))["allowed"] is True
    shrunk = deployment("web", cpu="-4")
    denied = post_review(client, webhook_token, review(shrunk, operation="UPDATE", old=old))
    assert denied["allowed"] is False and NEGATIVE in denied["status"]["message"]
    assert used("ads")["limits.cpu"] == "4" and QuotaCharge.objects.get(name="web").charge["limits.cpu"] == "4"


@pytest.mark.parametrize("where", ["limits-only", "init-container", "overhead", "memory"])
def test_every_negative_resource_of_a_template_is_denied(client, webhook_token, ads, where):
    manifest = deployment("odd", cpu="1")
    spec = manifest["spec"]["template"]["spec"]
    if where == "limits-only":
        spec["containers"][0]["resources"]["limits"]["cpu"] = "-1"
    elif where == "init-container":
        spec["initContainers"] = [{"name": "init", "image": "i:1", "resources": {"requests": {"cpu": "-50"}}}]
    elif where == "overhead":
        spec["overhead"] = {"cpu": "-3"}
    else:
        spec["containers"][0]["resources"]["requests"]["memory"] = "-1Gi"
    denied = post_review(client, webhook_token, review(manifest))
    assert denied["allowed"] is False and NEGATIVE in denied["status"]["message"], denied["status"]["message"]
    assert used("ads")["limits.cpu"] == "0"


def test_requests_above_limits_and_fractional_gpus_are_refused_as_the_api_server_refuses_them(client, webhook_token, ads):
    above = deployment("greedy", cpu="1")
    above["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    message = post_review(client, webhook_token, review(above))["status"]["message"]
    assert "must be less than or equal to cpu limit of 1" in message
    half = deployment("half-gpu", cpu="1", gpus=1)
    half["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "500m"
    message = post_review(client, webhook_token, review(half))["status"]["message"]
    assert 'limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer' in message
    assert "must be equal to nvidia.com/gpu limit of 500m" in message
    assert not QuotaCharge.objects.exists()


def test_the_what_if_says_what_the_webhook_says(operator_api, ads):
    body = operator_api.post(CHECK, {"workload": deployment("sneaky", cpu="-100")}, format="json").json()
    assert body["allowed"] is False and NEGATIVE in body["message"] and body["group"] == "ads"
    body = operator_api.post(CHECK, {"workload": rollout("canary", cpu="-1")}, format="json").json()
    assert body["allowed"] is False and NEGATIVE in body["message"]
    assert used("ads")["limits.cpu"] == "0"


def test_huge_quantities_are_valid_kubernetes_and_judged_by_the_quota(client, webhook_token, ads, operator_api):
    """apimachinery's ParseQuantity takes "1e400" (int64Amount{1, 400}) and a 400-digit number
    (inf.Dec), and pod validation only asks for >= 0; the quota then refuses them as too big."""
    digits = "1" + "0" * 399
    assert str(parse_quantity("1e400")) == "10e399" and parse_quantity(digits) == parse_quantity("1e399")
    template = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1e400"}, "requests": {"cpu": digits}}}]}}
    assert validate_pod_resources(template) == []
    for name, cpu in (("exp", "1e400"), ("digits", digits)):
        denied = post_review(client, webhook_token, review(deployment(name, cpu=cpu)))
        assert denied["allowed"] is False, name
        assert f"limits.cpu requested {parse_quantity(cpu)}, used 0, hard 10" in denied["status"]["message"]
    what_if = operator_api.post(CHECK, {"workload": deployment("exp", cpu="1e400")}, format="json").json()
    assert what_if["allowed"] is False and "limits.cpu requested 10e399" in what_if["message"]
    services.create_group(name="pods-only", parent=None, hard={"pods": "5"})
    free = post_review(client, webhook_token, review(deployment("big", group="pods-only", cpu="1e400")))
    assert free["allowed"] is True, "like ResourceQuota, a group limits only the resources its hard names"
    assert used("pods-only") == {"pods": "1"} and used("ads")["limits.cpu"] == "0"
    assert QuotaCharge.objects.get(name="big").charge["limits.cpu"] == "10e399", "stored exactly, never as a float"


def test_an_inventory_workload_with_negative_requests_is_never_charged_negative(cluster, ads):
    """A Rollout created before the webhook existed: its pods are refused, so it uses nothing."""
    now = timezone.now()
    labels = {"biz.group.resource.quota": "ads"}
    rows = [("honest", {"cpu": "3"}, 2), ("negative", {"cpu": "-100"}, 1)]
    for name, resources, replicas in rows:
        Workload.objects.create(cluster=cluster, namespace="default", kind="Rollout", api_version="argoproj.io/v1alpha1",
                                name=name, labels=labels, replicas=replicas, pod_requests=copy.deepcopy(resources),
                                pod_limits=copy.deepcopy(resources))
    touched = sync_ledger(cluster)
    assert touched == {"ads"}
    refresh_groups(touched)
    assert used("ads") == {"limits.cpu": "6", "limits.cpu.A4": "0", "pods": "3"}
    assert "limits.cpu" not in QuotaCharge.objects.get(name="negative").charge
    assert now <= QuotaCharge.objects.get(name="honest").admitted_at
