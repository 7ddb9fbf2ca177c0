import pytest

from fleet.models import Cluster, Node
from tests.pages import html

pytestmark = pytest.mark.django_db


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


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client


def test_cluster_list_shows_water_levels(viewer_client, cluster):
    page = html(viewer_client.get("/fleet/"))
    assert 'data-cluster="bj-3"' in page and "50.0%" in page


def test_cluster_detail_searches_nodes_by_label_selector(viewer_client, cluster):
    page = html(viewer_client.get("/fleet/clusters/bj-3/", {"labelSelector": "machineModel=A4,diskMode=hdd"}))
    assert "bj-3-a4-00001" in page and "bj-3-a3-00002" not in page and "bj-3-a4-00003" not in page
    bad = viewer_client.get("/fleet/clusters/bj-3/", {"labelSelector": "machineModel in (A4"})
    assert bad.status_code == 200 and "Invalid label selector" in html(bad)
    assert viewer_client.get("/fleet/clusters/nope/").status_code == 404


def test_node_detail_shows_topology_and_labels(viewer_client, cluster):
    response = viewer_client.get("/fleet/clusters/bj-3/nodes/bj-3-a4-00001/")
    page = html(response)
    assert response.status_code == 200 and "machineModel=A4" in page and page.count('class="cpu"') == 4
    assert viewer_client.get("/fleet/clusters/bj-3/nodes/missing/").status_code == 404


def test_overview_shows_the_fleet(viewer_client, cluster):
    page = html(viewer_client.get("/"))
    assert 'id="stat-clusters">1/1<' in page and 'id="stat-cpu-level">50.0%<' in page


def test_a_percent_sign_in_the_page_selector_is_an_error_message_not_a_500(viewer_client, cluster):
    for selector in ("%", "machineModel=%s", "50%off"):
        response = viewer_client.get("/fleet/clusters/bj-3/", {"labelSelector": selector})
        assert response.status_code == 200 and "Invalid label selector" in html(response), selector


def _messages(response) -> list[str]:
    from django.contrib.messages import get_messages

    return [str(m) for m in get_messages(response.wsgi_request)]


def test_the_cluster_page_offers_cordon_only_to_those_who_may(client, viewer, operator, cluster):
    client.force_login(viewer)
    page = client.get("/fleet/clusters/bj-3/").content.decode()
    assert 'id="cordon-state"' in page and "Schedulable" in page
    assert 'id="cordon-form"' not in page and 'name="cordon-action"' not in page
    assert client.post("/fleet/clusters/bj-3/cordon/", {"cordon-action": "drain", "cordon-reason": "x"}).status_code == 403
    assert client.post("/fleet/clusters/bj-3/", {"cordon-action": "drain"}).status_code == 403
    assert not Cluster.objects.get(name="bj-3").cordoned

    client.force_login(operator)
    page = client.get("/fleet/clusters/bj-3/").content.decode()
    assert 'id="cordon-form"' in page and 'action="/fleet/clusters/bj-3/cordon/"' in page
    assert 'value="cordon"' in page and 'value="drain"' in page and 'value="uncordon"' not in page
    assert client.post("/fleet/clusters/nope/cordon/", {"cordon-action": "cordon", "cordon-reason": "x"}).status_code == 404
    client.logout()
    anonymous = client.post("/fleet/clusters/bj-3/cordon/", {"cordon-action": "cordon", "cordon-reason": "x"})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert not Cluster.objects.get(name="bj-3").cordoned


def test_cordon_drain_and_uncordon_from_the_cluster_page(client, operator, cluster):
    from core.models import ObjectChange

    client.force_login(operator)
    url = "/fleet/clusters/bj-3/cordon/"
    version = client.get("/fleet/clusters/bj-3/").context["cordon_form"]["version"].value()

    missing = client.post(url, {"cordon-action": "cordon", "cordon-reason": "", "cordon-version": version})
    assert missing.status_code == 200 and "reason" in missing.context["cordon_form"].errors
    assert not Cluster.objects.get(name="bj-3").cordoned

    cordoned = client.post(url, {"cordon-action": "cordon", "cordon-reason": "kernel upgrade", "cordon-version": version})
    assert cordoned.status_code == 302 and cordoned["Location"] == "/fleet/clusters/bj-3/#cordon"
    assert _messages(cordoned)[-1] == "Cordoned bj-3: no new replicas go there."
    state = Cluster.objects.get(name="bj-3")
    assert state.cordoned and not state.drain and state.cordon_reason == "kernel upgrade"
    assert state.cordoned_by == operator.username and state.cordoned_at is not None
    assert ObjectChange.objects.filter(object_repr="bj-3", verb="cordon", reason="kernel upgrade").exists()
    page = client.get("/fleet/clusters/bj-3/")
    html = page.content.decode()
    assert 'id="cordon-state" data-state="cordoned"' in html and "kernel upgrade" in html and 'id="cluster-cordon-badge"' in html
    assert 'value="uncordon"' in html and 'value="drain"' in html
    assert 'data-cluster="bj-3"' in client.get("/fleet/").content.decode()

    stale = client.post(url, {"cordon-action": "drain", "cordon-reason": "late", "cordon-version": version})
    assert stale.status_code == 200 and "changed since you read it" in str(stale.context["cordon_form"].errors)
    assert 'value="late"' in stale.content.decode(), "what was typed is kept"
    assert not Cluster.objects.get(name="bj-3").drain

    fresh = page.context["cordon_form"]["version"].value()
    drained = client.post(url, {"cordon-action": "drain", "cordon-reason": "decommission", "cordon-version": fresh})
    assert drained.status_code == 302 and "Draining bj-3" in _messages(drained)[-1]
    assert Cluster.objects.get(name="bj-3").drain
    assert 'class="badge fed-cordon draining"' in client.get("/fleet/").content.decode()

    back = client.post(url, {"cordon-action": "uncordon", "cordon-reason": "done"})
    assert "Uncordoned bj-3" in _messages(back)[-1]
    state.refresh_from_db()
    assert not state.cordoned and not state.drain and state.cordon_reason == "" and state.cordoned_at is None
    again = client.post(url, {"cordon-action": "uncordon", "cordon-reason": "done"})
    assert "was not cordoned" in _messages(again)[-1]
    bogus = client.post(url, {"cordon-action": "explode", "cordon-reason": "x"})
    assert bogus.status_code == 200 and "action" in bogus.context["cordon_form"].errors
    assert ObjectChange.objects.filter(object_repr="bj-3", verb="uncordon", reason="done").count() == 1
