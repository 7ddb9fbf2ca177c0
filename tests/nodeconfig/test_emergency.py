"""The emergency downgrade as the consolidation promises it: the request commits the downgrade
(target, revision, audit entries, delivery job: all or nothing) and answers at once, saying
the delivery is pending; its job delivers it, retried until done; one scope is one downgrade
however its selector is spelled."""

from __future__ import annotations

import time

import pytest

from core.locks import hold
from core.models import Job, ObjectChange
from core.redis import get_redis
from fleet.models import Node
from fleet.tokens import issue_token
from kube.labels import parse_selector
from nodeconfig import services
from nodeconfig.etags import etag_key
from nodeconfig.models import ConfigRevision, ConfigTarget, NodeConfig
from nodeconfig.reconcile import reconcile_nodes
from nodeconfig.rollout import progress
from nodeconfig.services import RECONCILE_TASK, TargetSpec, canonical_selector, emergency_downgrade, save_target

from tests.workers import purge_queues, shard_worker, wait_for_job, waiting_messages
from .conftest import settle, type_key

pytestmark = pytest.mark.django_db
EMERGENCY = "/api/v1/nodeconfig/emergency-downgrade/"
DOWNGRADE = {"reason": "reclaim hurts latency", "confirm": "DOWNGRADE"}
#: What the request may take at most on a loaded two-core test machine; it never waits for a lock or a worker.
AT_ONCE = 5.0


def poll(client, raw: str, node: str = "bj-1-n000", etag: str | None = None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"} | ({"HTTP_IF_NONE_MATCH": etag} if etag else {})
    return client.get(f"/api/agent/v1/clusters/bj-1/nodes/{node}/config", **headers)


@pytest.mark.django_db(transaction=True)
def test_the_answer_is_pending_until_the_delivery_job_runs_then_agents_see_it(fleet, admin_qos, operator_api, client):
    hdd, _ = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}))
    settle(hdd)
    _, raw = issue_token(fleet["bj-1"], "agent")
    etag = poll(client, raw)["ETag"]
    purge_queues(type_key(admin_qos))  # no worker runs: what the downgrade sends stays queued

    started = time.monotonic()
    response = operator_api.post(EMERGENCY, DOWNGRADE | {"cluster": "bj-1"}, format="json")
    assert time.monotonic() - started < AT_ONCE
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["emergency"] and body["progress"]["delivery"] == "pending"
    assert body["delivery_job"]["status"] == "pending" and body["delivery_job"]["kind"] == RECONCILE_TASK
    job = Job.objects.get(pk=body["delivery_job"]["id"])
    assert job.status == Job.Status.PENDING and waiting_messages(type_key(admin_qos)) == 1, "its message is with the broker"
    # nothing reached a node yet, and nothing claims otherwise
    assert not NodeConfig.objects.filter(target__emergency=True).exists()
    assert poll(client, raw, etag=etag).status_code == 304
    shown = operator_api.get(EMERGENCY).json()
    assert [t["id"] for t in shown] == [body["id"]] and shown[0]["progress"]["delivery"] == "pending"

    with shard_worker(type_key(admin_qos), purge=False):  # a worker of the type's shard comes up
        assert wait_for_job(job).status == Job.Status.SUCCEEDED
    shown = operator_api.get(EMERGENCY).json()[0]
    assert shown["progress"]["delivery"] == "delivered" and shown["progress"]["delivered"] == 12
    assert shown["delivery_job"]["id"] == job.pk and shown["delivery_job"]["status"] == "succeeded"
    fresh = poll(client, raw, etag=etag)
    assert fresh.status_code == 200 and fresh["ETag"] != etag
    assert fresh.json()["configs"]["AdminQoSConfiguration"]["config"]["reclaimedResourceConfig"]["enableReclaim"] is False
    assert get_redis().get(etag_key("bj-1", "bj-1-n000")).decode() == fresh["ETag"], "the agents' ETags moved"


@pytest.mark.django_db(transaction=True)
def test_the_api_never_waits_for_the_reconcile_lock(fleet, admin_qos, operator_api):
    """A long matching pass of the type holds its lock: the downgrade still answers at once, its
    job waits while the lock is busy (saying for what, nothing lost) and delivers after."""
    purge_queues(type_key(admin_qos))
    with shard_worker(type_key(admin_qos), purge=False):
        with hold(f"nodeconfig-type-{admin_qos.pk}"):
            started = time.monotonic()
            response = operator_api.post(EMERGENCY, DOWNGRADE, format="json")
            assert time.monotonic() - started < AT_ONCE
            assert response.status_code == 201 and response.json()["progress"]["delivery"] == "pending"
            job = Job.objects.get(pk=response.json()["delivery_job"]["id"])
            deadline = time.monotonic() + 30
            while Job.objects.get(pk=job.pk).status != Job.Status.WAITING and time.monotonic() < deadline:
                time.sleep(0.05)
            job.refresh_from_db()
            assert job.status == Job.Status.WAITING, (job.status, job.error)
            assert job.waiting_for == f"nodeconfig-type-{admin_qos.pk} is busy (held by another process)"
            assert not NodeConfig.objects.filter(target__emergency=True).exists()
        assert wait_for_job(job).status == Job.Status.SUCCEEDED  # the lock is free: the retry delivers it
    assert NodeConfig.objects.filter(target__emergency=True).count() == 18
    assert operator_api.get(EMERGENCY).json()[0]["progress"]["delivery"] == "delivered"


def everything_written() -> dict[str, int]:
    return {"targets": ConfigTarget.objects.count(), "revisions": ConfigRevision.objects.count(),
            "audit": ObjectChange.objects.filter(object_type__model="configtarget").count(), "jobs": Job.objects.count()}


def test_the_downgrade_its_revision_audit_entries_and_job_commit_together(fleet, admin_qos):
    target, created, job = emergency_downgrade(cluster=None, selector="", reason="incident 7")
    assert created and target.emergency and target.revision.number == 1 and target.revision.action == "create"
    assert set(ObjectChange.objects.filter(object_id=str(target.pk)).values_list("action", "verb")) == {
        ("create", ""), ("update", "emergency_downgrade")}
    assert job is not None and job.kind == RECONCILE_TASK and job.status == Job.Status.PENDING
    assert job.task_args == [admin_qos.pk] and job.task_kwargs == {"target_ids": [target.pk]}


@pytest.mark.parametrize("fail_at", ["audit entry", "delivery job"])
def test_a_failure_after_the_target_is_saved_leaves_nothing(fleet, admin_qos, monkeypatch, fail_at):
    if fail_at == "audit entry":
        record_change = services.record_change

        def failing_record_change(obj, action, **kwargs):
            if kwargs.get("verb") == "emergency_downgrade":
                raise RuntimeError("the audit log is unavailable")
            return record_change(obj, action, **kwargs)

        monkeypatch.setattr(services, "record_change", failing_record_change)
    else:
        def failing_enqueue(*args, **kwargs):
            raise RuntimeError("the job table is unavailable")

        monkeypatch.setattr(services.jobs, "enqueue", failing_enqueue)
    before = everything_written()
    with pytest.raises(RuntimeError):
        emergency_downgrade(cluster=None, selector="", reason="incident 7")
    assert everything_written() == before
    assert not ConfigTarget.objects.filter(emergency=True).exists()


def test_equivalent_selector_spellings_make_one_downgrade(fleet, admin_qos, operator_api, deliver):
    answers = []
    with deliver():
        for selector in ("diskMode=hdd", "diskMode==hdd", "diskMode in (hdd)", " diskMode in ( hdd ) "):
            answers.append(operator_api.post(EMERGENCY, DOWNGRADE | {"selector": selector}, format="json"))
    assert [a.status_code for a in answers] == [201, 200, 200, 200], [a.content for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    target = ConfigTarget.objects.get(emergency=True)
    assert target.node_label_selector == "diskMode=hdd" and target.revisions.count() == 1
    assert ObjectChange.objects.filter(verb="emergency_downgrade").count() == 1
    assert Job.objects.filter(kind=RECONCILE_TASK, object_id=str(target.pk)).count() == 1
    assert NodeConfig.objects.filter(target=target).count() == 6  # 4 of 12 + 2 of 6 are hdd
    other = operator_api.post(EMERGENCY, DOWNGRADE | {"selector": "diskMode in (hdd,ssd)"}, format="json")
    assert other.status_code == 201 and other.json()["id"] != target.pk, "another scope is another downgrade"


@pytest.mark.parametrize("spellings", [
    ("diskMode=hdd", "diskMode==hdd", "diskMode in (hdd)", "diskMode in (hdd,hdd)"),
    ("pool!=online", "pool notin (online)"),
    ("a in (y,x),b=1", "b==1,a in (x,y)", "b=1,a in (x,y),b=1"),
    ("a=x,a!=y", "a notin (y),a in (x)"),
    ("a>5", "a>5,a>5"),
])
def test_canonical_selectors_are_one_spelling_per_meaning_and_keep_it(spellings):
    canonical = {canonical_selector(s) for s in spellings}
    assert len(canonical) == 1, canonical
    (one,) = canonical
    assert canonical_selector(one) == one
    assert parse_selector(one).matches({"diskMode": "hdd", "pool": "offline", "a": "x", "b": "1"}) == \
        parse_selector(spellings[0]).matches({"diskMode": "hdd", "pool": "offline", "a": "x", "b": "1"})
    assert parse_selector(one).matches({"a": "7"}) == parse_selector(spellings[0]).matches({"a": "7"})


def test_an_unreadable_downgrade_selector_is_refused_on_its_field(fleet, admin_qos, operator_api):
    response = operator_api.post(EMERGENCY, DOWNGRADE | {"selector": "diskMode in (hdd"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "selector_parse_failed"
    assert "selector" in response.json()["errors"]
    response = operator_api.post(EMERGENCY, DOWNGRADE | {"selector": "zone=a"}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "selector_key_not_allowed"
    assert "selector" in response.json()["errors"]
    assert not ConfigTarget.objects.filter(emergency=True).exists()


@pytest.mark.django_db
def test_an_emergency_downgrade_is_only_ended_by_restore(operator_api, admin_qos, fleet):
    """Its scope and body are what the incident needed: the API's PATCH/PUT/DELETE of the
    target are refused (they used to go through), and restore ends it."""
    created = operator_api.post("/api/v1/nodeconfig/emergency-downgrade/", {"reason": "incident", "confirm": "DOWNGRADE"},
                                format="json").json()
    url = f"/api/v1/nodeconfig/targets/{created['id']}/"
    for method, body in (("patch", {"config": {"reclaimedResourceConfig": {"enableReclaim": True}}}),
                         ("put", {"config": {}}), ("delete", {"reason": "oops"})):
        refused = getattr(operator_api, method)(url, body, format="json")
        assert refused.status_code == 400 and refused.json()["code"] == "emergency", (method, refused.content)
    target = ConfigTarget.objects.get(pk=created["id"])
    assert not target.deleted and target.config == {"reclaimedResourceConfig": {"enableReclaim": False}}
    restored = operator_api.post(f"/api/v1/nodeconfig/emergency-downgrade/{target.pk}/restore/", {"reason": "over"},
                                 format="json")
    assert restored.status_code == 200 and restored.json()["deleted"] is True


def test_a_few_churned_nodes_matched_before_the_downgrades_own_pass_do_not_make_it_delivered(fleet, admin_qos):
    """Found in the fault suite: a Redis outage held the downgrade's delivery job back while a
    sync of churned nodes matched those few against every target; their pass marked the new
    revision observed, and the downgrade said "delivered" with half the cluster still reclaiming."""
    target, _, _ = emergency_downgrade(cluster="bj-1", selector="", reason="incident 8")
    churned = list(Node.objects.filter(cluster__name="bj-1").order_by("name").values_list("pk", flat=True)[:3])
    reconcile_nodes(churned)
    target.refresh_from_db()
    shown = progress(target)
    assert NodeConfig.objects.filter(target=target).count() == 3, "the churned nodes got the override"
    assert shown["delivery"] == "pending", "9 of the cluster's 12 nodes do not hold it yet"
    settle(target)
    target.refresh_from_db()
    assert progress(target)["delivery"] == "delivered" and NodeConfig.objects.filter(target=target).count() == 12
