"""The event bus and the /ws/ endpoint, over the real Redis channel layer."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing.websocket import WebsocketCommunicator
from django.conf import settings
from django.db import connections, transaction
from django.test import Client

from config.asgi import application
from core import events
from core.models import APIToken, Job

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
async def close_executor_connections():
    """sync_to_async runs ORM calls on one executor thread; close its connection after each test."""
    yield
    await sync_to_async(connections.close_all)()


def session_headers(user) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    return [ORIGIN, (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())]


async def connect(headers) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(application, "/ws/", headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    return communicator, connected


async def subscribe(communicator: WebsocketCommunicator, topic: str) -> dict:
    await communicator.send_json_to({"type": "subscribe", "topic": topic})
    return await communicator.receive_json_from(timeout=5)


async def test_anonymous_clients_are_refused_at_the_handshake():
    communicator, connected = await connect([ORIGIN])
    assert not connected
    await communicator.disconnect()


async def test_a_foreign_origin_is_refused(viewer):
    headers = await sync_to_async(session_headers)(viewer)
    headers = [h for h in headers if h[0] != b"origin"] + [(b"origin", b"http://evil.example")]
    communicator, connected = await connect(headers)
    assert not connected
    await communicator.disconnect()


async def test_session_user_subscribes_and_receives_numbered_events(viewer):
    communicator, connected = await connect(await sync_to_async(session_headers)(viewer))
    assert connected
    assert (await communicator.receive_json_from(timeout=5)) == {"type": "hello", "user": viewer.username}
    job = await Job.objects.acreate(kind="probe", triggered_by="test")
    ack = await subscribe(communicator, f"job-{job.pk}")
    assert ack["type"] == "subscribed" and ack["topic"] == f"job-{job.pk}"

    first = await sync_to_async(events.send_now)(f"job-{job.pk}", "job.status", {"status": "running"})
    assert (await communicator.receive_json_from(timeout=5))["seq"] == first == ack["seq"] + 1
    system = await subscribe(communicator, "system")
    topic = f"job-{job.pk}"
    sequences = await sync_to_async(events.send_many)([(topic, "job.status", {"status": "succeeded"}),
                                                       ("system", "system.status", {"workers": 1}),
                                                       (topic, "job.log", {"lines": ["done"]})])
    assert sequences == [ack["seq"] + 2, system["seq"] + 1, ack["seq"] + 3], "each topic numbers its own"
    batch = await communicator.receive_json_from(timeout=5)
    assert batch["type"] == "batch", "events sent together (a tick's summaries) are one message"
    received = batch["events"]
    assert [(e["topic"], e["event"], e["seq"]) for e in received] == [  # each topic's in order
        (topic, "job.status", ack["seq"] + 2), (topic, "job.log", ack["seq"] + 3), ("system", "system.status", system["seq"] + 1)]
    assert received[0]["data"] == {"status": "succeeded"} and all(e["type"] == "event" for e in received)
    await communicator.disconnect()


async def test_a_tick_reaches_a_browser_as_one_message_from_the_first_of_its_topics(viewer):
    """With 1,000 sockets a browser following a tick's two topics got the tick once the web
    process had fanned out both to every socket (it waited for the second): each topic's message
    carries the tick's next topics' events, a browser takes what it follows from the first that
    reaches it, as one message, and skips the tick's later copies."""
    headers = await sync_to_async(session_headers)(viewer)
    both, alone, second = (await connect(headers))[0], (await connect(headers))[0], (await connect(headers))[0]
    for communicator in (both, alone, second):
        await communicator.receive_json_from(timeout=5)
    await subscribe(both, "system")
    await subscribe(both, "fleet")
    await subscribe(alone, "system")
    await subscribe(second, "fleet")
    jobs = [await Job.objects.acreate(kind="probe", triggered_by="test") for _ in range(3)]
    # a tick: the list topic and each object's own, interleaved; this browser follows one object
    await sync_to_async(events.send_many)([item for i, job in enumerate(jobs) for item in (
        ("system", "system.status", {"n": i}), (f"job-{job.pk}", "job.status", {"n": i}))] + [("fleet", "fleet.summary", {"n": 9})])
    merged = await both.receive_json_from(timeout=5)
    assert merged["type"] == "batch"
    assert [(e["topic"], e["data"]["n"]) for e in merged["events"]] == [("system", 0), ("system", 1), ("system", 2), ("fleet", 9)]
    single = await alone.receive_json_from(timeout=5)
    assert single["type"] == "batch" and [e["data"]["n"] for e in single["events"]] == [0, 1, 2]
    assert (await second.receive_json_from(timeout=5))["data"] == {"n": 9}, "the last topic's own message"
    for communicator in (both, alone, second):
        assert await communicator.receive_nothing(timeout=0.5), "each event once: the tick's later copies are skipped"

    layer = get_channel_layer()  # the first topic's message alone (the sender died before the second's)
    tick = [["system", json.dumps({"type": "event", "topic": "system", "event": "system.status", "seq": 0, "data": {}})],
            ["fleet", json.dumps({"type": "event", "topic": "fleet", "event": "fleet.summary", "seq": 0, "data": {}})]]
    await layer.group_send(events.group_name("system"), {"type": "meridian.event", "tick": "t-1", "encoded": tick})
    pair = await both.receive_json_from(timeout=5)
    assert [e["topic"] for e in pair["events"]] == ["system", "fleet"], "the pair from the first message"
    single = await alone.receive_json_from(timeout=5)
    assert single["type"] == "event" and single["topic"] == "system", "only what it follows"
    assert await second.receive_nothing(timeout=0.3), "not in the first topic's group"

    await asyncio.sleep(1.2)  # the budget frees; then an event from a worker of the previous release (a rolling upgrade)
    await layer.group_send(events.group_name("fleet"), {"type": "meridian.event", "event": {
        "type": "event", "topic": "fleet", "event": "fleet.summary", "seq": 1, "data": {"n": 1}}})
    for communicator in (both, second):
        assert (await communicator.receive_json_from(timeout=5))["data"] == {"n": 1}
    for communicator in (both, alone, second):
        await communicator.disconnect()


async def test_a_browser_gets_at_most_two_messages_a_second_and_every_event(viewer):
    """A busy topic (a rollout's summaries, five topics on the overview) woke every browser
    for each event: 1,000 browsers got up to five messages a second each. Events closer than
    the spacing wait for it and go out together, each once, in order; the first of a burst
    waits only a moment."""
    from console.consumers import BUDGET_WINDOW_SECONDS, MESSAGES_PER_SECOND

    communicator, connected = await connect(await sync_to_async(session_headers)(viewer))
    assert connected
    await communicator.receive_json_from(timeout=5)
    job = await Job.objects.acreate(kind="probe", triggered_by="test")
    ack = await subscribe(communicator, f"job-{job.pk}")
    arrivals, received = [], []

    async def receive() -> None:
        while len(received) < 12:
            message = await communicator.receive_json_from(timeout=5)
            arrivals.append(asyncio.get_running_loop().time())
            received.extend(message["events"] if message["type"] == "batch" else [message])

    receiving = asyncio.create_task(receive())
    sent_at = []
    for i in range(12):  # one every 0.1 s for 1.2 s
        sent_at.append(asyncio.get_running_loop().time())
        await sync_to_async(events.send_now)(f"job-{job.pk}", "job.status", {"n": i})
        await asyncio.sleep(0.1)
    await receiving
    assert [e["data"]["n"] for e in received] == list(range(12))
    assert [e["seq"] for e in received] == [ack["seq"] + 1 + i for i in range(12)]
    windows = [b - a for a, b in zip(arrivals, arrivals[MESSAGES_PER_SECOND:])]
    # a little over a second between a message and the next but one, so jitter on the way
    # cannot put three into a browser's second (bench_live once counted three)
    assert BUDGET_WINDOW_SECONDS > 1.0
    assert len(arrivals) <= 5 and min(windows) >= BUDGET_WINDOW_SECONDS - 0.05, f"{len(arrivals)} messages at {arrivals}"
    assert arrivals[0] - sent_at[0] < 0.3, "the first event of a burst is not held for the spacing"
    assert await communicator.receive_nothing(timeout=1), "every event once"
    await communicator.disconnect()


async def test_token_authenticated_client_is_accepted(viewer):
    _, raw = await sync_to_async(APIToken.issue)(viewer)
    communicator, connected = await connect([ORIGIN, (b"authorization", f"Token {raw}".encode())])
    assert connected
    await communicator.disconnect()
    communicator, connected = await connect([ORIGIN, (b"authorization", b"Token wrong")])
    assert not connected
    await communicator.disconnect()


async def test_unauthorised_and_unknown_subscriptions_are_refused(nobody):
    communicator, connected = await connect(await sync_to_async(session_headers)(nobody))
    assert connected
    await communicator.receive_json_from(timeout=5)
    assert (await subscribe(communicator, "job-1"))["code"] == "forbidden"
    assert (await subscribe(communicator, "audit"))["code"] == "forbidden"
    assert (await subscribe(communicator, "nosuchkind-1"))["code"] == "unknown_topic"
    assert (await subscribe(communicator, "Bad Topic!"))["code"] == "unknown_topic"
    assert (await subscribe(communicator, "system"))["type"] == "subscribed"

    await sync_to_async(events.send_now)("job-1", "job.status", {"status": "secret"})
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.send_to(text_data="not json")
    assert (await communicator.receive_json_from(timeout=5))["code"] == "bad_json"
    await communicator.disconnect()


async def _group_receiver(topic: str):
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(events.group_name(topic), channel)
    return layer, channel


async def test_an_event_published_in_a_rolled_back_transaction_is_never_delivered():
    layer, channel = await _group_receiver("system")

    def publish_then_fail() -> None:
        with transaction.atomic():
            events.publish("system", "test.rolled-back", {"n": 1})
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        await sync_to_async(publish_then_fail)()

    def publish_and_commit() -> None:
        with transaction.atomic():
            events.publish("system", "test.committed", {"n": 2})

    await sync_to_async(publish_and_commit)()
    message = await asyncio.wait_for(layer.receive(channel), timeout=5)
    assert [json.loads(text)["event"] for _, text in message["encoded"]] == ["test.committed"]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=0.5)


async def test_a_commits_events_go_out_together_in_order():
    """One channel-layer call for a commit's events (a call each cost a thread, an event loop
    and a Redis connection: a sync's commit made three)."""
    layer, channel = await _group_receiver("system")

    def publish_three() -> None:
        with transaction.atomic():
            for n in range(3):
                events.publish("system", f"test.{n}", {"n": n})

    await sync_to_async(publish_three)()
    message = await asyncio.wait_for(layer.receive(channel), timeout=5)
    assert [json.loads(text)["event"] for _, text in message["encoded"]] == ["test.0", "test.1", "test.2"]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=0.5)


async def test_the_events_of_a_savepoint_that_rolled_back_are_never_delivered_and_the_others_in_order():
    layer, channel = await _group_receiver("system")

    def publish_around_a_savepoint() -> None:
        with transaction.atomic():
            events.publish("system", "test.first", {"n": 1})
            with pytest.raises(RuntimeError), transaction.atomic():
                events.publish("system", "test.undone", {"n": 2})
                raise RuntimeError("the savepoint rolls back")
            events.publish("system", "test.last", {"n": 3})

    await sync_to_async(publish_around_a_savepoint)()
    delivered: list[str] = []
    while len(delivered) < 2:
        message = await asyncio.wait_for(layer.receive(channel), timeout=5)
        delivered += [json.loads(text)["event"] for _, text in message["encoded"]]
    assert delivered == ["test.first", "test.last"]
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=0.5)


async def test_malformed_topics_are_rejected_by_publish():
    for topic in ("", "UPPER", "no spaces", "x" * 200, "unregistered-kind"):
        with pytest.raises(ValueError):
            events.publish(topic, "e")


async def test_events_reach_sockets_while_the_thread_for_synchronous_code_is_busy(viewer):
    """Delivering an event takes no trip through the one thread sync_to_async shares: Channels
    closed stale database connections there before every message, so a broadcast to 1,000
    sockets queued 1,000 trips behind whatever ran there and reached browsers a second late."""
    communicator, connected = await connect(await sync_to_async(session_headers)(viewer))
    assert connected
    await communicator.receive_json_from(timeout=5)
    job = await Job.objects.acreate(kind="probe", triggered_by="test")
    await subscribe(communicator, f"job-{job.pk}")
    busy = asyncio.ensure_future(sync_to_async(time.sleep)(3))
    await asyncio.sleep(0.2)
    sent = await asyncio.to_thread(events.send_now, f"job-{job.pk}", "job.status", {"status": "while busy"})
    event = await communicator.receive_json_from(timeout=1)
    assert (event["seq"], event["data"]["status"]) == (sent, "while busy")
    assert not busy.done(), "the event arrived while the thread was still busy"
    await busy
    await communicator.disconnect()


async def test_a_quiet_subscription_stays_open_past_the_redis_read_timeout(viewer):
    """A page with nothing happening must not drop: channels_redis blocks 5 s per pop and
    redis-py's default socket timeout is 5 s too, so an idle consumer used to die within
    seconds (the Redis layer's read timing out). 12 s of silence, then an event still arrives."""
    communicator, connected = await connect(await sync_to_async(session_headers)(viewer))
    assert connected
    await communicator.receive_json_from(timeout=5)
    job = await Job.objects.acreate(kind="probe", triggered_by="test")
    await subscribe(communicator, f"job-{job.pk}")
    assert await communicator.receive_nothing(timeout=12, interval=0.5), "nothing is sent while nothing happens"
    await sync_to_async(events.send_now)(f"job-{job.pk}", "job.status", {"status": "after the quiet"})
    event = await communicator.receive_json_from(timeout=5)
    assert event["data"]["status"] == "after the quiet"
    await communicator.send_json_to({"type": "ping"})
    assert (await communicator.receive_json_from(timeout=5))["type"] == "pong"
    await communicator.disconnect()


SENDER = """
import sys
from core import events

for i in range(20):
    events.send_now("system", "system.status", {"i": i})
print("sent", flush=True)
sys.stdin.readline()  # the test restarts Redis meanwhile
events.send_now("system", "system.status", {"i": "after the restart"})
print("sent again", flush=True)
"""


def test_a_process_sends_its_events_over_one_kept_connection_and_rides_out_a_redis_restart(tmp_path):
    """A worker publishes after every commit that has events. Each send opened a thread, a loop
    and a Redis connection of its own and closed them again (20 sends: a connection each, 3 ms
    a send); the process's sender loop keeps one, and after a Redis restart the next send still
    reaches Redis (the kept connection is replaced, the event is not dropped)."""
    from tests.faults.processes import ROOT, PrivateRedis

    redis = PrivateRedis().start()
    client = _redis_client(redis.url)
    before = client.info("stats")["total_connections_received"]  # the test's own
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTEST_CURRENT_TEST")}
    env |= {"REDIS_URL": redis.url, "MERIDIAN_VAR_DIR": str(tmp_path), "LOG_FORMAT": "plain"}
    sender = subprocess.Popen([sys.executable, "manage.py", "shell", "--no-imports", "-c", SENDER], cwd=ROOT, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert sender.stdout.readline().strip().endswith("sent"), sender.stderr.read() if sender.poll() is not None else ""
        connections = client.info("stats")["total_connections_received"] - before
        assert _publishes(client) == 20, "every event reached Redis"
        assert connections <= 2, f"{connections} connections for 20 sends (the sequence numbers' and the layer's)"
        redis.stop()
        redis.start()
        sender.stdin.write("\n")
        sender.stdin.flush()
        _, errors = sender.communicate(timeout=60)
        assert sender.returncode == 0 and "dropped" not in errors, errors
        assert _publishes(_redis_client(redis.url)) == 1, "the event after the restart reached Redis"
    finally:
        if sender.poll() is None:
            sender.kill()
        redis.close()


def _redis_client(url: str):
    import redis

    return redis.Redis.from_url(url)


def _publishes(client) -> int:
    return client.info("commandstats").get("cmdstat_publish", {}).get("calls", 0)
