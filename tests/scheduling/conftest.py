"""Scheduling app fixtures: the seed template, a cluster with a webhook token, pod reviews,
and a clean webhook cache (its version lives in Redis, which outlives each test's database)."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from .test_templates import SEED_ANNOTATIONS, SEED_NSC_YAML, SEED_RENDERED  # noqa: F401

_uids = itertools.count(1)
WEBHOOK = "/api/admission/v1/scheduling/mutate"


@pytest.fixture(autouse=True)
def fresh_webhook_cache():
    """Each test starts from its own database: drop the cached snapshot and the Redis version."""
    from scheduling.admission import VERSION_KEY, _redis, cache

    def reset() -> None:
        cache.clear()
        try:
            _redis().delete(VERSION_KEY)
        except Exception:
            pass

    reset()
    yield
    reset()


def pod(annotations: dict | None = None, labels: dict | None = None, *, name: str = "web-0", namespace: str = "web",
        spec: dict | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if labels is not None:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": copy.deepcopy(spec) if spec is not None else {"containers": [{"name": "app", "image": "nginx"}]}}


def review(obj: dict | None, *, operation: str = "CREATE", namespace: str = "web",
           kind: tuple[str, str, str] = ("", "v1", "Pod"), resource: tuple[str, str, str] = ("", "v1", "pods"),
           sub_resource: str = "") -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": f"uid-{next(_uids)}", "operation": operation,
        "kind": dict(zip(("group", "version", "kind"), kind, strict=True)),
        "resource": dict(zip(("group", "version", "resource"), resource, strict=True)),
        "name": (obj or {}).get("metadata", {}).get("name", ""), "namespace": namespace,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": obj,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.fixture
def cluster(db):
    from fleet.models import Cluster

    return Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 4, "seed": 1})


@pytest.fixture
def webhook_token(cluster) -> str:
    from fleet.tokens import issue_token

    return issue_token(cluster, "webhook")[1]


@pytest.fixture
def seed_template(db):
    from core.context import acting_as
    from scheduling import services

    with acting_as("test"):
        results, _ = services.import_manifests(SEED_NSC_YAML, reason="the seed")
    return results[0]
