"""The ValidatingWebhookConfiguration Meridian renders and applies must not be able to break a cluster.

The finding: applying it without a base URL wrote ``https://meridian.example.com`` with
``failurePolicy: Fail`` and no ``caBundle`` (every labelled workload refused, cluster-wide), and
nothing told an API server how to send the webhook's Bearer token.
"""

from __future__ import annotations

import base64

import pytest

import fleet.webhooks
from core.models import ObjectChange
from fleet.models import Cluster
from fleet.services import connector_for
from quotas import webhook
from tests.certificates import CA_PEM

pytestmark = pytest.mark.django_db
URL = "/api/v1/quotas/webhook-configuration/bj-1/"


@pytest.fixture
def bj1(db) -> Cluster:
    return Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 2, "seed": 1})


def stored(cluster: Cluster) -> dict | None:
    with connector_for(cluster) as connector:
        return connector.get("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "meridian-quotas")


def test_applying_without_a_real_url_is_refused_and_writes_nothing(admin_api, bj1, settings):
    settings.MERIDIAN_PUBLIC_URL = ""
    bare = admin_api.post(URL, {"ca_bundle": CA_PEM}, format="json")
    assert bare.status_code == 400 and bare.json()["code"] == "base_url_required"
    assert "MERIDIAN_PUBLIC_URL" in bare.json()["errors"]["base_url"][0]
    for bad in ("https://meridian.example.com", "https://example.com/", "https://meridian.example.org:8443",
                "http://meridian.corp", "https://localhost", "https://127.0.0.1:8443", "https://user:pw@meridian.corp",
                "https://meridian.corp/?x=1", "meridian.corp", "https://meridian.corp:99999"):
        refused = admin_api.post(URL, {"base_url": bad, "ca_bundle": CA_PEM}, format="json")
        assert refused.status_code == 400 and "base_url" in refused.json()["errors"], bad
        assert refused.json()["code"] == "invalid_base_url", bad
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.example.com"
    assert admin_api.post(URL, {"ca_bundle": CA_PEM}, format="json").json()["code"] == "invalid_base_url", \
        "a placeholder in the setting is refused too"
    assert stored(bj1) is None
    assert not ObjectChange.objects.filter(verb="apply_quota_webhook").exists()
    preview = admin_api.get(URL)
    assert preview.status_code == 400 and "base_url" in preview.json()["errors"], "the preview names what is missing"


def test_applying_needs_a_ca_bundle_and_the_preview_says_so(admin_api, viewer_api, bj1, settings):
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp"
    preview = viewer_api.get(URL)
    assert preview.status_code == 200 and preview.json()["kind"] == "ValidatingWebhookConfiguration"
    assert "ca_bundle" in preview.headers["Warning"] and preview.headers["Warning"].startswith("299 meridian")
    hooks = preview.json()["webhooks"]
    assert {h["clientConfig"]["url"] for h in hooks} == {"https://meridian.corp/api/admission/v1/quotas/validate"}
    assert all("caBundle" not in h["clientConfig"] for h in hooks)

    refused = admin_api.post(URL, {}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "ca_bundle_required"
    assert "ca_bundle" in refused.json()["errors"] and stored(bj1) is None
    garbage = admin_api.post(URL, {"ca_bundle": "not a certificate"}, format="json")
    assert garbage.status_code == 400 and garbage.json()["code"] == "invalid_ca_bundle" and stored(bj1) is None

    with_ca = viewer_api.get(URL, {"ca_bundle": CA_PEM})
    assert "Warning" not in with_ca.headers
    applied = admin_api.post(URL, {"ca_bundle": CA_PEM}, format="json")
    assert applied.status_code == 200
    expected = base64.b64encode(CA_PEM.strip().encode()).decode()
    assert [h["clientConfig"]["caBundle"] for h in stored(bj1)["webhooks"]] == [expected, expected]
    assert applied.json()["webhooks"] == with_ca.json()["webhooks"], "what was shown is what was applied"
    base64_input = admin_api.post(URL, {"ca_bundle": expected}, format="json")
    assert base64_input.status_code == 200, "caBundle's own base64 form is taken as well"
    change = ObjectChange.objects.filter(verb="apply_quota_webhook").latest("pk")
    assert change.after["url"] == "https://meridian.corp/api/admission/v1/quotas/validate"


def test_both_webhooks_leave_kube_system_and_meridian_alone(viewer_api, bj1, settings):
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp"
    for namespace, excluded in (("meridian", ["kube-system", "meridian"]), ("platform", ["kube-system", "platform"])):
        settings.MERIDIAN_NAMESPACE = namespace
        hooks = {h["name"]: h for h in viewer_api.get(URL).json()["webhooks"]}
        for name in ("workloads.quotas.meridian.io", "scale.quotas.meridian.io"):
            assert hooks[name]["namespaceSelector"] == {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": excluded}]}, name
            assert hooks[name]["failurePolicy"] == "Fail"


def test_the_api_server_files_for_the_bearer_token_are_rendered(viewer_api, bj1, settings):
    settings.MERIDIAN_PUBLIC_URL = ""
    body = viewer_api.get(URL, {"base_url": "https://meridian.corp", "include": "admission-config"}).json()
    assert body["webhook_configuration"]["kind"] == "ValidatingWebhookConfiguration"
    admission = body["admission_configuration"]
    assert (admission["apiVersion"], admission["kind"]) == ("apiserver.config.k8s.io/v1", "AdmissionConfiguration")
    plugins = {p["name"]: p["configuration"] for p in admission["plugins"]}
    assert set(plugins) == {"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}, "one file serves both webhooks"
    for plugin in plugins.values():
        assert plugin["kind"] == "WebhookAdmissionConfiguration"
        assert plugin["kubeConfigFile"] == body["files"]["kubeconfig"]
    kubeconfig = body["kubeconfig"]
    assert (kubeconfig["apiVersion"], kubeconfig["kind"]) == ("v1", "Config")
    assert kubeconfig["users"][0]["name"] == "meridian.corp:443", "host:port as the API server looks it up (443 by default)"
    assert "bj-1" in kubeconfig["users"][0]["user"]["token"] and "webhook-tokens" in kubeconfig["users"][0]["user"]["token"]
    assert body["api_server_flags"] == [f"--admission-control-config-file={body['files']['admission_configuration']}"]
    assert "ca_bundle" in body["missing"]
    port = viewer_api.get(URL, {"base_url": "https://meridian.corp:8443/", "include": "admission-config"}).json()
    assert port["kubeconfig"]["users"][0]["name"] == "meridian.corp:8443", "host:port when the port is not 443"
    assert port["webhook_configuration"]["webhooks"][0]["clientConfig"]["url"] == \
        "https://meridian.corp:8443/api/admission/v1/quotas/validate"
    assert viewer_api.get(URL, {"base_url": "https://meridian.corp", "include": "everything"}).status_code == 400
    for needle in ("AdmissionConfiguration", "WebhookAdmissionConfiguration", "MutatingAdmissionWebhook",
                   "ValidatingAdmissionWebhook", "kubeConfigFile", "users:", "token:", body["files"]["kubeconfig"]):
        assert needle in fleet.webhooks.__doc__, f"the shared webhook module's docstring documents {needle}"
    assert "fleet.webhooks" in webhook.__doc__, "the quota webhook's docstring points at the shared explanation"


PAGE = "/quotas/webhook/bj-1/"


def test_the_page_shows_the_manifest_before_anything_is_applied(client, viewer, operator, admin_user, bj1, settings):
    settings.MERIDIAN_PUBLIC_URL = ""
    client.force_login(viewer)
    assert "/quotas/webhook/" in client.get("/quotas/").content.decode()
    listed = client.get("/quotas/webhook/")
    assert listed.status_code == 200 and 'href="/quotas/webhook/bj-1/"' in listed.content.decode()
    empty = client.get(PAGE)
    assert empty.status_code == 200 and empty.context["manifest_yaml"] is None
    assert "MERIDIAN_PUBLIC_URL" in " ".join(empty.context["missing"]["base_url"]), "says what is missing"
    placeholder = client.get(PAGE, {"base_url": "https://meridian.example.com"})
    assert "placeholder" in " ".join(placeholder.context["form"].errors["base_url"])
    shown = client.get(PAGE, {"base_url": "https://meridian.corp"})
    page = shown.content.decode()
    assert "kind: ValidatingWebhookConfiguration" in page and "https://meridian.corp/api/admission/v1/quotas/validate" in page
    assert "kind: AdmissionConfiguration" in page and "kubeConfigFile:" in page and "name: meridian.corp:443" in page
    assert 'id="webhook-missing"' in page and "ca_bundle" in page
    assert 'name="apply"' not in page and client.post(PAGE, {"apply": "1", "base_url": "https://meridian.corp"}).status_code == 403

    client.force_login(operator)
    assert client.post(PAGE, {"apply": "1", "base_url": "https://meridian.corp", "ca_bundle": CA_PEM}).status_code == 403, \
        "like the API: a cluster's admission chain is for admins"
    assert stored(bj1) is None
    client.force_login(admin_user)
    no_ca = client.post(PAGE, {"apply": "1", "base_url": "https://meridian.corp", "ca_bundle": ""})
    assert no_ca.status_code == 200 and no_ca.context["form"].errors["ca_bundle"] and stored(bj1) is None
    assert "kind: ValidatingWebhookConfiguration" in no_ca.content.decode(), "the manifest stays in view"
    preview = client.post(PAGE, {"preview": "", "base_url": "https://meridian.corp", "ca_bundle": CA_PEM})
    assert "caBundle:" in preview.content.decode() and not preview.context["missing"] and stored(bj1) is None
    assert not ObjectChange.objects.filter(verb="apply_quota_webhook").exists(), "nothing refused is recorded"
    applied = client.post(PAGE, {"apply": "1", "base_url": "https://meridian.corp", "ca_bundle": CA_PEM})
    assert applied.status_code == 302 and stored(bj1)["webhooks"][0]["clientConfig"]["caBundle"]
    change = ObjectChange.objects.get(verb="apply_quota_webhook")
    assert change.after == {"name": "meridian-quotas", "url": "https://meridian.corp/api/admission/v1/quotas/validate"}
