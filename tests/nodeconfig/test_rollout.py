"""Paced rollouts, progress counts, pause on failures, and the emergency downgrade."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from core.models import Job, ObjectChange
from nodeconfig.agent import record_reports
from nodeconfig.models import ConfigTarget, NodeConfig
from nodeconfig.rollout import advance_rollout, progress
from nodeconfig.services import TargetSpec, emergency_downgrade, restore_downgrade, save_target

from tests.workers import shard_worker, wait_for_job
from .conftest import settle, type_key

pytestmark = pytest.mark.django_db
EMERGENCY = "/api/v1/nodeconfig/emergency-downgrade/"


def ack(target: ConfigTarget, *, fail: set[str] = frozenset()) -> None:
    """Every delivered node of ``target`` reports (success, or an error for names in ``fail``)."""
    rows = NodeConfig.objects.filter(revision=target.revision).select_related("node", "cluster")
    by_cluster: dict = {}
    for row in rows:
        applied, errors = ({}, {"AdminQoSConfiguration": "broken"}) if row.node.name in fail else (
            {"AdminQoSConfiguration": row.config_hash}, {})
        by_cluster.setdefault(row.cluster, {})[row.node.name] = (applied, errors)
    for cluster, reports in by_cluster.items():
        record_reports(cluster, reports)


def paced(admin_qos, **changes) -> ConfigTarget:
    spec = TargetSpec(name="global", config={"reclaimedResourceConfig": {"enableReclaim": False}}, wave_size="25%",
                      wave_interval_seconds=0, failure_threshold_percent=30)
    for key, value in changes.items():
        setattr(spec, key, value)
    target, _ = save_target(admin_qos, spec)
    settle(target)
    target.refresh_from_db()
    return target


def test_waves_release_nodes_in_name_order_and_complete(fleet, admin_qos):
    target = paced(admin_qos)
    counts = progress(target)
    assert counts["targeted"] == 18 and counts["delivered"] == 4 and counts["held"] == 14  # floor(18 * 25%) = 4
    first = set(NodeConfig.objects.filter(revision=target.revision).values_list("node__name", flat=True))
    assert first == {"bj-1-n000", "bj-1-n001", "bj-1-n002", "bj-1-n003"}  # byte-wise name order, like upstream's canary
    advance_rollout(target)
    assert progress(target)["delivered"] == 4  # waits for the wave's acknowledgements
    ack(target)
    advance_rollout(target)
    assert progress(target)["delivered"] == 8
    for _ in range(5):
        ack(target)
        advance_rollout(target)
    target.refresh_from_db()
    counts = progress(target)
    assert counts["applied"] == 18 and counts["pending"] == counts["held"] == 0
    assert target.rollout_state == "complete"


def test_failures_over_the_threshold_pause_the_rollout(fleet, admin_qos):
    target = paced(admin_qos, failure_threshold_percent=30)
    ack(target, fail={"bj-1-n000", "bj-1-n001"})  # 2 of 4 = 50% > 30%
    advance_rollout(target)
    target.refresh_from_db()
    assert target.rollout_state == "failed" and target.paused and "2 of 4" in target.rollout_message
    advance_rollout(target)
    assert progress(target)["delivered"] == 4  # nothing more is released while paused
    assert ObjectChange.objects.filter(verb="auto_pause").count() == 1


def test_a_new_revision_keeps_unreleased_nodes_on_the_old_one(fleet, admin_qos):
    first, _ = save_target(admin_qos, TargetSpec(name="global", config={}))
    settle(first)
    old_revision = ConfigTarget.objects.get(pk=first.pk).revision_id
    target = paced(admin_qos, wave_size="2")
    on_new = NodeConfig.objects.filter(revision=target.revision).count()
    on_old = NodeConfig.objects.filter(revision_id=old_revision).count()
    assert (on_new, on_old) == (2, 16)


def test_pause_resume_and_promote_through_the_api(fleet, admin_qos, operator_api, viewer_api):
    target = paced(admin_qos, wave_size="1")
    base = f"/api/v1/nodeconfig/targets/{target.pk}/"
    assert viewer_api.post(base + "pause/", {}, format="json").status_code == 403
    assert operator_api.post(base + "pause/", {"reason": "look first"}, format="json").json()["rollout_state"] == "paused"
    assert operator_api.post(base + "resume/", {}, format="json").status_code == 200
    assert operator_api.post(base + "promote/", {"reason": "fine"}, format="json").json()["released"] == 17
    body = operator_api.get(base + "progress/").json()
    assert body["delivered"] == 18 and body["rollout_state"] == "complete"


def test_emergency_downgrade_overrides_everything_in_scope_and_restores(fleet, admin_qos, operator_api, viewer_api,
                                                                      deliver):
    hdd, _ = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd",
                                               config={"evictionConfig": {"memoryPressureEvictionConfig": {
                                                   "systemFreeMemoryThresholdMinimum": "20Gi"}}}))
    settle(hdd)
    body = {"cluster": "bj-1", "reason": "reclaim is hurting latency", "confirm": "DOWNGRADE"}
    assert viewer_api.post(EMERGENCY, body, format="json").status_code == 403
    assert operator_api.post(EMERGENCY, body | {"confirm": "yes"}, format="json").status_code == 400
    with deliver():
        response = operator_api.post(EMERGENCY, body, format="json")
        assert response.status_code == 201, response.content
        # the answer tells the truth: committed, delivery still to come, and the job delivering it
        assert response.json()["progress"]["delivery"] == "pending"
        assert response.json()["delivery_job"]["status"] == "pending"
    rows = NodeConfig.objects.filter(target__emergency=True)
    assert rows.count() == 12 and not rows.exclude(cluster__name="bj-1").exists()  # written by its delivery job
    client_view = operator_api.get(EMERGENCY).json()
    assert client_view[0]["progress"]["delivered"] == 12 and client_view[0]["progress"]["delivery"] == "delivered"
    assert client_view[0]["delivery_job"]["status"] == "succeeded"
    # the override keeps the node's own target underneath it
    from nodeconfig.agent import effective_config
    from fleet.models import Node

    payload, _ = effective_config(Node.objects.get(name="bj-1-n000"))
    config = payload["configs"]["AdminQoSConfiguration"]["config"]
    assert config["reclaimedResourceConfig"]["enableReclaim"] is False
    assert config["evictionConfig"]["memoryPressureEvictionConfig"]["systemFreeMemoryThresholdMinimum"] == "20Gi"
    assert operator_api.post(EMERGENCY, body, format="json").status_code == 200  # idempotent
    assert ConfigTarget.objects.filter(emergency=True).count() == 1
    target = ConfigTarget.objects.get(emergency=True)
    with deliver():
        restored = operator_api.post(f"{EMERGENCY}{target.pk}/restore/", {"reason": "latency ok"}, format="json")
        assert restored.status_code == 200, restored.content
        assert restored.json()["id"] == target.pk and restored.json()["deleted"] is True
        assert restored.json()["delivery_job"]["status"] == "pending" and restored.json()["progress"]["delivery"] == "pending"
    assert not NodeConfig.objects.filter(target__emergency=True).exists()
    assert NodeConfig.objects.get(node__name="bj-1-n000").target == hdd
    assert [r.action for r in target.revisions.all()] == ["restore", "create"]
    assert ObjectChange.objects.filter(verb="emergency_downgrade").count() == 1


def test_emergency_downgrade_bypasses_pacing(fleet, admin_qos, deliver):
    target = paced(admin_qos, wave_size="1")
    with deliver():
        downgrade, created, _job = emergency_downgrade(cluster=None, selector="", reason="incident 42")
    assert created and NodeConfig.objects.filter(target=downgrade).count() == 18
    with deliver():
        restore_downgrade(downgrade, reason="over")
    assert NodeConfig.objects.filter(revision=target.revision).count() == 1  # pacing resumes where it was


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_downgrades_make_one(fleet, admin_qos):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from core.models import APIToken
    from tests.conftest import make_user

    user = make_user(get_user_model(), "olga", "operator")
    _, raw = APIToken.issue(user)
    statuses: list[int] = []
    barrier = threading.Barrier(10)

    def press() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
        try:
            barrier.wait()
            for _ in range(5):
                statuses.append(client.post(EMERGENCY, {"reason": "incident", "confirm": "DOWNGRADE"}, format="json").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=press) for _ in range(10)]
    with shard_worker(type_key(admin_qos)):  # delivers the downgrade, as a worker of its shard does
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(set(statuses)) == [200, 201] and statuses.count(201) == 1 and len(statuses) == 50
        assert ConfigTarget.objects.filter(emergency=True).count() == 1
        target = ConfigTarget.objects.get(emergency=True)
        deliveries = Job.objects.filter(kind="nodeconfig.reconcile_type", object_id=str(target.pk))
        assert deliveries.count() == 1, "one downgrade, delivered once"
        assert wait_for_job(deliveries.get()).status == Job.Status.SUCCEEDED
    assert target.revisions.count() == 1
    assert NodeConfig.objects.filter(target=target).count() == 18
    assert ObjectChange.objects.filter(verb="emergency_downgrade").count() == 1
