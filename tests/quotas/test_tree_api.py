"""The quota tree through the REST API: the spec's rules, delegation and the audit trail."""

from __future__ import annotations

import pytest

from core.models import ObjectChange
from quotas.models import QuotaGroup
from tests.conftest import token_client

pytestmark = pytest.mark.django_db
GROUPS = "/api/v1/quotas/groups/"


def create(api, name, hard, parent=None, **extra):
    return api.post(GROUPS, {"name": name, "parent": parent, "hard": hard, **extra}, format="json")


def group(name: str) -> QuotaGroup:
    return QuotaGroup.objects.get(name=name)


@pytest.fixture
def tree(operator_api):
    assert create(operator_api, "vision", {"limits.cpu": "100", "requests.nvidia.com/gpu": "16"}).status_code == 201
    assert create(operator_api, "vision-ocr", {"limits.cpu": "30", "requests.nvidia.com/gpu": "4"}, "vision").status_code == 201
    return operator_api


def test_the_contract_shape_of_a_group(tree, viewer_api):
    body = viewer_api.get(f"{GROUPS}vision/").json()
    assert body["name"] == "vision" and body["parent"] is None and body["children"] == ["vision-ocr"]
    assert body["hard"] == {"limits.cpu": "100", "requests.nvidia.com/gpu": "16"}
    assert body["used"] == {"limits.cpu": "30", "requests.nvidia.com/gpu": "4"}, "a child's hard is carved out of its parent"
    assert body["self_used"] == {"limits.cpu": "0", "requests.nvidia.com/gpu": "0"}
    assert "last_reconcile_time" in body
    child = viewer_api.get(f"{GROUPS}vision-ocr/").json()
    assert child["parent"] == "vision" and child["used"] == {"limits.cpu": "0", "requests.nvidia.com/gpu": "0"}
    listed = viewer_api.get(GROUPS, {"parent": "vision"}).json()
    assert [g["name"] for g in listed["results"]] == ["vision-ocr"]


def test_child_must_carry_every_parent_key_and_fit_in_the_remaining(tree):
    missing = create(tree, "vision-det", {"limits.cpu": "10"}, "vision")
    assert missing.status_code == 400 and "hard.requests.nvidia.com/gpu" in missing.json()["errors"]
    too_big = create(tree, "vision-det", {"limits.cpu": "71", "requests.nvidia.com/gpu": "1"}, "vision")
    assert too_big.status_code == 400
    message = too_big.json()["errors"]["hard.limits.cpu"][0]
    assert "vision" in message and "70" in message
    assert not QuotaGroup.objects.filter(name="vision-det").exists()
    assert group("vision").used["limits.cpu"] == "30", "a refused child takes nothing from the parent"
    extra_key = create(tree, "vision-det", {"limits.cpu": "70", "requests.nvidia.com/gpu": "12", "pods": "50"}, "vision")
    assert extra_key.status_code == 201, "keys the parent does not limit are the child's own"
    assert group("vision").used == {"limits.cpu": "100", "requests.nvidia.com/gpu": "16"}


def test_bad_input_gets_field_messages(tree):
    assert "name" in create(tree, "Bad_Name", {"limits.cpu": "1"}).json()["errors"]
    assert "name" in create(tree, "vision", {"limits.cpu": "1"}).json()["errors"], "names are unique fleet-wide"
    assert "hard.limits.cpu" in create(tree, "x", {"limits.cpu": "-1"}).json()["errors"]
    assert "hard.limits.cpu" in create(tree, "x", {"limits.cpu": "ten"}).json()["errors"]
    assert "parent" in create(tree, "x", {"limits.cpu": "1"}, "nope").json()["errors"]
    assert tree.post(GROUPS, {"name": "x", "hard": ["limits.cpu"]}, format="json").status_code == 400
    assert not QuotaGroup.objects.filter(name="x").exists()


def test_parent_is_immutable_and_resize_checks_the_parent(tree):
    moved = tree.patch(f"{GROUPS}vision-ocr/", {"parent": None}, format="json")
    assert moved.status_code == 400 and "parent" in moved.json()["errors"]
    grow = tree.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "101", "requests.nvidia.com/gpu": "4"}}, format="json")
    assert grow.status_code == 400 and "hard.limits.cpu" in grow.json()["errors"]
    ok = tree.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "100", "requests.nvidia.com/gpu": "4"}}, format="json")
    assert ok.status_code == 200 and group("vision").used["limits.cpu"] == "100"
    dropped = tree.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "10"}}, format="json")
    assert dropped.status_code == 400, "a child keeps every key of its parent"
    added = tree.patch(f"{GROUPS}vision/", {"hard": {"limits.cpu": "100", "requests.nvidia.com/gpu": "16", "pods": "9"}},
                       format="json")
    assert added.status_code == 400, "a parent may not gain a key its children lack"


def test_shrinking_below_usage_is_allowed_with_a_warning(tree):
    shrunk = tree.patch(f"{GROUPS}vision/", {"hard": {"limits.cpu": "20", "requests.nvidia.com/gpu": "16"}}, format="json")
    assert shrunk.status_code == 200 and shrunk.json()["warnings"]
    assert "limits.cpu" in shrunk.json()["warnings"][0]


def test_only_leaves_are_deleted_and_their_quota_returns(tree):
    refused = tree.delete(f"{GROUPS}vision/")
    assert refused.status_code == 400 and refused.json()["code"] == "not_leaf" and "child" in refused.json()["detail"]
    assert tree.delete(f"{GROUPS}vision-ocr/").status_code == 204
    assert group("vision").used == {"limits.cpu": "0", "requests.nvidia.com/gpu": "0"}


def test_move_quota_between_siblings(tree):
    create(tree, "vision-det", {"limits.cpu": "20", "requests.nvidia.com/gpu": "4"}, "vision")
    moved = tree.post(f"{GROUPS}vision-ocr/move/", {"target": "vision-det", "amount": {"limits.cpu": "10"}}, format="json")
    assert moved.status_code == 200
    assert group("vision-ocr").hard["limits.cpu"] == "20" and group("vision-det").hard["limits.cpu"] == "30"
    assert group("vision").used["limits.cpu"] == "50", "the parent's carve-out is unchanged"
    over = tree.post(f"{GROUPS}vision-ocr/move/", {"target": "vision-det", "amount": {"limits.cpu": "21"}}, format="json")
    assert over.status_code == 400
    create(tree, "search", {"limits.cpu": "5"})
    cousin = tree.post(f"{GROUPS}vision-ocr/move/", {"target": "search", "amount": {"limits.cpu": "1"}}, format="json")
    assert cousin.status_code == 400 and "target" in cousin.json()["errors"]
    assert group("vision-ocr").hard["limits.cpu"] == "20"


def test_viewers_read_but_do_not_write(tree, viewer_api):
    assert viewer_api.get(GROUPS).status_code == 200
    assert create(viewer_api, "mine", {"limits.cpu": "1"}).status_code == 403
    assert viewer_api.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "1", "requests.nvidia.com/gpu": "1"}},
                            format="json").status_code == 403
    assert viewer_api.delete(f"{GROUPS}vision-ocr/").status_code == 403


def test_owners_manage_their_subtree_and_nothing_above(tree, viewer):
    group("vision").owners.add(viewer)
    owner = token_client(viewer)
    assert create(owner, "vision-new", {"limits.cpu": "10", "requests.nvidia.com/gpu": "1"}, "vision").status_code == 201
    assert create(owner, "ocr-sub", {"limits.cpu": "5", "requests.nvidia.com/gpu": "1"}, "vision-ocr").status_code == 201
    assert owner.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "40", "requests.nvidia.com/gpu": "4"}},
                       format="json").status_code == 200
    assert owner.patch(f"{GROUPS}vision/", {"hard": {"limits.cpu": "1000", "requests.nvidia.com/gpu": "16"}},
                       format="json").status_code == 403, "resizing the owned group itself takes from above"
    assert create(owner, "elsewhere", {"limits.cpu": "1"}).status_code == 403, "a new root is above them"
    assert owner.delete(f"{GROUPS}vision-new/").status_code == 204
    assert owner.delete(f"{GROUPS}vision/").status_code == 403
    read_only = token_client(viewer, write_enabled=False)
    assert create(read_only, "ro", {"limits.cpu": "1", "requests.nvidia.com/gpu": "1"}, "vision").status_code == 403


def test_every_change_is_audited_with_before_and_after(tree):
    tree.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "31", "requests.nvidia.com/gpu": "4"}, "reason": "more OCR"},
               format="json")
    entry = ObjectChange.objects.filter(object_repr="vision-ocr", action="update").latest("pk")
    assert entry.before["hard"]["limits.cpu"] == "30" and entry.after["hard"]["limits.cpu"] == "31"
    assert entry.reason == "more OCR"
    assert ObjectChange.objects.filter(object_repr="vision", action="create").exists()
    tree.delete(f"{GROUPS}vision-ocr/")
    assert ObjectChange.objects.filter(object_repr="vision-ocr", action="delete").exists()


def test_what_if_check_through_the_api(tree, viewer_api, viewer):
    from .conftest import deployment

    workload = deployment("trial", group="vision-ocr", cpu="31")
    body = tree.post(f"{GROUPS}check/", {"workload": workload}, format="json").json()
    assert body["allowed"] is False and "limits.cpu" in body["message"]
    fits = tree.post(f"{GROUPS}check/", {"workload": deployment("trial", group="vision-ocr", cpu="3")}, format="json")
    assert fits.json()["allowed"] is True and fits.json()["delta"]["limits.cpu"] == "3"
    assert group("vision-ocr").used["limits.cpu"] == "0"
    assert tree.post(f"{GROUPS}check/", {"workload": "nope"}, format="json").status_code == 400
    assert "group" in tree.post(f"{GROUPS}check/", {"workload": workload, "group": "zzz"}, format="json").json()["errors"]
    assert viewer_api.post(f"{GROUPS}check/", {"workload": workload}, format="json").status_code == 403
    group("vision").owners.add(viewer)
    read_only = token_client(viewer, write_enabled=False)
    assert read_only.post(f"{GROUPS}check/", {"workload": workload}, format="json").json()["allowed"] is False, \
        "an owner may ask with a read-only token: the check commits nothing"


def test_webhook_configuration_for_a_cluster(admin_api, operator_api, viewer_api, db):
    from fleet.models import Cluster
    from fleet.services import connector_for

    from tests.certificates import CA_PEM

    Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 2, "seed": 1})
    config = viewer_api.get("/api/v1/quotas/webhook-configuration/bj-1/", {"base_url": "https://meridian.corp"}).json()
    assert config["kind"] == "ValidatingWebhookConfiguration"
    hooks = {h["name"]: h for h in config["webhooks"]}
    assert hooks["workloads.quotas.meridian.io"]["clientConfig"]["url"] == "https://meridian.corp/api/admission/v1/quotas/validate"
    assert hooks["workloads.quotas.meridian.io"]["objectSelector"]["matchExpressions"][0]["key"] == "biz.group.resource.quota"
    assert "objectSelector" not in hooks["scale.quotas.meridian.io"], "Scale objects and HPAs carry no group label"
    apply = {"base_url": "https://meridian.corp", "ca_bundle": CA_PEM}
    assert viewer_api.post("/api/v1/quotas/webhook-configuration/bj-1/", apply, format="json").status_code == 403
    assert operator_api.post("/api/v1/quotas/webhook-configuration/bj-1/", apply, format="json").status_code == 403, \
        "changing a cluster's admission chain is for admins"
    assert admin_api.post("/api/v1/quotas/webhook-configuration/bj-1/", apply, format="json").status_code == 200
    with connector_for(Cluster.objects.get(name="bj-1")) as connector:
        stored = connector.get("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "meridian-quotas")
    assert stored is not None and len(stored["webhooks"]) == 2


def test_a_group_must_limit_something_however_the_create_is_sent(operator_api):
    """A create without ``hard`` used to make a group that limits nothing (it admits everything)."""
    form_encoded = operator_api.post(GROUPS, {"name": "loose"})  # multipart, as a plain HTML form or curl -F sends it
    assert form_encoded.status_code == 400 and "hard" in form_encoded.json()["errors"]
    url_encoded = operator_api.post(GROUPS, "name=loose&parent=&description=", content_type="application/x-www-form-urlencoded")
    assert url_encoded.status_code == 400 and "hard" in url_encoded.json()["errors"]
    blank = operator_api.post(GROUPS, "name=loose&hard=", content_type="application/x-www-form-urlencoded")
    assert blank.status_code == 400 and "hard" in blank.json()["errors"]
    empty_json = create(operator_api, "loose", {})
    assert empty_json.status_code == 400 and "hard" in empty_json.json()["errors"]
    assert not QuotaGroup.objects.filter(name="loose").exists()
    flattened = operator_api.post(GROUPS, "name=tight&hard.limits.cpu=2", content_type="application/x-www-form-urlencoded")
    assert flattened.status_code == 201 and flattened.json()["hard"] == {"limits.cpu": "2"}, "form keys hard.<resource> work"


def test_a_resize_to_nothing_is_refused(tree):
    emptied = tree.patch(f"{GROUPS}vision-ocr/", {"hard": {}}, format="json")
    assert emptied.status_code == 400 and emptied.json()["code"] == "hard_required" and "hard" in emptied.json()["errors"]
    assert group("vision-ocr").hard == {"limits.cpu": "30", "requests.nvidia.com/gpu": "4"}


def test_negative_hard_is_refused_on_create_and_resize(tree):
    created = create(tree, "minus", {"limits.cpu": "-10"})
    assert created.status_code == 400 and created.json()["errors"]["hard.limits.cpu"] == [
        "limits.cpu: must be greater than or equal to 0, got -10"]
    assert create(tree, "minus", {"limits.cpu": -1}).json()["errors"]["hard.limits.cpu"], "a JSON number too"
    assert not QuotaGroup.objects.filter(name="minus").exists()
    resized = tree.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "-1", "requests.nvidia.com/gpu": "4"}}, format="json")
    assert resized.status_code == 400 and "hard.limits.cpu" in resized.json()["errors"]
    assert group("vision-ocr").hard["limits.cpu"] == "30" and group("vision").used["limits.cpu"] == "30"
    assert create(tree, "vision-det", {"limits.cpu": "10", "requests.nvidia.com/gpu": "1"}, "vision").status_code == 201
    moved = tree.post(f"{GROUPS}vision-ocr/move/", {"target": "vision-det", "amount": {"limits.cpu": "-5"}}, format="json")
    assert moved.status_code == 400 and "amount.limits.cpu" in moved.json()["errors"], "the amount names itself"


def test_groups_carry_an_etag_and_a_stale_if_match_changes_nothing(tree):
    read = tree.get(f"{GROUPS}vision-ocr/")
    tag = read.headers["ETag"]
    assert tag == read.json()["etag"] and tree.get(f"{GROUPS}vision-ocr/", HTTP_IF_NONE_MATCH=tag).status_code == 304
    grown = {"hard": {"limits.cpu": "31", "requests.nvidia.com/gpu": "4"}}
    assert tree.patch(f"{GROUPS}vision-ocr/", grown, format="json", HTTP_IF_MATCH=tag).status_code == 200
    stale = tree.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "40", "requests.nvidia.com/gpu": "4"}}, format="json",
                       HTTP_IF_MATCH=tag)
    assert stale.status_code == 412 and stale.json()["code"] == "stale"
    assert group("vision-ocr").hard["limits.cpu"] == "31" and group("vision").used["limits.cpu"] == "31"


def test_history_is_revisions_with_diff_and_rollback(tree):
    tree.patch(f"{GROUPS}vision-ocr/", {"hard": {"limits.cpu": "31", "requests.nvidia.com/gpu": "4"}, "reason": "more"},
               format="json")
    revisions = tree.get(f"{GROUPS}vision-ocr/revisions/").json()
    assert [(r["number"], r["action"]) for r in revisions] == [(2, "update"), (1, "create")]
    diff = tree.get(f"{GROUPS}vision-ocr/diff/", {"a": 1, "b": 2}).json()
    assert diff["changes"] == [{"path": "hard.limits.cpu", "op": "change", "old": "30", "new": "31"}]
    assert tree.post(f"{GROUPS}vision-ocr/rollback/", {"revision": 1}, format="json").json()["errors"]["reason"]
    rolled = tree.post(f"{GROUPS}vision-ocr/rollback/", {"revision": 1, "reason": "too much"}, format="json")
    assert rolled.status_code == 201 and (rolled.json()["number"], rolled.json()["rollback_of"]) == (3, 1)
    assert group("vision-ocr").hard["limits.cpu"] == "30" and group("vision").used["limits.cpu"] == "30"
    unknown = tree.post(f"{GROUPS}vision-ocr/rollback/", {"revision": 9, "reason": "x"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_revision"
