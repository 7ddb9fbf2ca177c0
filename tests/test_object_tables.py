"""The tables of object pages and of the water-level dashboard go through ``core.tables`` like
every list: they sort, search, page and export CSV (``?export=csv`` through the same view, so
the object's permission check guards the export too), their filters are FilterSets (a bad
value is a form error on the page and a 400 on the export, never a 500), and their query
counts do not grow with their rows.

- a quota group's workloads and children (``workloads-``/``children-`` parameters);
- a node config target's node acknowledgements (``state``/``cluster`` filters);
- a federated object's members and placement (``members-``/``placement-``), live fragments;
- the water levels (whose live cells federation.js updates in place);
- a node's pods.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core import bindings
from core.models import RoleBinding
from core.roles import VIEWER
from fleet.models import Cluster, Node, Pod
from tests.conftest import make_user
from tests.test_tables import csv_rows, row_keys

pytestmark = pytest.mark.django_db


def refused(client, url: str) -> None:
    response = client.get(url)
    assert response.status_code in (403, 404) and not response.get("Content-Disposition"), url


def same_queries(client, small: str, large: str) -> None:
    """``large`` (more rows on the page) costs no more queries than ``small``."""
    client.get(small)
    with CaptureQueriesContext(connection) as few:
        client.get(small)
    with CaptureQueriesContext(connection) as many:
        client.get(large)
    assert len(many.captured_queries) <= len(few.captured_queries), [q["sql"] for q in many.captured_queries]


# ---------------------------------------------------------------------------- a quota group's workloads

@pytest.fixture
def charged():
    from quotas.models import QuotaCharge, QuotaGroup

    cluster = Cluster.objects.create(name="bj-1", connector="simulated")
    other = Cluster.objects.create(name="sh-1", connector="simulated")
    team = QuotaGroup.objects.create(name="qa-team", path="/qa-team/", hard={"limits.cpu": "100", "limits.memory": "64Gi"})
    QuotaGroup.objects.create(name="qa-other", path="/qa-other/", hard={"limits.cpu": "1"})
    for name, parent_hard in (("qa-team-b", {"limits.cpu": "10"}), ("qa-team-a4", {"limits.cpu": "20"})):
        QuotaGroup.objects.create(name=name, parent=team, path=f"/qa-team/{name}/", depth=1, hard=parent_hard,
                                  used={"limits.cpu": "5"}, description=f"{name} children")
    now = timezone.now()
    for i, (where, namespace, name, source) in enumerate(((cluster, "ml", "train-a4", "admission"),
                                                          (other, "web", "shop", "inventory"),
                                                          (cluster, "ml", "infer", "admission"))):
        QuotaCharge.objects.create(group=team, cluster=where, namespace=namespace, kind="Deployment", api_version="apps/v1",
                                   name=name, replicas=i + 1, charge={"limits.cpu": str(i + 1), "requests.cpu": "9"},
                                   source=source, observed=i != 1, admitted_at=now + timedelta(minutes=i))
    return team


TEAM = "/quotas/groups/qa-team/"


def workloads(html: str) -> list[str]:
    return row_keys(html, "data-workload")


def test_a_groups_workloads_sort_search_and_export(client, viewer, charged):
    client.force_login(viewer)
    assert workloads(client.get(TEAM).content.decode()) == ["ml/infer", "web/shop", "ml/train-a4"], "most recent first"
    assert workloads(client.get(f"{TEAM}?workloads-sort=name").content.decode()) == ["ml/infer", "web/shop", "ml/train-a4"]
    assert workloads(client.get(f"{TEAM}?workloads-sort=-name").content.decode()) == ["ml/train-a4", "web/shop", "ml/infer"]
    assert workloads(client.get(f"{TEAM}?workloads-sort=-replicas").content.decode())[0] == "ml/infer"
    assert workloads(client.get(f"{TEAM}?workloads-q=ML").content.decode()) == ["ml/infer", "ml/train-a4"]
    assert workloads(client.get(f"{TEAM}?workloads-q=sh-1").content.decode()) == ["web/shop"], "the cluster's name too"
    response = client.get(f"{TEAM}?workloads-q=ml&workloads-sort=-name&workloads-export=csv")
    assert response["Content-Disposition"] == 'attachment; filename="meridian-quota-workloads-qa-team.csv"'
    rows = csv_rows(response)
    assert rows[0] == ["Cluster", "Namespace", "Kind", "Name", "Replicas", "HPA max", "Source", "Observed", "Charge",
                       "Admitted"]
    assert [r[3] for r in rows[1:]] == ["train-a4", "infer"]
    assert rows[1][:5] == ["bj-1", "ml", "Deployment", "train-a4", "1"] and rows[1][8] == "limits.cpu 1"
    assert rows[1][6] == "admission" and rows[1][7] == "yes", "the export's values are the stored ones"


def test_a_groups_workloads_filter_through_a_filterset(client, viewer, charged):
    client.force_login(viewer)
    assert workloads(client.get(f"{TEAM}?workloads-source=inventory").content.decode()) == ["web/shop"]
    assert workloads(client.get(f"{TEAM}?workloads-observed=false").content.decode()) == ["web/shop"]
    assert workloads(client.get(f"{TEAM}?workloads-cluster=bj-1").content.decode()) == ["ml/infer", "ml/train-a4"]
    bad = client.get(f"{TEAM}?workloads-source=bogus&workloads-observed=maybe")
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode()
    assert workloads(bad.content.decode()) == [], "an invalid filter shows nothing rather than everything"
    export = client.get(f"{TEAM}?workloads-source=bogus&workloads-export=csv")
    assert export.status_code == 400 and b"source" in export.content and not export.get("Content-Disposition")


def test_a_groups_children_sort_search_and_export(client, viewer, charged):
    client.force_login(viewer)
    html = client.get(TEAM).content.decode()
    assert row_keys(html, "data-group") == ["qa-team-a4", "qa-team-b"]
    assert row_keys(client.get(f"{TEAM}?children-sort=-name").content.decode(), "data-group") == ["qa-team-b", "qa-team-a4"]
    assert row_keys(client.get(f"{TEAM}?children-q=A4").content.decode(), "data-group") == ["qa-team-a4"]
    rows = csv_rows(client.get(f"{TEAM}?children-sort=-name&children-export=csv"))
    assert rows[0][:2] == ["Group", "Description"] and "limits.cpu" in rows[0]
    assert [r[0] for r in rows[1:]] == ["qa-team-b", "qa-team-a4"] and rows[1][rows[0].index("limits.cpu")] == "5 / 10"


def test_a_groups_tables_are_refused_outside_the_viewers_scope(client, django_user_model, charged):
    scoped = make_user(django_user_model, "other-viewer", None)
    bindings.grant(scoped, bindings.Grant(VIEWER, RoleBinding.Scope.QUOTA, ("qa-other",)))
    client.force_login(scoped)
    assert client.get("/quotas/groups/qa-other/?workloads-export=csv").status_code == 200
    for param in ("workloads-export", "children-export"):
        refused(client, f"{TEAM}?{param}=csv")


def test_a_groups_owners_export_its_workloads_without_a_role(client, django_user_model, charged):
    owner = make_user(django_user_model, "team-owner", None)
    charged.owners.add(owner)
    client.force_login(owner)
    rows = csv_rows(client.get(f"{TEAM}?workloads-export=csv"))
    assert [r[3] for r in rows[1:]] == ["infer", "shop", "train-a4"], "owners see their group's workloads, as on its page"


def test_a_groups_workloads_cost_the_same_queries_for_more_rows(client, viewer, charged):
    from quotas.models import QuotaCharge

    cluster = Cluster.objects.get(name="bj-1")
    QuotaCharge.objects.bulk_create(
        QuotaCharge(group=charged, cluster=cluster, namespace="bulk", kind="Deployment", api_version="apps/v1",
                    name=f"w{i:03d}", replicas=1, charge={"limits.cpu": "1"}, admitted_at=timezone.now()) for i in range(120))
    client.force_login(viewer)
    same_queries(client, f"{TEAM}?workloads-per_page=25", f"{TEAM}?workloads-per_page=100")


# ---------------------------------------------------------------------------- a node config target's nodes

@pytest.fixture
def acks():
    from nodeconfig.models import ConfigType, NodeConfig
    from nodeconfig.services import TargetSpec, save_target

    clusters = {name: Cluster.objects.create(name=name, connector="simulated") for name in ("bj-1", "sh-1")}
    qos = ConfigType.objects.get(name="AdminQoSConfiguration")
    target, _ = save_target(qos, TargetSpec(name="qa-hdd", cluster="bj-1", node_label_selector="diskMode=hdd",
                                            config={"reclaimedResourceConfig": {"enableReclaim": True}}), reason="test")
    hidden, _ = save_target(qos, TargetSpec(name="qa-sh", cluster="sh-1", node_label_selector="diskMode=hdd",
                                            config={"reclaimedResourceConfig": {"enableReclaim": True}}), reason="test")
    digest = target.config_hash
    states = {"n-000": (digest, ""), "n-001": ("", "kernel too old"), "n-002": ("old", ""), "n-003": (digest, "")}
    for name, (applied, error) in states.items():
        node = Node.objects.create(cluster=clusters["bj-1"], name=name, labels={"diskMode": "hdd"})
        NodeConfig.objects.create(node=node, cluster=node.cluster, config_type=qos, matched_target=target, target=target,
                                  revision=target.revision, config_hash=digest, applied_hash=applied, error=error,
                                  reported_at=timezone.now() if applied else None)
    return target, hidden


def acked(html: str) -> list[str]:
    return re.findall(r'<tr data-state="\w+"[^>]*>\s*<td[^>]*><a href="[^"]+">(n-\d+)</a>', html)


def test_a_targets_nodes_sort_search_filter_and_export(client, viewer, acks):
    target, _hidden = acks
    url = f"/nodeconfig/targets/{target.pk}/"
    client.force_login(viewer)
    html = client.get(url).content.decode()
    assert acked(html) == ["n-000", "n-001", "n-002", "n-003"] and 'id="node-table"' in html
    assert acked(client.get(f"{url}?sort=-node").content.decode()) == ["n-003", "n-002", "n-001", "n-000"]
    assert acked(client.get(f"{url}?q=-00").content.decode()) == ["n-000", "n-001", "n-002", "n-003"]
    assert acked(client.get(f"{url}?q=3").content.decode()) == ["n-003"]
    assert acked(client.get(f"{url}?state=applied&sort=-node").content.decode()) == ["n-003", "n-000"]
    failed = client.get(f"{url}?state=failed").content.decode()
    assert acked(failed) == ["n-001"] and '<tr data-state="failed"' in failed and "kernel too old" in failed
    rows = csv_rows(client.get(f"{url}?state=applied&sort=-node&export=csv"))
    assert rows[0] == ["Node", "Cluster", "Revision", "Hash", "State", "Applied hash", "Error", "Reported"]
    assert [r[0] for r in rows[1:]] == ["n-003", "n-000"] and rows[1][1:5] == ["bj-1", "1", target.config_hash, "applied"]
    pending = csv_rows(client.get(f"{url}?state=pending&export=csv"))
    assert [r[0] for r in pending[1:]] == ["n-002"]


def test_a_targets_node_filter_refuses_bad_values_clearly(client, viewer, acks):
    target, _hidden = acks
    url = f"/nodeconfig/targets/{target.pk}/"
    client.force_login(viewer)
    bad = client.get(f"{url}?state=bogus")
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode() and acked(bad.content.decode()) == []
    export = client.get(f"{url}?state=bogus&export=csv")
    assert export.status_code == 400 and b"state" in export.content
    assert acked(client.get(f"{url}?cluster=sh-1").content.decode()) == []


def test_a_targets_nodes_are_refused_outside_the_viewers_scope(client, django_user_model, acks):
    target, hidden = acks
    scoped = make_user(django_user_model, "sh-viewer", None)
    bindings.grant(scoped, bindings.Grant(VIEWER, RoleBinding.Scope.CLUSTERS, ("sh-1",)))
    client.force_login(scoped)
    assert client.get(f"/nodeconfig/targets/{hidden.pk}/?export=csv").status_code == 200
    refused(client, f"/nodeconfig/targets/{target.pk}/?export=csv")


def test_a_targets_nodes_cost_the_same_queries_for_more_rows(client, viewer, acks):
    from nodeconfig.models import NodeConfig

    target, _hidden = acks
    cluster = Cluster.objects.get(name="bj-1")
    nodes = Node.objects.bulk_create(Node(cluster=cluster, name=f"m-{i:03d}", labels={}) for i in range(120))
    NodeConfig.objects.bulk_create(NodeConfig(node=node, cluster=cluster, config_type=target.config_type, matched_target=target,
                                              target=target, revision=target.revision, config_hash=target.config_hash)
                                   for node in nodes)
    client.force_login(viewer)
    url = f"/nodeconfig/targets/{target.pk}/"
    same_queries(client, f"{url}?per_page=25", f"{url}?per_page=100")


# ---------------------------------------------------------------------------- a federated object's members and placement

@pytest.fixture
def fed():
    from federation.models import FederatedObject, MemberObject

    clusters = {name: Cluster.objects.create(name=name, connector="simulated") for name in ("bj-1", "sh-1", "gz-1", "hz-1")}
    template = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"replicas": 3}}
    schedule = {"clusters": {"bj-1": 2, "sh-1": 1}, "feasible": ["bj-1", "sh-1", "hz-1"], "selected": ["bj-1", "sh-1"],
                "filtered": {"gz-1": ["cluster is cordoned"]}, "not_selected": {"hz-1": "lowest score"},
                "total_scores": {"bj-1": 180, "sh-1": 150, "hz-1": 90}, "weights": {"bj-1": 600, "sh-1": 400},
                "estimated_capacity": {"bj-1": 40, "sh-1": 12}, "profile": "default"}
    obj = FederatedObject.objects.create(namespace="shop", name="web", api_version="apps/v1", kind="Deployment",
                                         template=template, template_hash="h1", phase="Ready",
                                         placement={"bj-1": 2, "sh-1": 1}, schedule=schedule,
                                         status={"desiredReplicas": 3, "readyReplicas": 3})
    for name, replicas, state, error in (("bj-1", 2, "applied", ""), ("sh-1", 1, "error", "unreachable: refused"),
                                         ("hz-1", 1, "deleting", "")):
        MemberObject.objects.create(object=obj, cluster=clusters[name], replicas=replicas, state=state, error=error,
                                    observed={"templateHash": "h1", "readyReplicas": replicas, "availableReplicas": replicas,
                                              "updatedReplicas": replicas})
    FederatedObject.objects.create(namespace="other", name="web", api_version="v1", kind="ConfigMap",
                                   template={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}},
                                   template_hash="h2")
    return obj


def section(html: str, anchor: str) -> str:
    start = html.index(f'id="{anchor}"')
    return html[start:html.index("</table>", start)]


def test_a_federated_objects_members_sort_search_and_export(client, viewer, fed):
    url = f"/federation/objects/{fed.pk}/"
    client.force_login(viewer)
    html = client.get(url).content.decode()
    assert row_keys(section(html, "fed-members"), "data-cluster") == ["bj-1", "hz-1", "sh-1"]
    assert 'data-fed-field="scheduled"' in html and 'class="fed-bar updated"' in html, "the live hooks stay"
    assert row_keys(section(client.get(f"{url}?members-sort=-cluster").content.decode(), "fed-members"),
                    "data-cluster") == ["sh-1", "hz-1", "bj-1"]
    assert row_keys(section(client.get(f"{url}?members-sort=state").content.decode(), "fed-members"),
                    "data-cluster") == ["bj-1", "hz-1", "sh-1"]
    assert row_keys(section(client.get(f"{url}?members-q=SH").content.decode(), "fed-members"), "data-cluster") == ["sh-1"]
    live = client.get(f"{url}?fragment=live&members-sort=-cluster").content.decode()
    assert "<html" not in live and row_keys(section(live, "fed-members"), "data-cluster") == ["sh-1", "hz-1", "bj-1"], \
        "the live fragment keeps the table's order"
    response = client.get(f"{url}?members-sort=-cluster&members-export=csv")
    assert response["Content-Disposition"] == f'attachment; filename="meridian-federated-{fed.pk}-members.csv"'
    rows = csv_rows(response)
    assert rows[0] == ["Cluster", "Scheduled", "State", "Ready", "Available", "Updated", "Error"]
    assert rows[1] == ["sh-1", "1", "error", "1", "1", "1", "unreachable: refused"]
    assert rows[2][:3] == ["hz-1", "0", "deleting"], "a cluster it is leaving: nothing scheduled there"


def test_a_federated_objects_placement_sorts_searches_and_exports(client, viewer, fed):
    url = f"/federation/objects/{fed.pk}/"
    client.force_login(viewer)
    html = client.get(url).content.decode()
    placement = section(html, "placement")
    assert row_keys(placement, "data-cluster") == ["bj-1", "sh-1", "hz-1", "gz-1"], "placed, then by outcome"
    assert 'class="fed-outcome-placed' in placement
    assert row_keys(section(client.get(f"{url}?placement-sort=-score").content.decode(), "placement"),
                    "data-cluster")[:3] == ["bj-1", "sh-1", "hz-1"]
    assert row_keys(section(client.get(f"{url}?placement-sort=cluster").content.decode(), "placement"),
                    "data-cluster") == ["bj-1", "gz-1", "hz-1", "sh-1"]
    assert row_keys(section(client.get(f"{url}?placement-q=cordoned").content.decode(), "placement"),
                    "data-cluster") == ["gz-1"], "the reasons are searched too"
    rows = csv_rows(client.get(f"{url}?placement-q=gz&placement-export=csv"))
    assert rows[0] == ["Cluster", "Outcome", "Replicas", "Score", "Weight", "Estimated capacity", "Why"]
    assert rows[1][:2] == ["gz-1", "filtered"] and rows[1][6] == "cluster is cordoned"


def test_a_federated_objects_tables_are_refused_outside_the_viewers_namespaces(client, django_user_model, fed):
    from federation.models import FederatedObject

    scoped = make_user(django_user_model, "other-ns-viewer", None)
    bindings.grant(scoped, bindings.Grant(VIEWER, RoleBinding.Scope.NAMESPACES, ("other",)))
    client.force_login(scoped)
    mine = FederatedObject.objects.get(namespace="other")
    assert client.get(f"/federation/objects/{mine.pk}/?members-export=csv").status_code == 200
    for param in ("members-export", "placement-export"):
        refused(client, f"/federation/objects/{fed.pk}/?{param}=csv")


def test_the_federation_index_filters_through_a_filterset(client, viewer, fed):
    client.force_login(viewer)
    assert client.get("/federation/?namespace=shop").context["total"] == 1
    assert client.get("/federation/?namespace=nope").context["total"] == 0, "an unknown namespace matches nothing"
    bad = client.get("/federation/?phase=bogus")
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode()
    assert row_keys(bad.content.decode(), "data-object-id") == []
    export = client.get("/federation/?phase=bogus&export=csv")
    assert export.status_code == 400 and b"phase" in export.content


# ---------------------------------------------------------------------------- water levels

@pytest.fixture
def levels():
    for name, requested, drain in (("bj-1", 95_000, None), ("sh-1", 10_000, True), ("gz-1", 50_000, None)):
        Cluster.objects.create(name=name, connector="simulated", ready=name != "gz-1", cpu_allocatable_milli=100_000,
                               cpu_requested_milli=requested, memory_allocatable_bytes=64 * 2**30,
                               memory_requested_bytes=16 * 2**30, cordoned=drain is not None, drain=bool(drain))


WATER = "/federation/water-levels/"


def test_the_water_levels_sort_search_and_export(client, viewer, levels):
    client.force_login(viewer)
    html = client.get(WATER).content.decode()
    assert row_keys(html, "data-cluster") == ["bj-1", "gz-1", "sh-1"]
    assert row_keys(client.get(f"{WATER}?sort=-cpu").content.decode(), "data-cluster") == ["bj-1", "gz-1", "sh-1"]
    assert row_keys(client.get(f"{WATER}?sort=cpu").content.decode(), "data-cluster") == ["sh-1", "gz-1", "bj-1"]
    assert row_keys(client.get(f"{WATER}?sort=state").content.decode(), "data-cluster")[-1] == "sh-1"
    assert row_keys(client.get(f"{WATER}?q=SH").content.decode(), "data-cluster") == ["sh-1"]
    response = client.get(f"{WATER}?sort=-cpu&export=csv")
    assert response["Content-Disposition"] == 'attachment; filename="meridian-water-levels.csv"'
    rows = csv_rows(response)
    assert rows[0][:2] == ["Cluster", "CPU deploy rate (%)"] and "CPU requested" in rows[0] and "Weight ‰" in rows[0]
    assert [r[0] for r in rows[1:]] == ["bj-1", "gz-1", "sh-1"] and rows[1][1] == "95.0"
    assert rows[1][rows[0].index("CPU requested")] == "95.0" and rows[3][rows[0].index("State")] == "draining"
    assert "Actions" not in rows[0]


def test_the_water_level_cells_keep_their_live_hooks(client, viewer, operator, levels):
    """federation.js finds ``#fed-water-table tbody tr[data-cluster]`` and in it
    ``td[data-res=<key>]`` (a ``b`` bar, a ``span`` rate, a ``small`` detail), ``[data-f=weight]``
    and ``[data-f=state]``; the cordon dialog reads ``a[data-cordon]`` and its row's cluster."""
    client.force_login(viewer)
    html = client.get(WATER).content.decode()
    table = section(html, "fed-water-table")
    assert "<tbody>" in table
    row = table.split('data-cluster="bj-1"')[1].split("</tr>")[0]
    assert re.search(r'<tr id="cluster-bj-1" data-cluster="bj-1" data-state=""', table)
    assert re.search(r'<td data-res="cpu" class="hot"><b style="--r:95.0%"></b><span>95%</span><small>95 / 100 · 5</small></td>',
                     row), row
    assert 'data-f="weight"' in row and 'data-f="state"' in row and "data-cordon" not in html
    assert 'data-state="draining"' in table and 'class="badge fed-cordon draining"' in table
    client.force_login(operator)
    html = client.get(WATER).content.decode()
    assert 'data-cordon="drain" href="/federation/clusters/gz-1/cordon/?action=drain"' in html


def test_the_water_levels_are_refused_to_a_scoped_viewer(client, django_user_model, levels):
    scoped = make_user(django_user_model, "bj-viewer", None)
    bindings.grant(scoped, bindings.Grant(VIEWER, RoleBinding.Scope.CLUSTERS, ("bj-1",)))
    client.force_login(scoped)
    refused(client, WATER)
    refused(client, f"{WATER}?export=csv")


def test_the_water_levels_cost_the_same_queries_for_more_clusters(client, viewer, levels):
    client.force_login(viewer)
    with CaptureQueriesContext(connection) as few:
        client.get(WATER)
    Cluster.objects.bulk_create(Cluster(name=f"zz-{i:03d}", connector="simulated", cpu_allocatable_milli=1000)
                                for i in range(80))
    with CaptureQueriesContext(connection) as many:
        client.get(f"{WATER}?per_page=100")
    assert len(many.captured_queries) <= len(few.captured_queries)


# ---------------------------------------------------------------------------- a node's pods

@pytest.fixture
def pods():
    clusters = {name: Cluster.objects.create(name=name, connector="simulated") for name in ("bj-1", "sh-1")}
    for cluster in clusters.values():
        Node.objects.create(cluster=cluster, name="n-1")
    for i, (namespace, name, cpu) in enumerate((("ml", "train-a4", 4000), ("web", "shop", 500), ("ml", "infer", 2000))):
        Pod.objects.create(cluster=clusters["bj-1"], namespace=namespace, name=name, uid=f"u{i}", node_name="n-1",
                           phase="Running", requests={"cpu": f"{cpu}m", "memory": "1Gi"}, cpu_request_milli=cpu,
                           memory_request_bytes=2**30)
    Pod.objects.create(cluster=clusters["bj-1"], namespace="ml", name="done", uid="u9", node_name="n-1", phase="Succeeded",
                       finished_at=timezone.now())
    return clusters


NODE = "/fleet/clusters/bj-1/nodes/n-1/"


def test_a_nodes_pods_sort_search_and_export(client, viewer, pods):
    client.force_login(viewer)
    assert row_keys(client.get(NODE).content.decode(), "data-pod") == ["ml/infer", "ml/train-a4", "web/shop"]
    assert row_keys(client.get(f"{NODE}?sort=-cpu").content.decode(), "data-pod") == ["ml/train-a4", "ml/infer", "web/shop"]
    assert row_keys(client.get(f"{NODE}?q=shop").content.decode(), "data-pod") == ["web/shop"]
    rows = csv_rows(client.get(f"{NODE}?sort=cpu&export=csv"))
    assert rows[0] == ["Pod", "Phase", "CPU", "Memory"]
    assert rows[1:] == [["web/shop", "Running", "500m", "1Gi"], ["ml/infer", "Running", "2000m", "1Gi"],
                        ["ml/train-a4", "Running", "4000m", "1Gi"]], "finished pods are not on the node"


def test_a_nodes_page_and_pods_are_refused_outside_the_viewers_clusters(client, django_user_model, pods):
    scoped = make_user(django_user_model, "sh-only", None)
    bindings.grant(scoped, bindings.Grant(VIEWER, RoleBinding.Scope.CLUSTERS, ("sh-1",)))
    client.force_login(scoped)
    assert client.get("/fleet/clusters/sh-1/nodes/n-1/?export=csv").status_code == 200
    refused(client, NODE)
    refused(client, f"{NODE}?export=csv")
