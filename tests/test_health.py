import time

import pytest

from core.redis import get_redis
from core.worker_signals import WORKERS_KEY, beat_once, forget_worker, held_by, held_deliveries, live_workers
from tests.workers import solo_worker, unacked_tag


def test_healthz_needs_no_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_reports_each_dependency_and_waits_for_a_worker(client, django_user_model):
    redis = get_redis()
    redis.delete(WORKERS_KEY)
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
        forget_worker("test-worker@host")


def test_a_heartbeat_says_what_its_worker_holds_and_the_next_one_replaces_it():
    """The reaper restores only messages no live worker holds (``core.jobs.restore_orphaned``), and
    nothing while a live worker has not said what it holds."""
    try:
        beat_once("holding@host", ["tag-a", "tag-b"])
        beat_once("idle@host")
        assert held_by(["holding@host", "idle@host"]) == {"tag-a", "tag-b"}
        assert held_by(["idle@host"]) == set(), "holding nothing is said too"
        beat_once("holding@host", ["tag-c"])
        assert held_by(["holding@host"]) == {"tag-c"}
        assert held_by(["holding@host", "silent@host"]) is None, "a worker that has not said"
        forget_worker("holding@host")
        assert held_by(["holding@host"]) is None
    finally:
        forget_worker("holding@host")
        forget_worker("idle@host")


def test_a_worker_says_it_holds_the_message_it_keeps_until_its_eta():
    """What a heartbeat reports is what the broker keeps unacknowledged for the worker: kombu's
    ``unacked`` hash and the consumer's own record (``held_deliveries``) name the same tag."""
    from config.celery import app

    queue = "meridian-test-held"
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        try:
            with solo_worker([queue]) as worker:
                sent = app.send_task("core.publish_live", queue=queue, countdown=600)  # held until its ETA
                deadline = time.monotonic() + 10
                while unacked_tag(channel.client, sent.id, channel.unacked_key) is None:
                    assert time.monotonic() < deadline, "the worker never received the message"
                    time.sleep(0.05)
                assert unacked_tag(channel.client, sent.id, channel.unacked_key) in held_deliveries(worker.consumer)
        finally:
            channel.client.delete(queue)  # the worker gave the message back when it stopped


@pytest.mark.django_db
def test_readyz_runs_only_the_checks_asked_for(client):
    """A web pod's readiness probe asks for the database alone: no worker heartbeat (a first
    install, a worker outage) must not take every web pod out of its Service."""
    get_redis().delete(WORKERS_KEY)
    assert client.get("/readyz").status_code == 503
    response = client.get("/readyz?checks=database")
    assert response.status_code == 200 and set(response.json()["checks"]) == {"database"}
    both = client.get("/readyz?checks=database,workers")
    assert both.status_code == 503 and set(both.json()["checks"]) == {"database", "workers"}
    unknown = client.get("/readyz?checks=database,disk")
    assert unknown.status_code == 400 and unknown.json()["errors"] == {"checks": ["Choose among database, redis, workers."]}


@pytest.mark.django_db
def test_readyz_tells_anonymous_callers_only_whether_each_check_passed(client):
    """A load balancer needs ok/not ok; worker names and the database vendor help attackers."""
    beat_once("secret-worker@internal-host")
    try:
        text = client.get("/readyz").content.decode()
    finally:
        forget_worker("secret-worker@internal-host")
    assert '"ok": true' in text.replace('"ok":true', '"ok": true')
    for leak in ("secret-worker", "internal-host", "sqlite", "postgresql", "detail", "pong"):
        assert leak not in text


def test_live_workers_is_one_round_trip_however_many_keys_redis_holds(monkeypatch):
    """Every overview, /readyz and /metrics asks; a SCAN for per-worker keys walked the whole
    keyspace (1,023 round trips at fleet scale)."""
    redis = get_redis()
    filler = [f"meridian-test:filler:{i}" for i in range(5000)]
    pipe = redis.pipeline(transaction=False)
    for key in filler:
        pipe.set(key, "x", ex=60)
    pipe.execute()
    beat_once("counted-worker@host")
    live_workers()  # the script is loaded into Redis once (and again after a restart or SCRIPT FLUSH)
    sent: list[str] = []
    real = redis.execute_command

    def counting(*args, **kwargs):
        sent.append(str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(redis, "execute_command", counting)
    try:
        assert "counted-worker@host" in live_workers()
    finally:
        monkeypatch.undo()
        forget_worker("counted-worker@host")
        redis.delete(*filler)
    assert sent == ["EVALSHA"], sent


def test_a_lapsed_heartbeat_is_not_alive_and_is_dropped():
    redis = get_redis()
    now = int(redis.time()[0])
    redis.zadd(WORKERS_KEY, {"gone@host": now - 1, "alive@host": now + 20})
    try:
        live = live_workers()
        assert "alive@host" in live and "gone@host" not in live
        assert redis.zscore(WORKERS_KEY, "gone@host") is None, "lapsed entries are removed as they are read"
    finally:
        forget_worker("alive@host")
        forget_worker("gone@host")
