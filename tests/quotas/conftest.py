"""A cluster with a webhook token, quota trees, and AdmissionReviews as an API server sends them."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from quotas import services
from tests.servers import asgi_server  # noqa: F401  (the fixture)

_uids = itertools.count(1)


def deployment(name: str, *, group: str | None = "ads", cpu: str = "1", replicas: int = 1, memory: str = "1Gi",
               cpu_type: str | None = None, gpus: int = 0, gpu_type: str | None = None, namespace: str = "default",
               kind: str = "Deployment", api_version: str = "apps/v1") -> dict[str, Any]:
    optional = (("biz.group.resource.quota", group), ("biz.group.resource.quota/cpu-type", cpu_type),
                ("biz.group.resource.quota/gpu-type", gpu_type))
    labels = {"app": name} | {k: v for k, v in optional if v}
    resources = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "app:1", "resources": resources}]}}}}


def review(obj: dict | None, *, operation: str = "CREATE", old: dict | None = None, dry_run: bool = False,
           resource: tuple[str, str, str] = ("apps", "v1", "deployments"), sub_resource: str = "",
           kind: tuple[str, str, str] = ("apps", "v1", "Deployment"), name: str | None = None,
           namespace: str = "default") -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview as the API server sends it."""
    source = obj if obj is not None else old
    request: dict[str, Any] = {
        "uid": f"uid-{next(_uids)}", "operation": operation, "dryRun": dry_run,
        "kind": dict(zip(("group", "version", "kind"), kind, strict=True)),
        "resource": dict(zip(("group", "version", "resource"), resource, strict=True)),
        "name": name or (source or {}).get("metadata", {}).get("name", ""), "namespace": namespace,
        "userInfo": {"username": "system:serviceaccount:kube-system:deployment-controller"},
        "object": obj, "oldObject": old,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def scale_review(name: str, replicas: int, old_replicas: int, **kwargs: Any) -> dict[str, Any]:
    scale = lambda n: {"apiVersion": "autoscaling/v1", "kind": "Scale",  # noqa: E731
                       "metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": n}}
    return review(scale(replicas), operation="UPDATE", old=scale(old_replicas), sub_resource="scale",
                  kind=("autoscaling", "v1", "Scale"), name=name, **kwargs)


def hpa_review(target: str, max_replicas: int, *, operation: str = "CREATE", old_max: int | None = None) -> dict[str, Any]:
    def hpa(n: int) -> dict[str, Any]:
        return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": f"{target}-hpa", "namespace": "default"},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                         "minReplicas": 1, "maxReplicas": n}}
    obj = hpa(max_replicas) if operation != "DELETE" else None
    old = hpa(old_max) if old_max is not None else None
    return review(obj, operation=operation, old=old, resource=("autoscaling", "v2", "horizontalpodautoscalers"),
                  kind=("autoscaling", "v2", "HorizontalPodAutoscaler"), name=f"{target}-hpa")


@pytest.fixture
def ads(db):
    """The spec's example: limits.cpu 10, of which at most 4 on A4 machines."""
    return services.create_group(name="ads", parent=None, hard={"limits.cpu": "10", "limits.cpu.A4": "4", "pods": "20"})


def post_review(client, token: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/admission/v1/quotas/validate", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["response"]["uid"] == body["request"]["uid"]
    return answer["response"]


@pytest.fixture
def server(asgi_server):  # noqa: F811  (the imported fixture, requested by name)
    """The real ASGI app (the webhook's fast path included) served by uvicorn in a thread."""
    return asgi_server
