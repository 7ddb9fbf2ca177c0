"""Scheduling policies: seeded default, validated by the engine, versioned with diff and rollback
(201 + the new revision), audited, hot-reloaded (the next placed pod sees a change)."""

from __future__ import annotations

import pytest

from core.models import ObjectChange
from scheduling import services
from scheduling.engine import DEFAULT_SCORES, Policy
from scheduling.models import SchedulingPolicy

API = "/api/v1/scheduling/policies/"
STACK = {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}


@pytest.fixture
def nodes_and_pod():
    def node(name, cpu):
        return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}}}

    existing = {"metadata": {"name": "busy", "namespace": "x"}, "spec": {"nodeName": "n1", "containers": [
        {"name": "c", "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}}]}}
    incoming = {"metadata": {"name": "p", "namespace": "x"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    return [node("n1", 8), node("n2", 8)], [existing], incoming


def test_default_policy_is_seeded_with_upstream_plugins_and_weights(db):
    policy = SchedulingPolicy.objects.get(is_default=True)
    assert policy.name == "default" and policy.revision is not None and policy.revision.number == 1
    compiled = Policy.from_config(policy.config)
    assert [(s.name, s.weight) for s in compiled.scores] == [(s.name, s.weight) for s in DEFAULT_SCORES]
    assert services.policy_for({"metadata": {}}).scores == Policy.default().scores


def test_create_update_diff_rollback(operator_api):
    created = operator_api.post(API, {"name": "stack", "description": "bin packing", "config": STACK, "reason": "try"},
                                format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["revision"] == 1 and body["etag"] == created["ETag"]

    changed = operator_api.patch(f"{API}stack/", {"config": {"percentageOfNodesToScore": 50}, "reason": "sample half"},
                                 format="json", HTTP_IF_MATCH=body["etag"])
    assert changed.status_code == 200, changed.json()
    assert changed.json()["revision"] == 2

    stale = operator_api.patch(f"{API}stack/", {"description": "x"}, format="json", HTTP_IF_MATCH=body["etag"])
    assert stale.status_code == 412 and stale.json()["code"] == "stale"

    revisions = operator_api.get(f"{API}stack/revisions/").json()
    assert [r["number"] for r in revisions] == [2, 1]
    diff = operator_api.get(f"{API}stack/diff/?a=1&b=2").json()
    assert {c["path"] for c in diff["changes"]} >= {"config.percentageOfNodesToScore", "config.plugins"}

    no_reason = operator_api.post(f"{API}stack/rollback/", {"revision": 1, "reason": " "}, format="json")
    assert no_reason.status_code == 400
    rolled = operator_api.post(f"{API}stack/rollback/", {"revision": 1, "reason": "half was worse"}, format="json")
    assert rolled.status_code == 201, rolled.json()
    assert rolled.json()["number"] == 3 and rolled.json()["rollback_of"] == 1 and rolled.json()["config"] == STACK
    assert operator_api.get(f"{API}stack/").json()["config"] == STACK
    unknown = operator_api.post(f"{API}stack/rollback/", {"revision": 9, "reason": "x"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_revision" and "revision" in unknown.json()["errors"]

    verbs = list(ObjectChange.objects.filter(object_repr="stack").values_list("action", "verb"))
    assert ("update", "rollback") in verbs and ("create", "") in verbs


def test_invalid_config_is_refused_naming_the_field(operator_api):
    bad = {"plugins": {"score": {"enabled": [{"name": "NoSuchPlugin", "weight": 1}]}}}
    response = operator_api.post(API, {"name": "bad", "config": bad}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "policy_invalid" and "NoSuchPlugin" in body["detail"] and "config" in body["errors"]
    assert not SchedulingPolicy.objects.filter(name="bad").exists()
    bad_args = {"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Nope"}}}]}
    assert operator_api.post(API, {"name": "bad", "config": bad_args}, format="json").status_code == 400


def test_viewer_reads_but_cannot_write_or_roll_back(viewer_api, operator_api):
    operator_api.post(API, {"name": "stack", "config": STACK}, format="json")
    assert viewer_api.get(API).status_code == 200
    assert viewer_api.post(API, {"name": "x"}, format="json").status_code == 403
    assert viewer_api.post(f"{API}stack/rollback/", {"revision": 1, "reason": "r"}, format="json").status_code == 403


def test_one_default_and_the_default_cannot_go(operator_api):
    operator_api.post(API, {"name": "stack", "config": STACK, "is_default": True}, format="json")
    assert list(SchedulingPolicy.objects.filter(is_default=True).values_list("name", flat=True)) == ["stack"]
    refused = operator_api.delete(f"{API}stack/")
    assert refused.status_code == 400 and refused.json()["code"] == "in_use"
    assert operator_api.delete(f"{API}default/").status_code == 204


def test_hot_reload_next_pod_sees_a_change(operator, nodes_and_pod):
    """The scheduler reads the policy's current revision per pod: no restart, no stale cache."""
    from core.context import acting_as
    from scheduling.engine import Scheduler

    nodes, pods, incoming = nodes_and_pod
    annotated = {**incoming, "metadata": {**incoming["metadata"], "annotations": {"sched.cloud.ctrip.com/policy": "pack"}}}
    with acting_as("test"):
        policy, _ = services.save_policy(services.PolicySpec("pack", config={}))
    first = Scheduler(services.policy_for(annotated), nodes, pods).schedule(annotated)
    assert first.node == "n2"  # spread (LeastAllocated): the empty node
    with acting_as("test"):
        services.save_policy(services.PolicySpec("pack", config=STACK), instance=policy)
    second = Scheduler(services.policy_for(annotated), nodes, pods).schedule(annotated)
    assert second.node == "n1"  # the new revision packs onto the busy node
    meridian = {**incoming, "metadata": {**incoming["metadata"], "annotations": {"scheduling.meridian.io/policy": "pack"}}}
    assert services.policy_for(meridian).name == "pack"
    with acting_as("test"):
        services.rollback_policy(policy, 1, reason="spread again")
    assert Scheduler(services.policy_for(annotated), nodes, pods).schedule(annotated).node == "n2"


def test_policy_cache_compiles_once_per_revision(db, monkeypatch):
    calls = []
    original = Policy.from_config

    def counting(config):
        calls.append(config)
        return original(config)

    monkeypatch.setattr(Policy, "from_config", staticmethod(counting))
    services.policy_cache._compiled.clear()
    for _ in range(5):
        services.policy_named(None)
    assert len(calls) == 1


def test_unknown_policy_is_refused(db):
    from core.errors import Refused

    with pytest.raises(Refused) as exc:
        services.policy_named("nope")
    assert exc.value.code == "unknown_policy" and exc.value.field == "policy"
