"""CPU co-location pages: the seed's example on the CPU map, the fleet view, what-if, actions."""

from __future__ import annotations

import html as htmllib
import re

import pytest
from django.urls import reverse

from core.models import ObjectChange
from fleet.models import Cluster
from scheduling.cpu import allocation
from scheduling.cpu.cpuset import parse_cpuset
from scheduling.models import CPUAllocation

from .cpu_fixtures import SEED_RESERVED, seed_node

pytestmark = pytest.mark.django_db
def login(client, user) -> None:
    client.force_login(user)


CELL = re.compile(r'<span class="cpu ([^"]*)" title="[^"]*" data-cpu="(\d+)" data-role="(\w+)" data-owner="([^"]*)">')


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="db-pool", connector=Cluster.ConnectorKind.SIMULATED)


@pytest.fixture
def seed_example(cluster):
    """The seed's customer: 2 exclusive and 2 shared instances on one 104-CPU host reserving 8."""
    host = seed_node(cluster, ratio="2")
    a = allocation.allocate_exclusive(host, namespace="db", name="core-a", app="core-a", request=32)
    b = allocation.allocate_exclusive(host, namespace="db", name="core-b", app="core-b", request=16, strategy="Spread")
    allocation.place_shared(host, namespace="db", name="edge-a", app="edge-a", request_milli=8000, limit_milli=8000)
    allocation.place_shared(host, namespace="db", name="edge-b", app="edge-b", request_milli=4000, limit_milli=8000)
    return host, a, b


def cells(html: str) -> dict[int, tuple[str, str, str]]:
    return {int(cpu): (role, owner, css) for css, cpu, role, owner in CELL.findall(html)}


def test_cpu_map_shows_each_owner(client, viewer, seed_example):
    host, a, b = seed_example
    login(client, viewer)
    response = client.get(reverse("scheduling:cpu-node", args=[host.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    grid = cells(html)
    assert len(grid) == 104
    reserved = set(parse_cpuset(SEED_RESERVED))
    assert {cpu for cpu, (role, _, _) in grid.items() if role == "reserved"} == reserved
    assert {cpu for cpu, (_, owner, _) in grid.items() if owner == "db/core-a"} == set(a.cpus)
    assert {cpu for cpu, (_, owner, _) in grid.items() if owner == "db/core-b"} == set(b.cpus)
    share = {cpu for cpu, (role, _, _) in grid.items() if role == "share"}
    assert share == set(range(104)) - reserved - set(a.cpus) - set(b.cpus) and len(share) == 48
    assert grid[a.cpus[0]][2] != grid[b.cpus[0]][2]  # two instances, two colours
    # accessible labels and the legend
    assert f'CPU {a.cpus[0]}: exclusive, db/core-a</span>' in html
    assert "CPU 0: reserved</span>" in html
    for text in ("Share pool", "Reserved", "db/core-a", "db/core-b", "db/edge-a", "db/edge-b", f"<code>{a.cpuset}</code>"):
        assert text in html
    assert "<script>" not in html and "onclick" not in html  # the CSP allows scripts from files only
    # viewers see no forms
    assert 'id="allocate-form"' not in html and "Release isolation" not in html


def test_operator_allocates_from_the_page_and_a_refusal_stays_on_the_form(client, operator, seed_example):
    host, a, b = seed_example
    login(client, operator)
    page = client.get(reverse("scheduling:cpu-node", args=[host.pk])).content.decode()
    version = htmllib.unescape(re.search(r'name="allocate-version" value="([^"]*)"', page).group(1))
    refused = client.post(reverse("scheduling:cpu-allocate", args=[host.pk]), {
        "allocate-namespace": "db", "allocate-name": "huge", "allocate-request": 65, "allocate-strategy": "SameCoreFirst",
        "allocate-exclude_reserved": "on", "allocate-version": version})
    assert refused.status_code == 200 and "request exceeds 2/3 of sellable CPUs (64)" in refused.content.decode()
    done = client.post(reverse("scheduling:cpu-allocate", args=[host.pk]), {
        "allocate-namespace": "db", "allocate-name": "small", "allocate-request": 4, "allocate-strategy": "SameCoreFirst",
        "allocate-exclude_reserved": "on", "allocate-version": version, "allocate-reason": "from the page"})
    assert done.status_code == 302
    assert CPUAllocation.objects.filter(pod_name="small", request=4).exists()
    stale = client.post(reverse("scheduling:cpu-allocate", args=[host.pk]), {
        "allocate-namespace": "db", "allocate-name": "late", "allocate-request": 1, "allocate-strategy": "SameCoreFirst",
        "allocate-version": version})
    assert stale.status_code == 200 and "changed since you read it" in stale.content.decode()
    page = client.get(reverse("scheduling:cpu-node", args=[host.pk])).content.decode()
    version = htmllib.unescape(re.search(r'name="isolate-version" value="([^"]*)"', page).group(1))
    isolated = client.post(reverse("scheduling:cpu-release-isolate", args=[host.pk]), {
        "isolate-instance": "db/core-a", "isolate-on": "1", "isolate-version": version, "isolate-reason": ""})
    assert isolated.status_code == 302 and CPUAllocation.objects.get(pod_name="core-a").release_isolate
    version = htmllib.unescape(re.search(r'name="release-version" value="([^"]*)"',
                                         client.get(reverse("scheduling:cpu-node", args=[host.pk])).content.decode()).group(1))
    released = client.post(reverse("scheduling:cpu-release", args=[host.pk]), {
        "release-instance": "db/small", "release-version": version, "release-reason": "done"})
    assert released.status_code == 302
    assert ObjectChange.objects.filter(verb="release", reason="done").exists()
    assert ObjectChange.objects.filter(verb="allocate", reason="from the page").exists()


def test_viewers_cannot_post(client, viewer, seed_example):
    host, _, _ = seed_example
    login(client, viewer)
    response = client.post(reverse("scheduling:cpu-release", args=[host.pk]), {"release-instance": "db/core-a"})
    assert response.status_code == 403
    assert client.get(reverse("scheduling:cpu-what-if")).status_code == 403


def test_the_fleet_page_writes_figures_as_the_overview_does(client, viewer, cluster):
    """Grouped by the language's separator (1,144), as every other page prints numbers, the
    counts of where a request fits included."""
    for index in range(11):
        seed_node(cluster, f"db-host-{index}")
    login(client, viewer)
    page = client.get(reverse("scheduling:cpu-fleet")).content.decode()
    assert "of 1,144 logical CPUs" in page and '<span class="value">1,056</span>' in page  # sellable
    sized = client.get(reverse("scheduling:cpu-fleet"), {"request": 1}).content.decode()
    assert "1,056 such instances sellable" in sized
    for html in (page, sized):
        text = re.sub(r"\d{1,3}(,\d{3})+", "", html.split("<main", 1)[1].split("</main>")[0])
        assert not re.search(r"\b\d{4,}\b(?![^<]*>)", text), "no ungrouped figure of four digits or more in the page's text"


def test_fleet_page_and_what_if(client, operator, cluster, seed_example):
    host, _, _ = seed_example
    full = seed_node(cluster, "db-host-2")
    allocation.allocate_exclusive(full, namespace="db", name="x", request=64)
    allocation.allocate_exclusive(full, namespace="db", name="y", request=8)  # 24 left there, 32 on the seed's host
    login(client, operator)
    page = client.get(reverse("scheduling:cpu-fleet")).content.decode()
    assert 'id="total-nodes">2<' in page and "db-host-1" in page and "db-host-2" in page
    page = client.get(reverse("scheduling:cpu-fleet"), {"request": 32}).content.decode()
    assert 'id="fit-nodes">1<' in page and "db-host-1" in page and "db-host-2" not in page
    answer = client.get(reverse("scheduling:cpu-what-if"), {"request": 32}).content.decode()
    assert "Yes: 1 node can take 32 exclusive CPUs now." in answer and "db-host-1" in answer
    none = client.get(reverse("scheduling:cpu-what-if"), {"request": 33}).content.decode()
    assert "No node can take 33 exclusive CPUs now." in none
    node = client.get(reverse("scheduling:cpu-node", args=[full.pk]), {"request": 33}).content.decode()
    assert "Insufficient exclusive cpu" in node and 'id="what-if-answer"' in node


def test_pages_render_in_chinese(client, viewer, seed_example):
    host, _, _ = seed_example
    login(client, viewer)
    response = client.get(reverse("scheduling:cpu-node", args=[host.pk]), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 200


def test_the_fleet_view_adds_up_its_clusters_from_the_summary_index_alone():
    """The fleet view's GROUP BY reads only columns of the summary index, so PostgreSQL answers
    it from the index: at 200,000 nodes a scan of the index, not of the table with every node's
    CPU state (``COUNT(id)`` needed the table: 97 ms, ``COUNT(*)`` 52 ms)."""
    from django.db.models import F

    from scheduling.cpu import capacity
    from scheduling.models import NodeCPU

    from django.db.models import Q

    def columns(expression) -> set[str]:
        """The fields an aggregate reads: its sources (nested) and its filter's lookups."""
        if isinstance(expression, F):
            return {expression.name}
        out: set[str] = set()
        for source in getattr(expression, "get_source_expressions", list)():
            if source is not None:
                out |= columns(source)
        if isinstance(expression, Q):
            for child in expression.children:
                out |= columns(child) if isinstance(child, Q) else {child[0].split("__")[0]}
        return out

    index = next(i for i in NodeCPU._meta.indexes if i.name == "sched_nodecpu_summary_idx")
    aggregates = {**capacity.aggregates(), **capacity.fit_aggregates(32)}  # "where does a 32-CPU instance fit" too
    read = set().union(*(columns(a) | (columns(a.filter) if a.filter is not None else set()) for a in aggregates.values()))
    assert {"largest_exclusive", "largest_numa", "exclusive_left", "cluster"} <= read
    assert read <= set(index.fields) and index.fields[0] == "cluster", (sorted(read - set(index.fields)), index.fields)


# ---------------------------------------------------------------------------- the fleet page's tables


def _table(html: str, table_id: str) -> str:
    return html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]


def _column(html: str, table_id: str, index: int) -> list[str]:
    """The text of each body row's ``index``-th cell."""
    body = _table(html, table_id).split("<tbody>", 1)[1]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)
    return [re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)[index]).strip() for row in rows]


@pytest.fixture
def three_clusters():
    """db-a (2 nodes, 32 CPUs sold), db-b (1 node), web-c (1 node, 72 sold): 96 sellable a node."""
    hosts = {}
    for name, count in (("db-a", 2), ("db-b", 1), ("web-c", 1)):
        cluster = Cluster.objects.create(name=name, connector=Cluster.ConnectorKind.SIMULATED)
        hosts[name] = [seed_node(cluster, f"{name}-host-{index}") for index in range(count)]
    allocation.allocate_exclusive(hosts["db-a"][0], namespace="db", name="x", request=32)
    allocation.allocate_exclusive(hosts["web-c"][0], namespace="web", name="y", request=64)
    allocation.allocate_exclusive(hosts["web-c"][0], namespace="web", name="z", request=8)
    return hosts


def test_the_cluster_table_sorts_searches_and_exports_like_every_table(client, viewer, three_clusters):
    login(client, viewer)
    url = reverse("scheduling:cpu-fleet")
    page = client.get(url).content.decode()
    assert _column(page, "cpu-cluster-table", 0) == ["db-a", "db-b", "web-c"]  # most exclusive CPUs left first
    assert _column(page, "cpu-cluster-table", 4) == ["160", "96", "24"]
    page = client.get(url, {"clusters-sort": "-cluster"}).content.decode()
    assert _column(page, "cpu-cluster-table", 0) == ["web-c", "db-b", "db-a"]
    page = client.get(url, {"clusters-sort": "largest"}).content.decode()
    assert _column(page, "cpu-cluster-table", 0) == ["web-c", "db-a", "db-b"]  # 24, 64, 64: ties as before
    page = client.get(url, {"clusters-q": "DB-"}).content.decode()
    assert _column(page, "cpu-cluster-table", 0) == ["db-a", "db-b"]
    assert sorted(_column(page, "cpu-node-table", 0)) == ["db-a-host-0", "db-a-host-1", "db-b-host-0", "web-c-host-0"], \
        "the cluster table's search leaves the node table alone"

    export = client.get(url, {"clusters-export": "csv", "clusters-sort": "cluster"})
    assert export.status_code == 200 and export["Content-Disposition"] == 'attachment; filename="meridian-cpu-clusters.csv"'
    lines = b"".join(export.streaming_content).decode().splitlines()
    assert lines[0].split(",")[:6] == ["Cluster", "Nodes", "Logical CPUs", "Sellable", "Exclusive sold", "Exclusive sold %"]
    assert [line.split(",")[0] for line in lines[1:]] == ["db-a", "db-b", "web-c"]
    assert lines[1].split(",")[1:7] == ["2", "208", "192", "32", "16.7", "160"], "plain numbers: no grouping, no %"


def test_the_cluster_table_counts_where_a_request_fits_and_links_each_cluster_with_it(client, viewer, three_clusters):
    login(client, viewer)
    page = client.get(reverse("scheduling:cpu-fleet"), {"request": 40}).content.decode()
    table = _table(page, "cpu-cluster-table")
    assert "Take 40" in table
    assert _column(page, "cpu-cluster-table", 0) == ["db-a", "db-b", "web-c"]
    assert _column(page, "cpu-cluster-table", 8) == ["2", "1", "0"]  # web-c has 24 left; the others 64 a host at most
    assert 'href="/scheduling/cpu/?cluster=db-a&amp;request=40"' in table
    narrowed = client.get(reverse("scheduling:cpu-fleet"), {"cluster": "db-a", "request": 40}).content.decode()
    assert _column(narrowed, "cpu-cluster-table", 0) == ["db-a"]
    assert sorted(_column(narrowed, "cpu-node-table", 0)) == ["db-a-host-0", "db-a-host-1"]


def test_the_node_table_sorts_only_by_what_an_index_orders(client, viewer, three_clusters):
    login(client, viewer)
    url = reverse("scheduling:cpu-fleet")
    by_left = client.get(url, {"sort": "exclusive_left"}).content.decode()
    assert _column(by_left, "cpu-node-table", 0)[0] == "web-c-host-0"
    headers = _table(by_left, "cpu-node-table").split("</thead>", 1)[0]
    assert 'data-sort="exclusive_left"' in headers and 'data-sort="stranded"' not in headers
    default = _column(client.get(url).content.decode(), "cpu-node-table", 0)
    assert _column(client.get(url, {"sort": "stranded"}).content.decode(), "cpu-node-table", 0) == default, \
        "an unsortable column is ignored (a full sort of every node per page view)"
    by_cluster = client.get(url, {"sort": "cluster"}).content.decode()
    assert _column(by_cluster, "cpu-node-table", 0) == ["db-a-host-0", "db-a-host-1", "db-b-host-0", "web-c-host-0"]
    export = client.get(url, {"export": "csv", "sort": "cluster"})
    lines = b"".join(export.streaming_content).decode().splitlines()
    assert lines[0].startswith("Node,Cluster,CPUs") and lines[1].startswith("db-a-host-0,db-a,104,")


def test_an_invalid_fleet_filter_says_why_and_refuses_the_export(client, viewer, three_clusters):
    login(client, viewer)
    url = reverse("scheduling:cpu-fleet")
    page = client.get(url, {"request": "1.5"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Invalid filter:" in html and _column(html, "cpu-node-table", 0) == ["No node matches."]
    for table in ("", "clusters-"):
        refused = client.get(url, {"request": "0", f"{table}export": "csv"})
        assert refused.status_code == 400 and "request" in refused.content.decode()


def test_many_clusters_show_a_page_and_a_link_to_all_of_them(client, viewer):
    for index in range(27):
        seed_node(Cluster.objects.create(name=f"c-{index:02}", connector=Cluster.ConnectorKind.SIMULATED), "host")
    login(client, viewer)
    url = reverse("scheduling:cpu-fleet")
    page = client.get(url, {"clusters-per_page": 25}).content.decode()
    assert len(_column(page, "cpu-cluster-table", 0)) == 25 and "25 of 27 clusters" in page
    everything = re.search(r'href="(\?[^"]*clusters-per_page=500[^"]*)">show all', page).group(1)
    page = client.get(url + htmllib.unescape(everything)).content.decode()
    assert len(_column(page, "cpu-cluster-table", 0)) == 27 and "show all" not in page


def _as_generic(html: str) -> str:
    """Rows as both writers write them, whitespace and django-tables2's stripes aside (no style uses them)."""
    html = re.sub(r'<tr class="(even|odd)"', "<tr", str(html))
    return re.sub(r"\s*(<|>)\s*", r"\1", re.sub(r"<(td|tr) >", r"<\1>", html))


def test_the_written_cluster_rows_are_what_the_columns_render(rf, viewer):
    """``ClusterCPUTable`` writes its rows itself (500 clusters at once); its cells are exactly
    what its columns render through django-tables2, values escaped the same way."""
    from core.tables import BaseTable, build_table, paginate
    from scheduling.cpu.tables import ClusterCPUTable

    rows = [{"cluster": name, "nodes": 1234, "cpus": 2048, "sellable": 1500, "exclusive_used": 1000,
             "exclusive_used_pct": 66.7, "exclusive_left": 500, "largest": 64, "fragmentation_pct": 87.2,
             "stranded": 3, "stranded_pct": 0.2, "fit_nodes": 7, "fit_numa_nodes": 2, "fit_instances": 9}
            for name in ('a<b>&"c\'', "plain")]
    request = rf.get("/scheduling/cpu/", {"clusters-columns": [c for c in rows[0]]})
    request.user = viewer
    for size in (None, 32):
        table = paginate(request, build_table(request, ClusterCPUTable, rows, prefix="clusters-", request_size=size))
        written = str(table.rows_html)
        assert _as_generic(written) == _as_generic(BaseTable.rows_html.fget(table))
        assert "1,234" in written and "a&lt;b&gt;&amp;&quot;c&#x27;" in written and "<b>" not in written
        assert ("fit_nodes" in [c.name for c in table.columns]) == bool(size)


def test_the_written_node_rows_are_what_the_columns_render(rf, viewer, three_clusters):
    from core.tables import BaseTable, build_table, paginate
    from scheduling.cpu.tables import NodeCPUTable
    from scheduling.models import NodeCPU

    NodeCPU.objects.filter(name="db-b-host-0").update(conflicts=[3, 4], io_queue_state="refused", name='db-b<&"\'>')
    request = rf.get("/scheduling/cpu/", {"sort": "cluster"})
    request.user = viewer
    table = paginate(request, build_table(request, NodeCPUTable, NodeCPU.objects.select_related("cluster")))
    written = str(table.rows_html)
    assert _as_generic(written) == _as_generic(BaseTable.rows_html.fget(table))
    assert written.count("<tr>") == 4 and "db-b&lt;&amp;&quot;&#x27;&gt;" in written and "IO queues refused" in written
    assert '<td class="num">104</td>' in written and re.search(r'<td class="num">\d+%</td>', written)
