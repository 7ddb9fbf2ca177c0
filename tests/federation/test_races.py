"""Two people doing the same thing at the same moment, through the API with real threads.

A race on a unique name (the same new policy, the same new object) must end with one winner
and, for the other, a refusal that says what happened: 409 with code ``already_exists`` on
the field at fault, or the outcome of running after the winner. Never an ``IntegrityError``
shown as "database unavailable" (503), never a 500, never half a change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction

from core.models import ObjectChange
from federation import services
from federation.models import FederatedObject, FederatedRevision, PropagationPolicy
from tests.conftest import token_client

from .conftest import deployment

pytestmark = pytest.mark.django_db(transaction=True)

PP = "/api/v1/federation/propagation-policies/"
OBJECTS = "/api/v1/federation/objects/"


class Rendezvous:
    """Stands in for ``django.db.transaction`` in ``federation.services``: the first atomic
    block of each thread waits until every thread got there, so all of them have passed
    their checks before any of them writes (the interleaving a real race may produce)."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=15)
        self.local = threading.local()

    def atomic(self, *args: Any, **kwargs: Any):
        if not getattr(self.local, "met", False):
            self.local.met = True
            self.barrier.wait()
        return transaction.atomic(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(transaction, name)


def at_once(requests: list[Callable[[], Any]]) -> list[Any]:
    """Run each request in its own thread (its own database connection), started together."""
    start = threading.Barrier(len(requests), timeout=15)
    results: list[Any] = [None] * len(requests)

    def run(i: int) -> None:
        try:
            start.wait()
            results[i] = requests[i]()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a request never finished"
    return results


def creates(model) -> int:
    return ObjectChange.objects.filter(object_type=ContentType.objects.get_for_model(model), action="create").count()


def test_the_same_new_policy_created_twice_at_once_one_wins_the_other_gets_409(operator, admin_user, monkeypatch):
    clients = [token_client(operator), token_client(admin_user)]
    monkeypatch.setattr(services, "transaction", Rendezvous(len(clients)))
    body = {"namespace": "shop", "name": "twice", "spec": {"schedulingMode": "Duplicate"}}
    responses = at_once([lambda c=c: c.post(PP, body, format="json") for c in clients])
    assert not any(isinstance(r, BaseException) for r in responses), responses
    assert sorted(r.status_code for r in responses) == [201, 409], [r.content for r in responses]
    loser = next(r for r in responses if r.status_code == 409).json()
    assert loser["code"] == "already_exists", loser
    assert list(loser["errors"]) == ["name"] and "already exists" in loser["errors"]["name"][0]
    assert PropagationPolicy.objects.filter(name="twice").count() == 1 and creates(PropagationPolicy) == 1


def test_the_same_new_object_submitted_twice_at_once_is_created_once(operator, admin_user, spread_policy):
    """Both pass validation together; the database decides: one creates, the other either ran
    after it (SQLite serialises writers: an unchanged update, 200, no new revision) or raced
    into the unique index (PostgreSQL: 409 already_exists on ``object``). Never 5xx."""
    clients = [token_client(operator), token_client(admin_user), token_client(operator)]
    body = {"object": deployment("raced", replicas=3), "propagation_policy": "spread"}
    responses = at_once([lambda c=c: c.post(OBJECTS, body, format="json") for c in clients])
    assert not any(isinstance(r, BaseException) for r in responses), responses
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(201) == 1 and set(statuses) <= {200, 201, 409}, [r.content for r in responses]
    for response in responses:
        if response.status_code == 409:
            assert response.json()["code"] == "already_exists" and "object" in response.json()["errors"]
        if response.status_code == 200:
            assert response.json()["revision"] == 1
    assert FederatedObject.objects.filter(name="raced").count() == 1
    assert FederatedRevision.objects.filter(object__name="raced").count() == 1 and creates(FederatedObject) == 1


def test_a_submit_whose_insert_loses_the_race_is_a_409_naming_the_object(operator_api, operator, spread_policy,
                                                                          monkeypatch):
    """The interleaving PostgreSQL allows: the lookup ran before the winner committed, so the
    insert meets the unique index. The loser is told, and nothing of its change remains."""
    first = operator_api.post(OBJECTS, {"object": deployment("raced", replicas=3), "propagation_policy": "spread"},
                              format="json")
    assert first.status_code == 201
    audit = ObjectChange.objects.count()
    monkeypatch.setattr(type(FederatedObject.objects), "select_for_update", lambda self, **kw: self.none())
    second = token_client(operator).post(OBJECTS, {"object": deployment("raced", replicas=5),
                                                   "propagation_policy": "spread"}, format="json")
    assert second.status_code == 409, second.content
    body = second.json()
    assert body["code"] == "already_exists" and "just created by someone else" in body["errors"]["object"][0]
    fed = FederatedObject.objects.get(name="raced")
    assert fed.template["spec"]["replicas"] == 3 and fed.revisions.count() == 1
    assert ObjectChange.objects.count() == audit, "the loser left no audit entry"
