"""Scheduling app fixtures: the seed template, a cluster with a webhook token, pod reviews,
and a clean webhook cache (its version lives in Redis, which outlives each test's database)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from .seed import SEED_ANNOTATIONS, SEED_NSC_YAML, SEED_RENDERED, pod  # noqa: F401 (shared with the tests)

_uids = itertools.count(1)
WEBHOOK = "/api/admission/v1/scheduling/mutate"


class RedisDown:
    """A Redis client whose every command fails as when Redis is down."""

    def __getattr__(self, name: str) -> Any:
        from redis.exceptions import ConnectionError as RedisConnectionError

        def fail(*args: Any, **kwargs: Any) -> Any:
            raise RedisConnectionError("redis is down")
        return fail


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
def seed_template(db):
    from core.context import acting_as
    from scheduling import services

    with acting_as("test"):
        results, _ = services.import_manifests(SEED_NSC_YAML, reason="the seed")
    return results[0]
