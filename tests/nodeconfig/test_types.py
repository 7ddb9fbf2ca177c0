"""Config types registered at run time, revalidation when their rules change, coalesced progress."""

from __future__ import annotations

import re
import time

import pytest

from core.events import current_sequence
from core.live import TICK_SPACING_SECONDS, pending, publish_pending
from core.tasks import publish_live
from nodeconfig.agent import record_reports
from nodeconfig.models import TARGET_LIVE, ConfigType, NodeConfig
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


def fields_named(body: dict) -> set[str]:
    """The input fields an error body names (``allowed_keys[1].priority`` names ``allowed_keys``)."""
    return {re.split(r"[.\[]", path, maxsplit=1)[0] for path in body["errors"]}


@pytest.mark.parametrize("change, field", [
    ({"allowed_keys": [{"priority": 0, "keyList": ["bad key!"]}]}, "allowed_keys"),
    ({"allowed_keys": [{"priority": 0, "keyList": ["a"]}, {"priority": 0, "keyList": ["b"]}]}, "allowed_keys"),
    ({"schema": {"type": "nonsense"}}, "schema"),
    ({"default_config": {"throttleRatio": 7}}, "default_config"),
    ({"default_config": [1]}, "default_config"),
])
def test_bad_types_are_refused_field_by_field(admin_api, change, field):
    response = admin_api.post(TYPES, NEW_TYPE | change, format="json")
    assert response.status_code == 400 and field in fields_named(response.json())
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
    publish_pending()  # drain what the change itself marked
    before = current_sequence("nodeconfig")
    own_before = current_sequence(f"nodeconfig-target-{target.pk}")
    rows = NodeConfig.objects.filter(target=target).select_related("node", "cluster")
    with django_capture_on_commit_callbacks(execute=True):
        for row in rows:  # eighteen separate agent reports
            record_reports(row.cluster, {row.node.name: ({"AdminQoSConfiguration": row.config_hash}, {})})
    # one summary for the one target: on the list topic and on the target's own topic
    assert publish_pending() == {TARGET_LIVE: 2}
    assert current_sequence("nodeconfig") == before + 1
    assert current_sequence(f"nodeconfig-target-{target.pk}") == own_before + 1
    assert publish_pending() == {}


def test_bunched_beat_ticks_send_a_things_summary_about_once_a_second(fleet, admin_qos, django_capture_on_commit_callbacks):
    """Behind a busy worker the beat's one-second ticks run two or three back to back; each found
    new acknowledgements during a rollout and sent the target's summary again, so browsers got up
    to five messages in one second. A tick that comes too soon leaves the marks for the next."""
    target, _ = save_target(admin_qos, TargetSpec(name="global", config={}))
    settle(target)
    publish_pending()
    rows = list(NodeConfig.objects.filter(target=target).select_related("node", "cluster"))

    def report(row) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            record_reports(row.cluster, {row.node.name: ({"AdminQoSConfiguration": row.config_hash}, {})})

    before = current_sequence(f"nodeconfig-target-{target.pk}")
    report(rows[0])
    assert publish_live() == {TARGET_LIVE: 2}
    sent_at = time.monotonic()
    report(rows[1])
    assert publish_live() == {}, "a tick right behind the last one sends nothing"
    assert pending(TARGET_LIVE) == {str(target.pk)}, "and keeps what changed for the next"
    time.sleep(max(0.0, sent_at + TICK_SPACING_SECONDS + 0.05 - time.monotonic()))
    assert publish_live() == {TARGET_LIVE: 2}
    assert current_sequence(f"nodeconfig-target-{target.pk}") == before + 2


def test_a_type_keeps_its_name_its_gvr_stays_valid_and_the_downgrade_works_after_an_update(
        fleet, admin_api, operator_api, deliver):
    """The emergency downgrade finds its type by name: a rename would break it, so names are
    immutable; a garbage group/version/resource would break every agent and CNC, so each is
    refused on its field. A legitimate update changes neither, and the downgrade still works."""
    url = TYPES + "AdminQoSConfiguration/"
    current = admin_api.get(url)
    assert current.status_code == 200 and current["ETag"]
    unchanged = ConfigType.objects.filter(name="AdminQoSConfiguration").values(
        "name", "group", "version", "resource", "allowed_keys", "default_hash").get()
    for method, body in (("patch", {"name": "RenamedConfiguration"}),
                         ("put", current.json() | {"name": "RenamedConfiguration"})):
        response = getattr(admin_api, method)(url, body, format="json")
        assert response.status_code == 400 and response.json()["code"] == "invalid", (method, response.content)
        assert "cannot change" in " ".join(response.json()["errors"]["name"])
    garbage = {"group": "Not A Group!", "version": "1.0", "resource": "Admin_QoS"}
    response = admin_api.patch(url, garbage, format="json")
    assert response.status_code == 400 and set(response.json()["errors"]) == set(garbage)
    for field, value in garbage.items():
        response = admin_api.patch(url, {field: value}, format="json")
        assert response.status_code == 400 and set(response.json()["errors"]) == {field}, field
    created = admin_api.post(TYPES, NEW_TYPE | {"group": "bad group", "version": "v1", "resource": "x"}, format="json")
    assert created.status_code == 400 and set(created.json()["errors"]) == {"group"}
    assert ConfigType.objects.filter(name="AdminQoSConfiguration").values(*unchanged).get() == unchanged
    assert not ConfigType.objects.filter(name="RenamedConfiguration").exists()
    assert admin_api.get(url)["ETag"] == current["ETag"]

    update = {"description": "QoS switches", "allowed_keys": [{"priority": 0, "keyList": ["diskMode"]},
                                                              {"priority": 1, "keyList": ["pool"]}]}
    response = admin_api.patch(url, update, format="json", HTTP_IF_MATCH=current["ETag"])
    assert response.status_code == 200 and response.json()["name"] == "AdminQoSConfiguration"
    assert response["ETag"] != current["ETag"]
    with deliver():
        downgrade = operator_api.post("/api/v1/nodeconfig/emergency-downgrade/",
                                      {"selector": "pool=online", "reason": "incident", "confirm": "DOWNGRADE"},
                                      format="json")
    assert downgrade.status_code == 201, downgrade.content
    assert NodeConfig.objects.filter(target_id=downgrade.json()["id"]).count() == 9  # odd-numbered nodes are online
