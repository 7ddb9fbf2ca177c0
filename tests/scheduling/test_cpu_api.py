"""The CPU co-location REST API and the node agents' cpuset endpoint."""

from __future__ import annotations

import pytest

from core.models import ObjectChange
from fleet.models import Cluster
from fleet.tokens import issue_token
from scheduling.cpu import allocation
from scheduling.models import CPUAllocation

from .conftest import RedisDown
from .cpu_fixtures import seed_node

pytestmark = pytest.mark.django_db
BASE = "/api/v1/scheduling/cpu"


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="db-pool", connector=Cluster.ConnectorKind.SIMULATED)


@pytest.fixture
def host(cluster):
    return seed_node(cluster, ratio="2")


def test_nodes_list_and_detail_with_etag(viewer_api, host):
    listing = viewer_api.get(f"{BASE}/nodes/?cluster=db-pool")
    assert listing.status_code == 200
    item = listing.json()["results"][0]
    assert (item["name"], item["cpus"], item["sellable"], item["largest_exclusive"]) == ("db-host-1", 104, 96, 64)
    detail = viewer_api.get(f"{BASE}/nodes/{host.pk}/")
    assert detail.json()["share_pool"] == "4-51,56-103" and detail.json()["reserved_cpus"] == "0-3,52-55"
    assert viewer_api.get(f"{BASE}/nodes/{host.pk}/", HTTP_IF_NONE_MATCH=detail["ETag"]).status_code == 304
    assert viewer_api.get(f"{BASE}/nodes/?fits=65").json()["results"] == []


def test_operator_allocates_and_refusals_are_clear(operator_api, host):
    response = operator_api.post(f"{BASE}/nodes/{host.pk}/allocate/", {
        "namespace": "db", "name": "core-a", "app": "core-a", "request": 32, "strategy": "SameCoreFirst",
        "reason": "new instance"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["cpuset"] and len(body["cpus"]) == 32 and body["delivery"] == "pending"
    too_big = operator_api.post(f"{BASE}/nodes/{host.pk}/allocate/", {"namespace": "db", "name": "x", "request": 65},
                                format="json")
    assert too_big.status_code == 409
    assert too_big.json() == {"code": "instance_cap", "detail": "request exceeds 2/3 of sellable CPUs (64)",
                              "errors": {"request": ["request exceeds 2/3 of sellable CPUs (64)"]}}
    bad = operator_api.post(f"{BASE}/nodes/{host.pk}/allocate/", {"namespace": "db", "request": -1, "strategy": "Tight"},
                            format="json")
    assert bad.status_code == 400 and {"name", "request", "strategy"} <= set(bad.json()["errors"])
    shared = operator_api.post(f"{BASE}/nodes/{host.pk}/place-shared/", {
        "namespace": "db", "name": "edge", "cpu_request": "4", "cpu_limit": "8"}, format="json")
    assert shared.status_code == 201 and (shared.json()["request_milli"], shared.json()["limit_milli"]) == (4000, 8000)
    isolate = operator_api.post(f"{BASE}/nodes/{host.pk}/release-isolate/", {"instance": "db/core-a", "on": True,
                                                                            "reason": "11.11"}, format="json")
    assert isolate.status_code == 200 and isolate.json()["release_isolate"] is True
    released = operator_api.post(f"{BASE}/nodes/{host.pk}/release/", {"instance": "db/core-a"}, format="json")
    assert released.status_code == 200 and released.json()["delivery"] == "releasing"
    again = operator_api.post(f"{BASE}/nodes/{host.pk}/release/", {"instance": "db/core-a"}, format="json")
    assert again.status_code == 404 and again.json()["errors"] == {"instance": ["db/core-a holds nothing on node db-host-1."]}
    assert ObjectChange.objects.filter(verb__in=["allocate", "place_shared", "release_isolate_on", "release"]).count() == 4


def test_viewers_cannot_allocate(viewer_api, host):
    response = viewer_api.post(f"{BASE}/nodes/{host.pk}/allocate/", {"namespace": "db", "name": "a", "request": 1}, format="json")
    assert response.status_code == 403
    assert viewer_api.post(f"{BASE}/nodes/{host.pk}/what-if/", {"request": 32}, format="json").status_code == 403
    assert not CPUAllocation.objects.exists()


def test_stale_if_match_is_refused(operator_api, host):
    etag = operator_api.get(f"{BASE}/nodes/{host.pk}/")["ETag"]
    allocation.allocate_exclusive(host, namespace="db", name="other", request=2)
    response = operator_api.post(f"{BASE}/nodes/{host.pk}/allocate/", {"namespace": "db", "name": "a", "request": 1},
                                 format="json", HTTP_IF_MATCH=etag)
    assert response.status_code == 412 and response.json()["code"] == "stale"


def test_settings_patch(operator_api, host):
    allocation.allocate_exclusive(host, namespace="db", name="a", request=4)
    held = CPUAllocation.objects.get().cpus
    refused = operator_api.patch(f"{BASE}/nodes/{host.pk}/", {"reserved_cpus": str(held[0])}, format="json")
    assert refused.status_code == 400 and "reserved_cpus" in refused.json()["errors"]
    ok = operator_api.patch(f"{BASE}/nodes/{host.pk}/", {"overcommit_ratio": "1.5", "reason": "tuning"}, format="json")
    assert ok.status_code == 200 and ok.json()["overcommit_ratio"] == "1.500"


def test_what_if_node_and_fleet(operator_api, cluster, host):
    busy = seed_node(cluster, "db-host-2")
    allocation.allocate_exclusive(busy, namespace="db", name="a", request=64)
    answer = operator_api.post(f"{BASE}/nodes/{busy.pk}/what-if/", {"request": 33}, format="json").json()
    assert answer["ok"] is False and answer["reason"] == "Insufficient exclusive cpu"
    assert answer["detail"].startswith("Insufficient exclusive cpu — 33 requested; 32 of 96 sellable exclusive CPU(s) left")
    fits = operator_api.post(f"{BASE}/nodes/{host.pk}/what-if/", {"request": 32}, format="json").json()
    assert fits["ok"] is True and len(fits["cpus"]) == 32 and fits["scope"] == "numa"
    fleet = operator_api.post(f"{BASE}/what-if/", {"request": 32, "cluster": "db-pool"}, format="json").json()
    assert fleet["count"] == 2 and fleet["ok"] and [n["node"] for n in fleet["nodes"]][0] == "db-host-2"
    none = operator_api.post(f"{BASE}/what-if/", {"request": 70}, format="json").json()
    assert none == {"request": 70, "strategy": "SameCoreFirst", "count": 0, "ok": False, "nodes": [],
                    "reason": "no node can take an exclusive instance of 70 CPUs now"}


def test_fleet_view(viewer_api, cluster, host):
    other = seed_node(cluster, "db-host-2")
    allocation.allocate_exclusive(other, namespace="db", name="a", request=60)
    view = viewer_api.get(f"{BASE}/fleet/?request=40").json()  # 96 left on one, 36 on the other
    total = view["total"]
    assert (total["nodes"], total["sellable"], total["exclusive_used"], total["fit_nodes"]) == (2, 192, 60, 1)
    assert view["clusters"][0]["cluster__name"] == "db-pool" and view["clusters"][0]["fit_nodes"] == 1
    assert viewer_api.get(f"{BASE}/fleet/?request=x").json()["errors"] == {"request": ["request is a whole number of CPUs (1-100000)."]}


def test_agent_cpuset_endpoint(client, cluster, host):
    raw = issue_token(cluster, "agent")[1]
    other = Cluster.objects.create(name="elsewhere", connector=Cluster.ConnectorKind.SIMULATED)
    foreign = issue_token(other, "agent")[1]
    url = "/api/agent/v1/clusters/db-pool/nodes/db-host-1/cpuset"
    assert client.get(url).status_code == 401
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {foreign}").status_code == 403
    allocation.allocate_exclusive(host, namespace="db", name="a", request=4)
    response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200
    body = response.json()
    assert body["sharePool"]["cpuset"] and body["instances"][0]["name"] == "a" and body["instances"][0]["mode"] == "exclusive"
    etag = response["ETag"]
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}", HTTP_IF_NONE_MATCH=etag).status_code == 304
    allocation.release(host, "db/a")
    changed = client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed.json()["instances"] == [] and changed["ETag"] != etag
    assert client.get("/api/agent/v1/clusters/db-pool/nodes/nope/cpuset", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 404


def test_agent_cpuset_answers_without_redis(client, cluster, host, monkeypatch):
    import scheduling.cpu.agent_views as views

    raw = issue_token(cluster, "agent")[1]
    url = "/api/agent/v1/clusters/db-pool/nodes/db-host-1/cpuset"
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200  # token cached in Redis
    monkeypatch.setattr(views, "get_redis", RedisDown)
    monkeypatch.setattr("fleet.tokens.get_redis", RedisDown, raising=False)
    response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200 and response.json()["node"] == "db-host-1"
