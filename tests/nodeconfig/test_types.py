"""Config types registered at run time, revalidation when their rules change, coalesced progress."""

from __future__ import annotations

import pytest

from core.events import current_sequence
from nodeconfig.agent import record_reports
from nodeconfig.models import ConfigType, NodeConfig
from nodeconfig.rollout import publish_progress
from nodeconfig.services import TargetSpec, save_config_type, save_target

from .conftest import settle

pytestmark = pytest.mark.django_db
TYPES = "/api/v1/nodeconfig/types/"

NEW_TYPE = {
    "name": "CPUThrottleConfiguration", "resource": "cputhrottleconfigurations",
    "allowed_keys": [{"priority": 0, "keyList": ["machineModel"]}],
    "schema": {"type": "object", "properties": {"throttleRatio": {"type": "number", "minimum": 0, "maximum": 1}}},
    "default_config": {"throttleRatio": 0.8},
}


def test_admins_register_a_type_at_run_time_and_targets_of_it_work(fleet, admin_api, operator_api, client):
    assert operator_api.post(TYPES, NEW_TYPE, format="json").status_code == 403
    response = admin_api.post(TYPES, NEW_TYPE, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["gvr"] == "config.katalyst.kubewharf.io/v1alpha1/cputhrottleconfigurations"
    bad = operator_api.post("/api/v1/nodeconfig/targets/", {"type": "CPUThrottleConfiguration", "name": "a1",
                                                            "node_label_selector": "machineModel=A1",
                                                            "config": {"throttleRatio": 3}}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "config_invalid" and "throttleRatio" in bad.json()["detail"]
    good = operator_api.post("/api/v1/nodeconfig/targets/", {"type": "CPUThrottleConfiguration", "name": "a1",
                                                             "node_label_selector": "machineModel=A1",
                                                             "config": {"throttleRatio": 0.5}}, format="json")
    assert good.status_code == 201
    settle(good.json()["id"])
    assert NodeConfig.objects.filter(config_type__name="CPUThrottleConfiguration").count() == 5


@pytest.mark.parametrize("change, field", [
    ({"allowed_keys": [{"priority": 0, "keyList": ["bad key!"]}]}, "allowed_keys"),
    ({"allowed_keys": [{"priority": 0, "keyList": ["a"]}, {"priority": 0, "keyList": ["b"]}]}, "allowed_keys"),
    ({"schema": {"type": "nonsense"}}, "schema"),
    ({"default_config": {"throttleRatio": 7}}, "default_config"),
    ({"default_config": [1]}, "default_config"),
])
def test_bad_types_are_refused_field_by_field(admin_api, change, field):
    response = admin_api.post(TYPES, NEW_TYPE | change, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not ConfigType.objects.filter(name="CPUThrottleConfiguration").exists()


def test_narrowing_allowed_keys_flags_targets_invalid_but_their_nodes_keep_serving(fleet, admin_qos):
    target, _ = save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}))
    settle(target)
    served = set(NodeConfig.objects.filter(target=target).values_list("node_id", flat=True))
    save_config_type({"allowed_keys": [{"priority": 0, "keyList": ["machineModel"]}]}, instance=admin_qos)
    target.refresh_from_db()
    assert not target.valid and target.status_reason == "selector_key_not_allowed"
    settle(target)
    assert set(NodeConfig.objects.filter(target=target).values_list("node_id", flat=True)) == served


def test_a_type_warns_beyond_two_priorities_or_two_keys(admin_api):
    crowded = NEW_TYPE | {"allowed_keys": [{"priority": 0, "keyList": ["a", "b", "c"]}]}
    assert admin_api.post(TYPES, crowded, format="json").json()["warnings"]


def test_progress_events_are_coalesced_per_target(fleet, admin_qos, django_capture_on_commit_callbacks):
    target, _ = save_target(admin_qos, TargetSpec(name="global", config={}))
    settle(target)
    publish_progress()  # drain what the change itself marked
    before = current_sequence("nodeconfig")
    rows = NodeConfig.objects.filter(target=target).select_related("node", "cluster")
    with django_capture_on_commit_callbacks(execute=True):
        for row in rows:  # eighteen separate agent reports
            record_reports(row.cluster, {row.node.name: ({"AdminQoSConfiguration": row.config_hash}, {})})
    assert publish_progress() == 1
    assert current_sequence("nodeconfig") == before + 1
    assert publish_progress() == 0
