"""Every list page sorts, searches, pages, picks columns and exports CSV the same way
(``core.tables``): through the real views, with the test client, asserting rows' order."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.audit import record_change
from core.context import acting_as
from core.models import Job
from fleet.models import Cluster, Node
from nodeconfig.models import ConfigType

pytestmark = pytest.mark.django_db


def csv_rows(response) -> list[list[str]]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def row_keys(html: str, attr: str) -> list[str]:
    return re.findall(rf'<tr[^>]* {attr}="([^"]+)"', html)


@pytest.fixture
def clusters():
    for name, requested in (("bj-a4", 90_000), ("sh-b2", 10_000), ("gz-c7", 50_000)):
        Cluster.objects.create(name=name, connector="simulated", ready=True, node_count=3, ready_node_count=3,
                               cpu_allocatable_milli=100_000, cpu_requested_milli=requested,
                               labels={"zone": "north" if name == "bj-a4" else "south"})


@pytest.fixture
def nodes():
    cluster = Cluster.objects.create(name="big", connector="simulated", ready=True)
    Node.objects.bulk_create(Node(cluster=cluster, name=f"node-{i:03d}", ready=True, cpu_allocatable_milli=1000,
                                  labels={"machineModel": "A4" if i % 2 else "A3"}) for i in range(120))
    return cluster


def test_cluster_list_sorts_by_name_and_by_level(client, viewer, clusters):
    client.force_login(viewer)
    assert row_keys(client.get("/fleet/").content.decode(), "data-cluster") == ["bj-a4", "gz-c7", "sh-b2"]
    assert row_keys(client.get("/fleet/?sort=-name").content.decode(), "data-cluster") == ["sh-b2", "gz-c7", "bj-a4"]
    assert row_keys(client.get("/fleet/?sort=cpu").content.decode(), "data-cluster") == ["sh-b2", "gz-c7", "bj-a4"]
    html = client.get("/fleet/?sort=cpu").content.decode()
    assert 'href="?sort=-cpu"' in html and 'aria-sort="ascending"' in html, "the header sorts the other way next"


def test_cluster_list_searches_names_and_labels(client, viewer, clusters):
    client.force_login(viewer)
    assert row_keys(client.get("/fleet/?q=A4").content.decode(), "data-cluster") == ["bj-a4"]
    assert row_keys(client.get("/fleet/?q=south").content.decode(), "data-cluster") == ["gz-c7", "sh-b2"]
    html = client.get("/fleet/?q=a4").content.decode()
    assert "90.0%" in html, "the water level figures are fleet.queries' own"


def test_cluster_list_exports_the_searched_sorted_rows(client, viewer, clusters):
    client.force_login(viewer)
    response = client.get("/fleet/?q=-&sort=-cpu&export=csv&per_page=25&page=2")
    assert response["Content-Disposition"] == 'attachment; filename="meridian-clusters.csv"'
    rows = csv_rows(response)
    assert rows[0][:3] == ["Cluster", "Status", "Nodes"]
    assert [r[0] for r in rows[1:]] == ["bj-a4", "gz-c7", "sh-b2"], "every page, not the one asked for"
    assert rows[1][3] == "90.0" and "<" not in "".join(rows[1])


@pytest.mark.parametrize("query", ["sort=nonsense", "sort=-labels", "per_page=abc", "per_page=-5", "page=999",
                                   "page=abc", "page=0", "columns=bogus", "export=xml", "q=%25%27%22"])
@pytest.mark.parametrize("path", ["/fleet/", "/audit/", "/jobs/", "/nodeconfig/types/", "/fleet/clusters/big/"])
def test_bad_parameters_are_ignored_or_clamped(client, viewer, nodes, path, query):
    client.force_login(viewer)
    assert client.get(f"{path}?{query}").status_code == 200


def test_page_and_per_page_are_clamped(client, viewer, nodes):
    client.force_login(viewer)
    last = client.get("/fleet/clusters/big/?per_page=50&page=999").content.decode()
    assert "Page 3 of 3" in last and "node-119" in last and "node-099" not in last
    assert "Page 1 of 2" in client.get("/fleet/clusters/big/?per_page=70").content.decode(), "70 → the next size, 100"


def test_a_long_table_is_counted_only_as_deep_as_the_page_asked(client, viewer, nodes, monkeypatch):
    """Counting a million audit entries took longer than the rest of the page: rows are counted
    up to a limit or one page past the page asked for, and the pager says "more than"."""
    monkeypatch.setattr("core.tables.COUNT_LIMIT", 30)
    client.force_login(viewer)
    with CaptureQueriesContext(connection) as queries:
        first = client.get("/fleet/clusters/big/?per_page=25").content.decode()
    assert "Page 1 of more than 2" in first and "more than 50 rows" in first and 'rel="next"' in first
    assert any("COUNT(" in q["sql"].upper() and "LIMIT 51" in q["sql"].upper() for q in queries.captured_queries)
    third = client.get("/fleet/clusters/big/?per_page=25&page=3").content.decode()
    assert "Page 3 of more than 4" in third and "node-050" in third
    last = client.get("/fleet/clusters/big/?per_page=25&page=5").content.decode()
    assert "Page 5 of 5" in last and "120 rows" in last and 'rel="next"' not in last and "node-119" in last


def test_a_pager_writes_its_counts_as_every_page_writes_numbers(client, viewer, nodes):
    """1,234 rows, not 1234 (and "more than 10,000")."""
    Node.objects.bulk_create(Node(cluster=nodes, name=f"more-{i:04d}", ready=True) for i in range(1114))
    client.force_login(viewer)
    page = client.get("/fleet/clusters/big/").content.decode()
    assert "1,234 rows" in page and "1234 rows" not in page and "Page 1 of 25" in page


def test_nodes_keep_the_label_selector_and_sort_and_search(client, viewer, nodes):
    client.force_login(viewer)
    html = client.get("/fleet/clusters/big/?labelSelector=machineModel%3DA4&sort=-name&per_page=25").content.decode()
    names = re.findall(r">(node-\d+)</a>", html)
    assert names[:3] == ["node-119", "node-117", "node-115"] and len(names) == 25
    assert 'name="labelSelector"' in html and "Page 1 of 3" in html
    assert 'href="?labelSelector=machineModel%3DA4&amp;sort=-name&amp;per_page=25&amp;page=2"' in html
    found = re.findall(r">(node-\d+)</a>", client.get("/fleet/clusters/big/?q=e-01").content.decode())
    assert found == [f"node-01{i}" for i in range(10)]
    bad = client.get("/fleet/clusters/big/?labelSelector=machineModel%20in%20(").content.decode()
    assert "Invalid label selector" in bad


def test_nodes_export_every_matching_node(client, viewer, nodes):
    client.force_login(viewer)
    rows = csv_rows(client.get("/fleet/clusters/big/?labelSelector=machineModel%3DA3&export=csv"))
    assert rows[0][0] == "Node" and len(rows) == 61 and rows[1][0] == "node-000"
    assert "machineModel=A3" in rows[1][rows[0].index("Labels")]


def test_node_page_query_count_does_not_grow_with_rows(client, viewer, nodes, django_assert_max_num_queries):
    client.force_login(viewer)
    client.get("/fleet/clusters/big/?per_page=25")
    with django_assert_max_num_queries(14) as small:
        client.get("/fleet/clusters/big/?per_page=25")
    with django_assert_max_num_queries(len(small.captured_queries)):
        client.get("/fleet/clusters/big/?per_page=100")


def test_audit_log_sorts_searches_and_exports(client, viewer):
    for actor, what in (("carol", "target hdd-a4"), ("alice", "cluster bj-3"), ("bob", "target ssd-b1")):
        with acting_as(actor):
            record_change(None, "update", object_repr=what, reason="INC-1")
    client.force_login(viewer)
    html = client.get("/audit/?sort=actor").content.decode()
    assert [m for m in re.findall(r"<td >(alice|bob|carol)</td>", html)] == ["alice", "bob", "carol"]
    html = client.get("/audit/?q=a4").content.decode()
    assert "target hdd-a4" in html and "cluster bj-3" not in html
    rows = csv_rows(client.get("/audit/?sort=-actor&export=csv"))
    assert [r[1] for r in rows[1:]] == ["carol", "bob", "alice"]


def test_jobs_sort_search_and_export(client, viewer):
    for kind in ("sync-a4", "prune", "reconcile"):
        Job.objects.create(kind=kind, triggered_by="test", status=Job.Status.SUCCEEDED)
    client.force_login(viewer)
    html = client.get("/jobs/?sort=id").content.decode()
    assert re.findall(r"(sync-a4|prune|reconcile) #", html) == ["sync-a4", "prune", "reconcile"]
    html = client.get("/jobs/?sort=-id").content.decode()
    assert re.findall(r"(sync-a4|prune|reconcile) #", html) == ["reconcile", "prune", "sync-a4"]
    assert re.findall(r"(sync-a4|prune|reconcile) #", client.get("/jobs/?q=A4").content.decode()) == ["sync-a4"]
    rows = csv_rows(client.get("/jobs/?q=prune&export=csv"))
    assert rows[0][:2] == ["Job", "Status"] and rows[1][:2] == [f"prune #{Job.objects.get(kind='prune').pk}", "succeeded"]


def test_config_types_sort_search_and_export(client, viewer):
    for name in ("QaTestA4Configuration", "QaTestBConfiguration", "QaTestCConfiguration"):
        ConfigType.objects.create(name=name, resource=name.lower() + "s", description=f"{name} for tests")
    client.force_login(viewer)
    assert row_keys(client.get("/nodeconfig/types/?q=qatest&sort=-name").content.decode(), "id") == [
        "type-QaTestCConfiguration", "type-QaTestBConfiguration", "type-QaTestA4Configuration"]
    assert row_keys(client.get("/nodeconfig/types/?q=a4c").content.decode(), "id") == ["type-QaTestA4Configuration"]
    rows = csv_rows(client.get("/nodeconfig/types/?q=testc&export=csv"))
    assert rows[0][0] == "Type" and [r[0] for r in rows[1:]] == ["QaTestCConfiguration"]


def test_column_choice_is_remembered_in_the_session(client, viewer, clusters):
    client.force_login(viewer)
    html = client.get("/fleet/?columns=&columns=name&columns=gpu").content.decode()
    assert ">GPU</a>" in html and ">Memory</a>" not in html
    html = client.get("/fleet/").content.decode()
    assert ">GPU</a>" in html and ">Memory</a>" not in html, "kept for the next visit"
    html = client.get("/fleet/?columns=").content.decode()
    assert ">Memory</a>" in html, "an empty choice resets to the default"


@pytest.mark.parametrize("path", ["/fleet/", "/audit/", "/jobs/", "/nodeconfig/types/", "/scheduling/"])
def test_export_needs_the_pages_permission(client, nobody, path):
    client.force_login(nobody)
    response = client.get(f"{path}?export=csv")
    assert response.status_code == 403 and not response.get("Content-Disposition")
    client.logout()
    assert client.get(f"{path}?export=csv").status_code == 302


def test_a_page_with_several_tables_prefixes_each_ones_parameters(client, viewer):
    from scheduling.models import NodeSchedulerConfig, SchedulingPolicy

    for name in ("qa-a4", "qa-b", "qa-c"):
        SchedulingPolicy.objects.create(name=name, description=f"{name} policy")
        NodeSchedulerConfig.objects.create(name=name, spec={})
    client.force_login(viewer)
    html = client.get("/scheduling/?policy-q=qa-&policy-sort=-name&nsc-q=a4").content.decode()
    policies = html[html.index('id="policy-table"'):html.index("</table>", html.index('id="policy-table"'))]
    assert re.findall(r">(qa-\w+)</a>", policies) == ["qa-c", "qa-b", "qa-a4"]
    templates = html[html.index('id="nsc-table"'):html.index("</table>", html.index('id="nsc-table"'))]
    assert re.findall(r">(qa-\w+)</a>", templates) == ["qa-a4"]
    link = re.search(r'href="\?([^"]+)" data-sort="name"', policies).group(1)
    assert sorted(link.split("&amp;")) == ["nsc-q=a4", "policy-q=qa-", "policy-sort=name"], "other tables keep their state"
    rows = csv_rows(client.get("/scheduling/?nsc-q=qa&nsc-sort=-name&nsc-export=csv"))
    assert rows[0][0] == "Name" and [r[0] for r in rows[1:]] == ["qa-c", "qa-b", "qa-a4"]
    assert client.get("/scheduling/?scb-sort=bogus&psc-page=x&policy-per_page=abc").status_code == 200


def test_federation_policies_sort_search_and_export(client, operator):
    from federation.models import PropagationPolicy

    for name in ("qa-a4", "qa-b", "qa-c"):
        PropagationPolicy.objects.create(name=name, spec={"schedulingMode": "Divide"})
    client.force_login(operator)
    html = client.get("/federation/policies/?propagation-q=qa-&propagation-sort=-name").content.decode()
    assert re.findall(r'data-policy="[^"]*(qa-\w+)"', html) == ["qa-c", "qa-b", "qa-a4"]
    assert "csrfmiddlewaretoken" in html, "the delete buttons are real forms"
    assert re.findall(r'data-policy="[^"]*(qa-\w+)"', client.get("/federation/policies/?propagation-q=A4").content.decode()) == ["qa-a4"]
    rows = csv_rows(client.get("/federation/policies/?propagation-q=qa-b&propagation-export=csv"))
    assert rows[0][:2] == ["Namespace", "Name"] and rows[1][1] == "qa-b" and "Actions" not in rows[0]


# ---------------------------------------------------------------------------- federated objects

@pytest.fixture
def federated():
    from federation.models import FederatedObject

    made = {}
    for name, kind, phase, placement in (("qa-b", "Deployment", "Ready", {"bj-1": 2, "sh-1": 1}),
                                         ("qa-a4", "ConfigMap", "Pending", {}),
                                         ("qa-c", "Deployment", "Failed", {"gz-1": None})):
        made[name] = FederatedObject.objects.create(
            namespace="qa", name=name, api_version="v1", kind=kind, template={}, template_hash="x", phase=phase,
            placement=placement, status={"desiredReplicas": 3, "readyReplicas": 2} if kind == "Deployment" else {})
    return made


def object_names(html: str, federated) -> list[str]:
    by_pk = {str(fed.pk): name for name, fed in federated.items()}
    return [by_pk[pk] for pk in row_keys(html, "data-object-id") if pk in by_pk]


def test_federated_objects_sort_search_and_export(client, viewer, federated):
    client.force_login(viewer)
    assert object_names(client.get("/federation/").content.decode(), federated) == ["qa-a4", "qa-b", "qa-c"]
    html = client.get("/federation/?sort=-name").content.decode()
    assert object_names(html, federated) == ["qa-c", "qa-b", "qa-a4"]
    assert 'id="fed-objects-table"' in html and 'data-live-fragment="live"' in html, "the table stays a live part"
    assert object_names(client.get("/federation/?sort=phase").content.decode(), federated) == ["qa-c", "qa-a4", "qa-b"]
    assert object_names(client.get("/federation/?q=A4").content.decode(), federated) == ["qa-a4"]
    html = client.get("/federation/?kind=Deployment&sort=-name").content.decode()
    assert object_names(html, federated) == ["qa-c", "qa-b"], "the page's filters and the table's sort combine"
    assert 'name="sort" value="-name"' in html, "the filter form keeps the table's sort"
    fragment = client.get("/federation/?fragment=live&q=qa-b").content.decode()
    assert "<html" not in fragment and object_names(fragment, federated) == ["qa-b"]
    response = client.get("/federation/?kind=Deployment&sort=-name&export=csv")
    assert response["Content-Disposition"] == 'attachment; filename="meridian-federated-objects.csv"'
    rows = csv_rows(response)
    assert rows[0][:4] == ["Kind", "Namespace/name", "Phase", "Clusters (replicas)"]
    assert [r[1] for r in rows[1:]] == ["qa/qa-c", "qa/qa-b"]
    assert rows[2][2:5] == ["Ready", "bj-1=2 sh-1=1", "2/3"] and rows[1][3] == "gz-1=copy"


# ---------------------------------------------------------------------------- node config targets

@pytest.fixture
def targets():
    from nodeconfig.models import ConfigTarget

    one = ConfigType.objects.create(name="QaOneConfiguration", resource="qaones")
    two = ConfigType.objects.create(name="QaTwoConfiguration", resource="qatwos")
    for config_type, name, selector in ((one, "qa-b", "disk=ssd"), (two, "qa-a4", "disk=hdd"), (one, "qa-c", "")):
        ConfigTarget.objects.create(config_type=config_type, name=name, node_label_selector=selector, matched_node_count=3)
    return one, two


def test_config_targets_sort_search_filter_and_export(client, viewer, targets):
    from nodeconfig.models import ConfigTarget

    names = {str(t.pk): t.name for t in ConfigTarget.objects.all()}

    def shown(url):
        return [names[pk] for pk in row_keys(client.get(url).content.decode(), "data-target-id") if pk in names]

    client.force_login(viewer)
    assert shown("/nodeconfig/") == ["qa-b", "qa-c", "qa-a4"], "by type, then name"
    assert shown("/nodeconfig/?sort=-name") == ["qa-c", "qa-b", "qa-a4"]
    assert shown("/nodeconfig/?q=hdd") == ["qa-a4"] and shown("/nodeconfig/?q=qatwo") == ["qa-a4"]
    assert shown("/nodeconfig/?type=QaOneConfiguration&sort=-name") == ["qa-c", "qa-b"]
    assert shown("/nodeconfig/?type=nope") == []
    html = client.get("/nodeconfig/?sort=name").content.decode()
    assert html.count('class="nc-progress"') >= 3 and '<span data-count="targeted">0</span>' in html
    assert 'href="/nodeconfig/?type=QaOneConfiguration"' in client.get("/nodeconfig/types/").content.decode()
    rows = csv_rows(client.get("/nodeconfig/?q=qa-&sort=-name&export=csv"))
    assert rows[0][:3] == ["Type", "Target", "Mode"] and [r[1] for r in rows[1:]] == ["qa-c", "qa-b", "qa-a4"]
    assert rows[2][0] == "QaOneConfiguration" and "disk=ssd" in rows[2][4]
    assert "0 applied" in rows[1][rows[0].index("Progress")]


# ---------------------------------------------------------------------------- quota groups

@pytest.fixture
def quota_groups(viewer):
    from quotas.models import QuotaGroup

    root = QuotaGroup.objects.create(name="qa-root", path="/qa-root/", hard={"limits.cpu": "1000", "limits.memory": "64Gi"},
                                     used={"limits.cpu": "15478900m", "limits.memory": "1536Mi"})
    for name in ("qa-b", "qa-a4"):
        QuotaGroup.objects.create(name=name, parent=root, path=f"/qa-root/{name}/", depth=1, hard={"limits.cpu": "10"},
                                  used={"limits.cpu": "4"})
    root.owners.add(viewer)
    return root


def test_quota_groups_table_sorts_searches_and_exports(client, viewer, quota_groups):
    client.force_login(viewer)
    html = client.get("/quotas/").content.decode()
    assert row_keys(html, "data-group") == ["qa-root", "qa-a4", "qa-b"], "by path: each parent before its children"
    assert 'id="quota-treemap"' in html, "the tree map stays"
    assert row_keys(client.get("/quotas/?sort=-name").content.decode(), "data-group") == ["qa-root", "qa-b", "qa-a4"]
    assert row_keys(client.get("/quotas/?q=A4").content.decode(), "data-group") == ["qa-a4"]
    html = client.get("/quotas/?q=root").content.decode()
    assert "15,478.9 / 1,000" in html and "1.5Gi / 64Gi" in html and viewer.username in html
    rows = csv_rows(client.get("/quotas/?sort=-name&export=csv"))
    assert rows[0][:4] == ["Group", "Parent", "Path", "Owners"] and "limits.cpu" in rows[0]
    assert [r[0] for r in rows[1:]] == ["qa-root", "qa-b", "qa-a4"]
    cpu = rows[0].index("limits.cpu")
    assert rows[1][cpu] == "15,478.9 / 1,000" and rows[2][cpu] == "4 / 10" and rows[2][1] == "qa-root"
    assert rows[1][3] == viewer.username


def test_quota_table_queries_do_not_grow_with_groups(client, viewer, quota_groups, django_assert_max_num_queries):
    from quotas.models import QuotaGroup

    client.force_login(viewer)
    with CaptureQueriesContext(connection) as small:
        client.get("/quotas/?per_page=25")
    for i in range(40):
        group = QuotaGroup.objects.create(name=f"qa-x{i:02d}", path=f"/qa-x{i:02d}/", hard={"pods": "5"})
        group.owners.add(viewer)
    with django_assert_max_num_queries(len(small.captured_queries)):
        client.get("/quotas/?per_page=25")


@pytest.mark.parametrize("query", ["sort=nonsense", "sort=-clusters", "sort=-progress", "per_page=abc", "page=999",
                                   "page=abc", "columns=bogus", "export=xml", "q=%25%27%22", "q=%00", "type=%00", "phase=bogus",
                                   "kind=&namespace=%27", "key=bogus"])
@pytest.mark.parametrize("path", ["/federation/", "/nodeconfig/", "/quotas/"])
def test_bad_parameters_on_the_converted_pages(client, viewer, path, query):
    client.force_login(viewer)
    assert client.get(f"{path}?{query}").status_code == 200


@pytest.mark.parametrize("path", ["/federation/", "/nodeconfig/", "/quotas/"])
def test_the_converted_pages_export_needs_the_pages_permission(client, nobody, path):
    client.force_login(nobody)
    response = client.get(f"{path}?export=csv")
    assert response.status_code == 403 and not response.get("Content-Disposition")


def test_the_csv_streams_asynchronously_under_asgi(viewer):
    """Meridian serves through ASGI, where Django reads a sync iterator whole into memory before
    the first byte (a 200,000-node export held in RAM): the export is an async iterator there."""
    from asgiref.sync import async_to_sync
    from django.test import AsyncRequestFactory

    from core.models import ObjectChange
    from core.tables import ObjectChangeTable, build_table, export_csv

    for n in range(5):
        with acting_as(f"user-{n}"):
            record_change(None, "update", object_repr=f"thing {n}")
    request = AsyncRequestFactory().get("/audit/", {"export": "csv", "sort": "actor"})
    request.user, request.session = viewer, {}
    response = export_csv(build_table(request, ObjectChangeTable, ObjectChange.objects.all()), request)
    assert response.is_async

    async def body() -> str:
        return "".join([chunk.decode() async for chunk in response.streaming_content])

    rows = list(csv.reader(io.StringIO(async_to_sync(body)())))
    assert [r[1] for r in rows[1:]] == [f"user-{n}" for n in range(5)]


def test_rows_keep_each_rows_own_cell_attributes_beside_the_columns_fixed_ones() -> None:
    """``rows_html`` computes a column's fixed cell attributes once, a row-dependent one per row,
    and escapes values as the template did."""
    from datetime import UTC, datetime

    import django_tables2 as tables
    from django.test import RequestFactory

    from core.tables import BaseTable, TimeColumn, build_table

    class Rows(BaseTable):
        name = tables.Column(attrs={"td": {"class": "fixed"}})
        level = tables.Column(attrs={"td": {"data-level": lambda record: record["level"]}})
        at = TimeColumn(format="Y-m-d H:i")

    rows = [{"name": "<b>a</b>", "level": 1, "at": datetime(2026, 1, 2, 3, 4, tzinfo=UTC)},
            {"name": "b", "level": 2, "at": datetime(2026, 5, 6, 7, 8, tzinfo=UTC)}]
    html = str(build_table(RequestFactory().get("/"), Rows, rows).rows_html)
    assert re.findall(r'<td class="fixed">([^<]*(?:<[^/][^<]*)*)</td>', html) == ["&lt;b&gt;a&lt;/b&gt;", "b"]
    assert re.findall(r'data-level="(\d)"', html) == ["1", "2"]
    assert re.findall(r"<td [^>]*>(2026-[^<]*)</td>", html) == ["2026-01-02 03:04", "2026-05-06 07:08"]


def test_a_render_functions_parameters_are_read_once_and_as_django_tables2_reads_them(monkeypatch) -> None:
    """Cells call their column's render through django-tables2's ``call_with_appropriate``; the
    parameters it reads come from ``core.tables``' cache, equal to what the library reads itself."""
    import functools

    import django_tables2.utils as tables_utils

    from core import tables

    class Cells:
        def render_name(self, value, record):
            return value

        def render_any(self, value, **rest):
            return value

    def plain(record, table=None):
        return record

    class Render:
        def __call__(self, value):
            return value

    library = tables._read_signature  # django-tables2's own reader
    reads = []
    monkeypatch.setattr(tables, "_read_signature", lambda fn: reads.append(fn) or library(fn))
    monkeypatch.setattr(tables, "_SIGNATURES", {})
    first, second = Cells(), Cells()
    assert tables_utils.signature is tables._signature  # the library's call_with_appropriate reads ours
    assert tables._signature(first.render_name) == library(first.render_name) == (("value", "record"), None)
    assert tables._signature(second.render_name) == (("value", "record"), None)
    assert tables._signature(first.render_any) == library(first.render_any) == (("value",), "rest")
    assert tables._signature(plain) == library(plain) == (("record", "table"), None)
    assert len(reads) == 3  # once per function, whichever instance it is bound to
    partial, render = functools.partial(plain, table=1), Render()
    assert tables._signature(partial) == tables._signature(partial) == library(partial)
    assert tables._signature(render) == library(render) == (("value",), None)
    assert len(reads) == 6  # other callables are read every time, as before
    assert tables_utils.call_with_appropriate(first.render_name, {"value": 1, "record": 2, "table": 3}) == 1
    assert tables_utils.call_with_appropriate(plain, {"value": 1, "record": 2, "table": 3}) == 2
    assert tables_utils.call_with_appropriate(plain, {"value": 1, "record": 2}) is None  # (the library's rule: all or nothing)
