"""Scoped roles: an operator of two clusters out of three sees and changes only those two.

Generated from the URL resolver like the access matrix (``tests.test_access.all_routes``):
every page (and its CSV export), every API read, every websocket topic kind, as the scoped
operator, in a world where everything outside the scope is named ``zz-hidden…`` — a cluster,
its nodes, workloads, pods, node configs and CPU state, config targets (its own and a
fleet-wide one), a federated object in a hidden namespace, a quota group, jobs and audit
entries about them, water levels. No answer may name any of it; the writes (cordon, the
emergency downgrade, editing a target) reach the scope's objects and refuse the rest with
nothing written. A quota-subtree operator and a namespace operator get the same treatment on
their kinds, and binding changes are made in the Administration section, audited.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.utils import timezone

from core import bindings
from core.models import Job, ObjectChange, RoleBinding
from core.roles import OPERATOR
from federation.models import FederatedObject, WaterLevelSample
from fleet.models import Cluster, Node, Pod, Workload
from nodeconfig.models import ConfigTarget, ConfigType, NodeConfig
from nodeconfig.services import TargetSpec, save_target
from quotas.models import QuotaCharge, QuotaGroup
from scheduling.models import NodeCPU
from tests.conftest import make_user, token_client
from tests.test_access import MACHINE_PREFIXES, PUBLIC, SKIPPED_PREFIXES, _is_api, all_routes

HIDDEN = b"zz-hidden"
SCOPE = ("x", "a-2")


def _cluster(name: str, team: str) -> Cluster:
    cluster = Cluster.objects.create(name=name, connector=Cluster.ConnectorKind.SIMULATED, labels={"team": team},
                                     ready=False, status_message=f"{name} is unreachable")
    node = Node.objects.create(cluster=cluster, name=f"{name}-node-1", labels={"pool": "online"})
    Workload.objects.create(cluster=cluster, namespace="default", kind="Deployment", name=f"{name}-wl", replicas=1)
    Pod.objects.create(cluster=cluster, namespace="default", name=f"{name}-pod", uid=f"uid-{name}", node_name=node.name)
    NodeCPU.objects.create(node=node, cluster=cluster, name=node.name, topology=[[0, 0, 0, 0], [1, 0, 0, 0]], cpus=2, cores=1)
    WaterLevelSample.objects.create(cluster=cluster, at=timezone.now())
    return cluster


def build_world(django_user_model) -> dict:
    clusters = {name: _cluster(name, "a") for name in SCOPE} | {"zz-hidden": _cluster("zz-hidden", "b")}
    qos = ConfigType.objects.get(name="AdminQoSConfiguration")
    targets = {}
    for name, cluster, selector, priority in (("target-x", "x", "diskMode=hdd", 0),
                                              ("zz-hidden-target", "zz-hidden", "diskMode=ssd", 0),
                                              ("zz-hidden-fleetwide", None, "pool=batch", 1)):
        spec = TargetSpec(name=name, cluster=cluster, node_label_selector=selector, priority=priority,
                          config={"reclaimedResourceConfig": {"enableReclaim": True}})
        targets[name], _ = save_target(qos, spec, reason="world")
    for node in Node.objects.all():
        target = targets["target-x" if node.cluster.name == "x" else "zz-hidden-target"]
        if node.cluster.name != "a-2":
            NodeConfig.objects.create(node=node, cluster=node.cluster, config_type=qos, matched_target=target, target=target)
    FederatedObject.objects.create(name="zz-hidden-app", namespace="zz-hidden-ns", api_version="v1", kind="ConfigMap",
                                   template={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "zz-hidden-app"}},
                                   template_hash="h")
    root = QuotaGroup.objects.create(name="zz-hidden-quota", path="/zz-hidden-quota/", hard={"limits.cpu": "10"})
    QuotaCharge.objects.create(group=root, cluster=clusters["zz-hidden"], namespace="default", kind="Deployment",
                               name="zz-hidden-wl", replicas=1, admitted_at=timezone.now())
    for cluster in clusters.values():
        Job.objects.create(kind=f"fleet.sync_cluster {cluster.name}", triggered_by="test", object_id=str(cluster.pk),
                           object_type_id=_ct(Cluster), params={"cluster": cluster.name})
        ObjectChange.objects.create(actor="test", action="update", verb="cordon", object_repr=cluster.name,
                                    object_type_id=_ct(Cluster), object_id=str(cluster.pk))
    operator = make_user(django_user_model, "scoped-op", None)
    bindings.grant(operator, bindings.Grant(OPERATOR, RoleBinding.Scope.CLUSTERS, SCOPE))
    return {"operator": operator, "clusters": clusters, "targets": targets}


def _ct(model) -> int:
    from django.contrib.contenttypes.models import ContentType

    return ContentType.objects.get_for_model(model).pk


@pytest.fixture
def world(django_user_model, db):
    return build_world(django_user_model)


def _routes():
    for path, callback in all_routes():
        if path.startswith(SKIPPED_PREFIXES) or path.startswith(MACHINE_PREFIXES) or path in PUBLIC:
            continue
        yield path, callback


@pytest.mark.django_db
def test_no_page_export_or_api_read_names_anything_outside_the_scope(world):
    operator = world["operator"]
    page, api = Client(), token_client(operator)
    page.force_login(operator)
    shown, leaks = 0, []
    for path, callback in _routes():
        client = api if _is_api(callback) or path == "/metrics" else page
        for url in (path, f"{path}?export=csv"):
            response = client.get(url)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            if response.status_code >= 500 or HIDDEN in body:
                leaks.append(f"{url} ({response.status_code})")
            shown += response.status_code == 200
    assert leaks == [], "answers naming something outside the scope (or failing): " + ", ".join(leaks)
    assert shown > 40, "the scoped operator should see most pages"


@pytest.mark.django_db
def test_the_scopes_objects_are_there(world):
    operator = world["operator"]
    api = token_client(operator)
    assert sorted(r["name"] for r in api.get("/api/v1/fleet/clusters/").json()["results"]) == ["a-2", "x"]
    assert {r["cluster"] for r in api.get("/api/v1/fleet/nodes/").json()["results"]} == {"a-2", "x"}
    assert [r["name"] for r in api.get("/api/v1/nodeconfig/targets/").json()["results"]] == ["target-x"]
    hidden = world["targets"]["zz-hidden-target"]
    assert api.get(f"/api/v1/nodeconfig/targets/{hidden.pk}/").status_code == 404
    page = Client()
    page.force_login(operator)
    overview = page.get("/").content
    assert b"x is unreachable" in overview and b"a-2 is unreachable" in overview  # the attention list: their clusters
    assert page.get("/fleet/clusters/x/").status_code == 200
    assert page.get("/fleet/clusters/zz-hidden/").status_code in (403, 404)
    csv = b"".join(page.get("/fleet/?export=csv").streaming_content)
    assert b"\nx," in csv or b"\r\nx," in csv
    assert page.get("/audit/").status_code == 200 and page.get("/jobs/").status_code == 200
    assert {r["object_repr"] for r in api.get("/api/v1/core/audit-log/").json()["results"]} >= {"x", "a-2"}


@pytest.mark.django_db
def test_writes_reach_the_scope_and_nothing_else(world):
    operator = world["operator"]
    api = token_client(operator)
    assert api.post("/api/v1/fleet/clusters/x/cordon/", {"reason": "maintenance"}, format="json").status_code == 200
    assert api.post("/api/v1/fleet/clusters/zz-hidden/cordon/", {"reason": "x"}, format="json").status_code == 404
    assert not Cluster.objects.get(name="zz-hidden").cordoned
    target = world["targets"]["target-x"]
    moved = api.patch(f"/api/v1/nodeconfig/targets/{target.pk}/", {"cluster": "zz-hidden", "reason": "move"}, format="json")
    assert moved.status_code == 403, moved.content
    target.refresh_from_db()
    assert target.cluster.name == "x"
    fleet_wide = world["targets"]["zz-hidden-fleetwide"]
    assert api.patch(f"/api/v1/nodeconfig/targets/{fleet_wide.pk}/", {"reason": "x"}, format="json").status_code == 404
    created = api.post("/api/v1/nodeconfig/targets/", {"type": "AdminQoSConfiguration", "name": "new-on-x", "cluster": "x",
                                                       "node_label_selector": "diskMode=nvme",
                                                       "config": {}, "reason": "mine"}, format="json")
    assert created.status_code == 201, created.content
    outside = api.post("/api/v1/nodeconfig/targets/", {"type": "AdminQoSConfiguration", "name": "new-anywhere",
                                                       "node_label_selector": "pool=other", "priority": 1, "config": {},
                                                       "reason": "fleet-wide"}, format="json")
    assert outside.status_code == 403, outside.content
    assert not ConfigTarget.objects.filter(name="new-anywhere").exists()
    many = api.post("/api/v1/nodeconfig/targets/import/", {"yaml": "kind: AdminQoSConfiguration", "reason": "x"},
                    format="json")
    assert many.status_code == 403  # an import writes many objects: no one object to hold to the scope


@pytest.mark.django_db
def test_the_emergency_downgrade_is_theirs_for_their_clusters_and_an_admins_fleet_wide(world):
    api = token_client(world["operator"])
    body = {"reason": "incident", "confirm": "DOWNGRADE"}
    fleet = api.post("/api/v1/nodeconfig/emergency-downgrade/", body, format="json")
    assert fleet.status_code == 403, fleet.content
    other = api.post("/api/v1/nodeconfig/emergency-downgrade/", body | {"cluster": "zz-hidden"}, format="json")
    assert other.status_code == 403
    assert not ConfigTarget.objects.filter(emergency=True).exists()
    mine = api.post("/api/v1/nodeconfig/emergency-downgrade/", body | {"cluster": "x"}, format="json")
    assert mine.status_code == 201, mine.content
    listed = api.get("/api/v1/nodeconfig/emergency-downgrade/").json()
    assert [row["cluster"] for row in listed] == ["x"]
    restored = api.post(f"/api/v1/nodeconfig/emergency-downgrade/{mine.json()['id']}/restore/", {"reason": "over"},
                        format="json")
    assert restored.status_code == 200
    page = Client()
    page.force_login(world["operator"])
    panel = page.get("/nodeconfig/emergency/").content.decode()
    assert 'value="fleet"' not in panel and ">x<" in panel and "zz-hidden" not in panel
    refused = page.post("/nodeconfig/emergency/", {"scope": "fleet", "reason": "x", "confirm": "fleet"})
    assert refused.status_code in (200, 403) and not ConfigTarget.objects.filter(emergency=True, deleted=False).exists()


@pytest.mark.django_db(transaction=True)
async def test_websocket_topics_follow_the_scope(django_user_model):
    from config.asgi import application

    world = await sync_to_async(build_world)(django_user_model)
    from core.models import APIToken

    _, raw = await sync_to_async(APIToken.issue)(world["operator"])
    hidden_job = await sync_to_async(lambda: Job.objects.get(kind__contains="zz-hidden").pk)()
    x_job = await sync_to_async(lambda: Job.objects.get(kind="fleet.sync_cluster x").pk)()
    hidden_target = world["targets"]["zz-hidden-target"].pk
    communicator = WebsocketCommunicator(application, "/ws/", headers=[(b"origin", b"http://localhost"),
                                                                        (b"authorization", f"Token {raw}".encode())])
    connected, _ = await communicator.connect()
    assert connected
    await communicator.receive_json_from(timeout=5)
    expected = {"cluster-x": "subscribed", "cluster-a-2": "subscribed", f"job-{x_job}": "subscribed",
                f"nodeconfig-target-{world['targets']['target-x'].pk}": "subscribed",
                "cluster-zz-hidden": "forbidden", f"job-{hidden_job}": "forbidden",
                f"nodeconfig-target-{hidden_target}": "forbidden", "fleet": "forbidden", "nodeconfig": "forbidden",
                "water-levels": "forbidden", "audit": "forbidden", "quotas": "forbidden", "system": "subscribed"}
    try:
        for topic, want in expected.items():
            await communicator.send_json_to({"type": "subscribe", "topic": topic})
            answer = await communicator.receive_json_from(timeout=5)
            got = "subscribed" if answer["type"] == "subscribed" else answer.get("code")
            assert got == want, (topic, answer)
    finally:
        await communicator.disconnect()


@pytest.mark.django_db
def test_a_selector_binding_follows_the_clusters_labels(world, django_user_model):
    user = make_user(django_user_model, "team-b-viewer", None)
    bindings.grant(user, bindings.Grant("viewer", RoleBinding.Scope.CLUSTERS, selector="team=b"))
    api = token_client(user)
    assert [r["name"] for r in api.get("/api/v1/fleet/clusters/").json()["results"]] == ["zz-hidden"]
    assert api.post("/api/v1/fleet/clusters/zz-hidden/cordon/", {"reason": "x"}, format="json").status_code == 403
    Cluster.objects.filter(name="x").update(labels={"team": "b"})
    assert sorted(r["name"] for r in token_client(user).get("/api/v1/fleet/clusters/").json()["results"]) == ["x", "zz-hidden"]


@pytest.mark.django_db
def test_a_quota_subtree_operator(django_user_model, db):
    root = QuotaGroup.objects.create(name="root", path="/root/", hard={"limits.cpu": "100"})
    team = QuotaGroup.objects.create(name="team", parent=root, path="/root/team/", depth=1, hard={"limits.cpu": "40"})
    QuotaGroup.objects.create(name="team-web", parent=team, path="/root/team/team-web/", depth=2, hard={"limits.cpu": "10"})
    QuotaGroup.objects.create(name="other", parent=root, path="/root/other/", depth=1, hard={"limits.cpu": "10"})
    user = make_user(django_user_model, "quota-op", None)
    bindings.grant(user, bindings.Grant(OPERATOR, RoleBinding.Scope.QUOTA, ("team",)))
    api = token_client(user)
    assert sorted(r["name"] for r in api.get("/api/v1/quotas/groups/").json()["results"]) == ["team", "team-web"]
    assert api.get("/api/v1/quotas/groups/other/").status_code == 404
    assert api.patch("/api/v1/quotas/groups/team-web/", {"hard": {"limits.cpu": "12"}, "reason": "more"},
                     format="json").status_code == 200
    # The subtree's own root takes from its parent, outside the scope: not theirs to resize.
    assert api.patch("/api/v1/quotas/groups/team/", {"hard": {"limits.cpu": "50"}, "reason": "more"},
                     format="json").status_code in (403, 404)
    assert api.get("/api/v1/fleet/clusters/").status_code == 403
    page = Client()
    page.force_login(user)
    tree = page.get("/quotas/")
    assert tree.status_code == 200 and b"team-web" in tree.content and b'"other"' not in tree.content
    assert page.get("/quotas/groups/team-web/").status_code == 200 and page.get("/quotas/groups/other/").status_code in (403, 404)


@pytest.mark.django_db
def test_a_namespace_operator(django_user_model, db):
    for namespace in ("payments", "search"):
        FederatedObject.objects.create(name=f"{namespace}-app", namespace=namespace, api_version="v1", kind="ConfigMap",
                                       template={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                                       template_hash="h")
    user = make_user(django_user_model, "payments-op", None)
    bindings.grant(user, bindings.Grant(OPERATOR, RoleBinding.Scope.NAMESPACES, ("payments",)))
    api = token_client(user)
    assert [r["name"] for r in api.get("/api/v1/federation/objects/").json()["results"]] == ["payments-app"]
    search = FederatedObject.objects.get(namespace="search")
    assert api.post(f"/api/v1/federation/objects/{search.pk}/pause/", {}, format="json").status_code == 404


@pytest.mark.django_db
def test_bindings_are_granted_and_revoked_in_the_administration_audited(admin_user, viewer):
    from tests.test_administration import csrf_client, post

    client = csrf_client(admin_user)
    refused = post(client, f"/administration/users/{viewer.pk}/bindings/",
                   {"binding-role": "admin", "binding-scope": "clusters", "binding-names": "x"})
    assert refused.status_code == 200 and not RoleBinding.objects.exists()
    made = post(client, f"/administration/users/{viewer.pk}/bindings/",
                {"binding-role": "operator", "binding-scope": "clusters", "binding-names": "x, a-2",
                 "binding-reason": "team-a on call"})
    assert made.status_code == 302, made.content
    binding = RoleBinding.objects.get(user=viewer)
    assert (binding.role, binding.names, binding.source) == ("operator", ["a-2", "x"], "manual")
    assert ObjectChange.objects.filter(verb="grant_scoped_role", object_id=str(binding.pk), reason="team-a on call").exists()
    page = client.get(f"/administration/users/{viewer.pk}/").content.decode()
    assert "operator of clusters a-2, x" in page
    assert client.get("/administration/role-bindings/").status_code == 200
    assert post(client, f"/administration/role-bindings/{binding.pk}/revoke/", {}).status_code == 302
    assert not RoleBinding.objects.exists()
    assert ObjectChange.objects.filter(verb="revoke_scoped_role", object_id=str(binding.pk)).exists()
    others = csrf_client(viewer)
    assert post(others, f"/administration/users/{viewer.pk}/bindings/",
                {"binding-role": "operator", "binding-scope": "clusters", "binding-names": "x"}).status_code == 403
