"""Templates and bindings over REST: validation by the pure modules (one error body), revisions,
upstream YAML import (all or nothing) and export, and the render preview."""

from __future__ import annotations

import pytest
import yaml

from core.models import ObjectChange
from scheduling.manifests import load_manifests
from scheduling.models import NodeSchedulerConfig, SchedulerConfigBinding, SchedulingConfigVersion

from .conftest import SEED_ANNOTATIONS, SEED_NSC_YAML, SEED_RENDERED, pod

NSC = "/api/v1/scheduling/node-scheduler-configs/"
PSC = "/api/v1/scheduling/pod-scheduler-configs/"
SCB = "/api/v1/scheduling/bindings/"
IMPORT = "/api/v1/scheduling/import/"
EXPORT = "/api/v1/scheduling/export/"
PREVIEW = "/api/v1/scheduling/preview/"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"

SSD = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "disk", "operator": "In", "values": ["{{.Disk}}"]}]}]}}}
BINDING_YAML = """\
apiVersion: sched.cloud.ctrip.com/v1
kind: SchedulerConfigBinding
metadata:
  name: web-pools
  namespace: web
spec:
  selector:
    matchLabels:
      app: web
  priority: 10
  nodeSchedulerConfig:
    name: resource-pool-example
    args:
      DefaultPool: B
      PrefferredPool: A
"""


def test_template_crud_with_revisions(operator_api):
    created = operator_api.post(NSC, {"name": "disk", "spec": SSD, "reason": "ssd or hdd"}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["placeholders"] == ["Disk"] and created.json()["kind"] == "NodeSchedulerConfig"
    spec = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "disk", "operator": "NotIn", "values": ["{{.Disk}}"]}]}]}}}
    changed = operator_api.put(f"{NSC}disk/", {"spec": spec, "reason": "inverted"}, format="json",
                               HTTP_IF_MATCH=created["ETag"])
    assert changed.status_code == 200 and changed.json()["revision"] == 2
    diff = operator_api.get(f"{NSC}disk/diff/?a=1&b=2").json()
    assert [c["path"] for c in diff["changes"]] == [f"spec.nodeAffinity.{REQ}.nodeSelectorTerms"]
    rolled = operator_api.post(f"{NSC}disk/rollback/", {"revision": 1, "reason": "back"}, format="json")
    assert rolled.status_code == 201 and rolled.json()["number"] == 3 and rolled.json()["spec"] == SSD
    assert operator_api.get(f"{NSC}disk/").json()["spec"] == SSD
    assert ObjectChange.objects.filter(object_repr="disk").count() == 3


def test_invalid_template_is_refused_with_code_and_field(operator_api):
    bad = {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "disk", "operator": "Between", "values": ["{{.Disk}}"]}]}]}}}
    response = operator_api.post(NSC, {"name": "bad", "spec": bad}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert any("operator" in field for field in body["errors"]), body
    syntax = operator_api.post(NSC, {"name": "bad", "spec": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["{{.A.B}}"]}]}]}}}}, format="json")
    assert syntax.status_code == 400 and syntax.json()["code"] == "template_unsupported"
    assert operator_api.post(NSC, {"name": "Not_A_Name", "spec": SSD}, format="json").json()["errors"].keys() == {"metadata.name"}
    assert not NodeSchedulerConfig.objects.exists()


def test_binding_needs_its_template_and_args(operator_api):
    spec = {"selector": {"matchLabels": {"app": "web"}}, "nodeSchedulerConfig": {"name": "disk", "args": {"Disk": "ssd"}}}
    missing = operator_api.post(SCB, {"name": "web", "namespace": "web", "spec": spec}, format="json")
    assert missing.status_code == 400 and missing.json()["code"] == "template_not_found"
    assert "spec.nodeSchedulerConfig.name" in missing.json()["errors"]
    operator_api.post(NSC, {"name": "disk", "spec": SSD}, format="json")
    no_args = operator_api.post(SCB, {"name": "web", "namespace": "web", "spec": {
        **spec, "nodeSchedulerConfig": {"name": "disk"}}}, format="json")
    assert no_args.status_code == 400 and no_args.json()["code"] == "missing_argument"
    created = operator_api.post(SCB, {"name": "web", "namespace": "web", "spec": spec}, format="json")
    assert created.status_code == 201, created.json()
    in_use = operator_api.delete(f"{NSC}disk/")
    assert in_use.status_code == 400 and in_use.json()["code"] == "in_use" and "web/web" in in_use.json()["detail"]
    assert operator_api.delete(f"{SCB}{created.json()['id']}/").status_code == 204
    assert operator_api.delete(f"{NSC}disk/").status_code == 204


def test_import_the_seed_then_a_binding_all_or_nothing(operator_api):
    before = SchedulingConfigVersion.objects.filter(pk=1).values_list("number", flat=True).first() or 0
    response = operator_api.post(IMPORT, {"yaml": SEED_NSC_YAML + "---\n" + BINDING_YAML, "reason": "from the seed"},
                                 format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert [(o["kind"], o["name"], o["changed"]) for o in body["objects"]] == [
        ("NodeSchedulerConfig", "resource-pool-example", True), ("SchedulerConfigBinding", "web-pools", True)]
    assert body["warnings"]  # the seed's stray "..." line
    assert SchedulingConfigVersion.objects.get(pk=1).number > before
    again = operator_api.post(IMPORT, {"yaml": SEED_NSC_YAML, "reason": "again"}, format="json").json()
    assert again["objects"][0]["changed"] is False

    broken = BINDING_YAML.replace("web-pools", "api-pools").replace("resource-pool-example", "no-such") + \
        "---\n" + SEED_NSC_YAML.replace("resource-pool-example", "second")
    refused = operator_api.post(IMPORT, {"yaml": broken}, format="json")
    assert refused.status_code == 400
    assert refused.json()["code"] == "template_not_found" and set(refused.json()) == {"code", "detail", "errors"}
    assert not NodeSchedulerConfig.objects.filter(name="second").exists()  # nothing of it was written
    assert not SchedulerConfigBinding.objects.filter(name="api-pools").exists()

    bad_yaml = operator_api.post(IMPORT, {"yaml": "kind: [unclosed"}, format="json")
    assert bad_yaml.status_code == 400 and bad_yaml.json()["code"] == "yaml_invalid"
    assert operator_api.post(IMPORT, {"reason": "no yaml"}, format="json").json()["errors"].keys() == {"yaml"}


def test_export_is_a_yaml_download_that_imports_back(operator_api, viewer_api):
    operator_api.post(IMPORT, {"yaml": SEED_NSC_YAML + "---\n" + BINDING_YAML}, format="json")
    response = viewer_api.get(EXPORT)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    assert response["Content-Disposition"] == 'attachment; filename="scheduling-configs.yaml"'
    text = response.content.decode()
    loaded = load_manifests(text).objects
    assert [o.name for o in loaded] == ["resource-pool-example", "web-pools"]
    assert "'{{.PrefferredPool}}'" in text
    only_templates = viewer_api.get(EXPORT + "?kind=NodeSchedulerConfig").content.decode()
    assert [d["kind"] for d in yaml.safe_load_all(only_templates)] == ["NodeSchedulerConfig"]
    assert viewer_api.get(EXPORT + "?kind=Nope").status_code == 400
    assert viewer_api.post(IMPORT, {"yaml": text}, format="json").status_code == 403


def test_preview_explains_renders_and_denies(operator_api, viewer_api):
    operator_api.post(IMPORT, {"yaml": SEED_NSC_YAML}, format="json")
    shown = operator_api.post(PREVIEW, {"pod": pod(SEED_ANNOTATIONS)}, format="json")
    assert shown.status_code == 200, shown.json()
    body = shown.json()
    assert body["allowed"] is True and body["affinity"] == SEED_RENDERED
    assert body["patch"] == [{"op": "add", "path": "/spec/affinity", "value": SEED_RENDERED}]
    assert body["explanation"] == ['NodeSchedulerConfig "resource-pool-example" with args '
                                   '{"DefaultPool":"B","PrefferredPool":"A"}, from the pod annotation '
                                   'scb.sched.cloud.ctrip.com/nsc']
    as_yaml = yaml.safe_dump(pod({"scb.sched.cloud.ctrip.com/nsc": "resource-pool-example"}))
    denied = operator_api.post(PREVIEW, {"yaml": as_yaml}, format="json").json()
    assert denied["allowed"] is False and denied["denial"]["code"] == "missing_argument"
    assert operator_api.post(PREVIEW, {"yaml": "a: [b"}, format="json").json()["errors"].keys() == {"yaml"}
    assert viewer_api.post(PREVIEW, {"pod": pod()}, format="json").status_code == 403


@pytest.mark.parametrize("path", [NSC, PSC, SCB, "/api/v1/scheduling/policies/"])
def test_lists_are_paginated(viewer_api, path):
    body = viewer_api.get(path).json()
    assert "results" in body and "next" in body


def test_openapi_schema_builds(admin_api):
    response = admin_api.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/v1/scheduling/simulate/" in response.content and b"/api/v1/scheduling/import/" in response.content
