"""The agent API: effective config with ETag, 304 without the database, reports, token scoping."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.redis import get_redis
from fleet.tokens import issue_token, revoke_token
from nodeconfig.etags import etag_key
from nodeconfig.models import NodeConfig
from nodeconfig.services import TargetSpec, save_target

from .conftest import settle

pytestmark = pytest.mark.django_db


def url(cluster: str, node: str, what: str = "config") -> str:
    return f"/api/agent/v1/clusters/{cluster}/nodes/{node}/{what}"


@pytest.fixture
def agent_token(fleet) -> str:
    return issue_token(fleet["bj-1"], "agent")[1]


@pytest.fixture
def agent(agent_token, client):
    raw = agent_token
    return lambda method, path, **kw: getattr(client, method)(path, HTTP_AUTHORIZATION=f"Bearer {raw}", **kw)


@pytest.fixture
def hdd(fleet, admin_qos):
    target, _ = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd",
                                                  config={"evictionConfig": {"memoryPressureEvictionConfig": {
                                                      "systemFreeMemoryThresholdMinimum": "20Gi"}}}))
    settle(target)
    return target


def test_config_is_the_target_merged_over_the_default_with_an_etag(agent, hdd):
    response = agent("get", url("bj-1", "bj-1-n000"))
    assert response.status_code == 200
    admin = response.json()["configs"]["AdminQoSConfiguration"]
    assert admin["target"] == "hdd" and admin["revision"] == 1 and admin["hash"] == hdd.config_hash
    assert admin["config"] == {"reclaimedResourceConfig": {"enableReclaim": True}, "evictionConfig": {
        "memoryPressureEvictionConfig": {"enableNumaLevelEviction": False, "systemFreeMemoryThresholdMinimum": "20Gi"}}}
    assert response.json()["configs"]["AuthConfiguration"]["target"] is None
    assert response["ETag"].startswith('"')
    other = agent("get", url("bj-1", "bj-1-n001"))
    assert other.json()["configs"]["AdminQoSConfiguration"]["target"] is None and other["ETag"] != response["ETag"]


def test_if_none_match_gets_304_without_touching_the_database(agent, hdd):
    etag = agent("get", url("bj-1", "bj-1-n000"))["ETag"]
    with CaptureQueriesContext(connection) as queries:
        response = agent("get", url("bj-1", "bj-1-n000"), HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 304 and response["ETag"] == etag and response.content == b""
    assert len(queries) == 0
    stale = agent("get", url("bj-1", "bj-1-n000"), HTTP_IF_NONE_MATCH='"not-it"')
    assert stale.status_code == 200


def test_a_target_change_changes_the_etag_the_agent_sees(agent, hdd, deliver):
    etag = agent("get", url("bj-1", "bj-1-n000"))["ETag"]
    with deliver():  # the change's reconcile job runs, then refreshes the agents' ETags after its commit
        save_target(hdd.config_type, TargetSpec(name="hdd", node_label_selector="diskMode=hdd",
                                                config={"reclaimedResourceConfig": {"enableReclaim": False}}))
    assert get_redis().get(etag_key("bj-1", "bj-1-n000")).decode() != etag
    response = agent("get", url("bj-1", "bj-1-n000"), HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200
    assert response.json()["configs"]["AdminQoSConfiguration"]["config"]["reclaimedResourceConfig"]["enableReclaim"] is False


def test_reports_record_applied_hashes_and_errors(agent, hdd):
    response = agent("post", url("bj-1", "bj-1-n000", "status"), data={"applied": {"AdminQoSConfiguration": hdd.config_hash}},
                     content_type="application/json")
    assert response.status_code == 204
    row = NodeConfig.objects.get(node__name="bj-1-n000", config_type=hdd.config_type)
    assert row.state == "applied" and row.reported_at is not None
    agent("post", url("bj-1", "bj-1-n003", "status"), data={"errors": {"AdminQoSConfiguration": "boom"}},
          content_type="application/json")
    assert NodeConfig.objects.get(node__name="bj-1-n003", config_type=hdd.config_type).state == "failed"
    assert agent("post", url("bj-1", "bj-1-n000", "status"), data={"applied": {}},
                 content_type="application/json").status_code == 204


@pytest.mark.parametrize("body, field", [
    ("not json", "non_field_errors"),
    ({"applied": {"NoSuchType": "abc"}}, "applied"),
    ({"applied": ["x"]}, "applied"),
    ({"errors": {"AdminQoSConfiguration": 5}}, "errors"),
    ({"extra": 1}, "extra"),
])
def test_bad_reports_are_a_400_naming_the_field_and_record_nothing(agent, hdd, body, field):
    kwargs = {"data": body, "content_type": "application/json"}
    response = agent("post", url("bj-1", "bj-1-n000", "status"), **kwargs)
    assert response.status_code == 400 and field in response.json()["errors"]
    assert not NodeConfig.objects.exclude(applied_hash="").exists()


def test_tokens_are_scoped_to_their_cluster(agent, hdd, client, fleet):
    assert client.get(url("bj-1", "bj-1-n000")).status_code == 401
    assert client.get(url("bj-1", "bj-1-n000"), HTTP_AUTHORIZATION="Bearer mag_nope").status_code == 401
    assert agent("get", url("sh-1", "sh-1-n000")).status_code == 403
    assert agent("post", url("sh-1", "sh-1-n000", "status"), data={}, content_type="application/json").status_code == 403
    assert agent("get", url("bj-1", "no-such-node")).status_code == 404
    _, webhook = issue_token(fleet["bj-1"], "webhook")
    assert client.get(url("bj-1", "bj-1-n000"), HTTP_AUTHORIZATION=f"Bearer {webhook}").status_code == 401
    # another cluster's etag cannot be probed through the 304 path either
    etag = agent("get", url("bj-1", "bj-1-n000"))["ETag"]
    get_redis().set(etag_key("sh-1", "sh-1-n000"), etag)
    assert agent("get", url("sh-1", "sh-1-n000"), HTTP_IF_NONE_MATCH=etag).status_code == 403


def test_a_revoked_token_stops_working_at_once(fleet, client, hdd, django_capture_on_commit_callbacks):
    token, raw = issue_token(fleet["bj-1"], "agent")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.get(url("bj-1", "bj-1-n000"), **auth).status_code == 200  # now cached for the fast path
    with django_capture_on_commit_callbacks(execute=True):
        revoke_token(token)
    assert client.get(url("bj-1", "bj-1-n000"), **auth).status_code == 401


def test_the_asgi_fast_path_answers_304_and_defers_everything_else(agent, agent_token, hdd, settings):
    import asyncio

    from nodeconfig.fastpath import AgentPollFastPath

    etag = agent("get", url("bj-1", "bj-1-n000"))["ETag"]
    token = agent_token
    forwarded = []

    async def downstream(scope, receive, send):
        forwarded.append(scope["path"])

    async def call(path, headers):
        sent = []

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": path, "headers": headers}
        await AgentPollFastPath(downstream, settings.REDIS_URL)(scope, None, send)
        return sent

    auth = (b"authorization", f"Bearer {token}".encode())
    sent = asyncio.run(call(url("bj-1", "bj-1-n000"), [auth, (b"if-none-match", etag.encode())]))
    assert sent[0]["status"] == 304 and dict(sent[0]["headers"])[b"etag"] == etag.encode()
    # a changed config is served from the configs cached under the (content-addressed) ETag
    full = asyncio.run(call(url("bj-1", "bj-1-n000"), [auth, (b"if-none-match", b'"old"')]))
    assert full[0]["status"] == 200 and json.loads(full[1]["body"]) == agent("get", url("bj-1", "bj-1-n000")).json()
    assert asyncio.run(call(url("sh-1", "sh-1-n000"), [auth, (b"if-none-match", etag.encode())])) == []
    assert asyncio.run(call(url("bj-1", "bj-1-n000"), [(b"if-none-match", etag.encode())])) == []
    no_cache = (b"cache-control", b"no-cache")
    assert asyncio.run(call(url("bj-1", "bj-1-n000"), [auth, (b"if-none-match", etag.encode()), no_cache])) == []
    get_redis().delete(f"meridian:nodeconfig:configs:{etag}")
    assert asyncio.run(call(url("bj-1", "bj-1-n000"), [auth, (b"if-none-match", b'"old"')])) == []
    assert len(forwarded) == 4


def test_polls_parsed_in_one_turn_of_the_event_loop_share_one_redis_round_trip(agent, agent_token, hdd, settings):
    """Per poll, redis-py's command and connection handling cost more than Redis' own work:
    the polls a turn of the loop parsed read their tokens and ETags with one MGET."""
    import asyncio

    from nodeconfig.fastpath import AgentPollFastPath

    names = [f"bj-1-n{i:03d}" for i in range(12)]
    etags = {name: agent("get", url("bj-1", name))["ETag"] for name in names}
    auth = (b"authorization", f"Bearer {agent_token}".encode())
    redis = get_redis()

    async def poll_all() -> list[int]:
        async def downstream(scope, receive, send):
            raise AssertionError(f"{scope['path']} was not answered by the fast path")

        app, answers = AgentPollFastPath(downstream, settings.REDIS_URL), {}

        async def poll(name: str) -> None:
            async def send(message):
                answers.setdefault(name, message.get("status"))

            headers = [auth, (b"if-none-match", etags[name].encode())]
            await app({"type": "http", "method": "GET", "path": url("bj-1", name), "headers": headers}, None, send)

        await poll(names[0])  # the client's connection is made
        before = redis.info("commandstats")["cmdstat_mget"]["calls"]
        await asyncio.gather(*(poll(name) for name in names))
        return [redis.info("commandstats")["cmdstat_mget"]["calls"] - before, *answers.values()]

    mgets, *statuses = asyncio.run(poll_all())
    assert statuses == [304] * len(names)
    assert mgets == 1, f"{len(names)} polls in one turn took {mgets} round trips"
