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
    """Grouped by the language's separator (1,040), as every other page prints numbers."""
    for index in range(10):
        seed_node(cluster, f"db-host-{index}")
    login(client, viewer)
    page = client.get(reverse("scheduling:cpu-fleet")).content.decode()
    assert "of 1,040 logical CPUs" in page
    assert re.search(r'<span class="value">9[0-9]{2}</span>', page), "sellable: fewer than a thousand here"
    assert not re.search(r"\b\d{4,}\b(?![^<]*>)", page.split('<main', 1)[1].split("</main>")[0].replace("1,040", "")), \
        "no ungrouped figure of four digits or more in the page's text"


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

    index = next(i for i in NodeCPU._meta.indexes if i.name == "sched_nodecpu_summary_idx")
    read = {ref.name for aggregate in capacity.aggregates().values()
            for ref in aggregate.get_source_expressions() if isinstance(ref, F)}
    assert read <= set(index.fields) and index.fields[0] == "cluster", (sorted(read - set(index.fields)), index.fields)
