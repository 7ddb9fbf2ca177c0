"""Stale writes never silently overwrite: every updatable resource of the REST API returns an
ETag, a write with a matching ``If-Match`` goes through, a stale one answers 412 and changes
nothing — one behaviour from the one viewset base, checked here resource by resource."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fleet.models import Cluster
from nodeconfig.models import ConfigType

SIMULATED = {"name": "etag-sim", "connector": "simulated", "connector_config": {"node_count": 3, "seed": 7}}


@dataclass(frozen=True)
class Resource:
    """How to create one resource, its URL, and a change that moves its ETag."""

    name: str
    create: Callable[[Any], str]   # admin API client -> detail URL
    change: dict[str, Any]
    changed: Callable[[dict[str, Any]], Any]   # the field the change sets, read back


def _cluster(api) -> str:
    assert api.post("/api/v1/fleet/clusters/", SIMULATED, format="json").status_code == 201
    return "/api/v1/fleet/clusters/etag-sim/"


def _config_type(api) -> str:
    body = {"name": "EtagProbeConfiguration", "resource": "etagprobeconfigurations", "default_config": {"a": 1}}
    assert api.post("/api/v1/nodeconfig/types/", body, format="json").status_code == 201
    return "/api/v1/nodeconfig/types/EtagProbeConfiguration/"


def _target(api) -> str:
    ConfigType.objects.get_or_create(name="EtagTargetConfiguration", defaults={
        "resource": "etagtargetconfigurations", "allowed_keys": [{"priority": 0, "keyList": ["pool"]}]})
    body = {"type": "EtagTargetConfiguration", "name": "etag-target", "node_label_selector": "pool=a", "config": {"x": 1}}
    response = api.post("/api/v1/nodeconfig/targets/", body, format="json")
    assert response.status_code == 201, response.content
    return f"/api/v1/nodeconfig/targets/{response.json()['id']}/"


def _quota_group(api) -> str:
    response = api.post("/api/v1/quotas/groups/", {"name": "etag-group", "hard": {"limits.cpu": "10"}}, format="json")
    assert response.status_code == 201, response.content
    return "/api/v1/quotas/groups/etag-group/"


def _policy(api) -> str:
    body = {"namespace": "", "name": "etag-policy", "spec": {"schedulingMode": "Divide"}}
    response = api.post("/api/v1/federation/propagation-policies/", body, format="json")
    assert response.status_code == 201, response.content
    return f"/api/v1/federation/propagation-policies/{response.json()['id']}/"


RESOURCES = [
    Resource("cluster", _cluster, {"display_name": "renamed"}, lambda b: b["display_name"]),
    Resource("config-type", _config_type, {"description": "changed"}, lambda b: b["description"]),
    Resource("config-target", _target, {"config": {"x": 2}}, lambda b: b["config"]),
    Resource("quota-group", _quota_group, {"description": "changed"}, lambda b: b["description"]),
    Resource("propagation-policy", _policy, {"description": "changed"}, lambda b: b["description"]),
]


@pytest.mark.django_db
@pytest.mark.parametrize("resource", RESOURCES, ids=[r.name for r in RESOURCES])
def test_if_match_guards_every_update(resource, admin_api):
    url = resource.create(admin_api)
    first = admin_api.get(url)
    etag = first["ETag"]
    assert etag and etag.startswith('"') and first.json().get("etag") in (None, etag)
    assert admin_api.get(url, HTTP_IF_NONE_MATCH=etag).status_code == 304

    updated = admin_api.patch(url, resource.change, format="json", HTTP_IF_MATCH=etag)
    assert updated.status_code == 200, updated.content
    assert updated["ETag"] != etag, "a change to what a user writes moves the ETag"

    before = admin_api.get(url).json()
    stale = admin_api.patch(url, {k: "stale" if isinstance(v, str) else {"stale": True} for k, v in resource.change.items()},
                            format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412, stale.content
    assert stale.json()["code"] == "stale" and stale.json()["detail"]
    assert resource.changed(admin_api.get(url).json()) == resource.changed(before), "nothing was written"


@pytest.mark.django_db
def test_a_weak_or_wildcard_if_match(admin_api):
    url = _quota_group(admin_api)
    etag = admin_api.get(url)["ETag"]
    assert admin_api.patch(url, {"description": "x"}, format="json", HTTP_IF_MATCH="W/" + etag).status_code == 412, \
        "a weak tag never matches If-Match (RFC 9110)"
    assert admin_api.patch(url, {"description": "y"}, format="json", HTTP_IF_MATCH="*").status_code == 200


@pytest.mark.django_db
def test_the_status_a_reconciler_writes_does_not_make_an_edit_stale(admin_api):
    """The ETag covers the spec: a sync moving the cluster's status keeps a user's If-Match valid."""
    url = _cluster(admin_api)
    etag = admin_api.get(url)["ETag"]
    Cluster.objects.filter(name="etag-sim").update(node_count=999, ready=True, status_message="synced")
    assert admin_api.patch(url, {"display_name": "still fine"}, format="json", HTTP_IF_MATCH=etag).status_code == 200
