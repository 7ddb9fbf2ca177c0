"""Never over-admit: hundreds of concurrent AdmissionReviews against a real running server.

The server is uvicorn serving the ASGI app in a thread (as the browser tests do), so each
request runs in its own Django thread with its own database connection; the suite runs
this on SQLite and, in CI, on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection, transaction

from quotas import services
from quotas.models import QuotaCharge, QuotaGroup
from tests.threads import held_in_a_thread

from .conftest import deployment, review

pytestmark = pytest.mark.django_db(transaction=True)
DENIAL = re.compile(r"requested (\d+), used (\d+), hard (\d+)")
REQUESTS = 200
ROOM = 37  # requests of 1 core that fit


def fire(url: str, token: str, bodies: list[dict]) -> list[dict]:
    """Send every review at once from many threads, as many API servers would."""
    barrier = threading.Barrier(min(len(bodies), 64))
    # A fresh connection per request: a pooled keep-alive connection the server is closing
    # just then would fail the request for reasons that have nothing to do with admission.
    client = httpx.Client(timeout=60, limits=httpx.Limits(max_connections=64, max_keepalive_connections=0))

    def send(body: dict) -> dict:
        try:
            barrier.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        response = client.post(f"{url}/api/admission/v1/quotas/validate", json=body,
                               headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text
        return response.json()["response"]

    with client, ThreadPoolExecutor(max_workers=64) as pool:
        return list(pool.map(send, bodies))


def test_concurrent_admissions_admit_exactly_what_fits(server, webhook_token):
    services.create_group(name="hot", parent=None, hard={"limits.cpu": str(ROOM), "pods": "1000"})
    bodies = [review(deployment(f"w{i:03d}", group="hot", cpu="1")) for i in range(REQUESTS)]
    answers = fire(server, webhook_token, bodies)
    admitted = [a for a in answers if a["allowed"]]
    denied = [a for a in answers if not a["allowed"]]
    assert len(admitted) == ROOM, f"{len(admitted)} admitted for room {ROOM}"
    assert all("limits.cpu requested 1" in a["status"]["message"] for a in denied)
    group = QuotaGroup.objects.get(name="hot")
    assert group.used["limits.cpu"] == str(ROOM) and group.used["pods"] == str(ROOM)
    assert QuotaCharge.objects.filter(group=group).count() == ROOM
    assert {a["uid"] for a in answers} == {b["request"]["uid"] for b in bodies}


def test_concurrent_mixed_sizes_never_pass_hard(server, webhook_token):
    services.create_group(name="mixed", parent=None, hard={"limits.cpu": "50", "limits.cpu.A4": "12"})
    sizes = [(1 + i % 4, "A4" if i % 3 == 0 else None) for i in range(REQUESTS)]
    bodies = [review(deployment(f"m{i:03d}", group="mixed", cpu=str(cpu), cpu_type=model)) for i, (cpu, model) in enumerate(sizes)]
    answers = fire(server, webhook_token, bodies)
    admitted_cpu = sum(cpu for (cpu, _), a in zip(sizes, answers, strict=True) if a["allowed"])
    admitted_a4 = sum(cpu for (cpu, model), a in zip(sizes, answers, strict=True) if a["allowed"] and model)
    group = QuotaGroup.objects.get(name="mixed")
    assert admitted_cpu <= 50 and admitted_a4 <= 12
    assert group.used == {"limits.cpu": str(admitted_cpu), "limits.cpu.A4": str(admitted_a4)}
    for answer in answers:
        if not answer["allowed"]:
            for requested, in_use, hard in DENIAL.findall(answer["status"]["message"]):
                assert int(requested) + int(in_use) > int(hard), "refused only when it truly did not fit then"


def test_the_running_server_refuses_bad_callers_and_bodies(server, webhook_token):
    services.create_group(name="ads", parent=None, hard={"limits.cpu": "2"})
    url = f"{server}/api/admission/v1/quotas/validate"
    body = review(deployment("x"))
    with httpx.Client(timeout=30) as client:
        anonymous = client.post(url, json=body)
        assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
        auth = {"Authorization": f"Bearer {webhook_token}"}
        garbage = client.post(url, content=b"{nope", headers=auth | {"Content-Type": "application/json"})
        assert garbage.status_code == 400 and "AdmissionReview" in garbage.json()["detail"]
        huge = client.post(url, content=b" " * (3 * 1024 * 1024 + 10), headers=auth)
        assert huge.status_code == 413
        assert client.get(url, headers=auth).status_code == 405, "anything but POST goes to Django"
        fine = client.post(url, json=body, headers=auth)
        assert fine.status_code == 200 and fine.json()["response"] == {"uid": body["request"]["uid"], "allowed": True}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite's writer lock holds every group at once")
def test_a_batch_stuck_on_a_lock_does_not_hold_up_other_groups(server, webhook_token):
    """Batches run one at a time, except next to a batch that is stuck: a request for a
    group whose row another transaction holds must not delay the requests for other groups."""
    services.create_group(name="slow", parent=None, hard={"limits.cpu": "10"})
    services.create_group(name="fast", parent=None, hard={"limits.cpu": "10"})

    @contextlib.contextmanager
    def the_slow_group_locked() -> Iterator[None]:
        with transaction.atomic():
            QuotaGroup.objects.select_for_update().get(name="slow")
            yield

    url, auth = f"{server}/api/admission/v1/quotas/validate", {"Authorization": f"Bearer {webhook_token}"}
    with (held_in_a_thread(the_slow_group_locked) as let_go, httpx.Client(timeout=30) as client,
          ThreadPoolExecutor(max_workers=1) as pool):
        slow = pool.submit(client.post, url, json=review(deployment("s", group="slow")), headers=auth)
        time.sleep(0.2)
        started = time.monotonic()
        fast = client.post(url, json=review(deployment("f", group="fast")), headers=auth)
        assert fast.json()["response"]["allowed"] and time.monotonic() - started < 5
        assert not slow.done(), "still waiting for the lock"
        let_go()
        assert slow.result().json()["response"]["allowed"]
