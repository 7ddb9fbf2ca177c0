"""Redis down: it is a cache (ETags, the token cache, the fast path) and a transport (job
messages), never the truth. Agents are answered from the database, the ASGI fast path steps
aside for a while, work asked for meanwhile waits as jobs, and everything recovers when Redis
is back.

Each test runs its own redis-server (the embedded binary, on a unix socket in a temporary
directory) and points ``settings.REDIS_URL`` at it, so stopping it never touches the Redis
the rest of the suite (or the machine) uses.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core import jobs
from core.embedded_redis import EmbeddedRedis
from core.models import Job
from core.redis import _client, get_redis
from fleet.models import Node
from fleet.tokens import issue_token
from nodeconfig import fastpath
from nodeconfig.etags import etag_key
from nodeconfig.models import ConfigTarget, NodeConfig
from nodeconfig.reconcile import REFRESH_TASK, after_write
from nodeconfig.services import TargetSpec, save_target

from .conftest import settle

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_redis(settings):
    """A redis-server of this test's own; ``core.redis`` (ETags, tokens, locks, job sends) uses it."""
    directory = Path(tempfile.mkdtemp(prefix="meridian-outage-"))
    server = EmbeddedRedis(directory / "redis.sock").start()
    settings.REDIS_URL = server.url
    _client.cache_clear()
    yield server
    server.stop()
    _client.cache_clear()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def hdd(fleet, admin_qos) -> ConfigTarget:
    target, _ = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={
        "evictionConfig": {"memoryPressureEvictionConfig": {"systemFreeMemoryThresholdMinimum": "20Gi"}}}))
    settle(target)
    target.refresh_from_db()
    return target


def url(node: str = "bj-1-n000", what: str = "config", cluster: str = "bj-1") -> str:
    return f"/api/agent/v1/clusters/{cluster}/nodes/{node}/{what}"


def down(server: EmbeddedRedis) -> None:
    server.stop()
    with pytest.raises(Exception):
        get_redis().ping()


def test_agents_are_answered_from_the_database_while_redis_is_down(private_redis, fleet, hdd, client,
                                                                   django_capture_on_commit_callbacks):
    _, raw = issue_token(fleet["bj-1"], "agent")
    _, other_cluster = issue_token(fleet["sh-1"], "agent")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    first = client.get(url(), **auth)
    assert first.status_code == 200
    etag, body = first["ETag"], first.json()
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url(), HTTP_IF_NONE_MATCH=etag, **auth).status_code == 304
    assert len(queries) == 0, "with Redis up, the cache answers"

    down(private_redis)
    answer = client.get(url(), **auth)
    assert answer.status_code == 200 and answer.json() == body and answer["ETag"] == etag
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url(), HTTP_IF_NONE_MATCH=etag, **auth).status_code == 304
    assert len(queries) > 0, "the database answered"
    with django_capture_on_commit_callbacks(execute=True):  # the progress mark after commit is best effort
        report = client.post(url(what="status"), {"applied": {"AdminQoSConfiguration": hdd.config_hash}},
                             content_type="application/json", **auth)
    assert report.status_code == 204
    assert NodeConfig.objects.get(node__name="bj-1-n000", config_type=hdd.config_type).state == "applied"
    assert client.get(url(), HTTP_AUTHORIZATION="Bearer mag_nope").status_code == 401
    assert client.get(url()).status_code == 401
    assert client.post(url(what="status"), {}, content_type="application/json",
                       HTTP_AUTHORIZATION="Bearer mag_nope").status_code == 401
    assert client.get(url(), HTTP_AUTHORIZATION=f"Bearer {other_cluster}").status_code == 403
    assert client.get(url("no-such-node"), **auth).status_code == 404

    private_redis.start()  # back, empty (nothing persisted): the caches fill again
    assert client.get(url(), **auth).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url(), HTTP_IF_NONE_MATCH=etag, **auth).status_code == 304
    assert len(queries) == 0, "recovered: the cache answers again"
    assert get_redis().get(etag_key("bj-1", "bj-1-n000")).decode() == etag


@pytest.mark.django_db(transaction=True)
def test_the_asgi_fast_path_steps_aside_while_redis_is_down_and_django_answers(private_redis, fleet, hdd,
                                                                               monkeypatch):
    """The real Django ASGI app behind the fast path (committed rows: it runs views in a thread)."""
    from django.core.asgi import get_asgi_application

    monkeypatch.setattr(fastpath, "PAUSE_SECONDS", 1.0)
    _, raw = issue_token(fleet["bj-1"], "agent")
    django_app = get_asgi_application()
    reached_django: list[str] = []

    async def django(scope, receive, send):
        reached_django.append(scope["path"])
        await django_app(scope, receive, send)

    app = fastpath.AgentPollFastPath(django, private_redis.url)
    loop = asyncio.new_event_loop()

    def poll(etag: str | None = None) -> tuple[int, dict[bytes, bytes], bytes]:
        headers = [(b"authorization", f"Bearer {raw}".encode()), (b"host", b"testserver")]
        if etag:
            headers.append((b"if-none-match", etag.encode()))
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                 "path": url(), "raw_path": url().encode(), "root_path": "", "query_string": b"", "headers": headers,
                 "client": ("127.0.0.1", 40000), "server": ("testserver", 80)}
        sent: list[dict] = []
        requested = False

        async def receive():
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.Event().wait()  # no disconnect

        async def send(message):
            sent.append(message)

        loop.run_until_complete(app(scope, receive, send))
        start = next(m for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return start["status"], {name.lower(): value for name, value in start["headers"]}, body

    try:
        status, headers, _ = poll()
        assert status == 200 and reached_django == [url()]  # Django builds it and fills the caches
        etag = headers[b"etag"].decode()
        assert poll(etag)[0] == 304 and len(reached_django) == 1, "the fast path answered from Redis"

        down(private_redis)
        started = time.monotonic()
        assert poll(etag)[0] == 304 and len(reached_django) == 2, "Django answered from the database"
        status, _, body = poll()
        assert status == 200 and b'"20Gi"' in body and len(reached_django) == 3
        assert time.monotonic() - started < 5
        tried: list[int] = []
        monkeypatch.setattr(app, "_read", lambda *keys: tried.append(1) or pytest.fail("the breaker is open"))
        assert poll(etag)[0] == 304 and len(reached_django) == 4 and not tried, "paused: not even tried"
        monkeypatch.undo()
        monkeypatch.setattr(fastpath, "PAUSE_SECONDS", 1.0)

        private_redis.start()
        time.sleep(1.1)  # the pause ends
        assert poll(etag)[0] == 304 and len(reached_django) == 5  # tried Redis (empty), Django refilled it
        assert poll(etag)[0] == 304 and len(reached_django) == 5, "recovered: the fast path answers again"
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def test_a_downgrade_made_while_redis_is_down_is_delivered_once_it_is_back(private_redis, fleet, admin_qos,
                                                                          operator_api, deliver,
                                                                          django_capture_on_commit_callbacks):
    """The request commits the downgrade and its job; the job's message cannot be sent, so it
    waits in the outbox (pending, never sent) and the answer says so — never a 500, never
    "complete". With Redis back, the reaper sends it and its delivery runs."""
    down(private_redis)
    with django_capture_on_commit_callbacks(execute=True):  # the commit tries to send the job's message
        response = operator_api.post("/api/v1/nodeconfig/emergency-downgrade/",
                                     {"reason": "incident", "confirm": "DOWNGRADE"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["progress"]["delivery"] == "pending"
    job = Job.objects.get(pk=response.json()["delivery_job"]["id"])
    assert job.status == Job.Status.PENDING and job.dispatched is None, "the send failed; the outbox keeps it"
    assert operator_api.get("/api/v1/nodeconfig/emergency-downgrade/").json()[0]["progress"]["delivery"] == "pending"

    private_redis.start()
    with deliver():
        assert jobs.reap(now=timezone.now() + jobs.SEND_RETRY_AFTER + timedelta(seconds=1))["resent"] == 1
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    target = ConfigTarget.objects.get(emergency=True)
    assert NodeConfig.objects.filter(target=target).count() == 18
    assert operator_api.get("/api/v1/nodeconfig/emergency-downgrade/").json()[0]["progress"]["delivery"] == "delivered"


def test_etags_that_could_not_be_refreshed_are_refreshed_by_a_job(private_redis, fleet, hdd, deliver,
                                                                  django_capture_on_commit_callbacks):
    """A reconcile committed, then Redis was gone for its ETag refresh: a job does it later, so a
    stale ETag (a 304 for a changed config) cannot outlive the outage."""
    nodes = list(Node.objects.filter(cluster__name="bj-1").values_list("pk", flat=True))
    get_redis().set(etag_key("bj-1", "bj-1-n000"), '"stale"')
    down(private_redis)
    with django_capture_on_commit_callbacks(execute=True):
        after_write(nodes)
    refresh = Job.objects.get(kind=REFRESH_TASK)
    assert refresh.status == Job.Status.PENDING and refresh.task_args == [nodes]

    private_redis.start()
    get_redis().set(etag_key("bj-1", "bj-1-n000"), '"stale"')  # what a persistent Redis would still hold
    with deliver():
        jobs.reap(now=timezone.now() + jobs.SEND_RETRY_AFTER + timedelta(seconds=1))
    refresh.refresh_from_db()
    assert refresh.status == Job.Status.SUCCEEDED
    assert get_redis().get(etag_key("bj-1", "bj-1-n000")).decode() not in ("", '"stale"')
