"""Fixtures of the fault suite: Meridian's own processes over the suite's PostgreSQL test
database and a private Redis. Marked ``faults`` (slow; ``.ci/run`` runs it once)."""

from __future__ import annotations

import uuid

import httpx
import pytest
import redis
from django.contrib.auth.models import Group
from django.db import connection

from core.models import APIToken, Job
from fleet.models import Cluster
from nodeconfig.models import ConfigTarget
from nodeconfig.services import emergency_type, latest_delivery
from tests.workers import queued, this_database_url, unacked_tag

from .processes import Meridian, PrivateRedis, wait_until


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/faults/" in str(item.fspath):
            item.add_marker(pytest.mark.faults)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report ends with what each of Meridian's processes last said."""
    report = yield
    processes = item.funcargs.get("meridian") if report.when == "call" and report.failed else None
    if isinstance(processes, Meridian):
        for path in sorted(processes.var_dir.glob("*.log")):
            report.sections.append((f"{path.name} (its end)", processes.log(path.stem)))
    return report


@pytest.fixture
def test_database_url(transactional_db) -> str:
    """The suite's own test database, for Meridian processes to share with the test."""
    if connection.vendor != "postgresql":
        pytest.skip("the fault suite runs Meridian as separate processes sharing the test database: PostgreSQL only")
    return this_database_url()


@pytest.fixture
def private_redis():
    redis = PrivateRedis().start()
    yield redis
    redis.close()


@pytest.fixture
def meridian(test_database_url, private_redis, tmp_path):
    processes = Meridian(database_url=test_database_url, redis_url=private_redis.url, var_dir=tmp_path)
    yield processes
    processes.close()


@pytest.fixture
def admin_token(django_user_model) -> str:
    user = django_user_model.objects.create_user("fault-admin", password="fault-admin-password-123")
    user.groups.add(Group.objects.get(name="admin"))
    return APIToken.issue(user)[1]


def api(meridian: Meridian, token: str) -> httpx.Client:
    """The REST API of ``meridian``, as ``token``'s owner."""
    return httpx.Client(base_url=meridian.base, headers={"Authorization": f"Token {token}"}, timeout=30)


def serving_edge(meridian: Meridian, token: str, *, nodes: int, seed: int, synced: int) -> httpx.Client:
    """Web, worker and beat started, and the simulated cluster ``edge`` registered through the API
    and synced (``synced`` of its ``nodes`` in the inventory): the REST API, as ``token``'s owner."""
    meridian.start_web()
    meridian.start_worker()
    meridian.start_beat()
    client = api(meridian, token)
    registered = client.post("/api/v1/fleet/clusters/", json={"name": "edge", "connector": "simulated",
                                                              "connector_config": {"node_count": nodes, "seed": seed}})
    assert registered.status_code == 201
    wait_until(lambda: Cluster.objects.get(name="edge").node_count >= synced, timeout=90, what="the first sync")
    return client


def emergency_lock() -> str:
    """The Redis key of the emergency config type's lock (``core.locks.KEY``)."""
    return "meridian:lock:nodeconfig-type-{}".format(emergency_type().pk)


def press_while_locked(client: httpx.Client, broker: redis.Redis, round_: int, target: ConfigTarget | None) -> tuple[ConfigTarget, Job]:
    """The emergency downgrade of ``edge`` pressed (even rounds) or restored (odd ones: ``target``
    is the downgrade) while its config type's lock is held, as by a long reconcile: the
    downgrade and its delivery job, once the worker holds the delivery's retry unacknowledged
    until its ETA and none of its messages is queued."""
    broker.set(emergency_lock(), f"{uuid.uuid4().hex} the fault suite", px=120_000)
    if round_ % 2 == 0:
        pressed = client.post("/api/v1/nodeconfig/emergency-downgrade/",
                              json={"cluster": "edge", "reason": f"round {round_}", "confirm": "DOWNGRADE"})
        assert pressed.status_code == 201, pressed.text
        target = ConfigTarget.objects.get(pk=pressed.json()["id"])
    else:
        assert target is not None
        restored = client.post(f"/api/v1/nodeconfig/emergency-downgrade/{target.pk}/restore/", json={"reason": f"round {round_}"})
        assert restored.status_code == 200, restored.text
    delivery = latest_delivery(target)
    wait_until(lambda: Job.objects.get(pk=delivery.pk).status == Job.Status.WAITING, timeout=60, interval=0.05,
               what="the delivery to wait for the lock")
    wait_until(lambda: unacked_tag(broker, delivery.task_id) and not queued(broker, delivery.task_id),
               timeout=10, interval=0.02, what="the worker to hold the delivery's retry until its ETA, none queued")
    return target, delivery
