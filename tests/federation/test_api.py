"""Federation through the REST API: policies, objects, what-if, the planner, clusters and water
levels, roles and the audit trail, and the talk's scaling examples end to end.

Celery does not run here: a change's reconcile is a job (``core.jobs.enqueue``) whose message is
sent after commit (never, inside a test transaction), so tests call ``reconcile_object``
themselves where the spec says the reconciler would run, and read the jobs a change asked for.
Member clusters are the fleet's one cluster resource (cordon, drain and uncordon live there).
"""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from django.contrib.contenttypes.models import ContentType

from core.models import Job, ObjectChange
from federation import water
from federation.models import (
    FederatedObject,
    FederatedRevision,
    MemberObject,
    OverridePolicy,
    PropagationPolicy,
    WaterLevelSample,
)
from federation.planner import ClusterPreference, plan
from federation.reconcile import RECONCILE_TASK, reconcile_object
from fleet.models import Cluster
from tests.conftest import token_client

from .conftest import deployment

pytestmark = pytest.mark.django_db

BASE = "/api/v1/federation/"
PP = f"{BASE}propagation-policies/"
OP = f"{BASE}override-policies/"
OBJECTS = f"{BASE}objects/"
WHAT_IF = f"{BASE}what-if/"
PLANNER = f"{BASE}planner/"
CLUSTERS = "/api/v1/fleet/clusters/"
WATER = f"{BASE}water-levels/"

#: The talk's clusters A, B, C, as fleet3 names them.
A, B, C = "bj-1", "sh-1", "gz-1"


def placement_policy(*clusters: str, weight: int = 1) -> dict:
    return {"schedulingMode": "Divide",
            "placement": [{"cluster": c, "preferences": {"weight": weight}} for c in clusters]}


def changes(model, action: str | None = None, verb: str | None = None):
    entries = ObjectChange.objects.filter(object_type=ContentType.objects.get_for_model(model))
    if action:
        entries = entries.filter(action=action)
    if verb is not None:
        entries = entries.filter(verb=verb)
    return entries


def reconciled(pk: int) -> FederatedObject:
    reconcile_object(pk)
    return FederatedObject.objects.get(pk=pk)


def errors(response) -> dict[str, list[str]]:
    """The field errors of the one error body (``{"code", "detail", "errors"}``)."""
    body = response.json()
    assert set(body) == {"code", "detail", "errors"}, body
    return body["errors"]


def reconcile_jobs(pk: int) -> int:
    """Reconcile jobs asked for this object (each one's message is sent after commit)."""
    return Job.objects.filter(kind=RECONCILE_TASK, task_args__0=pk).count()


def replicas_by_cluster(pk: int) -> dict[str, int]:
    return {m.cluster.name: m.replicas for m in MemberObject.objects.filter(object_id=pk).select_related("cluster")}


@pytest.fixture
def fleet(fleet3):
    assert sorted(c.name for c in fleet3) == sorted([A, B, C])
    return fleet3


# --------------------------------------------------------------------------- policies


def test_policy_crud_with_usage_count_and_audit(operator_api, viewer_api, operator, spread_policy):
    body = {"namespace": "shop", "name": "two", "description": "A and B", "spec": placement_policy(A, B)}
    created = operator_api.post(PP, body, format="json")
    assert created.status_code == 201, created.content
    policy = created.json()
    assert policy["name"] == "two" and policy["namespace"] == "shop" and policy["spec"] == placement_policy(A, B)
    assert policy["object_count"] == 0
    entry = changes(PropagationPolicy, "create").get()
    assert entry.actor == operator.username and entry.source == "api" and entry.after["name"] == "two"

    listed = viewer_api.get(PP, {"namespace": "shop"}).json()
    assert [p["name"] for p in listed["results"]] == ["two"]
    assert [p["name"] for p in viewer_api.get(PP, {"name": "spread"}).json()["results"]] == ["spread"]
    assert [p["name"] for p in viewer_api.get(PP, {"namespace": ""}).json()["results"]] == ["spread"], \
        "?namespace= lists the fleet-wide policies"

    url = f"{PP}{policy['id']}/"
    put = operator_api.put(url, {"spec": placement_policy(A, B, C), "description": "three"}, format="json")
    assert put.status_code == 200, put.content
    assert put.json()["spec"] == placement_policy(A, B, C) and put.json()["description"] == "three"
    patched = operator_api.patch(url, {"description": "A, B and C"}, format="json")
    assert patched.status_code == 200 and patched.json()["spec"] == placement_policy(A, B, C)
    assert patched.json()["description"] == "A, B and C"
    assert changes(PropagationPolicy, "update").count() == 2

    renamed = operator_api.patch(url, {"name": "other", "namespace": "elsewhere"}, format="json")
    assert renamed.status_code == 400 and set(errors(renamed)) == {"name", "namespace"}
    assert errors(operator_api.put(url, {"description": "no spec"}, format="json")) == {"spec": ["This field is required."]}
    same_name = operator_api.patch(url, {"name": "two", "namespace": "shop", "description": "x"}, format="json")
    assert same_name.status_code == 200, "restating the identity is fine"

    duplicate = operator_api.post(PP, body, format="json")
    assert duplicate.status_code == 400 and "name" in errors(duplicate)

    fed = operator_api.post(OBJECTS, {"object": deployment(), "propagation_policy": "two"}, format="json")
    assert fed.status_code == 201, fed.content
    assert viewer_api.get(url).json()["object_count"] == 1
    in_use = operator_api.delete(url)
    assert in_use.status_code == 400 and "still used by web" in errors(in_use)["name"][0]
    assert PropagationPolicy.objects.filter(pk=policy["id"]).exists()

    assert operator_api.delete(f"{PP}{spread_policy.pk}/").status_code == 204
    assert not PropagationPolicy.objects.filter(pk=spread_policy.pk).exists()
    assert changes(PropagationPolicy, "delete").get().before["name"] == "spread"


@pytest.mark.parametrize("spec,field,words", [
    ({"clusterSelector": {"bad key!": "x"}}, "spec.clusterSelector", "bad key!"),
    ({"clusterSelector": {"region": 7}}, "spec.clusterSelector", "string"),
    ({"placement": [{"cluster": A, "preferences": {"minReplicas": -1}}]},
     "spec.placement[0].preferences.minReplicas", "non-negative"),
    ({"placement": [{"cluster": A, "preferences": {"weight": 1}}, {"cluster": B, "preferences": {"maxReplicas": -3}}]},
     "spec.placement[1].preferences.maxReplicas", "non-negative"),
    ({"placement": [{"cluster": A, "preferences": {"minReplicas": 5, "maxReplicas": 2}}]},
     "spec.placement[0].preferences.minReplicas", "exceeds maxReplicas"),
    ({"schedulingProfile": "no-such-profile"}, "spec.schedulingProfile", "unknown scheduling profile"),
    ({"schedulingProfile": ["a", "list"]}, "spec.schedulingProfile", "must be"),
    ({"placements": []}, "spec.placements", "unknown field"),
    ({"placement": [{"cluster": A, "preferences": {"weigth": 1}}]}, "spec.placement[0].preferences.weigth", "unknown field"),
    ({"schedulingMode": "Spread"}, "spec.schedulingMode", "Divide"),
    ({"maxClusters": -1}, "spec.maxClusters", "negative"),
    ({"clusterAffinity": [{"matchExpressions": [{"key": "region", "operator": "Near", "values": ["x"]}]}]},
     "spec.clusterAffinity[0]", "operator"),
    (["not", "an", "object"], "spec", "object"),
    # Kubernetes refuses NotIn/In with no values (NewRequirement: "values set can't be empty").
    ({"clusterAffinity": [{"matchExpressions": [{"key": "region", "operator": "NotIn", "values": []}]}]},
     "spec.clusterAffinity[0]", "values set can't be empty"),
    ({"clusterAffinity": [{"matchExpressions": [{"key": "region", "operator": "In"}]}]},
     "spec.clusterAffinity[0]", "values set can't be empty"),
])
def test_invalid_propagation_policies_get_field_messages(operator_api, spec, field, words):
    response = operator_api.post(PP, {"namespace": "shop", "name": "bad", "spec": spec}, format="json")
    assert response.status_code == 400, response.content
    body = errors(response)
    assert field in body, body
    assert isinstance(body[field], list) and words in body[field][0]
    assert not PropagationPolicy.objects.exists()
    assert not changes(PropagationPolicy).exists(), "a refused change leaves no audit entry"


def test_an_update_is_validated_too_and_changes_nothing_when_refused(operator_api, spread_policy):
    url = f"{PP}{spread_policy.pk}/"
    response = operator_api.patch(url, {"spec": {"placement": [{"cluster": A, "preferences": {"weight": -1}}]}},
                                  format="json")
    assert response.status_code == 400
    assert errors(response) == {"spec.placement[0].preferences.weight": ["must be a non-negative integer"]}
    spread_policy.refresh_from_db()
    assert spread_policy.spec == {"schedulingMode": "Divide"}


@pytest.mark.parametrize("body", [
    {"name": "Bad_Name", "spec": {}},
    {"namespace": "Not A Namespace", "name": "ok", "spec": {}},
    {"name": "x" * 300, "spec": {}},
    {"name": "ok", "description": "d" * 501, "spec": {}},
    {"name": "ok", "spec": "text"},
    {"name": ["list"], "spec": {}},
    {"spec": {}},
    ["a", "list"],
])
def test_malformed_policy_bodies_are_400_never_500(operator_api, body):
    response = operator_api.post(PP, body, format="json")
    assert response.status_code == 400, response.content
    assert not PropagationPolicy.objects.exists()


def test_override_policies(operator_api, viewer_api):
    spec = {"overrideRules": [{"targetClusters": {"clusters": [A]},
                               "overriders": {"jsonpatch": [{"operator": "replace", "path": "/spec/replicas", "value": 2}]}}]}
    created = operator_api.post(OP, {"namespace": "shop", "name": "images", "spec": spec}, format="json")
    assert created.status_code == 201, created.content
    assert viewer_api.get(OP, {"namespace": "shop"}).json()["results"][0]["spec"] == spec
    bad = operator_api.patch(f"{OP}{created.json()['id']}/",
                             {"spec": {"overrideRules": [{"overriders": {"jsonpatch": [{"op": "frobnicate", "path": "/x"}]}}],
                                       "extra": 1}}, format="json")
    assert bad.status_code == 400
    assert set(errors(bad)) == {"spec.extra", "spec.overrideRules[0].overriders.jsonpatch[0]"}
    fed = operator_api.post(OBJECTS, {"object": deployment(), "propagation_policy": "spread-missing"}, format="json")
    assert fed.status_code == 400 and "propagation_policy" in errors(fed)
    assert changes(OverridePolicy, "create").count() == 1
    assert operator_api.delete(f"{OP}{created.json()['id']}/").status_code == 204
    assert not OverridePolicy.objects.exists()


# --------------------------------------------------------------------------- objects


def test_submit_reconcile_and_read_an_object(fleet, operator_api, viewer_api, operator, spread_policy):
    response = operator_api.post(OBJECTS, {"object": deployment(replicas=6), "propagation_policy": "spread",
                                           "change_cause": "first"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["kind"] == "Deployment" and body["key"] == "shop/web" and body["revision"] == 1
    assert body["phase"] == "Pending" and body["members"] == [] and body["placement"] == {}
    assert body["policies"] == {"propagation": {"id": spread_policy.pk, "namespace": "", "name": "spread"},
                                "override": None}
    assert body["template"]["spec"]["replicas"] == 6
    assert changes(FederatedObject, "create").get().actor == operator.username

    fed = reconciled(body["id"])
    assert sum(fed.placement.values()) == 6
    detail = viewer_api.get(f"{OBJECTS}{fed.pk}/").json()
    assert detail["placement"] == fed.placement and detail["phase"] == fed.phase
    assert detail["schedule"]["explanation"] and detail["schedule"]["clusters"] == fed.placement
    assert {m["cluster"] for m in detail["members"]} == set(fed.placement)
    member = detail["members"][0]
    assert set(member) >= {"cluster", "replicas", "state", "error", "attempts", "next_retry", "observed"}
    assert member["state"] == "applied" and member["attempts"] == 0 and member["observed"]["specReplicas"] == member["replicas"]
    assert detail["status"] == fed.status

    explain = viewer_api.get(f"{OBJECTS}{fed.pk}/explain/").json()
    assert explain["placement"] == fed.placement and explain["schedule"] == fed.schedule
    assert explain["explanation"][0].startswith("Scheduling shop/web")

    again = operator_api.post(OBJECTS, {"object": deployment(replicas=6)}, format="json")
    assert again.status_code == 200 and again.json()["revision"] == 1, "an unchanged template is no new revision"
    assert again.json()["policies"]["propagation"]["name"] == "spread", "the policy binding stays"


def test_list_filters_and_search(fleet, operator_api, viewer_api, spread_policy):
    for name, namespace in (("web", "shop"), ("api", "shop"), ("web", "blog")):
        assert operator_api.post(OBJECTS, {"object": deployment(name, namespace=namespace, replicas=1),
                                           "propagation_policy": "spread"}, format="json").status_code == 201
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config", "namespace": "shop"},
              "data": {"a": "b"}}
    assert operator_api.post(OBJECTS, {"object": config, "propagation_policy": "spread"}, format="json").status_code == 201

    def names(**params):
        return sorted(f"{o['namespace']}/{o['name']}" for o in viewer_api.get(OBJECTS, params).json()["results"])

    assert names() == ["blog/web", "shop/api", "shop/web", "shop/web-config"]
    assert names(namespace="shop") == ["shop/api", "shop/web", "shop/web-config"]
    assert names(kind="ConfigMap") == ["shop/web-config"]
    assert names(search="web") == ["blog/web", "shop/web", "shop/web-config"]
    assert names(phase="Pending") == names() and names(phase="Ready") == []
    listed = viewer_api.get(OBJECTS).json()["results"][0]
    assert "template" not in listed and "members" not in listed, "the list stays light"


def test_yaml_manifest_submission(fleet, operator_api, spread_policy):
    manifest = yaml.safe_dump(deployment("from-yaml", replicas=3))
    response = operator_api.post(OBJECTS, {"manifest": manifest, "propagation_policy": "spread"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "from-yaml" and response.json()["template"]["spec"]["replicas"] == 3

    labelled = textwrap.dedent("""\
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: settings
          namespace: shop
          labels:
            kubeadmiral.io/cluster-propagation-policy-name: spread
        data:
          mode: fast
        """)
    response = operator_api.post(OBJECTS, {"manifest": labelled}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["policies"]["propagation"]["name"] == "spread", "the label binds the policy"


@pytest.mark.parametrize("manifest,words", [
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n", "not valid YAML"),
    ("a: b\n  c: d\n", "not valid YAML"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
     "2 documents"),
    ("", "blank"),
    ("---\n# nothing\n", "empty"),
    ("- just\n- a list\n", "mapping"),
    ("!!python/object/apply:os.system ['true']\n", "not valid YAML"),
])
def test_bad_manifests_answer_400_on_manifest(fleet, operator_api, manifest, words):
    response = operator_api.post(OBJECTS, {"manifest": manifest}, format="json")
    assert response.status_code == 400, response.content
    assert words in errors(response)["manifest"][0]
    assert not FederatedObject.objects.exists()


@pytest.mark.parametrize("body,field", [
    ({}, "object"),
    ({"object": deployment(), "manifest": "kind: x"}, "manifest"),
    ({"object": "text"}, "object"),
    ({"object": {"kind": "Deployment", "metadata": {"name": "a"}}}, "object.apiVersion"),
    ({"object": {**deployment(), "metadata": {"name": "Bad_Name", "namespace": "shop"}}}, "object.metadata.name"),
    ({"object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}}, "object.kind"),
    ({"object": deployment(replicas=-2)}, "object.spec.replicas"),
    ({"object": {**deployment(), "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}],
                                                                              "volumes": 5}}}}},
     "object.spec.template.spec.volumes"),
    ({"object": {**deployment(), "spec": {"replicas": 1, "template": {"spec": {"containers": 5}}}}},
     "object.spec.template.spec"),
    ({"object": deployment(), "propagation_policy": "nope"}, "propagation_policy"),
    ({"object": deployment(), "propagation_policy": "other-team/spread"}, "propagation_policy"),
    ({"object": deployment(), "override_policy": "nope"}, "override_policy"),
])
def test_invalid_objects_answer_400_with_field_messages(fleet, operator_api, spread_policy, body, field):
    response = operator_api.post(OBJECTS, body, format="json")
    assert response.status_code == 400, response.content
    assert field in errors(response), response.json()
    assert not FederatedObject.objects.exists()


def nested(depth: int, leaf: str = "1") -> str:
    """``depth`` lists around ``leaf``, as JSON text (too deep to build and dump recursively)."""
    return "[" * depth + leaf + "]" * depth


def deep_deployment(depth: int) -> str:
    """A valid Deployment as JSON text with one extra field nested ``depth`` lists deep."""
    text = json.dumps(deployment())
    return text.replace('"replicas": 30', f'"replicas": 30, "extra": {nested(depth)}', 1)


@pytest.mark.parametrize("depth", [10_000, 600, 150])
@pytest.mark.parametrize("url,body,field,words", [
    (OBJECTS, lambda d: f'{{"object": {deep_deployment(d)}}}', "object", "nested more than 100 levels"),
    (OBJECTS, lambda d: f'{{"object": {nested(d)}}}', "object", "must be a Kubernetes object"),
    (WHAT_IF, lambda d: f'{{"object": {deep_deployment(d)}, "policy": "spread"}}', "object", "nested more than 100"),
    (WHAT_IF, lambda d: f'{{"object": {json.dumps(deployment())}, "policy": {{"placement": {nested(d)}}}}}', "policy",
     "nested more than 100 levels"),
    (PP, lambda d: f'{{"name": "deep", "spec": {{"placement": {nested(d)}}}}}', "spec", "nested more than 100 levels"),
    (OP, lambda d: f'{{"name": "deep", "spec": {{"overrideRules": {nested(d)}}}}}', "spec", "nested more than 100 levels"),
    (OBJECTS, lambda d: json.dumps({"manifest": "a: " + nested(d)}), "manifest", "nested more than 100 levels"),
])
def test_deeply_nested_bodies_are_a_400_never_a_500(fleet, operator_api, spread_policy, depth, url, body, field, words):
    """Regression: a body nested thousands of levels deep must be refused, not crash a recursion
    (10,000 levels: the JSON parser's own limit; 600 and 150: parsed, then refused on the field)."""
    response = operator_api.generic("POST", url, body(depth), content_type="application/json")
    assert response.status_code == 400, response.content
    payload = response.json()
    if depth == 10_000 and field != "manifest":
        assert payload["code"] == "too_deep", payload
    else:
        assert payload["code"] == "invalid" and words in " ".join(errors(response)[field]), payload
    assert not FederatedObject.objects.exists() and PropagationPolicy.objects.count() == 1
    assert not OverridePolicy.objects.exists()


def test_a_deep_patch_of_an_object_is_refused_on_the_object(fleet, operator_api, spread_policy):
    pk = operator_api.post(OBJECTS, {"object": deployment(), "propagation_policy": "spread"}, format="json").json()["id"]
    for depth in (400, 120):
        body = f'{{"object": {{"spec": {{"extra": {nested(depth)}}}}}}}'
        response = operator_api.generic("PATCH", f"{OBJECTS}{pk}/", body, content_type="application/json")
        assert response.status_code == 400 and "nested" in errors(response)["object"][0], response.content
    assert FederatedObject.objects.get(pk=pk).revision == 1


def test_put_patch_identity_revisions_and_rollback(fleet, operator_api, viewer_api, operator, spread_policy):
    pk = operator_api.post(OBJECTS, {"object": deployment(replicas=4), "propagation_policy": "spread"},
                           format="json").json()["id"]
    url = f"{OBJECTS}{pk}/"
    put = operator_api.put(url, {"object": deployment(replicas=4, image="nginx:1.28"), "change_cause": "upgrade"},
                           format="json")
    assert put.status_code == 200, put.content
    assert put.json()["revision"] == 2
    assert put.json()["template"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"

    patch = operator_api.patch(url, {"object": {"spec": {"replicas": 9}}, "change_cause": "scale"}, format="json")
    assert patch.status_code == 200 and patch.json()["revision"] == 3
    template = patch.json()["template"]
    assert template["spec"]["replicas"] == 9 and template["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"

    yaml_patch = operator_api.patch(url, {"manifest": "metadata:\n  labels:\n    tier: front\n"}, format="json")
    assert yaml_patch.status_code == 200 and yaml_patch.json()["template"]["metadata"]["labels"] == {"tier": "front"}

    for change, field in (({"metadata": {"name": "other"}}, "object.metadata.name"),
                          ({"metadata": {"namespace": "blog"}}, "object.metadata.namespace"),
                          ({"kind": "StatefulSet"}, "object.kind")):
        refused = operator_api.patch(url, {"object": change}, format="json")
        assert refused.status_code == 400 and field in errors(refused), refused.content
    renamed = operator_api.put(url, {"object": deployment("other", replicas=4)}, format="json")
    assert renamed.status_code == 400 and "object.metadata.name" in errors(renamed)
    bad = operator_api.put(url, {"object": deployment(replicas=-1)}, format="json")
    assert bad.status_code == 400 and "object.spec.replicas" in errors(bad)
    assert FederatedObject.objects.count() == 1 and FederatedObject.objects.get().revision == 4

    revisions = viewer_api.get(f"{url}revisions/").json()
    assert [r["number"] for r in revisions] == [4, 3, 2, 1]
    assert [r["reason"] for r in revisions[1:3]] == ["scale", "upgrade"]
    assert [r["action"] for r in revisions] == ["update", "update", "update", "create"]
    assert revisions[0]["created_by"] == operator.username

    unexplained = operator_api.post(f"{url}rollback/", {"revision": 1}, format="json")
    assert unexplained.status_code == 400 and "reason" in errors(unexplained), "a rollback needs a reason"
    assert FederatedObject.objects.get().revision == 4
    back = operator_api.post(f"{url}rollback/", {"revision": 1, "reason": "bad image"}, format="json")
    assert back.status_code == 201, back.content
    assert back.json()["number"] == 5 and back.json()["action"] == "rollback" and back.json()["rollback_of"] == 1
    assert back.json()["reason"] == "bad image" and back.json()["template"]["spec"]["replicas"] == 4
    assert back.json()["template"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    rolled = viewer_api.get(url).json()
    assert rolled["revision"] == 5 and rolled["template"] == back.json()["template"]
    assert changes(FederatedObject, "update", "rollback").get().reason == "bad image"
    same = operator_api.post(f"{url}rollback/", {"revision": 5, "reason": "again"}, format="json")
    assert same.status_code == 400 and same.json()["code"] == "unchanged"
    assert errors(same) == {"revision": ["revision 5 is what runs now"]}
    unknown = operator_api.post(f"{url}rollback/", {"revision": 99, "reason": "x"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_revision" and "revision" in errors(unknown)
    assert operator_api.post(f"{url}rollback/", {"revision": 0, "reason": "x"}, format="json").status_code == 400
    assert FederatedObject.objects.get().revision == 5


def test_pause_resume_reschedule_and_delete(fleet, operator_api, spread_policy):
    pk = operator_api.post(OBJECTS, {"object": deployment(replicas=3), "propagation_policy": "spread"},
                           format="json").json()["id"]
    url = f"{OBJECTS}{pk}/"
    reconcile_object(pk)
    paused = operator_api.post(f"{url}pause/", {"reason": "watch it"}, format="json")
    assert paused.status_code == 200 and paused.json()["rollout_paused"] is True
    assert operator_api.post(f"{url}resume/", format="json").json()["rollout_paused"] is False
    assert changes(FederatedObject, "update", "pause").get().reason == "watch it"
    assert changes(FederatedObject, "update", "resume").exists()

    assert FederatedObject.objects.get(pk=pk).schedule_digest
    rescheduled = operator_api.post(f"{url}reschedule/", {"reason": "water levels moved"}, format="json")
    assert rescheduled.status_code == 202
    assert FederatedObject.objects.get(pk=pk).schedule_digest == ""
    assert changes(FederatedObject, "update", "reschedule").get().reason == "water levels moved"

    deleted = operator_api.delete(url)
    assert deleted.status_code == 202 and deleted.json()["phase"] == "Deleting" and deleted.json()["deleting"]
    assert changes(FederatedObject, "delete").exists()
    assert operator_api.patch(url, {"object": {"spec": {"replicas": 1}}}, format="json").status_code == 400
    assert operator_api.post(OBJECTS, {"object": deployment(replicas=3)}, format="json").status_code == 400, \
        "resubmitting an object being deleted is refused"
    assert reconcile_object(pk) is None, "the reconciler removes it from the members, then forgets it"
    assert not FederatedObject.objects.filter(pk=pk).exists() and not MemberObject.objects.exists()
    assert operator_api.get(url).status_code == 404


# --------------------------------------------------------------------------- what-if


def test_what_if_commits_nothing(fleet, operator_api, viewer_api, spread_policy):
    before = ObjectChange.objects.count()
    refused = viewer_api.post(WHAT_IF, {"object": deployment(replicas=12), "policy": "spread"}, format="json")
    assert refused.status_code == 403, "a preview needs the role that could make the change"
    by_name = operator_api.post(WHAT_IF, {"object": deployment(replicas=12), "policy": "spread"}, format="json")
    assert by_name.status_code == 200, by_name.content
    result = by_name.json()
    assert sum(result["schedule"]["clusters"].values()) == 12 and result["replicas"] == 12
    assert {row["cluster"] for row in result["water_levels"]} == {A, B, C}
    assert result["request"] == {"cpu": 100, "memory": 128 * 2**20}
    row = next(r for r in result["water_levels"] if r["replicas"])
    assert row["cpu"]["after"] >= row["cpu"]["before"]

    by_spec = operator_api.post(WHAT_IF, {"manifest": yaml.safe_dump(deployment(replicas=30)),
                                        "policy": placement_policy(A, B)}, format="json")
    assert by_spec.status_code == 200, by_spec.content
    assert by_spec.json()["schedule"]["clusters"] == {A: 15, B: 15}

    assert not FederatedObject.objects.exists() and not MemberObject.objects.exists()
    assert not FederatedRevision.objects.exists() and ObjectChange.objects.count() == before


@pytest.mark.parametrize("body,field", [
    ({"object": deployment(), "policy": "missing"}, "policy"),
    ({"object": deployment(), "policy": {"placement": [{"cluster": A, "preferences": {"weight": -1}}]}},
     "policy.placement[0].preferences.weight"),
    ({"object": deployment(), "policy": {"schedulingProfile": {"a": 1}}}, "policy.schedulingProfile"),
    ({"object": deployment(), "policy": 5}, "policy"),
    ({"object": deployment()}, "policy"),
    ({"object": {"kind": "Deployment"}, "policy": "spread"}, "object.apiVersion"),
    ({"manifest": "a: [", "policy": "spread"}, "manifest"),
])
def test_what_if_refusals(fleet, operator_api, spread_policy, body, field):
    response = operator_api.post(WHAT_IF, body, format="json")
    assert response.status_code == 400, response.content
    assert field in errors(response)


# --------------------------------------------------------------------------- planner


def test_planner_contract_and_the_talk_numbers(operator_api, viewer_api):
    equal = {A: {"weight": 1}, B: {"weight": 1}, C: {"weight": 1}}
    base = {"clusters": [A, B, C], "preferences": equal, "key": "shop/web", "avoid_migration": True}

    assert viewer_api.post(PLANNER, {**base, "total": 3}, format="json").status_code == 403

    def planned(**changes):
        response = operator_api.post(PLANNER, {**base, **changes}, format="json")
        assert response.status_code == 200, response.content
        return response.json()

    assert planned(total=30, preferences={A: {"weight": 1}, B: {"weight": 1}}) == {"plan": {B: 15, A: 15}, "overflow": {}}
    assert planned(total=30, current={A: 15, B: 15})["plan"] == {A: 15, B: 15, C: 0}
    assert planned(total=15, current={A: 15, B: 15})["plan"] == {A: 8, B: 7, C: 0}
    assert planned(total=36, current={A: 15, B: 15})["plan"] == {A: 15, B: 15, C: 6}
    free = planned(total=15, current={A: 15, B: 15}, avoid_migration=False)["plan"]
    assert free == {A: 5, B: 5, C: 5}, "a plain weighted re-split would start replicas in C"

    capped = planned(total=10, avoid_migration=False, capacity={A: 2},
                     preferences={A: {"weight": 1, "minReplicas": 4}, "*": {"weight": 1, "maxReplicas": 3}})
    reference = plan({A: ClusterPreference(1, 4), "*": ClusterPreference(1, 0, 3)}, 10, [A, B, C], {}, {A: 2}, {},
                     key="shop/web")
    assert capped == {"plan": reference[0], "overflow": reference[1]}
    assert capped["plan"][A] == 2 and capped["overflow"][A] > 0, "what A's estimated capacity cannot take is overflow"


@pytest.mark.parametrize("body,field", [
    ({"total": -1}, "total"),
    ({"total": 3, "clusters": [A, A]}, "clusters"),
    ({"total": 3, "current": {"zz-9": 1}}, "current.zz-9"),
    ({"total": 3, "current": {A: -1}}, f"current.{A}"),
    ({"total": 3, "capacity": {"zz-9": 1}}, "capacity.zz-9"),
    ({"total": 3, "preferences": {A: {"weight": -1}}}, f"preferences.{A}.weight"),
    ({"total": 3, "preferences": {A: {"weight": 1, "minReplicas": 4, "maxReplicas": 2}}}, f"preferences.{A}.minReplicas"),
    ({"total": 3, "preferences": {A: {"weight": 1, "minReplica": 1}}}, f"preferences.{A}.minReplica"),
    ({"total": 3, "preferences": {A: {}}}, f"preferences.{A}.weight"),
    ({"total": 3, "preferences": {"zz-9": {"weight": 1}}}, "preferences.zz-9"),
    ({"total": 3, "preferences": {A: 1}}, f"preferences.{A}"),
    ({"total": "many"}, "total"),
])
def test_planner_validation(operator_api, body, field):
    full = {"clusters": [A, B], "preferences": {A: {"weight": 1}}, **body}
    response = operator_api.post(PLANNER, full, format="json")
    assert response.status_code == 400, response.content
    assert field in errors(response), response.json()


# --------------------------------------------------------------------------- clusters and water levels


def test_clusters_cordon_drain_uncordon(fleet, operator_api, viewer_api, operator, spread_policy):
    listed = viewer_api.get(CLUSTERS).json()["results"]
    assert [c["name"] for c in listed] == sorted([A, B, C])
    first = listed[0]
    assert first["cordoned"] is False and first["drain"] is False and first["cordon_reason"] == ""
    levels = {c["name"]: c for c in viewer_api.get(WATER).json()["clusters"]}
    assert levels[first["name"]]["weight"] > 0
    assert set(levels[first["name"]]["resources"]) == {"cpu", "memory", "gpu"}
    assert levels[first["name"]]["resources"]["cpu"]["allocatable"] > 0

    pk = operator_api.post(OBJECTS, {"object": deployment(replicas=9), "propagation_policy": "spread"},
                           format="json").json()["id"]
    assert C in reconciled(pk).placement
    queued = reconcile_jobs(pk)

    cordoned = operator_api.post(f"{CLUSTERS}{C}/cordon/", {"reason": "maintenance"}, format="json")
    assert cordoned.status_code == 200, cordoned.content
    body = cordoned.json()
    assert body["name"] == C and body["cordoned"] is True and body["drain"] is False
    assert body["cordon_reason"] == "maintenance" and body["cordoned_by"] == operator.username and body["cordoned_at"]
    assert cordoned["ETag"] == body["etag"]
    level = next(c for c in viewer_api.get(WATER).json()["clusters"] if c["name"] == C)
    assert level["cordoned"] and level["weight"] == 0
    assert FederatedObject.objects.get(pk=pk).schedule_digest == "", "the objects running there are rescheduled"
    assert reconcile_jobs(pk) == queued + 1, "and their reconcile is asked for"
    assert changes(Cluster, verb="cordon").get().actor == operator.username

    drained = operator_api.post(f"{CLUSTERS}{C}/drain/", {"reason": "decommission"}, format="json")
    assert drained.status_code == 200 and drained.json()["drain"] is True and drained.json()["cordoned"] is True
    assert changes(Cluster, "update", "drain").exists()
    fed = reconciled(pk)
    assert C not in fed.placement and sum(fed.placement.values()) == 9, "draining moves its replicas away"

    assert viewer_api.get(f"{CLUSTERS}{C}/").json()["drain"] is True
    back = operator_api.post(f"{CLUSTERS}{C}/uncordon/", {"reason": "done"}, format="json")
    assert back.status_code == 200 and back.json()["cordoned"] is False and back.json()["drain"] is False
    assert back.json()["cordon_reason"] == "" and back.json()["cordoned_at"] is None
    assert not Cluster.objects.filter(cordoned=True).exists() and changes(Cluster, "update", "uncordon").exists()
    assert operator_api.post(f"{CLUSTERS}{C}/uncordon/", format="json").status_code == 200, "idempotent"

    assert operator_api.post(f"{CLUSTERS}nowhere/cordon/", {"reason": "x"}, format="json").status_code == 404
    assert viewer_api.post(f"{CLUSTERS}{C}/cordon/", {"reason": "x"}, format="json").status_code == 403


def test_water_levels_and_history(fleet, viewer_api):
    now = viewer_api.get(WATER).json()
    assert [c["name"] for c in now["clusters"]] == sorted([A, B, C]) and "history" not in now
    assert now["totals"]["cpu"]["allocatable"] > 0 and now["units"]["cpu"] == "cores"
    assert sum(c["weight"] for c in now["clusters"]) == 1000

    water.record_samples()
    assert WaterLevelSample.objects.count() == 3
    one = viewer_api.get(WATER, {"hours": 2, "cluster": A}).json()
    assert list(one["history"]["series"]) == [A] and len(one["history"]["series"][A]["at"]) == 1
    every = viewer_api.get(WATER, {"hours": 1}).json()
    assert sorted(every["history"]["series"]) == sorted([A, B, C])
    assert viewer_api.get(WATER, {"cluster": "nowhere"}).status_code == 400
    assert viewer_api.get(WATER, {"hours": "soon"}).status_code == 400
    assert viewer_api.get(WATER, {"hours": -1}).status_code == 400


# --------------------------------------------------------------------------- roles


def test_roles(fleet, viewer, operator, viewer_api, operator_api, nobody, client, spread_policy):
    pk = operator_api.post(OBJECTS, {"object": deployment(replicas=2), "propagation_policy": "spread"},
                           format="json").json()["id"]
    reads = [PP, OP, OBJECTS, f"{OBJECTS}{pk}/", f"{OBJECTS}{pk}/revisions/", f"{OBJECTS}{pk}/explain/", CLUSTERS,
             f"{CLUSTERS}{A}/", WATER]
    for url in reads:
        assert viewer_api.get(url).status_code == 200, url
        assert client.get(url).status_code in (401, 403), url
        assert token_client(nobody).get(url).status_code == 403, url

    writes = [
        ("post", PP, {"name": "p", "spec": {}}), ("patch", f"{PP}{spread_policy.pk}/", {"description": "x"}),
        ("delete", f"{PP}{spread_policy.pk}/", None), ("post", OP, {"name": "o", "spec": {}}),
        ("post", OBJECTS, {"object": deployment("other")}), ("patch", f"{OBJECTS}{pk}/", {"object": {"spec": {"replicas": 1}}}),
        ("delete", f"{OBJECTS}{pk}/", None), ("post", f"{OBJECTS}{pk}/rollback/", {"revision": 1}),
        ("post", f"{OBJECTS}{pk}/pause/", {}), ("post", f"{OBJECTS}{pk}/resume/", {}),
        ("post", f"{OBJECTS}{pk}/reschedule/", {}), ("post", f"{CLUSTERS}{A}/cordon/", {}),
        ("post", f"{CLUSTERS}{A}/drain/", {}), ("post", f"{CLUSTERS}{A}/uncordon/", {}),
    ]
    for method, url, body in writes:
        assert getattr(viewer_api, method)(url, body, format="json").status_code == 403, (method, url)
        assert getattr(client, method)(url, body, content_type="application/json").status_code in (401, 403)
    fed = FederatedObject.objects.get(pk=pk)
    assert not fed.deleting and not fed.rollout_paused and fed.template["spec"]["replicas"] == 2
    assert not Cluster.objects.filter(cordoned=True).exists() and PropagationPolicy.objects.count() == 1

    assert token_client(viewer).post(WHAT_IF, {"object": deployment(), "policy": "spread"}, format="json").status_code == 403
    read_only = token_client(operator, write_enabled=False)
    assert read_only.post(WHAT_IF, {"object": deployment(), "policy": "spread"}, format="json").status_code == 200, \
        "what-if commits nothing: an operator's read-only token is enough"
    assert read_only.post(PLANNER, {"total": 1, "clusters": [A], "preferences": {A: {"weight": 1}}},
                          format="json").status_code == 200
    assert token_client(nobody).post(WHAT_IF, {"object": deployment(), "policy": "spread"}, format="json").status_code == 403
    assert token_client(nobody).post(PLANNER, {}, format="json").status_code == 403
    assert client.post(PLANNER, {}, content_type="application/json").status_code in (401, 403)


# --------------------------------------------------------------------------- the talk's examples


def _talk_start(api) -> int:
    """Place 30 replicas with policy placement A, B (equal static weights): [15, 15]."""
    policy = api.post(PP, {"namespace": "shop", "name": "talk", "spec": placement_policy(A, B)}, format="json")
    assert policy.status_code == 201, policy.content
    created = api.post(OBJECTS, {"object": deployment(replicas=30), "propagation_policy": "talk"}, format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    fed = reconciled(pk)
    assert fed.placement == {A: 15, B: 15} and fed.schedule["weights_source"] == "static"
    assert replicas_by_cluster(pk) == {A: 15, B: 15}

    # Add C with the same weight: avoid-migration keeps [15, 15, 0] (a plain re-split would be [10, 10, 10]).
    updated = api.patch(f"{PP}{policy.json()['id']}/", {"spec": placement_policy(A, B, C)}, format="json")
    assert updated.status_code == 200 and updated.json()["object_count"] == 1
    fed = reconciled(pk)
    assert fed.schedule["weights"] == {A: 1, B: 1, C: 1}, fed.schedule
    assert fed.placement == {A: 15, B: 15}, "adding C moved no replica"
    assert replicas_by_cluster(pk) == {A: 15, B: 15}
    return pk


def test_talk_scale_down_only_stops_replicas(fleet, operator_api, viewer_api):
    pk = _talk_start(operator_api)
    expected, _ = plan({c: ClusterPreference(1) for c in (A, B, C)}, 15, [A, B, C], {A: 15, B: 15}, {}, {},
                       key="shop/web", avoid_migration=True)
    assert expected == {A: 8, B: 7, C: 0}, "upstream's answer for key shop/web (FNV-1 tie-break)"

    scaled = operator_api.patch(f"{OBJECTS}{pk}/", {"object": {"spec": {"replicas": 15}}}, format="json")
    assert scaled.status_code == 200, scaled.content
    fed = reconciled(pk)
    assert fed.placement == {A: 8, B: 7}, fed.schedule["explanation"]
    assert replicas_by_cluster(pk) == {A: 8, B: 7}, "only stops: nothing started in C"

    through_planner = operator_api.post(PLANNER, {"total": 15, "clusters": [A, B, C],
                                                "preferences": {c: {"weight": 1} for c in (A, B, C)},
                                                "current": {A: 15, B: 15}, "avoid_migration": True, "key": fed.key},
                                      format="json").json()
    assert through_planner == {"plan": {A: 8, B: 7, C: 0}, "overflow": {}}


def test_talk_scale_up_only_starts_replicas(fleet, operator_api):
    pk = _talk_start(operator_api)
    scaled = operator_api.patch(f"{OBJECTS}{pk}/", {"object": {"spec": {"replicas": 36}}}, format="json")
    assert scaled.status_code == 200, scaled.content
    fed = reconciled(pk)
    assert fed.placement == {A: 15, B: 15, C: 6}, fed.schedule["explanation"]
    assert replicas_by_cluster(pk) == {A: 15, B: 15, C: 6}, "only starts: all 6 go to C"
