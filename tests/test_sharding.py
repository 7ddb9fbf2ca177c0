"""Sharded routing with the real broker and a real Celery worker."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from hypothesis import given
from hypothesis import strategies as st

from core.jobs import enqueue
from core.models import Job
from core.redis import get_redis
from core.sharding import all_shard_queues, parse_shard_spec, shard_for, shard_queue, sharded_task
from kube.hashing import fnv32a, stable_hash
from tests.workers import solo_worker, wait_for_job


@sharded_task(shard_key=lambda key, payload=None: f"cluster/{key}", name="tests.where_am_i")
def where_am_i(key: str, payload: str | None = None) -> dict:
    from celery import current_task

    return {"key": key, "payload": payload, "queue": current_task.request.delivery_info.get("routing_key")}


def test_stable_hash_is_fnv1a_and_process_independent():
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968
    assert stable_hash("cluster/bj-3") == stable_hash(b"cluster/bj-3")


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_fnv1a_of_a_prefix_continues_to_the_whole(prefix: bytes, rest: bytes):
    assert fnv32a(rest, fnv32a(prefix)) == fnv32a(prefix + rest)


def test_shard_queue_names_follow_the_hash():
    for key in ("cluster/a", "cluster/b", "target/42", "quota-group/vision"):
        assert shard_for(key) == stable_hash(key) % settings.MERIDIAN_SHARDS
        assert shard_queue(key) == f"reconcile.{stable_hash(key) % settings.MERIDIAN_SHARDS}"
    spread = {shard_for(f"cluster/{n}") for n in range(200)}
    assert spread == set(range(settings.MERIDIAN_SHARDS)), "keys spread over every shard"


@pytest.mark.parametrize(
    "spec,expected", [("all", [0, 1, 2, 3]), ("", [0, 1, 2, 3]), ("0,2-3", [0, 2, 3]), ("1", [1]), ("3-3,0", [0, 3])]
)
def test_shard_spec(spec, expected):
    assert parse_shard_spec(spec, 4) == expected


@pytest.mark.parametrize("spec", ["4", "a", "2-1", "-1", "0,,1x"])
def test_bad_shard_spec_is_refused(spec):
    with pytest.raises(ValueError):
        parse_shard_spec(spec, 4)


def _queue_lengths() -> dict[str, int]:
    """Kombu's Redis transport keeps each queue as a Redis list named after it."""
    redis = get_redis()
    return {q: redis.llen(q) for q in all_shard_queues()}


def test_a_task_routed_by_key_lands_on_the_queue_its_hash_names():
    redis = get_redis()
    for queue in all_shard_queues():
        redis.delete(queue)
    key = "bj-3"
    expected = shard_queue(f"cluster/{key}")
    where_am_i.delay(key, payload="queued")
    lengths = _queue_lengths()
    assert lengths[expected] == 1
    assert sum(lengths.values()) == 1, lengths
    for queue in all_shard_queues():
        redis.delete(queue)


@pytest.mark.django_db(transaction=True)
def test_a_worker_owning_one_shard_runs_that_shards_tasks():
    key = "sh-1"
    queue = shard_queue(f"cluster/{key}")
    with solo_worker([queue]):
        result = where_am_i.delay(key, payload="ran")
        job = wait_for_job(result.id)
    assert job.status == Job.Status.SUCCEEDED and job.task_name == "tests.where_am_i"
    assert job.result == {"key": key, "payload": "ran", "queue": queue}


@pytest.mark.django_db(transaction=True)
def test_a_job_enqueued_with_extra_arguments_routes_by_its_key_and_runs():
    """``enqueue`` (the outbox) passes ``job_id`` along: the key function never sees it, and the
    Job row records the task's result (the old shard router broke on arguments it did not take)."""
    key = "sh-2"
    queue = shard_queue(f"cluster/{key}")
    with solo_worker([queue]):
        job = enqueue("tests.where_am_i", key, payload="outbox")  # outside a transaction: sent at once
        job = wait_for_job(job.task_id)
    assert job.status == Job.Status.SUCCEEDED and job.result["queue"] == queue and job.attempts == 1


def test_explicit_queue_overrides_the_shard():
    result = where_am_i.apply_async(("x",), queue="default")
    redis = get_redis()
    try:
        assert redis.llen("default") >= 1
    finally:
        result.revoke()
        redis.delete("default")


@pytest.mark.django_db(transaction=True)
def test_a_canceled_job_never_runs_when_its_message_is_delivered():
    """Cancel revokes the task and marks the Job; a worker that starts later (and so missed
    the revoke broadcast) takes the message and drops it: the task body never runs."""
    from core.jobs import cancel_job

    key = "sh-3"
    queue = shard_queue(f"cluster/{key}")
    job = enqueue("tests.where_am_i", key, payload="canceled")  # outside a transaction: sent at once
    cancel_job(job)
    redis = get_redis()
    with solo_worker([queue]):
        deadline = time.monotonic() + 20
        while redis.llen(queue) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # the delivered message has been handled by now
    job.refresh_from_db()
    assert redis.llen(queue) == 0, "the worker took the message"
    assert job.status == Job.Status.CANCELED and not job.result and job.attempts == 0
