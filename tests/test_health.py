import pytest

from core.worker_signals import HEARTBEAT_KEY, beat_once
from core.redis import get_redis


def test_healthz_needs_no_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_reports_each_dependency_and_waits_for_a_worker(client):
    redis = get_redis()
    for key in redis.scan_iter(match=HEARTBEAT_KEY.format(hostname="*")):
        redis.delete(key)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is True
    assert body["checks"]["workers"]["ok"] is False

    beat_once("test-worker@host")
    try:
        response = client.get("/readyz")
        assert response.status_code == 200
        assert response.json()["checks"]["workers"]["detail"] == ["test-worker@host"]
    finally:
        redis.delete(HEARTBEAT_KEY.format(hostname="test-worker@host"))
