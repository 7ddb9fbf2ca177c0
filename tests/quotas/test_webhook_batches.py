"""The webhook's lean batch path, outside any test transaction, as the pool threads run it.

On PostgreSQL a batch that starts outside ``atomic()`` runs its own transaction (BEGIN with
the lock, COMMIT with the writes, in two pipelines); these tests drive that path directly
(``transaction=True``), including the ways it can fail, and check the ledger and the
statuses come out exactly as the ORM wrote them.
"""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, connection

from fleet.models import Cluster
from kube.admission import parse_admission_review
from quotas import services
from quotas.admission import decide_batch
from quotas.models import QuotaCharge, QuotaGroup
from quotas.webhook import decide, decide_many

from .conftest import deployment, hpa_review, review, scale_review

pytestmark = pytest.mark.django_db(transaction=True)


def decided(cluster, *bodies):
    return decide_batch([(cluster, parse_admission_review(body)) for body in bodies])


def used(name: str) -> dict[str, str]:
    return QuotaGroup.objects.get(name=name).used


def test_a_batch_outside_any_transaction_runs_every_kind_of_change(cluster, ads):
    services.create_group(name="search", parent=None, hard={"limits.cpu": "5"})
    web = deployment("web", cpu="1", replicas=2)
    moved = deployment("mover", cpu="2", group="search")
    decisions = decided(cluster, review(web), review(deployment("mover", cpu="2")), review(deployment("gone", cpu="1")))
    assert [d.allowed for d in decisions] == [True, True, True]
    assert used("ads") == {"limits.cpu": "5", "limits.cpu.A4": "0", "pods": "4"}
    version = QuotaGroup.objects.get(name="ads").version

    decisions = decided(cluster, scale_review("web", 4, 2), hpa_review("web", 5),
                        review(moved, operation="UPDATE", old=deployment("mover", cpu="2")),
                        review(None, operation="DELETE", old=deployment("gone", cpu="1"), name="gone"),
                        review(deployment("dry", cpu="1"), dry_run=True))
    assert [d.allowed for d in decisions] == [True, True, True, True, True]
    assert used("ads") == {"limits.cpu": "5", "limits.cpu.A4": "0", "pods": "5"}, "web: 5 replicas (the HPA's max) × 1 core"
    assert used("search") == {"limits.cpu": "2"}
    assert QuotaGroup.objects.get(name="ads").version == version + 1, "one status write per batch"
    charges = {c.name: c for c in QuotaCharge.objects.select_related("group")}
    assert set(charges) == {"web", "mover"}
    assert (charges["web"].spec_replicas, charges["web"].hpa_max_replicas, charges["web"].replicas) == (4, 5, 5)
    assert charges["web"].charge == {"count/pods": "5", "cpu": "5", "limits.cpu": "5", "limits.memory": "5Gi",
                                     "memory": "5Gi", "pods": "5", "requests.cpu": "5", "requests.memory": "5Gi"}
    assert charges["web"].per_replica["limits.cpu"] == "1" and charges["web"].source == "admission"
    assert charges["mover"].group.name == "search" and not charges["mover"].observed
    assert connection.get_autocommit() and not connection.in_atomic_block


def test_a_create_for_a_workload_charged_elsewhere_starts_over_outside_atomic(cluster, ads):
    services.create_group(name="search", parent=None, hard={"limits.cpu": "5"})
    assert decided(cluster, review(deployment("again", cpu="3")))[0].allowed
    assert decided(cluster, review(deployment("again", group="search", cpu="2")))[0].allowed
    assert used("ads")["limits.cpu"] == "0" and used("search")["limits.cpu"] == "2"
    assert QuotaCharge.objects.get().group.name == "search"


def test_a_batch_that_fails_at_commit_leaves_nothing_and_the_connection_works(cluster, ads):
    ghost = Cluster(pk=cluster.pk + 1000, name="ghost")  # the ledger's foreign key refuses it at COMMIT
    with pytest.raises(IntegrityError):
        decided(ghost, review(deployment("orphan", cpu="2")))
    assert used("ads")["limits.cpu"] == "0" and not QuotaCharge.objects.exists()
    assert connection.get_autocommit() and not connection.in_atomic_block
    assert decided(cluster, review(deployment("fine", cpu="2")))[0].allowed
    assert used("ads")["limits.cpu"] == "2"


def test_one_batch_of_calls_answers_each_call_on_its_own(webhook_token, ads):
    """Callers without a token, bodies that are not reviews and admissions share a batch;
    each gets its own answer, and the admissions are decided in order."""
    auth = f"Bearer {webhook_token}"
    bodies = [review(deployment(f"w{i}", cpu="4")) for i in range(3)]
    calls = [(auth, json.dumps(bodies[0]).encode()), ("", json.dumps(bodies[1]).encode()), (auth, b"{nope"),
             (auth, json.dumps(bodies[1]).encode()), (auth, json.dumps(bodies[2]).encode())]
    answers = decide_many(calls)
    assert [status for status, _ in answers] == [200, 401, 400, 200, 200]
    assert [answers[i][1]["response"]["allowed"] for i in (0, 3, 4)] == [True, True, False]
    assert answers[4][1]["response"]["status"]["message"].endswith("limits.cpu requested 4, used 8, hard 10")
    assert used("ads")["limits.cpu"] == "8"


def test_the_same_template_with_other_model_labels_is_charged_apart(cluster, ads):
    plain, a4 = deployment("plain", cpu="2"), deployment("fast", cpu="2", cpu_type="A4")
    assert [d.allowed for d in decided(cluster, review(a4), review(plain))] == [True, True]
    assert used("ads") == {"limits.cpu": "4", "limits.cpu.A4": "2", "pods": "2"}
    assert "limits.cpu.A4" not in QuotaCharge.objects.get(name="plain").charge


def test_bodies_the_fast_decoder_refuses_are_judged_as_before(webhook_token, ads):
    auth = f"Bearer {webhook_token}"
    huge = review(deployment("big-number", cpu="1"))
    huge["request"]["object"]["metadata"]["annotations"] = {"n": "x"}
    body = json.dumps(huge).replace('"annotations": {"n": "x"}', '"generation": 123456789012345678901234567890').encode()
    status, answer = decide(auth, body)
    assert status == 200 and answer["response"]["allowed"] is True, "an integer beyond 64 bits is still JSON"
    status, answer = decide(auth, b"[1, 2]")
    assert status == 400 and answer == {"code": "invalid", "errors": {},
                                        "detail": "Not an AdmissionReview: AdmissionReview must be a JSON object, not array"}
    status, answer = decide(auth, b'"text"')
    assert status == 400 and "not string" in answer["detail"]
    status, answer = decide(auth, b"\xff{}")
    assert status == 400 and "UTF-8" in answer["detail"]


@pytest.mark.parametrize(("authorization", "body", "status", "code"), [
    ("", b"{}", 401, "unauthenticated"),
    ("Bearer mwh_unknown", b"{}", 401, "unauthenticated"),
])
def test_a_call_that_is_no_review_gets_the_one_error_body(client, authorization, body, status, code, db):
    """The webhooks' answers that are not AdmissionReviews carry the REST API's one body
    (``{"code", "detail", "errors"}``), as every other machine endpoint's."""
    answer = client.post("/api/admission/v1/quotas/validate", body, content_type="application/json",
                         HTTP_AUTHORIZATION=authorization)
    assert answer.status_code == status
    assert set(answer.json()) == {"code", "detail", "errors"} and answer.json()["code"] == code
