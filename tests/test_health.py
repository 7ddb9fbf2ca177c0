import pytest

from core.worker_signals import HEARTBEAT_KEY, beat_once
from core.redis import get_redis


def test_healthz_needs_no_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_reports_each_dependency_and_waits_for_a_worker(client, django_user_model):
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
        client.force_login(django_user_model.objects.create_user("ops", is_staff=True))
        assert client.get("/readyz").json()["checks"]["workers"]["detail"] == ["test-worker@host"]
    finally:
        redis.delete(HEARTBEAT_KEY.format(hostname="test-worker@host"))


@pytest.mark.django_db
def test_readyz_tells_anonymous_callers_only_whether_each_check_passed(client):
    """A load balancer needs ok/not ok; worker names and the database vendor help attackers."""
    beat_once("secret-worker@internal-host")
    try:
        text = client.get("/readyz").content.decode()
    finally:
        get_redis().delete(HEARTBEAT_KEY.format(hostname="secret-worker@internal-host"))
    assert '"ok": true' in text.replace('"ok":true', '"ok": true')
    for leak in ("secret-worker", "internal-host", "sqlite", "postgresql", "detail", "pong"):
        assert leak not in text
