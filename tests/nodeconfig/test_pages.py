"""The node config pages as people use them: read for every role, write through the services,
refusals shown as form errors, the emergency downgrade from the overview."""

from __future__ import annotations

import json
from html import unescape

import pytest
from django.db.models import F

from core.models import ObjectChange
from nodeconfig import views
from nodeconfig.models import ConfigRevision, ConfigTarget, NodeConfig
from nodeconfig.rollout import progress, progress_many
from nodeconfig.services import TargetSpec, emergency_downgrade, save_target
from nodeconfig.tasks import simulate_agents

from .conftest import settle

pytestmark = pytest.mark.django_db
NEW = "/nodeconfig/targets/new/"
EMERGENCY = "/nodeconfig/emergency/"
HDD_CONFIG = {"evictionConfig": {"memoryPressureEvictionConfig": {"systemFreeMemoryThresholdMinimum": "20Gi"}}}


def make_target(config_type, name="hdd", **fields) -> ConfigTarget:
    spec = TargetSpec(name=name, **({"node_label_selector": "diskMode=hdd", "config": HDD_CONFIG} | fields))
    target, _ = save_target(config_type, spec, reason="test")
    settle(target)
    target.refresh_from_db()
    return target


def form_data(**fields) -> dict:
    return {"type": "AdminQoSConfiguration", "name": "ssd-a1", "cluster": "", "mode": "selector",
            "node_label_selector": "diskMode=ssd,machineModel=A1", "priority": "0", "node_names": "",
            "last_duration": "", "config": '{"reclaimedResourceConfig": {"enableReclaim": false}}', "wave_size": "",
            "wave_interval_seconds": "60", "failure_threshold_percent": "10", "reason": "ssd A1 boxes", "save": "1"} | fields


def ack(target: ConfigTarget, nodes: list[str] | None = None) -> None:
    rows = NodeConfig.objects.filter(target=target)
    if nodes is not None:
        rows = rows.filter(node__name__in=nodes)
    rows.update(applied_hash=F("config_hash"))


@pytest.fixture
def hdd(fleet, admin_qos) -> ConfigTarget:
    return make_target(admin_qos)


# ---------------------------------------------------------------------------- reading

def test_every_page_renders_for_a_viewer(client, viewer, hdd):
    emergency_downgrade(cluster="sh-1", selector="", reason="incident")
    client.force_login(viewer)
    for path in ("/nodeconfig/", "/nodeconfig/types/", f"/nodeconfig/targets/{hdd.pk}/",
                 f"/nodeconfig/targets/{hdd.pk}/?state=applied&cluster=bj-1", EMERGENCY,
                 "/nodeconfig/nodes/bj-1/bj-1-n000/", "/"):
        response = client.get(path)
        assert response.status_code == 200, path
    assert client.get("/nodeconfig/targets/999999/").status_code == 404
    assert client.get("/nodeconfig/nodes/bj-1/missing/").status_code == 404


def test_index_groups_targets_with_progress_and_the_emergency_banner(client, viewer, hdd, admin_qos):
    ack(hdd, ["bj-1-n000", "bj-1-n003"])
    client.force_login(viewer)
    html = client.get("/nodeconfig/").content.decode()
    assert "AdminQoSConfiguration" in html and "AuthConfiguration" in html
    assert f'href="/nodeconfig/targets/{hdd.pk}/"' in html and "diskMode=hdd" in html
    assert '<span data-count="applied">2</span>' in html and '<span data-count="targeted">6</span>' in html
    assert 'data-topics="nodeconfig"' in html and "meridian/js/nodeconfig.js" in html
    assert "Emergency downgrade active" not in html
    assert "New target" not in html, "a viewer is not offered writes"
    emergency_downgrade(cluster=None, selector="", reason="incident")
    html = client.get("/nodeconfig/").content.decode()
    assert "Emergency downgrade active" in html and "emergency-downgrade-fleet" in html


def counted_by_hand(target: ConfigTarget) -> dict[str, int]:
    """The rollout counting rules, re-derived row by row in Python."""
    rows = NodeConfig.objects.filter(**({"target": target} if target.emergency else {"matched_target": target}))
    counts = dict.fromkeys(("targeted", "delivered", "applied", "failed", "pending", "held"), 0)
    for row in rows:
        counts["targeted"] += 1
        current = row.revision_id == target.revision_id or (
            not target.emergency and row.base_revision_id == target.revision_id)
        if not current:
            counts["held"] += 1
            continue
        counts["delivered"] += 1
        if row.applied_hash == row.config_hash:
            counts["applied"] += 1
        elif row.error:
            counts["failed"] += 1
        else:
            counts["pending"] += 1
    return counts


def test_grouped_progress_counts_each_target_by_the_rollout_rules(hdd, admin_qos, fleet, deliver):
    paced, _ = save_target(admin_qos, TargetSpec(name="global", config={}, wave_size="5"))
    settle(paced)
    ack(hdd, ["bj-1-n000"])
    NodeConfig.objects.filter(target=hdd, node__name="bj-1-n003").update(error="boom")
    with deliver():
        emergency, _, _ = emergency_downgrade(cluster="sh-1", selector="", reason="incident")
    ack(emergency, ["sh-1-n001"])
    targets = list(views.targets_with_relations().filter(deleted=False))
    grouped = progress_many(targets)
    assert len(targets) == 3
    for target in targets:
        assert {k: grouped[target.pk][k] for k in counted_by_hand(target)} == counted_by_hand(target), target.name
    assert grouped[hdd.pk]["applied"] == 1 and grouped[hdd.pk]["failed"] == 1 and grouped[hdd.pk]["targeted"] >= 2
    assert grouped[paced.pk]["held"] > 0, "a paced rollout holds nodes back"
    assert grouped[emergency.pk]["targeted"] == 6 and grouped[emergency.pk]["applied"] == 1


def test_index_queries_do_not_grow_with_targets(client, viewer, fleet, admin_qos, django_assert_max_num_queries):
    client.force_login(viewer)
    make_target(admin_qos, "one", node_label_selector="", node_names=("bj-1-n001",), last_duration="72h")
    client.get("/nodeconfig/")
    for i in range(2, 8):
        make_target(admin_qos, f"n{i}", node_label_selector="", node_names=(f"bj-1-n{i:03d}",), last_duration="72h")
    with django_assert_max_num_queries(12):
        assert client.get("/nodeconfig/").status_code == 200


def test_types_page_shows_keys_warnings_and_counts(client, viewer, hdd, admin_qos):
    admin_qos.allowed_keys = [{"priority": 0, "keyList": ["diskMode", "machineModel", "pool"]}]
    admin_qos.save()
    client.force_login(viewer)
    html = client.get("/nodeconfig/types/").content.decode()
    assert "config.katalyst.kubewharf.io/v1alpha1/adminqosconfigurations" in html
    assert "<code>machineModel</code>" in html and "keep to at most 2" in html


def test_target_detail_shows_history_diff_and_nodes(client, viewer, hdd, admin_qos):
    save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={
        "evictionConfig": {"memoryPressureEvictionConfig": {"systemFreeMemoryThresholdMinimum": "30Gi"}}}),
        reason="more headroom")
    settle(hdd)
    ack(ConfigTarget.objects.get(pk=hdd.pk), ["bj-1-n000"])
    client.force_login(viewer)
    html = client.get(f"/nodeconfig/targets/{hdd.pk}/", {"a": 1, "b": 2}).content.decode()
    assert "more headroom" in html and 'data-topics="nodeconfig-target-' in html
    assert "config.evictionConfig.memoryPressureEvictionConfig.systemFreeMemoryThresholdMinimum" in html
    assert "20Gi" in html and "30Gi" in html
    assert f"/api/v1/nodeconfig/targets/{hdd.pk}/manifest/" in html
    assert html.count('<tr data-state="') == 6 and "/nodeconfig/nodes/bj-1/bj-1-n000/" in html
    applied = client.get(f"/nodeconfig/targets/{hdd.pk}/", {"state": "applied"}).content.decode()
    assert applied.count('<tr data-state="applied"') == 1 and applied.count('<tr data-state="') == 1
    pending = client.get(f"/nodeconfig/targets/{hdd.pk}/", {"state": "pending", "cluster": "sh-1"}).content.decode()
    assert pending.count('<tr data-state="pending"') == 2  # sh-1-n000, sh-1-n003
    bad = client.get(f"/nodeconfig/targets/{hdd.pk}/", {"a": 1, "b": 99, "state": "bogus"})
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode()
    assert "Roll back" not in html, "a viewer is not offered a rollback"


def test_node_table_is_sorted_by_node_name_and_pages(client, viewer, fleet, admin_qos):
    target = make_target(admin_qos, "global", node_label_selector="", config={})
    client.force_login(viewer)

    def names(**query) -> list[str]:
        table = client.get(f"/nodeconfig/targets/{target.pk}/", query).context["table"]
        return [row.record.node.name for row in table.shown_rows]

    seen = names()
    assert len(seen) == 18 and seen == sorted(seen)
    assert names(sort="-node") == sorted(seen, reverse=True)
    assert names(q="n001") == [n for n in seen if "n001" in n]


def test_node_config_page_shows_merged_config_and_agent_state(client, viewer, hdd):
    ack(hdd, ["bj-1-n000"])
    client.force_login(viewer)
    html = unescape(client.get("/nodeconfig/nodes/bj-1/bj-1-n000/").content.decode())
    assert '"systemFreeMemoryThresholdMinimum": "20Gi"' in html  # the target's value
    assert '"enableReclaim": true' in html  # the type's default underneath
    assert f'href="/nodeconfig/targets/{hdd.pk}/"' in html and ">applied<" in html
    other = unescape(client.get("/nodeconfig/nodes/bj-1/bj-1-n001/").content.decode())
    assert '"systemFreeMemoryThresholdMinimum": "10Gi"' in other and "the type's default config" in other


# ---------------------------------------------------------------------------- permissions

def test_write_forms_refuse_viewers(client, viewer, hdd):
    emergency, _, _ = emergency_downgrade(cluster="sh-1", selector="", reason="incident")
    client.force_login(viewer)
    for path in (NEW, f"/nodeconfig/targets/{hdd.pk}/edit/", "/nodeconfig/import/"):
        assert client.get(path).status_code == 403, path
    posts = {
        NEW: form_data(),
        f"/nodeconfig/targets/{hdd.pk}/edit/": form_data(name="hdd"),
        f"/nodeconfig/targets/{hdd.pk}/rollback/": {"rollback-revision": "1", "rollback-reason": "x"},
        f"/nodeconfig/targets/{hdd.pk}/delete/": {"delete-reason": "x"},
        f"/nodeconfig/targets/{hdd.pk}/rollout/": {"rollout-action": "pause"},
        f"/nodeconfig/targets/{emergency.pk}/restore/": {"restore-reason": "x"},
        "/nodeconfig/import/": {"yaml": "kind: AdminQoSConfiguration"},
        EMERGENCY: {"scope": "fleet", "reason": "x", "confirm": "fleet"},
    }
    revisions = ConfigRevision.objects.count()
    for path, data in posts.items():
        assert client.post(path, data).status_code == 403, path
    assert ConfigRevision.objects.count() == revisions and ConfigTarget.objects.count() == 2


def test_action_urls_answer_only_post(client, operator, hdd):
    client.force_login(operator)
    assert client.get(f"/nodeconfig/targets/{hdd.pk}/rollback/").status_code == 405


# ---------------------------------------------------------------------------- writing

def test_operator_creates_a_target_through_the_form(client, operator, fleet, admin_qos):
    client.force_login(operator)
    assert client.get(NEW, {"type": "AdminQoSConfiguration"}).status_code == 200
    response = client.post(NEW, form_data())
    target = ConfigTarget.objects.get(name="ssd-a1")
    assert response.status_code == 302 and response["Location"] == f"/nodeconfig/targets/{target.pk}/"
    assert target.node_label_selector == "diskMode=ssd,machineModel=A1" and target.config == {
        "reclaimedResourceConfig": {"enableReclaim": False}}
    revision = target.revisions.get()
    assert revision.reason == "ssd A1 boxes" and revision.created_by == operator.username
    assert ObjectChange.objects.filter(actor=operator.username, source="ui").exists()
    page = client.get(response["Location"]).content.decode()
    assert "Created AdminQoSConfiguration/ssd-a1" in page


def test_node_list_mode_and_yaml_config(client, operator, fleet, admin_qos):
    client.force_login(operator)
    response = client.post(NEW, form_data(name="gray", mode="node_list", node_label_selector="ignored=1",
                                          node_names="bj-1-n001\nbj-1-n002, bj-1-n001", last_duration="72h",
                                          config="evictionConfig:\n  memoryPressureEvictionConfig:\n"
                                                 "    enableNumaLevelEviction: true\n"))
    assert response.status_code == 302, response.content.decode()
    target = ConfigTarget.objects.get(name="gray")
    assert target.node_names == ["bj-1-n001", "bj-1-n002"] and target.node_label_selector == ""
    assert target.config["evictionConfig"]["memoryPressureEvictionConfig"]["enableNumaLevelEviction"] is True


def test_a_refused_target_shows_the_reason_and_creates_nothing(client, operator, hdd):
    client.force_login(operator)
    count = ConfigTarget.objects.count()
    response = client.post(NEW, form_data(node_label_selector="diskMode=hdd,machineModel=A1"))
    html = response.content.decode()
    assert response.status_code == 200 and 'selector overlaps with target "hdd" at priority 0' in unescape(html)
    response = client.post(NEW, form_data(name="Bad_Name"))
    assert "Name must be a DNS subdomain" in response.content.decode()
    response = client.post(NEW, form_data(config="[1, 2"))
    assert "Invalid YAML at line 1, column" in response.content.decode()
    response = client.post(NEW, form_data(config='{"reclaimedResourceConfig": {"enableReclaim": "no"}}'))
    assert "is not of type" in response.content.decode()
    response = client.post(NEW, form_data(name="hdd", node_label_selector="diskMode=ssd"))
    assert "already exists" in response.content.decode()
    response = client.post(NEW, form_data(mode="node_list", node_names="bj-1-n005", last_duration=""))
    assert "a node list must expire" in response.content.decode()
    assert ConfigTarget.objects.count() == count


def test_preview_shows_matches_and_conflicts_without_saving(client, operator, hdd):
    client.force_login(operator)
    revisions = ConfigRevision.objects.count()
    data = form_data(node_label_selector="diskMode=hdd,machineModel=A1", preview="1")
    del data["save"]
    html = client.post(NEW, data).content.decode()
    assert '<strong id="preview-matched">2</strong>' in html  # bj-1-n000, sh-1-n000 (i % 12 == 0)
    assert "selector_overlap" in html and "Saving would be refused" in html
    html = client.post(NEW, data | {"node_label_selector": "diskMode=ssd"}).content.decode()
    assert '<strong id="preview-matched">12</strong>' in html and "No conflicts" in html
    assert "This target can be saved" in html and "/nodeconfig/nodes/bj-1/bj-1-n001/" in html
    assert ConfigRevision.objects.count() == revisions and not ConfigTarget.objects.filter(name="ssd-a1").exists()


def test_edit_creates_a_revision_and_keeps_the_identity(client, operator, hdd):
    client.force_login(operator)
    page = client.get(f"/nodeconfig/targets/{hdd.pk}/edit/").content.decode()
    assert "20Gi" in page and "diskMode=hdd" in page
    data = form_data(name="renamed", node_label_selector="diskMode=hdd", config='{"qrmPluginConfig": {}}',
                     reason="clear")
    response = client.post(f"/nodeconfig/targets/{hdd.pk}/edit/", data)
    assert response.status_code == 302
    hdd.refresh_from_db()
    assert hdd.name == "hdd" and hdd.config == {"qrmPluginConfig": {}} and hdd.revision.number == 2
    client.post(f"/nodeconfig/targets/{hdd.pk}/edit/", data)
    assert hdd.revisions.count() == 2, "an unchanged spec writes nothing"


def test_the_history_lists_revisions_with_hashes_and_offers_the_rollback(client, operator, hdd, admin_qos):
    save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}), reason="oops")
    hdd.refresh_from_db()
    client.force_login(operator)
    html = client.get(f"/nodeconfig/targets/{hdd.pk}/").content.decode()
    history = html[html.index('id="revisions"'):html.index("</section>", html.index('id="revisions"'))]
    assert history.count("<tr") == 3 and '<tr class="nc-current">' in history
    assert f"<code>{hdd.revision.config_hash}</code>" in history, "node config shows each revision's hash"
    assert 'href="?a=1&amp;b=2#diff"' in history
    assert f'action="/nodeconfig/targets/{hdd.pk}/rollback/#rollback"' in history


def test_rollback_through_the_form_creates_a_revision(client, operator, hdd, admin_qos):
    save_target(admin_qos, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}), reason="oops")
    client.force_login(operator)
    url = f"/nodeconfig/targets/{hdd.pk}/rollback/"
    response = client.post(url, {"rollback-revision": "1", "rollback-reason": ""})
    assert response.status_code == 200 and "This field is required" in response.content.decode()
    assert hdd.revisions.count() == 2
    response = client.post(url, {"rollback-revision": "1", "rollback-reason": "bring 20Gi back"})
    assert response.status_code == 302
    hdd.refresh_from_db()
    latest = hdd.revisions.first()
    assert (latest.number, latest.action, latest.rollback_of, latest.reason) == (3, "rollback", 1, "bring 20Gi back")
    assert hdd.config == HDD_CONFIG


def test_rollout_controls_pause_and_promote(client, operator, fleet, admin_qos):
    target = make_target(admin_qos, "global", node_label_selector="", config={}, wave_size="1")
    client.force_login(operator)
    url = f"/nodeconfig/targets/{target.pk}/rollout/"
    assert 'value="pause"' in client.get(f"/nodeconfig/targets/{target.pk}/").content.decode()
    client.post(url, {"rollout-action": "pause", "rollout-reason": "look first"})
    target.refresh_from_db()
    assert target.paused and target.rollout_state == "paused"
    client.post(url, {"rollout-action": "promote"})
    target.refresh_from_db()
    assert target.rollout_state == "complete" and progress(target)["delivered"] == 18
    assert client.post(url, {"rollout-action": "explode"}).status_code == 200


def visible(html: str, marker: str) -> bool:
    """Whether the element carrying ``marker`` (an attribute) is rendered without ``hidden``."""
    start = html.index(marker)
    return " hidden" not in html[start:html.index(">", start)]


def test_an_edit_of_a_paused_rollout_stays_paused_and_the_page_says_what_is_true(client, operator, fleet, admin_qos):
    """Journey 2: wave 1 fails, the rollout pauses itself, the body is fixed. The fix is a new
    revision that waits for Resume (a save does not release it), and the page after the save
    shows that revision (r2 with its delivery pending, not the r1 the reconciler last saw), the
    Resume button, and the matched nodes the reconciler counts once it has delivered."""
    from nodeconfig.rollout import advance_rollout

    target = make_target(admin_qos, wave_size="25%", failure_threshold_percent=2)
    wave = list(NodeConfig.objects.filter(target=target).values_list("node__name", flat=True))
    NodeConfig.objects.filter(target=target, node__name=wave[0]).update(error="failed to apply: bad threshold")
    ack(target, wave[1:])
    advance_rollout(target)
    target.refresh_from_db()
    assert target.rollout_state == "failed" and target.paused
    client.force_login(operator)
    html = client.get(f"/nodeconfig/targets/{target.pk}/").content.decode()
    assert visible(html, 'value="resume"') and not visible(html, 'value="pause"')

    fixed = HDD_CONFIG["evictionConfig"]["memoryPressureEvictionConfig"] | {"gracePeriod": 30}
    data = form_data(name="hdd", node_label_selector="diskMode=hdd", wave_size="25%", failure_threshold_percent="2",
                     config='{"evictionConfig": {"memoryPressureEvictionConfig": %s}}' % json.dumps(fixed),
                     reason="grace period for the HDD boxes")
    response = client.post(f"/nodeconfig/targets/{target.pk}/edit/", data, follow=True)
    html = response.content.decode()
    target.refresh_from_db()
    assert target.revision.number == 2 and target.paused and target.rollout_state == "paused"
    assert 'r<span data-nc-field="current_revision">2</span>' in html, "the page shows the revision just saved"
    assert visible(html, "data-nc-delivery") and visible(html, 'value="resume"') and not visible(html, 'value="pause"')
    settle(target)  # the delivery: nothing is released while paused, the failed wave keeps revision 1
    assert progress(target)["delivered"] == 0
    html = client.get(f"/nodeconfig/targets/{target.pk}/").content.decode()
    count = NodeConfig.objects.filter(matched_target=target).count()
    assert f'<span data-nc-field="matched_nodes">{count}</span>' in html and count == 6
    client.post(f"/nodeconfig/targets/{target.pk}/rollout/", {"rollout-action": "resume", "rollout-reason": "fixed"})
    target.refresh_from_db()
    assert not target.paused and target.rollout_state == "progressing" and progress(target)["delivered"] == 1


def test_delete_needs_a_reason(client, operator, hdd):
    client.force_login(operator)
    url = f"/nodeconfig/targets/{hdd.pk}/delete/"
    assert "This field is required" in client.post(url, {"delete-reason": ""}).content.decode()
    assert client.post(url, {"delete-reason": "hdd boxes retired"})["Location"] == "/nodeconfig/"
    hdd.refresh_from_db()
    assert hdd.deleted and hdd.revisions.first().reason == "hdd boxes retired"
    assert client.get(f"/nodeconfig/targets/{hdd.pk}/edit/").status_code == 302  # revive by rollback, not edit


def test_import_page(client, operator, fleet, admin_qos):
    client.force_login(operator)
    good = ("apiVersion: config.katalyst.kubewharf.io/v1alpha1\nkind: AdminQoSConfiguration\n"
            "metadata:\n  name: global\nspec:\n  config:\n    reclaimedResourceConfig:\n      enableReclaim: false\n")
    response = client.post("/nodeconfig/import/", {"yaml": good, "reason": "from git"})
    assert response.status_code == 302 and ConfigTarget.objects.filter(name="global").exists()
    bad = client.post("/nodeconfig/import/", {"yaml": "kind: [unclosed"}).content.decode()
    assert "not valid YAML" in bad
    unknown = client.post("/nodeconfig/import/", {"yaml": good.replace("AdminQoSConfiguration", "NopeConfiguration")})
    assert "is not registered" in unknown.content.decode()


# ---------------------------------------------------------------------------- emergency downgrade

def test_overview_offers_the_emergency_panel_to_operators_only(client, viewer, operator, fleet, admin_qos):
    client.force_login(viewer)
    assert "emergency-form" not in client.get("/").content.decode()
    client.force_login(operator)
    html = client.get("/").content.decode()
    assert 'id="emergency-form"' in html and f'action="{EMERGENCY}"' in html and "data-confirm-scope" in html
    target, _, _ = emergency_downgrade(cluster=None, selector="", reason="incident")
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert "emergency-downgrade-fleet" in html and f'data-live-topic="nodeconfig-target-{target.pk}"' in html
    assert "emergency-form" not in html


def test_the_emergency_form_needs_the_scope_typed_and_makes_one_target(client, operator, fleet, admin_qos, deliver):
    client.force_login(operator)
    body = {"scope": "fleet", "reason": "reclaim hurts latency", "confirm": "DOWNGRADE"}
    response = client.post(EMERGENCY, body)
    assert response.status_code == 200 and "Type fleet, the name of the scope you chose" in response.content.decode()
    assert not ConfigTarget.objects.filter(emergency=True).exists()
    assert "Choose the cluster" in client.post(EMERGENCY, body | {"scope": "cluster", "confirm": "bj-1"}).content.decode()
    wrong = client.post(EMERGENCY, body | {"scope": "cluster", "cluster": "bj-1", "confirm": "sh-1"}).content.decode()
    assert "Type bj-1, the name of the scope you chose" in wrong, "another cluster's name does not confirm this one"
    assert not ConfigTarget.objects.filter(emergency=True).exists()
    with deliver():
        response = client.post(EMERGENCY, body | {"confirm": "fleet"})
        target = ConfigTarget.objects.get(emergency=True)
        assert response.status_code == 302 and response["Location"] == f"/nodeconfig/targets/{target.pk}/"
        pending = client.get(response["Location"]).content.decode()
        assert "delivery pending" in pending and 'data-nc-delivery hidden' not in pending  # before its job ran
    assert NodeConfig.objects.filter(target=target).count() == 18  # written by its delivery job
    assert client.post(EMERGENCY, body | {"confirm": "fleet"}).status_code == 302
    assert ConfigTarget.objects.filter(emergency=True).count() == 1, "a double click is one downgrade"
    page = client.get(response["Location"]).content.decode()
    assert "Emergency downgrade active" in page and 'id="restore-form"' in page
    assert '<span data-count="targeted">18</span>' in page and "data-nc-delivery hidden" in page


def test_emergency_scope_by_cluster_and_selector(client, operator, fleet, admin_qos, deliver):
    client.force_login(operator)
    base = {"reason": "incident"}
    client.post(EMERGENCY, base | {"scope": "cluster", "cluster": "sh-1", "selector": "pool=online", "confirm": "sh-1"})
    target = ConfigTarget.objects.get(emergency=True)
    assert target.cluster.name == "sh-1" and target.node_label_selector == ""
    with deliver():
        client.post(EMERGENCY, base | {"scope": "selector", "cluster": "bj-1", "selector": "pool=online", "confirm": "pool=online"})
    selector = ConfigTarget.objects.get(emergency=True, node_label_selector="pool=online")
    assert selector.cluster.name == "bj-1" and NodeConfig.objects.filter(target=selector).count() == 6
    bad = client.post(EMERGENCY, base | {"scope": "selector", "selector": "pool in (online", "confirm": "pool in (online"})
    assert bad.status_code == 200 and "does not parse" in bad.content.decode()


def test_restore_through_the_detail_page(client, operator, hdd, deliver):
    with deliver():
        target, _, _ = emergency_downgrade(cluster=None, selector="", reason="incident")
    assert NodeConfig.objects.filter(target=target).count() == 18
    client.force_login(operator)
    url = f"/nodeconfig/targets/{target.pk}/restore/"
    assert "This field is required" in client.post(url, {"restore-reason": ""}).content.decode()
    with deliver():
        assert client.post(url, {"restore-reason": "latency is fine"}).status_code == 302
    assert not NodeConfig.objects.filter(target=target).exists()
    assert NodeConfig.objects.get(node__name="bj-1-n000").target_id == hdd.pk
    # The restore is watched like the downgrade: the nodes it moved back, acknowledged as their
    # agents apply their regular config again (it used to show "0 of 0").
    restoring = progress(ConfigTarget.objects.get(pk=target.pk))
    assert (restoring["targeted"], restoring["applied"], restoring["pending"], restoring["delivery"]) == (6, 0, 6, "delivered")
    assert restoring["default"] == 12, "of the 18 nodes, 12 had no regular target: they run the type's default"
    page = unescape(client.get(f"/nodeconfig/targets/{target.pk}/").content.decode())
    assert '<span data-count="targeted">6</span>' in page and "Restore progress" in page
    assert "12 nodes have no regular target" in page
    simulate_agents(now=4_000_000_000.0)
    restored = progress(ConfigTarget.objects.get(pk=target.pk))
    assert restored["applied"] + restored["failed"] == 6 and restored["applied"] > 0
    change = ObjectChange.objects.filter(object_id=str(target.pk), action="delete").get()
    assert change.verb == "restore" and change.reason == "latency is fine"
    assert client.post(f"/nodeconfig/targets/{hdd.pk}/restore/", {"restore-reason": "x"}).status_code == 404
