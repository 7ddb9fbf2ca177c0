"""Configuration as code through the REST API: ``POST /api/v1/apply/`` (``?dry_run=true`` = the
server-side diff), ``POST /api/v1/delete/``, ``GET /api/v1/export/`` (``core.documents``).

Every configurable kind goes through its own services, so these tests check what the engine
adds: idempotence (no revision, no audit entry, no job for an unchanged document), exactly one
revision for one edit, all-or-nothing batches, stale resourceVersions, refusals addressed to
the document, permissions per object and dependency order. The end-to-end round trip
(export → a fresh Meridian → apply → export, byte-identical) runs against real servers in
``tests/cli``.
"""

from __future__ import annotations

import copy

import pytest

from core.models import Job, ObjectChange
from federation.models import FederatedObject
from nodeconfig.models import ConfigRevision, ConfigTarget
from quotas.models import QuotaGroup, QuotaGroupRevision
from scheduling.models import SchedulerConfigBinding

APPLY, DELETE, EXPORT = "/api/v1/apply/", "/api/v1/delete/", "/api/v1/export/"
V1 = "meridian.io/v1"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def doc(kind: str, name: str, spec: dict, *, namespace: str = "", description: str = "") -> dict:
    metadata: dict = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if description:
        metadata["annotations"] = {"meridian.io/description": description}
    return {"apiVersion": V1, "kind": kind, "metadata": metadata, "spec": spec}


def configuration() -> list[dict]:
    """One document of every configurable kind, deliberately out of dependency order."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
                  "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                               {"name": "web", "image": "web:1", "resources": {"requests": {"cpu": "100m"}}}]}}}}
    return [
        doc("SchedulerConfigBinding", "web-pools", {"selector": {"matchLabels": {"app": "web"}},
                                                   "nodeSchedulerConfig": {"name": "disk", "args": {"Disk": "ssd"}}},
            namespace="web"),
        doc("NodeSchedulerConfig", "disk", {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["{{.Disk}}"]}]}]}}}, description="disk pools"),
        doc("FederatedObject", "web", {"template": deployment, "propagation_policy": "spread"}, namespace="shop"),
        doc("QuotaGroup", "vision-ocr", {"parent": "vision", "hard": {"limits.cpu": "1000m", "pods": "10"}}),
        doc("QuotaGroup", "vision", {"hard": {"limits.cpu": "8", "pods": "100"}}, description="vision team"),
        doc("ConfigTarget", "hdd-a4", {"type": "AdminQoSConfiguration", "cluster": "sim-1",
                                       "node_label_selector": "diskMode=hdd",
                                       "config": {"reclaimedResourceConfig": {"enableReclaim": True}}}),
        doc("PropagationPolicy", "spread", {"schedulingMode": "Divide"}),
        doc("OverridePolicy", "tag", {"overrideRules": []}),
        doc("SchedulingPolicy", "binpack", {"config": {"percentageOfNodesToScore": 50}}),
        doc("Cluster", "sim-1", {"display_name": "Simulated 1", "labels": {"env": "test"}, "connector": "simulated",
                                 "connector_config": {"node_count": 6, "seed": 11}}),
    ]


def apply(client, documents, *, dry_run: bool = False, reason: str = "", **headers):
    return client.post(APPLY + ("?dry_run=true" if dry_run else ""), {"documents": documents, "reason": reason},
                       format="json", **headers)


def exported(client) -> list[dict]:
    response = client.get(EXPORT)
    assert response.status_code == 200, response.json()
    return response.json()["documents"]


def counts() -> tuple[int, int, int]:
    return ObjectChange.objects.count(), Job.objects.count(), ConfigRevision.objects.count() + QuotaGroupRevision.objects.count()


@pytest.fixture
def applied(admin_api):
    response = apply(admin_api, configuration(), reason="first")
    assert response.status_code == 200, response.json()
    return response.json()


def test_every_kind_is_created_in_dependency_order(applied):
    order = [(r["kind"], r["name"]) for r in applied["results"]]
    assert order == [("Cluster", "sim-1"), ("ConfigTarget", "hdd-a4"), ("QuotaGroup", "vision"), ("QuotaGroup", "vision-ocr"),
                     ("PropagationPolicy", "spread"), ("OverridePolicy", "tag"), ("FederatedObject", "web"),
                     ("SchedulingPolicy", "binpack"), ("NodeSchedulerConfig", "disk"), ("SchedulerConfigBinding", "web-pools")]
    assert {r["action"] for r in applied["results"]} == {"created"} and applied["dry_run"] is False
    assert QuotaGroup.objects.get(name="vision-ocr").hard == {"limits.cpu": "1", "pods": "10"}  # stored canonical
    assert FederatedObject.objects.get(name="web").propagation_policy.name == "spread"
    assert ObjectChange.objects.filter(reason="first").exists()


def test_applying_the_export_again_changes_nothing(admin_api, applied):
    documents = exported(admin_api)
    kinds = {d["kind"] for d in documents}
    assert {"Cluster", "ConfigType", "ConfigTarget", "QuotaGroup", "PropagationPolicy", "OverridePolicy", "FederatedObject",
            "SchedulingPolicy", "NodeSchedulerConfig", "SchedulerConfigBinding"} <= kinds
    before = counts()
    again = apply(admin_api, documents).json()["results"]
    assert {r["action"] for r in again} == {"unchanged"} and all(r["changes"] == [] for r in again)
    assert counts() == before  # no audit entry, no job, no revision
    # the submitted form need not be the stored one: "1000m" is the "1" the group holds
    assert apply(admin_api, configuration()).json()["results"][3]["action"] == "unchanged"
    assert counts() == before
    assert exported(admin_api) == documents


def test_one_edit_makes_one_revision_and_the_dry_run_shows_only_it(admin_api, applied):
    documents = exported(admin_api)
    target = next(d for d in documents if d["kind"] == "ConfigTarget")
    edited = copy.deepcopy(target)
    edited["spec"]["priority"] = 0
    edited["spec"]["config"]["reclaimedResourceConfig"]["enableReclaim"] = False
    before, revisions = counts(), ConfigRevision.objects.filter(target__name="hdd-a4").count()

    preview = apply(admin_api, documents[:1] + [edited], dry_run=True)
    assert preview.status_code == 200 and preview["X-Meridian-Dry-Run"] == "true"
    body = preview.json()
    assert body["dry_run"] is True
    changed = [r for r in body["results"] if r["action"] != "unchanged"]
    assert [(r["kind"], r["action"]) for r in changed] == [("ConfigTarget", "configured")]
    assert changed[0]["changes"] == [{"path": "spec.config.reclaimedResourceConfig.enableReclaim", "op": "change",
                                      "old": True, "new": False}]
    assert counts() == before  # the dry run kept nothing

    done = apply(admin_api, [edited], reason="turn reclaim off").json()["results"][0]
    assert done["action"] == "configured" and done["changes"] == changed[0]["changes"]
    assert ConfigRevision.objects.filter(target__name="hdd-a4").count() == revisions + 1
    assert ObjectChange.objects.count() == before[0] + 1
    assert done["resourceVersion"] != target["metadata"]["resourceVersion"]


def test_a_stale_resource_version_is_refused_and_nothing_is_written(admin_api, applied):
    documents = exported(admin_api)
    group = next(d for d in documents if d["kind"] == "QuotaGroup" and d["metadata"]["name"] == "vision")
    moved = admin_api.patch("/api/v1/quotas/groups/vision/", {"hard": {"limits.cpu": "9", "pods": "100"}}, format="json")
    assert moved.status_code == 200
    mine = copy.deepcopy(group)
    mine["spec"]["hard"]["pods"] = "120"
    stale = apply(admin_api, [mine])
    assert stale.status_code == 412
    body = stale.json()
    assert body["code"] == "stale" and set(body) == {"code", "detail", "errors"}
    assert list(body["errors"]) == ["documents[0].metadata.resourceVersion"]
    assert QuotaGroup.objects.get(name="vision").hard["pods"] == "100"
    # without the resourceVersion it is the caller's choice, as without If-Match
    del mine["metadata"]["resourceVersion"]
    assert apply(admin_api, [mine]).json()["results"][0]["action"] == "configured"


def test_a_refused_document_refuses_the_batch_naming_its_field(admin_api, applied):
    documents = [doc("QuotaGroup", "ads", {"hard": {"limits.cpu": "4"}}),
                 doc("ConfigTarget", "broken", {"type": "AdminQoSConfiguration", "node_label_selector": "a in (",
                                                "config": {}})]
    refused = apply(admin_api, documents)
    assert refused.status_code == 400
    body = refused.json()
    assert body["code"] == "selector_parse_failed" and "ConfigTarget broken" in body["detail"]
    assert list(body["errors"]) == ["documents[1].spec.node_label_selector"]
    assert not QuotaGroup.objects.filter(name="ads").exists()  # all or nothing

    envelope = apply(admin_api, [{"apiVersion": "v1", "kind": "Nope", "metadata": {}, "spec": []},
                                 doc("QuotaGroup", "ads", {"hard": {"limits.cpu": "4"}, "hrad": {}})])
    assert envelope.status_code == 400
    assert {"documents[0].apiVersion", "documents[0].kind", "documents[0].metadata.name",
            "documents[0].spec"} <= set(envelope.json()["errors"])
    unknown = apply(admin_api, [doc("QuotaGroup", "ads", {"hard": {"limits.cpu": "4"}, "hrad": {}})]).json()
    assert list(unknown["errors"]) == ["documents[0].spec.hrad"]
    annotated = apply(admin_api, [doc("ConfigTarget", "x", {"type": "AdminQoSConfiguration"}, description="no such field"),
                                  {**doc("QuotaGroup", "ads", {"hard": {"pods": "1"}}),
                                   "metadata": {"name": "ads", "annotations": {"team": "ads"}}}])
    assert set(annotated.json()["errors"]) == {"documents[0].metadata.annotations.meridian.io/description",
                                               "documents[1].metadata.annotations.team"}
    twice = apply(admin_api, [doc("QuotaGroup", "ads", {"hard": {"pods": "1"}})] * 2)
    assert twice.status_code == 400 and "documents[1].metadata.name" in twice.json()["errors"]


def test_delete_goes_children_first_and_reports_absent_ones(admin_api, applied):
    documents = [doc("QuotaGroup", "vision", {"hard": {"pods": "1"}}), doc("QuotaGroup", "vision-ocr", {"parent": "vision",
                                                                                                     "hard": {"pods": "1"}}),
                 doc("QuotaGroup", "nobody", {"hard": {"pods": "1"}})]
    dry = admin_api.post(DELETE + "?dry_run=true", {"documents": documents}, format="json")
    assert dry.status_code == 200 and QuotaGroup.objects.filter(name="vision-ocr").exists()
    done = admin_api.post(DELETE, {"documents": documents, "reason": "cleanup"}, format="json").json()["results"]
    assert [(r["name"], r["action"]) for r in done] == [("nobody", "absent"), ("vision-ocr", "deleted"), ("vision", "deleted")]
    assert not QuotaGroup.objects.filter(name__startswith="vision").exists()
    binding = admin_api.post(DELETE, {"documents": [configuration()[0], configuration()[1]]}, format="json")
    assert binding.status_code == 200 and not SchedulerConfigBinding.objects.exists()


def test_permissions_are_asked_per_object(viewer_api, operator_api, admin_user, applied):
    from tests.conftest import token_client

    denied = apply(viewer_api, [doc("QuotaGroup", "ads", {"hard": {"pods": "1"}})])  # at the door: a viewer changes nothing
    assert denied.status_code == 403 and set(denied.json()) == {"code", "detail", "errors"}
    clusters = apply(operator_api, [doc("QuotaGroup", "ads", {"hard": {"pods": "1"}}),
                                    doc("Cluster", "sim-2", {"connector": "simulated"})])  # admins register clusters
    assert clusters.status_code == 403 and list(clusters.json()["errors"]) == ["documents[1].metadata.name"]
    assert not QuotaGroup.objects.filter(name="ads").exists()
    everything = exported(operator_api)  # clusters and config types included, which operators may not change
    assert {"Cluster", "ConfigType"} <= {d["kind"] for d in everything}
    assert {r["action"] for r in apply(operator_api, everything).json()["results"]} == {"unchanged"}
    cluster = next(d for d in everything if d["kind"] == "Cluster")
    cluster["spec"]["labels"]["env"] = "prod"
    assert apply(operator_api, [cluster]).status_code == 403
    read_only = token_client(admin_user, write_enabled=False)
    assert apply(read_only, [doc("QuotaGroup", "ads", {"hard": {"pods": "1"}})]).status_code == 403
    assert {d["kind"] for d in exported(viewer_api)} >= {"QuotaGroup", "ConfigTarget"}


def test_export_leaves_out_credentials_downgrades_and_deleted_targets(admin_api, applied):
    from fleet.models import Cluster

    Cluster.objects.filter(name="sim-1").update(credentials="apiVersion: v1\nusers: [{user: {token: s3cr3t}}]")
    response = admin_api.post("/api/v1/nodeconfig/emergency-downgrade/", {"reason": "incident", "confirm": "DOWNGRADE"},
                              format="json")
    assert response.status_code == 201
    ConfigTarget.objects.filter(name="hdd-a4").update(deleted=True)
    text = admin_api.get(EXPORT).content.decode()
    assert "s3cr3t" not in text and "emergency-downgrade" not in text and "hdd-a4" not in text
    only = admin_api.get(EXPORT + "?kind=QuotaGroup").json()["documents"]
    assert [d["metadata"]["name"] for d in only] == ["vision", "vision-ocr"]  # parents first
    assert admin_api.get(EXPORT + "?kind=Nope").status_code == 400


# ---------------------------------------------------------------------------- ?dry_run on every write


def test_dry_run_on_a_viewset_write_answers_for_real_and_keeps_nothing(admin_api):
    before = counts()
    created = admin_api.post("/api/v1/quotas/groups/?dry_run=true", {"name": "ads", "hard": {"pods": "3"}}, format="json")
    assert created.status_code == 201 and created.json()["name"] == "ads" and created["X-Meridian-Dry-Run"] == "true"
    assert not QuotaGroup.objects.filter(name="ads").exists() and counts() == before
    refused = admin_api.post("/api/v1/quotas/groups/?dry_run=All", {"name": "ads", "hard": {}}, format="json")
    assert refused.status_code == 400 and set(refused.json()) == {"code", "detail", "errors"}
    bad = admin_api.post("/api/v1/quotas/groups/?dry_run=maybe", {"name": "ads", "hard": {"pods": "3"}}, format="json")
    assert bad.status_code == 400 and list(bad.json()["errors"]) == ["dry_run"]
    assert not QuotaGroup.objects.filter(name="ads").exists()
    real = admin_api.post("/api/v1/quotas/groups/?dry_run=false", {"name": "ads", "hard": {"pods": "3"}}, format="json")
    assert real.status_code == 201 and QuotaGroup.objects.filter(name="ads").exists()
    gone = admin_api.delete("/api/v1/quotas/groups/ads/?dry_run=true")
    assert gone.status_code == 204 and QuotaGroup.objects.filter(name="ads").exists()


def test_dry_run_of_a_downgrade_and_of_a_verb(admin_api, applied):
    before = counts()
    downgrade = admin_api.post("/api/v1/nodeconfig/emergency-downgrade/?dry_run=true",
                               {"reason": "drill", "confirm": "DOWNGRADE"}, format="json")
    assert downgrade.status_code == 201 and not ConfigTarget.objects.filter(emergency=True).exists()
    target = ConfigTarget.objects.get(name="hdd-a4")
    paused = admin_api.post(f"/api/v1/nodeconfig/targets/{target.pk}/pause/?dry_run=true", {"reason": "x"}, format="json")
    assert paused.status_code == 200 and paused.json()["paused"] is True
    target.refresh_from_db()
    assert target.paused is False and counts() == before


def test_what_leaves_the_database_refuses_a_dry_run(admin_api, applied):
    refused = admin_api.post("/api/v1/quotas/webhook-configuration/sim-1/?dry_run=true", {}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "dry_run_unsupported"


def test_every_write_endpoint_honours_dry_run():
    """One way to dry-run: every REST view taking an unsafe method has ``DryRunMixin``."""
    from django.urls import get_resolver
    from rest_framework.views import APIView

    from core.api.viewsets import DryRunMixin

    def walk(patterns, prefix=""):
        for pattern in patterns:
            if hasattr(pattern, "url_patterns"):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern.callback

    missing = []
    for route, callback in walk(get_resolver().url_patterns):
        view = getattr(callback, "cls", None)
        if not route.startswith("api/v1/") or view is None or not issubclass(view, APIView):
            continue
        actions = getattr(callback, "actions", None)
        methods = set(actions) if actions else {m for m in ("post", "put", "patch", "delete") if hasattr(view, m)}
        if methods & {"post", "put", "patch", "delete"} and not issubclass(view, DryRunMixin):
            missing.append(route)
    assert missing == []


# ---------------------------------------------------------------------------- tokens for the command line


def test_a_token_issues_tokens_no_stronger_than_itself(admin_user):
    from datetime import timedelta

    from django.utils import timezone

    from core.models import APIToken
    from tests.conftest import token_client

    writer = token_client(admin_user)
    issued = writer.post("/api/v1/auth/tokens/", {"name": "ci", "write_enabled": False}, format="json")
    assert issued.status_code == 201 and issued.json()["write_enabled"] is False
    reader = token_client(admin_user, write_enabled=False)
    assert reader.post("/api/v1/auth/tokens/", {"name": "escalate"}, format="json").status_code == 403
    short, raw = APIToken.issue(admin_user, ttl=timedelta(hours=1))
    writer.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    longer = writer.post("/api/v1/auth/tokens/", {"name": "longer", "ttl_days": 30}, format="json").json()
    assert APIToken.objects.get(name="longer").expires <= short.expires
    assert longer["expires"] is not None and APIToken.objects.get(name="longer").expires > timezone.now()


def test_malformed_specs_are_refused_never_a_server_error(admin_api, applied):
    """Every spec field of every kind given values of the wrong shape: 400 with the one body
    (or, for a value the field happens to accept, a normal answer) — never a 500."""
    junk = [None, 0, -1, "", "x", [], [1], {}, {"a": []}, True]
    answers = set()
    for document in configuration():
        for field in list(document["spec"]) + ["template", "type"]:
            for value in junk:
                broken = copy.deepcopy(document)
                broken["spec"][field] = value
                response = apply(admin_api, [broken], dry_run=True)
                assert response.status_code in (200, 400, 403, 404, 409, 412), (document["kind"], field, value, response.content)
                if response.status_code != 200:
                    assert set(response.json()) == {"code", "detail", "errors"}
                answers.add(response.status_code)
    assert 400 in answers
