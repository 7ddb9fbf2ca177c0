"""Targets end to end through the REST API: validation, matching, history, rollback, YAML."""

from __future__ import annotations

import pytest

from nodeconfig.models import ConfigTarget, NodeConfig
from nodeconfig.hashing import config_hash

from .conftest import seed_examples, settle

pytestmark = pytest.mark.django_db
TARGETS = "/api/v1/nodeconfig/targets/"


def entries(type_name: str = "AdminQoSConfiguration") -> dict[str, str | None]:
    return {n: t for n, t in NodeConfig.objects.filter(config_type__name=type_name).values_list("node__name", "target__name")}


def create(api, **fields):
    body = {"type": "AdminQoSConfiguration", "config": {}} | fields
    return api.post(TARGETS, body, format="json")


SEED_YAML = seed_examples("bj-1-n001", "bj-1-n002")


def test_the_seed_examples_import_as_upstream_yaml_and_reach_the_right_nodes(fleet, operator_api):
    response = operator_api.post(TARGETS + "import/", {"yaml": SEED_YAML, "reason": "seed"}, format="json")
    assert response.status_code == 200, response.content
    assert [t["name"] for t in response.json()["targets"]] == ["global", "numa-memory-eviction-gray", "hybrid-for-disk-hdd"]
    for target in ConfigTarget.objects.all():
        settle(target)
    got = entries()
    assert got["bj-1-n001"] == got["bj-1-n002"] == "numa-memory-eviction-gray"  # node list beats the rest
    assert got["bj-1-n000"] == "hybrid-for-disk-hdd" and got["sh-1-n003"] == "hybrid-for-disk-hdd"  # diskMode=hdd
    assert got["bj-1-n004"] == "global" and got["sh-1-n001"] == "global"
    assert len(got) == 18
    gray = ConfigTarget.objects.get(name="numa-memory-eviction-gray")
    assert gray.expires_at is not None and (gray.expires_at - gray.created).total_seconds() == pytest.approx(72 * 3600, abs=5)
    assert gray.config_hash == config_hash(gray.config)
    exported = operator_api.get(TARGETS + "export/?type=AdminQoSConfiguration").content.decode()
    assert "ephemeralSelector:" in exported and "lastDuration: 72h" in exported and "nodeLabelSelector: diskMode=hdd" in exported


@pytest.mark.parametrize("fields, code", [
    ({"name": "second-global"}, "global_duplicated"),
    ({"name": "hdd-2", "node_label_selector": "diskMode in (hdd,nvme)"}, "selector_overlap"),
    ({"name": "bad-key", "node_label_selector": "zone=a"}, "selector_key_not_allowed"),
    ({"name": "bad-prio", "node_label_selector": "diskMode=hdd", "priority": 7}, "priority_not_supported"),
    ({"name": "both", "node_label_selector": "diskMode=hdd", "node_names": ["x"], "last_duration": "1h"},
     "both_selector_and_node_names"),
    ({"name": "no-duration", "node_names": ["bj-1-n001"]}, "node_names_without_last_duration"),
    ({"name": "gray-2", "node_names": ["bj-1-n002", "bj-1-n005"], "last_duration": "1h"}, "node_names_overlap"),
    ({"name": "parse", "node_label_selector": "diskMode in (hdd"}, "selector_parse_failed"),
    ({"name": "schema", "node_label_selector": "pool=online", "priority": 1,
      "config": {"reclaimedResourceConfig": {"enableReclaim": "no"}}}, "config_invalid"),
])
def test_refused_targets_name_the_reason_and_change_no_node(fleet, operator_api, fields, code):
    operator_api.post(TARGETS + "import/", {"yaml": SEED_YAML}, format="json")
    for target in ConfigTarget.objects.all():
        settle(target)
    before = list(NodeConfig.objects.order_by("pk").values_list("node_id", "target_id", "revision_id", "config_hash"))
    targets_before = ConfigTarget.objects.count()
    response = create(operator_api, **fields)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code
    if code in ("global_duplicated", "selector_overlap", "node_names_overlap"):
        other = {"global_duplicated": "global", "selector_overlap": "hybrid-for-disk-hdd",
                 "node_names_overlap": "numa-memory-eviction-gray"}[code]
        assert other in response.json()["detail"]
    assert ConfigTarget.objects.count() == targets_before
    assert list(NodeConfig.objects.order_by("pk").values_list("node_id", "target_id", "revision_id", "config_hash")) == before


def test_an_update_that_would_conflict_is_refused_and_the_old_revision_keeps_serving(fleet, operator_api):
    hdd = create(operator_api, name="hdd", node_label_selector="diskMode=hdd").json()
    assert create(operator_api, name="a1", node_label_selector="diskMode=ssd,machineModel=A1").status_code == 201
    settle(hdd["id"])
    response = operator_api.patch(f"{TARGETS}{hdd['id']}/", {"node_label_selector": "diskMode=ssd", "reason": "oops"},
                                  format="json")
    assert response.status_code == 400 and response.json()["code"] == "selector_overlap"
    target = ConfigTarget.objects.get(pk=hdd["id"])
    assert target.node_label_selector == "diskMode=hdd" and target.revisions.count() == 1


def test_every_change_is_a_revision_diffable_and_rollback_restores_an_old_one(fleet, operator_api):
    target = create(operator_api, name="hdd", node_label_selector="diskMode=hdd",
                    config={"reclaimedResourceConfig": {"enableReclaim": True}}, reason="first").json()
    url = f"{TARGETS}{target['id']}/"
    assert operator_api.patch(url, {"config": {"reclaimedResourceConfig": {"enableReclaim": False}}, "reason": "why not"},
                              format="json").status_code == 200
    assert operator_api.patch(url, {"node_label_selector": "diskMode=hdd,machineModel=A1", "reason": "narrow"},
                              format="json").status_code == 200
    revisions = operator_api.get(url + "revisions/").json()
    assert [(r["number"], r["action"], r["reason"]) for r in revisions] == [
        (3, "update", "narrow"), (2, "update", "why not"), (1, "create", "first")]
    assert revisions[0]["created_by"] == "otto-operator"
    diff = operator_api.get(url + "diff/?a=1&b=3").json()["changes"]
    assert {"path": "config.reclaimedResourceConfig.enableReclaim", "op": "change", "old": True, "new": False} in diff
    assert {"path": "node_label_selector", "op": "change", "old": "diskMode=hdd", "new": "diskMode=hdd,machineModel=A1"} in diff
    assert operator_api.get(url + "diff/?a=1&b=9").status_code == 400
    assert operator_api.post(url + "rollback/", {"revision": 1}, format="json").status_code == 400  # reason required
    response = operator_api.post(url + "rollback/", {"revision": 1, "reason": "bad narrowing"}, format="json")
    assert response.status_code == 201
    assert response.json().items() >= {"number": 4, "action": "rollback", "rollback_of": 1, "reason": "bad narrowing"}.items()
    restored = ConfigTarget.objects.get(pk=target["id"])
    assert restored.node_label_selector == "diskMode=hdd"
    assert restored.config == {"reclaimedResourceConfig": {"enableReclaim": True}}
    assert restored.config_hash == ConfigTarget.objects.get(pk=target["id"]).revisions.get(number=1).config_hash
    settle(restored)
    assert sum(1 for t in entries().values() if t == "hdd") == 6  # 4 of 12 + 2 of 6 are hdd


def test_a_change_that_is_not_a_json_object_is_refused(fleet, operator_api):
    target = create(operator_api, name="x").json()
    response = operator_api.patch(f"{TARGETS}{target['id']}/", [{"config": {"a": 1}}], format="json")
    assert response.status_code == 400 and response.json()["code"] == "invalid"
    assert "non_field_errors" in response.json()["errors"]
    assert ConfigTarget.objects.get(pk=target["id"]).revisions.count() == 1


def test_viewers_read_but_cannot_write_and_unchanged_saves_write_nothing(fleet, viewer_api, operator_api):
    assert create(viewer_api, name="x").status_code == 403
    target = create(operator_api, name="x").json()
    assert operator_api.patch(f"{TARGETS}{target['id']}/", {"config": {}}, format="json").status_code == 200
    assert ConfigTarget.objects.get(pk=target["id"]).revisions.count() == 1
    assert viewer_api.get(TARGETS).json()["results"][0]["name"] == "x"


def test_delete_falls_back_and_keeps_history(fleet, operator_api):
    glob = create(operator_api, name="global").json()
    hdd = create(operator_api, name="hdd", node_label_selector="diskMode=hdd").json()
    settle(glob["id"]), settle(hdd["id"])
    assert operator_api.delete(f"{TARGETS}{hdd['id']}/?reason=retired").status_code == 204
    settle(hdd["id"])
    assert set(entries().values()) == {"global"}
    assert [r["action"] for r in operator_api.get(f"{TARGETS}{hdd['id']}/revisions/").json()] == ["delete", "create"]


def test_preview_shows_matches_and_conflicts_without_saving(fleet, operator_api):
    create(operator_api, name="hdd", node_label_selector="diskMode=hdd")
    response = operator_api.post(TARGETS + "preview/", {"type": "AdminQoSConfiguration", "name": "a1",
                                                        "node_label_selector": "machineModel=A1"}, format="json")
    body = response.json()
    assert body["matched_count"] == 5 and body["problem"] is not None and body["problem"]["code"] == "selector_overlap"
    assert body["conflicts"][0]["code"] == "selector_overlap"
    fleetwide = operator_api.post(TARGETS + "preview/", {"type": "AdminQoSConfiguration", "name": "p",
                                                         "node_label_selector": "cluster=sh-1,pool=online",
                                                         "priority": 1}, format="json").json()
    assert fleetwide["problem"] is None and fleetwide["matched_count"] == 3
    assert {n["cluster"] for n in fleetwide["nodes"]} == {"sh-1"}
    assert ConfigTarget.objects.count() == 1


def test_cluster_scoped_targets_do_not_conflict_across_clusters(fleet, operator_api):
    assert create(operator_api, name="g-bj", cluster="bj-1").status_code == 201
    assert create(operator_api, name="g-sh", cluster="sh-1").status_code == 201
    refused = create(operator_api, name="g-all")
    assert refused.status_code == 400 and refused.json()["code"] == "global_duplicated"
    for target in ConfigTarget.objects.all():
        settle(target)
    got = entries()
    assert got["bj-1-n000"] == "g-bj" and got["sh-1-n000"] == "g-sh"
    assert create(operator_api, name="nowhere", cluster="xx-9").json()["code"] == "unknown_cluster"


def test_a_node_label_change_reconciles_that_node(fleet, operator_api):
    from fleet.models import Node
    from nodeconfig.reconcile import reconcile_nodes

    hdd = create(operator_api, name="hdd", node_label_selector="diskMode=hdd").json()
    settle(hdd["id"])
    node = Node.objects.get(name="bj-1-n001")
    assert "bj-1-n001" not in entries()
    node.labels = node.labels | {"diskMode": "hdd"}
    node.save()
    reports = reconcile_nodes([node.pk])
    assert entries()["bj-1-n001"] == "hdd"
    assert reports[0].nodes == 1 and reports[0].written == 1


def test_expired_node_list_targets_are_removed(fleet, operator_api):
    from datetime import timedelta

    from django.utils import timezone

    from nodeconfig.tasks import expire_targets

    gray = create(operator_api, name="gray", node_names=["bj-1-n001"], last_duration="1h").json()
    settle(gray["id"])
    assert entries() == {"bj-1-n001": "gray"}
    assert expire_targets(now=timezone.now() + timedelta(minutes=59)) == 0
    assert expire_targets(now=timezone.now() + timedelta(minutes=61)) == 1
    settle(gray["id"])
    assert entries() == {}
    target = ConfigTarget.objects.get(pk=gray["id"])
    assert target.deleted and target.revisions.first().reason == "lastDuration 1h elapsed"
