"""Scheduling pages: lists, details with history/diff/rollback, create/edit with preview, import,
render preview, simulator and webhook configuration; refusals land on the form, never a 500."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings

from core.context import acting_as
from fleet.models import Cluster, Node
from scheduling import services
from scheduling.models import NodeSchedulerConfig, SchedulerConfigBinding, SchedulingPolicy
from tests.pages import html

from .conftest import SEED_NSC_YAML

INDEX = "/scheduling/"


def login(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def seeded(db):
    with acting_as("test"):
        services.import_manifests(SEED_NSC_YAML)
        binding, _ = services.save_binding("web-pools", "web", {"selector": {"matchLabels": {"app": "web"}},
                                                                "nodeSchedulerConfig": {"name": "resource-pool-example",
                                                                                        "args": {"DefaultPool": "B", "PrefferredPool": "A"}}})
    return binding


def test_index_lists_everything_and_hides_forms_from_viewers(client, viewer, operator, seeded):
    page = html(login(client, viewer).get(INDEX))
    assert "resource-pool-example" in page and "web-pools" in page and "default" in page
    assert "/scheduling/policies/new/" not in page
    page = html(login(client, operator).get(INDEX))
    assert "/scheduling/policies/new/" in page and "/scheduling/templates/nsc/new/" in page
    assert client.logout() is None and client.get(INDEX).status_code == 302


def test_every_page_renders(client, operator, seeded):
    login(client, operator)
    Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 1, "seed": 1})
    for path in (INDEX, "/scheduling/policies/default/", "/scheduling/policies/new/", "/scheduling/policies/default/edit/",
                 "/scheduling/templates/nsc/resource-pool-example/", "/scheduling/templates/nsc/new/",
                 "/scheduling/templates/psc/new/", "/scheduling/templates/nsc/resource-pool-example/edit/",
                 f"/scheduling/bindings/{seeded.pk}/", f"/scheduling/bindings/{seeded.pk}/edit/", "/scheduling/bindings/new/",
                 "/scheduling/import/", "/scheduling/preview/", "/scheduling/simulator/", "/scheduling/webhook/"):
        response = client.get(path)
        assert response.status_code == 200, path
    assert client.get("/scheduling/templates/xyz/new/").status_code == 404


def test_template_edit_preview_save_diff_rollback(client, operator, seeded):
    login(client, operator)
    edit = "/scheduling/templates/nsc/resource-pool-example/edit/"
    form = client.get(edit)
    version = re.search(r'name="version" value="([^"]+)"', html(form)).group(1).replace("&quot;", '"')
    spec = ("nodeAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n    nodeSelectorTerms:\n"
            "    - matchExpressions:\n      - key: cloud.ctrip.com/pool\n        operator: In\n        values:\n"
            "        - {{.DefaultPool}}\n")
    preview = client.post(edit, {"spec": spec, "preview": "1", "preview_args": '{"DefaultPool": "B"}', "version": version})
    assert preview.status_code == 200 and "Preview" in html(preview) and 'id="preview-rendered"' in html(preview)
    assert NodeSchedulerConfig.objects.get().revision.number == 1  # a preview saves nothing
    saved = client.post(edit, {"spec": spec, "reason": "default only", "save": "1", "version": version})
    assert saved.status_code == 302
    row = NodeSchedulerConfig.objects.get()
    assert row.revision.number == 2 and row.spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["{{.DefaultPool}}"]
    stale = client.post(edit, {"spec": spec.replace("In", "NotIn"), "save": "1", "version": version})
    assert stale.status_code == 200 and "changed since" in html(stale)
    detail = client.get("/scheduling/templates/nsc/resource-pool-example/?a=1&b=2")
    assert "Changes from r1 to r2" in html(detail)
    rolled = client.post("/scheduling/templates/nsc/resource-pool-example/rollback/",
                         {"rollback-revision": "1", "rollback-reason": "back to two pools"})
    assert rolled.status_code == 302
    assert NodeSchedulerConfig.objects.get().revision.number == 3
    refused = client.post("/scheduling/templates/nsc/resource-pool-example/delete/", {"delete-reason": "x"})
    assert refused.status_code == 200 and "web/web-pools" in html(refused)  # in use by the binding


def test_invalid_template_lands_on_the_form(client, operator, db):
    login(client, operator)
    bad = ("nodeAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n    nodeSelectorTerms:\n"
           "    - matchExpressions:\n      - key: pool\n        operator: Sometimes\n        values: [a]\n")
    response = client.post("/scheduling/templates/nsc/new/", {"name": "bad", "spec": bad, "save": "1"})
    assert response.status_code == 200 and "Sometimes" in html(response)
    assert not NodeSchedulerConfig.objects.exists()
    unparsable = client.post("/scheduling/templates/nsc/new/", {"name": "bad", "spec": "a: [b", "save": "1"})
    assert unparsable.status_code == 200 and "YAML" in html(unparsable)


def test_policy_pages_create_preview_and_rollback(client, operator, db):
    login(client, operator)
    config = "plugins:\n  score:\n    enabled:\n    - name: WaterLevelStackSpread\n      weight: 3\n"
    preview = client.post("/scheduling/policies/new/", {"name": "water", "config": config, "preview": "1"})
    assert "WaterLevelStackSpread" in html(preview) and not SchedulingPolicy.objects.filter(name="water").exists()
    created = client.post("/scheduling/policies/new/", {"name": "water", "config": config, "save": "1"})
    assert created.status_code == 302 and created["Location"] == "/scheduling/policies/water/"
    bad = client.post("/scheduling/policies/new/", {"name": "bad", "config": "plugins: {score: {enabled: [{name: Nope}]}}",
                                                    "save": "1"})
    assert bad.status_code == 200 and "Nope" in html(bad)
    policy = SchedulingPolicy.objects.get(name="water")
    with acting_as("test"):
        services.save_policy(services.PolicySpec("water", config={}), instance=policy)
    rolled = client.post("/scheduling/policies/water/rollback/", {"rollback-revision": "1", "rollback-reason": "water again"})
    assert rolled.status_code == 302
    assert SchedulingPolicy.objects.get(name="water").revision.rollback_of == 1


def test_viewer_cannot_post(client, viewer, seeded):
    login(client, viewer)
    assert client.post("/scheduling/policies/default/rollback/", {"rollback-revision": "1", "rollback-reason": "x"}).status_code == 403
    assert client.post("/scheduling/import/", {"yaml": SEED_NSC_YAML}).status_code == 403
    # a what-if needs the role that could make the change (as the quota check page)
    assert client.post("/scheduling/preview/", {"pod": "metadata: {name: a}"}).status_code == 403


FORM_PAGES = ("/scheduling/policies/new/", "/scheduling/policies/default/edit/", "/scheduling/templates/nsc/new/",
              "/scheduling/templates/psc/new/", "/scheduling/templates/nsc/resource-pool-example/edit/",
              "/scheduling/bindings/new/", "/scheduling/import/", "/scheduling/preview/", "/scheduling/simulator/")


def test_a_viewer_is_not_offered_forms_they_cannot_send(client, viewer, operator, seeded):
    """A page that is nothing but a change's form needs the change's permission to be opened
    (as in node config, federation and quotas); the pages viewers read stay open to them."""
    login(client, viewer)
    open_to_viewer = [path for path in (*FORM_PAGES, f"/scheduling/bindings/{seeded.pk}/edit/") if client.get(path).status_code != 403]
    assert open_to_viewer == []
    assert client.get("/scheduling/policies/default/").status_code == 200
    assert client.get(f"/scheduling/bindings/{seeded.pk}/").status_code == 200
    login(client, operator)
    assert [path for path in FORM_PAGES if client.get(path).status_code != 200] == []


def test_binding_create_refusal_and_save(client, operator, seeded):
    login(client, operator)
    spec = "selector: {matchLabels: {app: api}}\nnodeSchedulerConfig: {name: resource-pool-example, args: {DefaultPool: B}}\n"
    refused = client.post("/scheduling/bindings/new/", {"name": "api", "namespace": "api", "spec": spec, "save": "1"})
    assert refused.status_code == 200 and "PrefferredPool" in html(refused)
    fixed = spec.replace("{DefaultPool: B}", "{DefaultPool: B, PrefferredPool: A}")
    preview = client.post("/scheduling/bindings/new/", {"name": "api", "namespace": "api", "spec": fixed, "preview": "1"})
    assert 'id="preview-rendered"' in html(preview)
    saved = client.post("/scheduling/bindings/new/", {"name": "api", "namespace": "api", "spec": fixed, "save": "1"})
    assert saved.status_code == 302 and SchedulerConfigBinding.objects.filter(name="api", namespace="api").exists()


def test_import_page_all_or_nothing(client, operator, db):
    login(client, operator)
    bad = SEED_NSC_YAML + "---\n" + SEED_NSC_YAML.replace("resource-pool-example", "Bad_Name")
    refused = client.post("/scheduling/import/", {"yaml": bad})
    assert refused.status_code == 200 and "Bad_Name" in html(refused)
    assert not NodeSchedulerConfig.objects.exists()
    assert client.post("/scheduling/import/", {"yaml": SEED_NSC_YAML}).status_code == 302
    assert NodeSchedulerConfig.objects.filter(name="resource-pool-example").exists()


def test_render_preview_page(client, operator, seeded):
    login(client, operator)
    pod = ("metadata:\n  name: web-0\n  namespace: web\n  labels: {app: web}\nspec:\n  containers: [{name: a, image: nginx}]\n")
    page = html(client.post("/scheduling/preview/", {"pod": pod}))
    assert 'id="explanation"' in page and "web/web-pools" in page and 'id="patch"' in page and "cloud.ctrip.com/pool" in page
    denied = html(client.post("/scheduling/preview/", {"pod": pod.replace("labels: {app: web}", "annotations: "
                                                                           "{scb.sched.cloud.ctrip.com/nsc: nothing}")}))
    assert 'id="denial"' in denied and "does not exist" in denied


def test_simulator_page_charts_from_files_only(client, operator, db):
    login(client, operator)
    cluster = Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 1, "seed": 1})
    Node.objects.bulk_create(Node(cluster=cluster, name=f"n{i}", labels={}, allocatable={"cpu": "16", "memory": "64Gi", "pods": "110"},
                                  ready=True) for i in range(10))
    pod = "metadata: {name: web}\nspec:\n  containers: [{name: a, resources: {requests: {cpu: '2', memory: 2Gi}}}]\n"
    response = client.post("/scheduling/simulator/", {"cluster": "bj-1", "pod": pod, "replicas": "30", "policy": "",
                                                      "compare_with": "default"})
    page = html(response)
    assert response.status_code == 200 and 'id="sched-sim-data"' in page and "vendor/plotly/plotly.min.js" in page
    assert "meridian/js/scheduling.js" in page and 'class="sched-placed">30<' in page
    assert not re.search(r"<script>(?!\s*</script>)", page)  # no inline code (the CSP allows files only)
    assert "plotly.min.js" not in html(client.get("/scheduling/simulator/"))


@override_settings(MERIDIAN_PUBLIC_URL="")
def test_webhook_page_refuses_without_a_public_url(client, admin_user, db):
    login(client, admin_user)
    Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 1, "seed": 1})
    page = html(client.get("/scheduling/webhook/?cluster=bj-1"))
    assert "MERIDIAN_PUBLIC_URL" in page and 'id="webhook-manifest"' not in page
    shown = html(client.get("/scheduling/webhook/?cluster=bj-1&base_url=https://meridian.corp.internal"))
    assert 'id="webhook-manifest"' in shown and "kube-system" in shown and "failurePolicy: Fail" in shown


def test_webhook_page_applies_only_with_a_ca_bundle_and_only_for_admins(client, operator, admin_user, settings, db):
    from core.models import ObjectChange
    from fleet.services import connector_for
    from tests.certificates import CA_PEM

    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp.internal"
    cluster = Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 1, "seed": 1})

    def stored():
        with connector_for(cluster) as connector:
            return connector.get("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "meridian-scheduling")

    login(client, operator)
    assert 'name="apply"' not in html(client.get("/scheduling/webhook/?cluster=bj-1")), "the button is for admins"
    assert client.post("/scheduling/webhook/", {"apply": "1", "cluster": "bj-1", "ca_bundle": CA_PEM}).status_code == 403
    login(client, admin_user)
    no_ca = client.post("/scheduling/webhook/", {"apply": "1", "cluster": "bj-1", "base_url": "", "ca_bundle": ""})
    assert no_ca.status_code == 200 and no_ca.context["form"].errors["ca_bundle"] and stored() is None
    assert 'id="webhook-manifest"' in html(no_ca), "the manifest stays in view"
    not_pem = client.post("/scheduling/webhook/", {"apply": "1", "cluster": "bj-1", "ca_bundle": "not a certificate"})
    assert not_pem.status_code == 200 and not_pem.context["form"].errors["ca_bundle"] and stored() is None
    assert not ObjectChange.objects.filter(verb="apply_scheduling_webhook").exists()
    applied = client.post("/scheduling/webhook/", {"apply": "1", "cluster": "bj-1", "base_url": "", "ca_bundle": CA_PEM})
    assert applied.status_code == 302 and applied["Location"] == "/scheduling/webhook/?cluster=bj-1"
    assert stored()["webhooks"][0]["clientConfig"]["caBundle"]
    assert ObjectChange.objects.get(verb="apply_scheduling_webhook").after["name"] == "meridian-scheduling"
