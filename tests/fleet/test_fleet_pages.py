import pytest

from fleet.models import Cluster, Node


@pytest.fixture
def cluster(db):
    c = Cluster.objects.create(name="bj-3", connector="simulated", ready=True, node_count=3, ready_node_count=3,
                               cpu_allocatable_milli=192000, cpu_requested_milli=96000)
    topology = [[0, 0, 0, 0], [1, 0, 0, 1], [2, 0, 0, 0], [3, 0, 0, 1]]
    Node.objects.bulk_create([
        Node(cluster=c, name="bj-3-a4-00001", labels={"machineModel": "A4", "diskMode": "hdd"}, ready=True,
             cpu_allocatable_milli=64000, cpu_requested_milli=48000, allocatable={"cpu": "64"}, capacity={"cpu": "64"},
             cpu_topology=topology),
        Node(cluster=c, name="bj-3-a3-00002", labels={"machineModel": "A3", "diskMode": "ssd"}, ready=True),
        Node(cluster=c, name="bj-3-a4-00003", labels={"machineModel": "A4", "diskMode": "ssd"}, ready=False),
    ])
    return c


@pytest.mark.django_db
def test_cluster_list_shows_water_levels(client, viewer, cluster):
    client.force_login(viewer)
    html = client.get("/fleet/").content.decode()
    assert 'data-cluster="bj-3"' in html and "50.0%" in html


@pytest.mark.django_db
def test_cluster_detail_searches_nodes_by_label_selector(client, viewer, cluster):
    client.force_login(viewer)
    html = client.get("/fleet/clusters/bj-3/", {"labelSelector": "machineModel=A4,diskMode=hdd"}).content.decode()
    assert "bj-3-a4-00001" in html and "bj-3-a3-00002" not in html and "bj-3-a4-00003" not in html
    bad = client.get("/fleet/clusters/bj-3/", {"labelSelector": "machineModel in (A4"})
    assert bad.status_code == 200 and "Invalid label selector" in bad.content.decode()
    assert client.get("/fleet/clusters/nope/").status_code == 404


@pytest.mark.django_db
def test_node_detail_shows_topology_and_labels(client, viewer, cluster):
    client.force_login(viewer)
    response = client.get("/fleet/clusters/bj-3/nodes/bj-3-a4-00001/")
    html = response.content.decode()
    assert response.status_code == 200 and "machineModel=A4" in html and html.count('class="cpu"') == 4
    assert client.get("/fleet/clusters/bj-3/nodes/missing/").status_code == 404


@pytest.mark.django_db
def test_overview_shows_the_fleet(client, viewer, cluster):
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert 'id="stat-clusters">1/1<' in html and 'id="stat-cpu-level">50.0%<' in html
