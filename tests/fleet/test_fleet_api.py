"""The fleet REST API over inventory rows: filters, cursor pages, 400s, tokens, secrets."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.models import ObjectChange
from fleet import tokens
from fleet.models import Cluster, ClusterToken, Node


@pytest.fixture
def fleet(db):
    a = Cluster.objects.create(name="bj-1", connector="simulated", credentials="apiVersion: v1\nusers: [{user: {token: s3cr3t-token}}]")
    b = Cluster.objects.create(name="sh-1", connector="simulated")
    nodes = []
    for i in range(30):
        cluster = a if i % 2 == 0 else b
        labels = {"machineModel": f"A{i % 4 + 1}", "diskMode": "hdd" if i % 3 == 0 else "ssd", "zone": f"z{i % 5}"}
        nodes.append(Node(cluster=cluster, name=f"{cluster.name}-n{i:03d}", labels=labels, ready=i % 7 != 0))
    Node.objects.bulk_create(nodes)
    return a, b


@pytest.mark.django_db
def test_nodes_filter_by_cluster_and_label_selector(fleet, viewer_api):
    response = viewer_api.get("/api/v1/fleet/nodes/", {"cluster": "bj-1", "labelSelector": "machineModel in (A1,A3),diskMode=hdd"})
    assert response.status_code == 200
    names = [n["name"] for n in response.json()["results"]]
    expected = sorted(n.name for n in Node.objects.filter(cluster__name="bj-1")
                      if n.labels["machineModel"] in ("A1", "A3") and n.labels["diskMode"] == "hdd")
    assert sorted(names) == expected and expected
    first = response.json()["results"][0]
    assert first["cluster"] == "bj-1" and isinstance(first["labels"], dict)


@pytest.mark.django_db
def test_cursor_pagination_walks_every_node_once(fleet, viewer_api):
    seen, url = [], "/api/v1/fleet/nodes/?page_size=7"
    while url:
        body = viewer_api.get(url).json()
        seen += [n["name"] for n in body["results"]]
        url = body["next"]
    assert len(seen) == len(set(seen)) == 30


@pytest.mark.django_db
@pytest.mark.parametrize("params,field", [
    ({"labelSelector": "machineModel in (A1"}, "labelSelector"),
    ({"labelSelector": "bad key!=x"}, "labelSelector"),
    ({"cluster": "no-such-cluster"}, "cluster"),
])
def test_bad_query_parameters_are_a_400_naming_the_parameter(fleet, viewer_api, params, field):
    response = viewer_api.get("/api/v1/fleet/nodes/", params)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and field in body["errors"] and body["errors"][field][0]


LISTS = ["/api/v1/fleet/nodes/", "/api/v1/fleet/clusters/", "/api/v1/fleet/workloads/", "/api/v1/fleet/pods/"]


@pytest.mark.django_db
@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("selector", ["%", "zone=%", "zone in (a,%s)", "%(zone)s", "50%off", "zone notin (%d)"])
def test_a_percent_sign_in_a_label_selector_is_a_400_naming_it_not_a_500(fleet, viewer_api, url, selector):
    """Regression: the message quoting the bad selector was %-formatted by DRF and crashed into a 500."""
    response = viewer_api.get(url, {"labelSelector": selector})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and list(body["errors"]) == ["labelSelector"], body
    assert body["detail"].startswith("labelSelector: ") and "%" in body["errors"]["labelSelector"][0]


@pytest.mark.django_db
@pytest.mark.parametrize("url", [u for u in LISTS if not u.endswith("/clusters/")])
def test_a_percent_sign_in_the_cluster_parameter_is_a_400_naming_it(fleet, viewer_api, url):
    response = viewer_api.get(url, {"cluster": "100%"})
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == {"cluster": ["unknown cluster '100%'"]}


@pytest.mark.django_db
def test_notin_with_empty_parentheses_is_notin_the_empty_value_as_upstream(fleet, viewer_api):
    """``k notin ()`` parses as upstream ``labels.Parse`` does (values {""}): it keeps the rows
    without the key or with a non-empty value, and drops ``k=""``; it never matches everything."""
    cluster = Cluster.objects.get(name="bj-1")
    Node.objects.create(cluster=cluster, name="empty-zone", labels={"zone": ""})
    names = {n["name"] for n in viewer_api.get("/api/v1/fleet/nodes/", {"labelSelector": "zone notin ()",
                                                                        "page_size": 1000}).json()["results"]}
    assert "empty-zone" not in names and names == set(Node.objects.exclude(name="empty-zone").values_list("name", flat=True))
    refused = viewer_api.get("/api/v1/fleet/nodes/", {"labelSelector": "zone notin"})
    assert refused.status_code == 400 and "labelSelector" in refused.json()["errors"]


@pytest.mark.django_db
def test_node_list_query_count_does_not_grow_with_the_fleet(fleet, viewer_api):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_api.get("/api/v1/fleet/nodes/", {"page_size": 1000}).status_code == 200
        return len(ctx)

    queries()  # the first call also records the token's last use
    small = queries()
    cluster = Cluster.objects.get(name="bj-1")
    Node.objects.bulk_create(Node(cluster=cluster, name=f"extra-{i}", labels={}) for i in range(300))
    assert queries() == small


@pytest.mark.django_db
def test_credentials_are_never_returned(fleet, admin_api):
    body = admin_api.get("/api/v1/fleet/clusters/bj-1/").json()
    assert "s3cr3t" not in str(body) and "credentials" not in body and "kubeconfig" not in body


@pytest.mark.django_db
def test_agent_token_issue_use_rotate_and_revoke(fleet, admin_api, viewer_api):
    assert viewer_api.post("/api/v1/fleet/clusters/bj-1/agent-tokens/", {}, format="json").status_code == 403
    first = admin_api.post("/api/v1/fleet/clusters/bj-1/agent-tokens/", {"name": "agents"}, format="json")
    assert first.status_code == 201
    raw = first.json()["token"]
    assert tokens.authenticate(raw, "agent").cluster.name == "bj-1"
    assert tokens.authenticate(raw, "webhook") is None, "an agent token is not a webhook token"

    listed = admin_api.get("/api/v1/fleet/clusters/bj-1/agent-tokens/").json()
    assert [t["key_prefix"] for t in listed] == [raw[:8]] and "token" not in listed[0]

    rotated = admin_api.post("/api/v1/fleet/clusters/bj-1/agent-tokens/", {"rotate": True}, format="json").json()
    assert tokens.authenticate(raw, "agent") is None and tokens.authenticate(rotated["token"], "agent") is not None

    assert admin_api.delete(f"/api/v1/fleet/clusters/sh-1/agent-tokens/{rotated['id']}/").status_code == 404
    assert admin_api.delete(f"/api/v1/fleet/clusters/bj-1/agent-tokens/{rotated['id']}/").status_code == 204
    assert tokens.authenticate(rotated["token"], "agent") is None
    assert ClusterToken.objects.filter(key_hash__contains=raw).count() == 0
    verbs = list(ObjectChange.objects.filter(object_type__model="clustertoken").values_list("verb", flat=True))
    assert sorted(verbs) == ["issue_token", "revoke_token", "rotate_token"]
    assert all(raw not in str(c.after) for c in ObjectChange.objects.all())


@pytest.mark.django_db
def test_webhook_tokens_are_separate(fleet, admin_api):
    body = admin_api.post("/api/v1/fleet/clusters/sh-1/webhook-tokens/", {}, format="json").json()
    assert tokens.authenticate(body["token"], "webhook").cluster.name == "sh-1"
    assert admin_api.get("/api/v1/fleet/clusters/sh-1/agent-tokens/").json() == []


@pytest.mark.django_db
def test_operator_may_sync_but_not_register_or_delete(fleet, operator_api):
    assert operator_api.post("/api/v1/fleet/clusters/", {"name": "x", "connector": "simulated"}, format="json").status_code == 403
    assert operator_api.delete("/api/v1/fleet/clusters/bj-1/").status_code == 403
    assert Cluster.objects.filter(name="bj-1").exists()


@pytest.mark.django_db
def test_cluster_label_validation(fleet, admin_api):
    response = admin_api.patch("/api/v1/fleet/clusters/bj-1/", {"labels": {"bad key": "x", "ok": "y" * 64}}, format="json")
    assert response.status_code == 400 and "labels" in response.json()["errors"]
    assert Cluster.objects.get(name="bj-1").labels == {}
    good = admin_api.patch("/api/v1/fleet/clusters/bj-1/", {"labels": {"region": "bj"}}, format="json")
    assert good.status_code == 200 and good.json()["labels"] == {"region": "bj"}
    change = ObjectChange.objects.filter(action="update", object_repr="bj-1").latest("time")
    assert change.before["labels"] == {} and change.after["labels"] == {"region": "bj"} and "credentials" not in change.after


@pytest.mark.django_db
def test_register_a_simulated_cluster_and_refuse_bad_settings(admin_api, django_capture_on_commit_callbacks):
    bad = admin_api.post("/api/v1/fleet/clusters/", {"name": "sim-1", "connector": "simulated",
                                                      "connector_config": {"node_count": "many", "seed": True, "colour": "red"}}, format="json")
    assert bad.status_code == 400
    problems = " ".join(bad.json()["errors"]["connector_config"])
    assert "node_count" in problems and "seed" in problems and "colour" in problems
    assert admin_api.post("/api/v1/fleet/clusters/", {"name": "Bad_Name", "connector": "simulated"}, format="json").status_code == 400
    assert not Cluster.objects.exists()
    with django_capture_on_commit_callbacks():
        good = admin_api.post("/api/v1/fleet/clusters/", {"name": "sim-1", "connector": "simulated",
                                                          "connector_config": {"node_count": 40, "seed": 3, "region": "bj"}}, format="json")
    assert good.status_code == 201, good.content
    assert Cluster.objects.get(name="sim-1").connector_config["node_count"] == 40
