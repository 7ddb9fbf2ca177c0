"""The federation pages as people use them: everyone reads, only the permitted write; every
refusal comes back on the field it is about with nothing changed; the water-level dashboard
costs a fixed number of queries whatever the fleet size; the what-if commits nothing."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
import yaml
from django.apps import apps
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.models import ObjectChange
from federation import services
from federation.models import (
    FederatedObject,
    FederatedRevision,
    MemberObject,
    OverridePolicy,
    PropagationPolicy,
    WaterLevelSample,
)
from federation.reconcile import reconcile_object
from federation.water import record_samples
from fleet.models import Cluster
from tests.pages import html

from .conftest import deployment

pytestmark = pytest.mark.django_db

INDEX, NEW, POLICIES, WATER, WATER_JSON, WHAT_IF = (
    "/federation/", "/federation/objects/new/", "/federation/policies/", "/federation/water-levels/",
    "/federation/water-levels.json", "/federation/what-if/")


def detail(fed) -> str:
    return f"/federation/objects/{fed.pk}/"


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def placed(fed_or_policy="/spread", **kwargs) -> FederatedObject:
    """A deployment submitted and reconciled once (scheduled, applied, observed)."""
    fed, _ = services.submit(deployment(**kwargs), propagation_policy=fed_or_policy)
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    return fed


@pytest.fixture
def web(fleet3, spread_policy) -> FederatedObject:
    return placed(replicas=30)


def row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_app_config("federation").get_models()}


# ---------------------------------------------------------------------------- reading


def test_every_page_renders_for_a_viewer_without_write_controls(client, viewer, web, spread_policy):
    record_samples()
    client.force_login(viewer)
    pages = {
        INDEX: ["web", "Ready", f'data-object-id="{web.pk}"'],
        detail(web): ["Member clusters", "bj-1", "Placement", "Filter (", "replicas: 30", "Revisions"],
        NEW: None,
        POLICIES: ["spread", "Objects using it"],
        f"/federation/policies/propagation/{spread_policy.pk}/": ["schedulingMode: Divide", web.key],
        WATER: ['id="fed-water-data"', "bj-1", "vendor/plotly/plotly.min.js"],
        WHAT_IF: None,
        "/federation/policies/propagation/new/": None,
    }
    for url, expected in pages.items():
        response = client.get(url)
        if expected is None:
            assert response.status_code == 403, f"{url}: viewers may not submit (a what-if needs the role to add)"
            continue
        assert response.status_code == 200, url
        page = html(response)
        for text in expected:
            assert text in page, f"{url}: {text!r} missing"
        for control in ("template-edit", "rollout-form", "reschedule-form", "delete-form", 'name="rollback-revision"',
                        "fed-submit-link", "new-propagation-policy", "policy-form", "policy-delete-form",
                        "data-cordon=", "fed-cordon-dialog", "fed-whatif-link"):
            assert control not in page, f"{url} shows {control!r} to a viewer"
    assert client.get(f"/federation/clusters/{web.members.first().cluster.name}/cordon/").status_code == 403
    assert json.loads(client.get(WATER_JSON).content)["clusters"] == ["bj-1", "gz-1", "sh-1"]


def test_the_detail_page_explains_the_placement_and_shows_each_member(client, viewer, web):
    client.force_login(viewer)
    response = client.get(detail(web))
    members = {row["cluster"]: row for row in response.context["members"]}
    assert set(members) == set(web.placement) and sum(r["scheduled"] for r in members.values()) == 30
    for row in members.values():
        assert row["state"] == "applied" and row["updated"] == row["scheduled"] == row["available"]
        assert row["updated_pct"] == row["available_pct"] == "100.0"
    placement = {row["cluster"]: row for row in response.context["placement"]}
    assert {n for n, r in placement.items() if r["outcome"] == "placed"} == set(web.placement)
    assert all(r["score"] is not None and r["weight"] for r in placement.values())
    page = html(response)
    assert "dynamic, from water levels" in page and "Result: " in page
    assert f"federation-object-{web.pk}" in page.split("data-topics=")[1].split(">")[0]

    member = MemberObject.objects.get(object=web, cluster__name="gz-1")
    member.state, member.error, member.attempts = MemberObject.State.ERROR, "unreachable: connection refused", 3
    member.next_retry = timezone.now() + timedelta(seconds=8)
    member.save()
    row = html(client.get(detail(web))).split('data-cluster="gz-1"')[1].split("</tr>")[0]
    assert "unreachable: connection refused" in row and "3 failed attempts" in row and "next retry" in row

    live = client.get(detail(web) + "?fragment=live")
    assert live.status_code == 200 and 'id="fed-members"' in html(live) and 'id="fed-summary"' in html(live)
    assert "<html" not in html(live) and "Revisions" not in html(live), "the live fragment is small"


def test_the_index_filters_and_counts_by_phase(client, viewer, fleet3, spread_policy):
    web = placed(replicas=6)
    other = placed(name="api", namespace="ops", replicas=3)
    pending, _ = services.submit(deployment(name="queued", replicas=2), propagation_policy="/spread")
    client.force_login(viewer)
    response = client.get(INDEX)
    counts = {c["phase"]: c["count"] for c in response.context["phase_counts"]}
    assert counts["Ready"] == 2 and counts["Pending"] == 1 and response.context["total"] == 3
    assert [o.pk for o in client.get(INDEX, {"namespace": "ops"}).context["objects"]] == [other.pk]
    assert [o.pk for o in client.get(INDEX, {"phase": "Pending"}).context["objects"]] == [pending.pk]
    assert {o.pk for o in client.get(INDEX, {"kind": "Deployment", "phase": "Ready"}).context["objects"]} == {web.pk, other.pk}
    row = next(o for o in response.context["objects"] if o.pk == web.pk)
    assert (row.ready_count, row.desired_count) == (6, 6)
    assert sum(int(r) for _, r in row.clusters_shown) == 6
    fragment = client.get(INDEX, {"phase": "Ready", "fragment": "live"})
    assert 'id="fed-objects"' in html(fragment) and "queued" not in html(fragment)


def test_anonymous_visitors_are_sent_to_login(client, web, spread_policy):
    for url in (INDEX, detail(web), NEW, POLICIES, f"/federation/policies/propagation/{spread_policy.pk}/", WATER,
                WATER_JSON, WHAT_IF, "/federation/clusters/bj-1/cordon/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
    before = FederatedRevision.objects.count()
    client.post(f"{detail(web)}rollback/", {"rollback-revision": "1", "rollback-change_cause": "x"})
    client.post("/federation/clusters/bj-1/cordon/", {"action": "drain", "reason": "x"})
    assert FederatedRevision.objects.count() == before and not Cluster.objects.filter(cordoned=True).exists()


# ---------------------------------------------------------------------------- objects


def test_an_operator_submits_an_object_through_the_form(client, operator, fleet3, spread_policy):
    client.force_login(operator)
    form = client.get(NEW)
    assert form.status_code == 200 and "/spread" in html(form)
    response = client.post(NEW, {"object": yaml.safe_dump(deployment(name="shop-web", replicas=9)),
                                 "propagation_policy": "/spread", "override_policy": "", "change_cause": "first"})
    fed = FederatedObject.objects.get(name="shop-web")
    assert response.status_code == 302 and response["Location"] == detail(fed)
    assert fed.propagation_policy == spread_policy and fed.revisions.get().reason == "first"
    assert "Submitted" in messages_of(response)[-1]
    assert ObjectChange.objects.filter(object_id=str(fed.pk), action="create").exists()


def test_submit_errors_are_shown_on_the_form_and_nothing_is_saved(client, operator, fleet3, spread_policy):
    client.force_login(operator)
    broken = client.post(NEW, {"object": "kind: Deployment\nmetadata: {name: x\n", "propagation_policy": "/spread"})
    assert broken.status_code == 200
    assert re.search(r"Invalid YAML at line \d+, column \d+", str(broken.context["form"].errors["object"]))

    bad = deployment(name="Bad_Name", replicas=-1)
    refused = client.post(NEW, {"object": yaml.safe_dump(bad), "propagation_policy": "/spread"})
    errors = " ".join(refused.context["form"].errors["object"])
    assert "object.metadata.name: must be a DNS subdomain" in errors and "object.spec.replicas: must be a non-negative" in errors
    assert "Bad_Name" in html(refused), "what was typed is kept"

    unknown = client.post(NEW, {"object": yaml.safe_dump(deployment()), "propagation_policy": "/nope"})
    assert "propagation_policy" in unknown.context["form"].errors

    PropagationPolicy.objects.create(namespace="team", name="mine", spec={})
    foreign = client.post(NEW, {"object": yaml.safe_dump(deployment()), "propagation_policy": "team/mine"})
    assert "belongs to namespace 'team'" in foreign.context["form"].errors["propagation_policy"][0]

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop"}}
    assert "cannot be federated" in str(client.post(NEW, {"object": yaml.dump(pod)}).context["form"].errors["object"])
    assert not FederatedObject.objects.exists() and not FederatedRevision.objects.exists()


@pytest.mark.parametrize("depth", [10_000, 900, 150])
def test_deeply_nested_yaml_is_a_form_error_never_a_500(client, operator, web, spread_policy, depth):
    """Regression: YAML nested hundreds of levels crashed the recursive parser (or a later
    recursion) into a 500 on every page that takes YAML."""
    client.force_login(operator)
    client.raise_request_exception = False
    deep = "[" * depth + "1" + "]" * depth
    template = yaml.safe_dump(web.template) + f"extra: {deep}\n"
    posts = [
        (NEW, {"object": template, "propagation_policy": "/spread"}, "form", "object"),
        (f"{detail(web)}edit/", {"edit-template": template, "edit-change_cause": "deep"}, "edit_form", "template"),
        (WHAT_IF, {"object": template, "policy": "/spread"}, "form", "object"),
        (WHAT_IF, {"object": yaml.safe_dump(deployment()), "policy_spec": f"placement: {deep}"}, "form", "policy_spec"),
        ("/federation/policies/propagation/new/", {"name": "deep", "spec": f"placement: {deep}"}, "form", "spec"),
        (f"/federation/policies/propagation/{spread_policy.pk}/", {"spec": f"placement: {deep}"}, "form", "spec"),
    ]
    before = row_counts()
    for url, data, form, field in posts:
        response = client.post(url, data)
        assert response.status_code == 200, (url, response.status_code)
        assert "levels deep" in " ".join(response.context[form].errors[field]), (url, response.context[form].errors)
    assert row_counts() == before and FederatedObject.objects.get(pk=web.pk).revision == 1


def test_the_live_part_carries_unavailable_vs_budget_and_the_placement(client, viewer, fleet3, spread_policy):
    fed = placed(replicas=40, max_surge=2, max_unavailable="10%")
    client.force_login(viewer)
    live = html(client.get(detail(fed) + "?fragment=live"))
    summary = client.get(detail(fed)).context["summary"]
    available = fed.status["availableReplicas"]
    assert (summary["budget"], summary["surge_budget"]) == (4, 2), "10% of 40 rounded down, surge as written"
    assert summary["unavailable"] == 40 - available
    assert f'data-unavailable="{40 - available}" data-budget="4"' in live
    assert f"{40 - available} unavailable of 4 allowed" in live
    assert 'id="placement"' in live, "the placement table is re-rendered live too"
    for name, replicas in fed.placement.items():
        row = live.split(f'<tr data-cluster="{name}" class="fed-outcome-placed')[1].split("</tr>")[0]
        assert f'<td class="fed-num">{replicas}' in row

    # Scaled down: the next pass's placement is what the live part shows, only stops.
    before = dict(fed.placement)
    template = dict(fed.template, spec=dict(fed.template["spec"], replicas=20))
    services.submit(template)
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    assert sum(fed.placement.values()) == 20 and all(fed.placement.get(n, 0) <= r for n, r in before.items())
    live = html(client.get(detail(fed) + "?fragment=live"))
    for name, replicas in fed.placement.items():
        assert f'<td class="fed-num">{replicas}' in live.split(f'<tr data-cluster="{name}" class="fed-outcome-placed')[1]
    assert 'data-budget="2"' in live, "the budget follows the desired total"


def test_two_template_revisions_are_compared_on_the_object_page(client, viewer, web):
    template = json.loads(json.dumps(web.template))
    template["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    services.submit(template, change_cause="bump")
    client.force_login(viewer)
    page = client.get(detail(web))
    assert 'id="diff-form"' in html(page) and page.context["diff"] is None
    response = client.get(detail(web) + "?a=1&b=2")
    changes = response.context["diff"]["changes"]
    assert [c["path"] for c in changes] == ["template.spec.template.spec.containers"], "lists compare whole"
    assert '"image": "nginx:1.27"' in changes[0]["old_text"] and '"image": "nginx:1.28"' in changes[0]["new_text"]
    assert "Changes from r1 to r2" in html(response) and "nginx:1.28" in html(response).split('id="diff"')[1]
    bad = client.get(detail(web) + "?a=1&b=9")
    assert bad.status_code == 200 and bad.context["diff"] is None and 'role="alert"' in html(bad).split('id="diff-form"')[1]


def test_editing_the_template_makes_a_revision_and_rollback_restores_it(client, operator, web):
    client.force_login(operator)
    page = client.get(detail(web))
    assert 'id="template-edit"' in html(page)
    template = yaml.safe_load(page.context["edit_form"]["template"].value())
    template["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    response = client.post(f"{detail(web)}edit/", {"edit-template": yaml.safe_dump(template), "edit-change_cause": "bump"})
    assert response.status_code == 302 and "Saved revision 2" in messages_of(response)[-1]
    web.refresh_from_db()
    assert web.revision == 2 and web.revisions.get(number=2).reason == "bump"

    same = client.post(f"{detail(web)}edit/", {"edit-template": yaml.safe_dump(web.template), "edit-change_cause": ""})
    assert "did not change" in messages_of(same)[-1]

    renamed = dict(template, metadata=dict(template["metadata"], name="other"))
    refused = client.post(f"{detail(web)}edit/", {"edit-template": yaml.safe_dump(renamed)})
    assert refused.status_code == 200 and "must stay Deployment shop/web" in str(refused.context["edit_form"].errors)
    negative = json.loads(json.dumps(template))
    negative["spec"]["replicas"] = -3
    refused = client.post(f"{detail(web)}edit/", {"edit-template": yaml.safe_dump(negative)})
    assert "object.spec.replicas: must be a non-negative integer" in str(refused.context["edit_form"].errors["template"])
    assert FederatedObject.objects.get(pk=web.pk).revision == 2 and not FederatedObject.objects.filter(name="other").exists()

    page = client.get(detail(web))
    assert 'name="rollback-revision" value="1"' in html(page) and 'name="rollback-revision" value="2"' not in html(page)
    assert 'name="rollback-change_cause" id="rollback-cause-1" required' in html(page), "each rollback asks why"
    unexplained = client.post(f"{detail(web)}rollback/", {"rollback-revision": "1", "rollback-change_cause": ""})
    assert unexplained.status_code == 200 and "change_cause" in unexplained.context["rollback_form"].errors
    assert 'id="rollback-errors"' in html(unexplained) and "This field is required." in html(unexplained)
    assert FederatedObject.objects.get(pk=web.pk).revision == 2, "a rollback needs a reason"
    rolled = client.post(f"{detail(web)}rollback/", {"rollback-revision": "1", "rollback-change_cause": "bad image"})
    assert rolled.status_code == 302 and "Rolled back to revision 1 as new revision 3" in messages_of(rolled)[-1]
    web.refresh_from_db()
    assert web.revision == 3 and web.template["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert web.revisions.get(number=3).reason == "bad image" and web.revisions.get(number=3).rollback_of == 1
    again = client.post(f"{detail(web)}rollback/", {"rollback-revision": "3", "rollback-change_cause": "again"})
    assert again.status_code == 200 and "is what runs now" in html(again)
    assert FederatedObject.objects.get(pk=web.pk).revision == 3


def test_pause_resume_reschedule_and_delete(client, operator, web):
    client.force_login(operator)
    paused = client.post(f"{detail(web)}rollout/", {"pause-reason": "hold on", "action": "pause"})
    assert paused.status_code == 302 and messages_of(paused) == ["Rollout paused."]
    assert FederatedObject.objects.get(pk=web.pk).rollout_paused
    page = html(client.get(detail(web)))
    assert 'value="resume"' in page and 'value="pause"' not in page
    assert ObjectChange.objects.filter(object_id=str(web.pk), verb="pause", reason="hold on").exists()
    resumed = client.post(f"{detail(web)}rollout/", {"pause-reason": "", "action": "resume"})
    assert messages_of(resumed)[-1] == "Rollout resumed." and not FederatedObject.objects.get(pk=web.pk).rollout_paused

    client.post(f"{detail(web)}reschedule/", {"reschedule-reason": "new rack in gz-1"})
    assert FederatedObject.objects.get(pk=web.pk).schedule_digest == ""
    assert ObjectChange.objects.filter(object_id=str(web.pk), verb="reschedule", reason="new rack in gz-1").exists()

    wrong = client.post(f"{detail(web)}delete/", {"delete-confirm": "nope"})
    assert wrong.status_code == 200 and "Type web exactly" in html(wrong)
    assert not FederatedObject.objects.get(pk=web.pk).deleting
    deleted = client.post(f"{detail(web)}delete/", {"delete-confirm": "web"})
    assert deleted.status_code == 302 and deleted["Location"] == INDEX
    web.refresh_from_db()
    assert web.deleting and web.phase == "Deleting"
    assert 'id="template-edit"' not in html(client.get(detail(web))), "no edits while it is being deleted"


def test_viewers_cannot_post_writes(client, viewer, web):
    client.force_login(viewer)
    for action, data in (("edit", {"edit-template": yaml.safe_dump(web.template)}), ("rollout", {"action": "pause"}),
                         ("rollback", {"rollback-revision": "1", "rollback-change_cause": "x"}), ("reschedule", {}),
                         ("delete", {"delete-confirm": "web"})):
        assert client.post(f"{detail(web)}{action}/", data).status_code == 403, action
    assert client.post(NEW, {"object": yaml.safe_dump(deployment(name="x"))}).status_code == 403
    web.refresh_from_db()
    assert not web.rollout_paused and not web.deleting and web.revision == 1


# ---------------------------------------------------------------------------- policies


def test_policy_create_shows_spec_errors_and_saves_nothing(client, operator, db):
    client.force_login(operator)
    spec = "schedulingMode: Divide\nplacement:\n- cluster: bj-1\n  preferences: {minReplicas: 5, maxReplicas: 2}\n"
    response = client.post("/federation/policies/propagation/new/",
                           {"namespace": "shop", "name": "web-spread", "description": "", "spec": spec})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "spec.placement[0].preferences.minReplicas: minReplicas (5) exceeds maxReplicas (2)" in errors["spec"]
    assert "web-spread" in html(response) and "maxReplicas: 2" in html(response), "what was typed is kept"

    names = client.post("/federation/policies/propagation/new/", {"namespace": "Shop", "name": "Bad Name", "spec": "{}"})
    assert set(names.context["form"].errors) == {"namespace", "name"}
    unknown = client.post("/federation/policies/propagation/new/", {"namespace": "", "name": "x", "spec": "speed: fast"})
    assert "spec.speed: unknown field" in unknown.context["form"].errors["spec"]
    invalid = client.post("/federation/policies/override/new/", {"name": "o", "spec": "overrideRules: [1, 2"})
    assert "Invalid YAML at line" in str(invalid.context["form"].errors["spec"])
    assert not PropagationPolicy.objects.exists() and not OverridePolicy.objects.exists()

    created = client.post("/federation/policies/propagation/new/",
                          {"namespace": "shop", "name": "web-spread", "description": "two regions",
                           "spec": "schedulingMode: Divide\nmaxClusters: 2\n"})
    policy = PropagationPolicy.objects.get(name="web-spread")
    assert created.status_code == 302 and created["Location"] == f"/federation/policies/propagation/{policy.pk}/"
    assert policy.spec == {"schedulingMode": "Divide", "maxClusters": 2} and policy.description == "two regions"
    override = client.post("/federation/policies/override/new/", {
        "namespace": "", "name": "images", "spec": yaml.safe_dump({"overrideRules": [{
            "targetClusters": {"clusters": ["bj-1"]},
            "overriders": {"jsonpatch": [{"operator": "replace", "path": "/spec/replicas", "value": 1}]}}]})})
    assert override.status_code == 302 and OverridePolicy.objects.get(name="images").spec["overrideRules"]


def test_policy_edit_and_delete_refused_while_in_use(client, operator, web, spread_policy):
    client.force_login(operator)
    url = f"/federation/policies/propagation/{spread_policy.pk}/"
    page = client.get(url)
    assert 'id="policy-form"' in html(page) and page.context["used_count"] == 1
    refused = client.post(url, {"description": "", "spec": "maxClusters: -1"})
    assert "spec.maxClusters: must not be negative" in refused.context["form"].errors["spec"]
    assert PropagationPolicy.objects.get(pk=spread_policy.pk).spec == {"schedulingMode": "Divide"}
    saved = client.post(url, {"namespace": "ignored", "name": "ignored", "description": "everywhere",
                              "spec": "schedulingMode: Duplicate"})
    assert saved.status_code == 302
    spread_policy.refresh_from_db()
    assert (spread_policy.name, spread_policy.namespace, spread_policy.spec) == ("spread", "", {"schedulingMode": "Duplicate"})

    listing = client.get(POLICIES)
    row = next(r.record for s in listing.context["sections"] if s["kind"] == "propagation" for r in s["table"].shown_rows)
    assert row.used == 1
    delete = client.post(f"{url}delete/")
    assert delete.status_code == 302 and "still used by web" in messages_of(delete)[-1]
    assert PropagationPolicy.objects.filter(pk=spread_policy.pk).exists()
    unused = PropagationPolicy.objects.create(name="unused", spec={})
    gone = client.post(f"/federation/policies/propagation/{unused.pk}/delete/")
    assert gone["Location"] == POLICIES and not PropagationPolicy.objects.filter(pk=unused.pk).exists()
    assert client.get("/federation/policies/nonsense/new/").status_code == 404


@pytest.mark.parametrize("post", [
    {},
    {"description": "", "spec": ""},
    {"description": "now empty", "spec": "   \n"},
    {"namespace": "", "name": "spread", "description": "", "spec": ""},
])
def test_an_empty_form_post_to_a_policy_page_changes_nothing(client, operator, web, spread_policy, post):
    """Regression: an empty spec field was read as ``{}`` and saved, wiping the policy (and
    rescheduling every object using it onto every cluster). An empty field is refused now;
    ``{}`` typed on purpose is still an empty spec."""
    spread_policy.description = "fleet-wide spread"
    spread_policy.save()
    client.force_login(operator)
    url = f"/federation/policies/propagation/{spread_policy.pk}/"
    audit = ObjectChange.objects.count()
    response = client.post(url, post)
    assert response.status_code == 200 and "spec" in response.context["form"].errors
    assert response.context["form"].errors["spec"] == ["This field is required."]
    spread_policy.refresh_from_db()
    assert spread_policy.spec == {"schedulingMode": "Divide"} and spread_policy.description == "fleet-wide spread"
    assert ObjectChange.objects.count() == audit and FederatedObject.objects.get(pk=web.pk).schedule_digest

    emptied = client.post(url, {"description": "", "spec": "{}"})
    assert emptied.status_code == 302
    spread_policy.refresh_from_db()
    assert spread_policy.spec == {}, "{} typed on purpose is an empty spec"


def test_a_stale_policy_form_is_refused_and_keeps_what_was_typed(client, operator, spread_policy):
    client.force_login(operator)
    url = f"/federation/policies/propagation/{spread_policy.pk}/"
    version = client.get(url).context["form"]["version"].value()
    assert version
    PropagationPolicy.objects.filter(pk=spread_policy.pk).update(spec={"schedulingMode": "Duplicate"})
    stale = client.post(url, {"description": "mine", "spec": "maxClusters: 2", "version": version})
    assert stale.status_code == 200 and "changed since you read it" in str(stale.context["form"].errors)
    assert "maxClusters: 2" in html(stale)
    assert PropagationPolicy.objects.get(pk=spread_policy.pk).spec == {"schedulingMode": "Duplicate"}


# ---------------------------------------------------------------------------- water levels


def test_cordon_drain_and_uncordon_through_the_dashboard(client, operator, web):
    record_samples()
    client.force_login(operator)
    page = html(client.get(WATER))
    assert 'data-cordon="drain" href="/federation/clusters/bj-1/cordon/?action=drain"' in page
    assert 'id="fed-cordon-dialog"' in page

    missing = client.post("/federation/clusters/bj-1/cordon/", {"action": "drain", "reason": ""})
    assert missing.status_code == 200 and "reason" in missing.context["form"].errors
    assert not Cluster.objects.filter(cordoned=True).exists()

    drained = client.post("/federation/clusters/bj-1/cordon/", {"action": "drain", "reason": "kernel upgrade"})
    assert drained.status_code == 302 and drained["Location"] == f"{WATER}#cluster-bj-1"
    state = Cluster.objects.get(name="bj-1")
    assert state.cordoned and state.drain and state.cordon_reason == "kernel upgrade"
    assert state.cordoned_by == operator.username and state.cordoned_at is not None
    assert FederatedObject.objects.get(pk=web.pk).schedule_digest == "", "its objects are rescheduled"
    since = html(client.get("/federation/clusters/bj-1/cordon/")).split('id="cordon-state">')[1].split("</p>")[0]
    assert f"by {operator.username}: kernel upgrade" in since, since
    levels = client.get(WATER)
    assert '<tr id="cluster-bj-1" data-cluster="bj-1" data-state="draining">' in html(levels)
    assert levels.context["payload"]["state"][0] == "draining"
    assert levels.context["payload"]["weight"][0] == 0, "a draining cluster takes no weight"
    cordons = html(levels).split('id="fed-cordons"')[1].split("</ul>")[0]
    assert '<li data-cluster="bj-1"><a href="#cluster-bj-1">bj-1</a>: draining' in cordons
    assert f"{operator.username} · {state.cordoned_at:%Y-%m-%d %H:%M} — kernel upgrade" in cordons, cordons

    client.post("/federation/clusters/bj-1/cordon/", {"action": "cordon", "reason": "done draining"})
    state.refresh_from_db()
    assert state.cordoned and not state.drain and state.cordon_reason == "done draining"
    uncordoned = client.post("/federation/clusters/bj-1/cordon/", {"action": "uncordon", "reason": "back"})
    assert "Uncordoned bj-1" in messages_of(uncordoned)[-1] and not Cluster.objects.filter(cordoned=True).exists()
    again = client.post("/federation/clusters/bj-1/cordon/", {"action": "uncordon", "reason": "back"})
    assert "was not cordoned" in messages_of(again)[-1]
    assert ObjectChange.objects.filter(verb="drain", reason="kernel upgrade").exists()
    assert client.get("/federation/clusters/nope/cordon/").status_code == 404


def test_draining_from_the_fleet_cluster_page_reschedules_what_runs_there(client, operator, web):
    from core.models import Job
    from federation.reconcile import RECONCILE_TASK

    name = next(iter(web.placement))
    client.force_login(operator)
    page = client.get(f"/fleet/clusters/{name}/")
    assert 'id="cordon-form"' in html(page)
    drained = client.post(f"/fleet/clusters/{name}/cordon/", {"cordon-action": "drain", "cordon-reason": "rack move",
                                                             "cordon-version": page.context["cordon_form"]["version"].value()})
    assert drained.status_code == 302
    assert FederatedObject.objects.get(pk=web.pk).schedule_digest == "", "its objects are scheduled afresh"
    assert Job.objects.filter(kind=RECONCILE_TASK, task_args__0=web.pk, status=Job.Status.PENDING).exists()
    reconcile_object(web.pk)
    web.refresh_from_db()
    assert name not in web.placement and sum(web.placement.values()) == 30
    assert 'data-state="draining"' in html(client.get(WATER))


#: One clock for every sample pass, as ``water.record_samples`` writes all clusters at one time.
SAMPLED_AT = timezone.now()


def bare_clusters(count: int, start: int = 0) -> None:
    """Clusters with only water-level columns (no nodes), and an hour of samples each."""
    Cluster.objects.bulk_create([
        Cluster(name=f"bare-{i:03d}", connector="simulated", ready=i % 7 != 0, cpu_allocatable_milli=64_000 * (1 + i % 4),
                cpu_requested_milli=1_000 * i, memory_allocatable_bytes=2**38, memory_requested_bytes=2**30 * i,
                gpu_allocatable=8 * (i % 2), gpu_requested=i % 3)
        for i in range(start, start + count)])
    WaterLevelSample.objects.bulk_create([
        WaterLevelSample(cluster=c, at=SAMPLED_AT - timedelta(minutes=m), cpu_allocatable_milli=c.cpu_allocatable_milli,
                         cpu_requested_milli=c.cpu_requested_milli, weight=10)
        for c in Cluster.objects.filter(name__startswith="bare-")[start:] for m in range(0, 60, 10)])


def test_the_water_level_page_issues_a_bounded_number_of_queries(client, admin_user, django_assert_max_num_queries):
    client.force_login(admin_user)
    bare_clusters(3)
    Cluster.objects.filter(name="bare-001").update(cordoned=True, drain=True, cordon_reason="test")
    with CaptureQueriesContext(connection) as small:
        first = client.get(WATER)
    assert first.status_code == 200 and first.context["payload"]["history"]["series"]
    bare_clusters(50, start=3)
    with django_assert_max_num_queries(len(small.captured_queries)):
        response = client.get(WATER)
    assert response.context["cluster_count"] == 53 and html(response).count('<tr id="cluster-') == 53
    assert 'data-state="draining"' in html(response) and len(response.context["payload"]["history"]["series"]) == 53
    with CaptureQueriesContext(connection) as small_json:
        client.get(WATER_JSON)
    bare_clusters(20, start=53)
    with django_assert_max_num_queries(len(small_json.captured_queries)):
        data = json.loads(client.get(WATER_JSON, {"hours": 6}).content)
    assert len(data["clusters"]) == 73 and data["hours"] == 6 and len(data["history"]["series"]) == 73
    assert data["resources"]["cpu"]["deploy_rate"][1] == pytest.approx(100 * 1 / 128, abs=0.1)


def test_a_big_fleet_page_leaves_the_history_to_the_json_endpoint(client, viewer, monkeypatch):
    from federation import views

    monkeypatch.setattr(views, "HISTORY_EMBED_SAMPLES", 10)
    bare_clusters(5)
    client.force_login(viewer)
    page = client.get(WATER)
    assert page.context["payload"]["history"] is None
    data = json.loads(client.get(WATER_JSON).content)
    assert set(data["history"]["series"]) == {f"bare-{i:03d}" for i in range(5)}
    series = data["history"]["series"]["bare-002"]
    assert len(series["t"]) == 6 and series["cpu"][0] == pytest.approx(100 * 2 / 192, abs=0.1)


# ---------------------------------------------------------------------------- what-if


def test_the_what_if_places_a_workload_and_commits_nothing(client, viewer, operator, fleet3, spread_policy):
    record_samples()
    client.force_login(viewer)
    trial = {"object": yaml.safe_dump(deployment(name="trial", replicas=2)), "policy": "/spread", "policy_spec": ""}
    assert client.get(WHAT_IF).status_code == 403 and client.post(WHAT_IF, trial).status_code == 403, \
        "a preview needs the role that could make the change, like the API's"
    client.force_login(operator)
    before = row_counts()
    audit = ObjectChange.objects.count()
    response = client.post(WHAT_IF, {"object": yaml.safe_dump(deployment(name="trial", replicas=12, cpu="2")),
                                     "policy": "/spread", "policy_spec": ""})
    assert response.status_code == 200
    schedule = response.context["schedule"]
    assert sum(schedule["clusters"].values()) == 12 and "Result: " in html(response)
    chart = response.context["chart"]
    assert sorted(chart["clusters"]) == sorted(schedule["clusters"])
    levels = {row["cluster"]: row["cpu"] for row in response.context["placed_levels"]}
    for name, before_level, after_level in zip(chart["clusters"], chart["before"]["cpu"], chart["after"]["cpu"],
                                               strict=True):
        # Levels are rounded to 0.1 %: one 2-core replica on a big cluster may not move the figure.
        added = 100.0 * 2 * schedule["clusters"][name] / levels[name]["allocatable"]
        assert after_level - before_level == pytest.approx(added, abs=0.11)
    assert 'id="fed-whatif-data"' in html(response) and "vendor/plotly/plotly.min.js" in html(response)

    spec = client.post(WHAT_IF, {"object": yaml.safe_dump(deployment(name="trial", replicas=4)),
                                 "policy": "", "policy_spec": "schedulingMode: Divide\nmaxClusters: 1\n"})
    assert len(spec.context["schedule"]["clusters"]) == 1
    duplicate = client.post(WHAT_IF, {"object": yaml.safe_dump(deployment(name="trial", replicas=2)),
                                      "policy_spec": "schedulingMode: Duplicate"})
    assert set(duplicate.context["schedule"]["clusters"].values()) == {None}
    assert len(duplicate.context["placed_levels"]) == 3

    refused = client.post(WHAT_IF, {"object": yaml.safe_dump(deployment()), "policy_spec": "schedulingMode: Spread"})
    assert "policy.schedulingMode: must be Divide or Duplicate" in refused.context["form"].errors["policy_spec"]
    neither = client.post(WHAT_IF, {"object": yaml.safe_dump(deployment())})
    assert "Choose a propagation policy" in str(neither.context["form"].errors["policy"])
    assert row_counts() == before and ObjectChange.objects.count() == audit
    assert not MemberObject.objects.exists()
