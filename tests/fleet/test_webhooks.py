"""The one admission webhook configuration module (``fleet.webhooks``): the public URL and CA
bundle rules, the entries of each kind, and the ONE AdmissionConfiguration + kubeconfig pair
that makes a member API server send the webhook token to both of Meridian's webhooks."""

from __future__ import annotations

import base64
import re

import pytest

from core.errors import Refused
from fleet import webhooks
from fleet.models import Cluster
from quotas.webhook import CONFIGURATION as QUOTAS
from scheduling.webhook import CONFIGURATION as SCHEDULING
from tests.certificates import CA_PEM


@pytest.fixture
def bj1(db) -> Cluster:
    return Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 1, "seed": 1})


# ---------------------------------------------------------------------------- the public URL


@pytest.mark.parametrize(("raw", "code"), [
    ("", "base_url_required"), ("   ", "base_url_required"),
    ("http://meridian.corp", "invalid_base_url"), ("meridian.corp", "invalid_base_url"),
    ("https://meridian.example.com", "invalid_base_url"), ("https://example.org", "invalid_base_url"),
    ("https://meridian.test", "invalid_base_url"), ("https://localhost:8443", "invalid_base_url"),
    ("https://meridian.invalid", "invalid_base_url"), ("https://127.0.0.1", "invalid_base_url"),
    ("https://[::1]:8443", "invalid_base_url"), ("https://0.0.0.0", "invalid_base_url"),
    ("https://169.254.1.1", "invalid_base_url"), ("https://user:pw@meridian.corp", "invalid_base_url"),
    ("https://meridian.corp/?x=1", "invalid_base_url"), ("https://meridian.corp/#top", "invalid_base_url"),
    ("https://meridian.corp:99999", "invalid_base_url"), ("https://meridian.corp:", "invalid_base_url"),
    ("https://", "invalid_base_url"),
])
def test_a_url_no_api_server_could_use_is_refused_on_base_url(settings, raw, code):
    settings.MERIDIAN_PUBLIC_URL = ""
    with pytest.raises(Refused) as refused:
        webhooks.public_base_url(raw)
    assert refused.value.code == code and list(refused.value.errors) == ["base_url"], raw


def test_the_setting_is_the_default_and_held_to_the_same_rules(settings):
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp/"
    assert webhooks.public_base_url() == "https://meridian.corp"
    assert webhooks.public_base_url("https://other.corp:8443/meridian/") == "https://other.corp:8443/meridian", \
        "an explicit base_url wins"
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.example.com"
    with pytest.raises(Refused) as refused:
        webhooks.public_base_url()
    assert refused.value.code == "invalid_base_url" and "placeholder" in refused.value.detail


# ---------------------------------------------------------------------------- the CA bundle


def test_the_ca_bundle_is_pem_or_its_base64_and_nothing_else():
    expected = base64.b64encode(CA_PEM.strip().encode()).decode()
    assert webhooks.ca_bundle_value(CA_PEM) == expected
    assert webhooks.ca_bundle_value(expected) == expected, "caBundle's own form"
    assert webhooks.ca_bundle_value("  ") == ""
    for bad in ("not a certificate", base64.b64encode(b"-----BEGIN").decode(), "-----BEGIN CERTIFICATE-----\nxx\n"):
        with pytest.raises(Refused) as refused:
            webhooks.ca_bundle_value(bad)
        assert refused.value.code == "invalid_ca_bundle" and list(refused.value.errors) == ["ca_bundle"], bad
    assert webhooks.missing_for_apply(ca_bundle=CA_PEM) == {}
    assert list(webhooks.missing_for_apply(ca_bundle="")) == ["ca_bundle"]


# ---------------------------------------------------------------------------- the configuration objects


def test_each_kind_gets_its_object_and_every_entry_the_shared_rules(bj1, settings):
    settings.MERIDIAN_PUBLIC_URL, settings.MERIDIAN_NAMESPACE = "https://meridian.corp", "platform"
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": ["kube-system", "platform"]}]}
    for config, kind in ((QUOTAS, "ValidatingWebhookConfiguration"), (SCHEDULING, "MutatingWebhookConfiguration")):
        rendered = webhooks.webhook_configuration(bj1, config, ca_bundle=CA_PEM)
        assert (rendered["kind"], rendered["metadata"]["name"]) == (kind, config.name)
        assert rendered["metadata"]["annotations"] == {"meridian.io/cluster": "bj-1"}
        assert [h["name"] for h in rendered["webhooks"]] == [h.name for h in config.hooks]
        for entry in rendered["webhooks"]:
            assert entry["clientConfig"]["url"] == f"https://meridian.corp{config.path}"
            assert entry["clientConfig"]["caBundle"] == webhooks.ca_bundle_value(CA_PEM)
            assert entry["namespaceSelector"] == selector, "Fail is safe only with these two left alone"
            assert entry["admissionReviewVersions"] == ["v1"] and entry["failurePolicy"] == "Fail"
            assert all(rule["scope"] == "Namespaced" and rule["operations"] for rule in entry["rules"])
            assert ("reinvocationPolicy" in entry) == (kind == "MutatingWebhookConfiguration"), \
                "reinvocationPolicy exists on mutating webhooks only"
        rendered["webhooks"][0]["rules"][0]["resources"].append("secrets")
        rendered["webhooks"][0].get("objectSelector", {}).clear()
        assert webhooks.webhook_configuration(bj1, config, ca_bundle=CA_PEM)["webhooks"] != rendered["webhooks"], \
            "an app's description is never changed through what was rendered from it"
    (pods,) = webhooks.webhook_configuration(bj1, SCHEDULING)["webhooks"]
    assert (pods["sideEffects"], pods["timeoutSeconds"], pods["rules"][0]["operations"]) == ("None", 5, ["CREATE"])
    workloads, scale = webhooks.webhook_configuration(bj1, QUOTAS)["webhooks"]
    assert workloads["sideEffects"] == scale["sideEffects"] == "NoneOnDryRun"
    assert "caBundle" not in workloads["clientConfig"], "without a CA bundle: a preview only"


def test_applying_is_refused_before_anything_is_written(bj1, settings):
    from core.models import ObjectChange
    from fleet.services import connector_for

    settings.MERIDIAN_PUBLIC_URL = ""
    for config in (QUOTAS, SCHEDULING):
        with pytest.raises(Refused) as no_url:
            webhooks.apply(bj1, config, ca_bundle=CA_PEM)
        assert no_url.value.code == "base_url_required"
        with pytest.raises(Refused) as no_ca:
            webhooks.apply(bj1, config, base_url="https://meridian.corp")
        assert no_ca.value.code == "ca_bundle_required" and no_ca.value.status == 400 and "ca_bundle" in no_ca.value.errors
    kinds = {QUOTAS.name: "ValidatingWebhookConfiguration", SCHEDULING.name: "MutatingWebhookConfiguration"}
    with connector_for(bj1) as connector:
        assert all(connector.get("admissionregistration.k8s.io/v1", kind, name) is None for name, kind in kinds.items())
    assert not ObjectChange.objects.exists()


# ---------------------------------------------------------------------------- the API server's two files


def test_one_admission_configuration_names_both_plugins_with_the_same_kubeconfig(bj1, settings):
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp"
    files = webhooks.admission_files(bj1)
    plugins = files["admission_configuration"]["plugins"]
    assert [p["name"] for p in plugins] == ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"]
    assert {p["configuration"]["kind"] for p in plugins} == {"WebhookAdmissionConfiguration"}
    assert {p["configuration"]["kubeConfigFile"] for p in plugins} == {files["files"]["kubeconfig"]}, \
        "both plugins read the one kubeconfig"
    assert files["files"] == {"admission_configuration": "/etc/kubernetes/meridian/admission-configuration.yaml",
                              "kubeconfig": "/etc/kubernetes/meridian/webhook-kubeconfig.yaml"}
    assert files["api_server_flags"] == ["--admission-control-config-file=/etc/kubernetes/meridian/admission-configuration.yaml"]
    (user,) = files["kubeconfig"]["users"]
    assert user["name"] == "meridian.corp:443"
    assert "bj-1" in user["user"]["token"] and "/api/v1/fleet/clusters/bj-1/webhook-tokens/" in user["user"]["token"], \
        "the placeholder says how to issue the token (it is shown once)"


@pytest.mark.parametrize(("base_url", "user"), [
    ("https://meridian.corp", "meridian.corp:443"),
    ("https://meridian.corp/", "meridian.corp:443"),
    ("https://meridian.corp/prefix", "meridian.corp:443"),
    ("https://meridian.corp:8443", "meridian.corp:8443"),
    ("https://meridian.corp:443", "meridian.corp:443"),
    ("https://Meridian.Corp.net", "Meridian.Corp.net:443"),  # the API server matches the URL's host as written
    ("https://10.1.2.3:9443", "10.1.2.3:9443"),
    ("https://[2001:db8::10]:8443", "[2001:db8::10]:8443"),
])
def test_the_kubeconfig_user_is_keyed_by_the_public_urls_host_and_port(bj1, base_url, user):
    files = webhooks.admission_files(bj1, base_url=base_url)
    assert [u["name"] for u in files["kubeconfig"]["users"]] == [user]
    hooks = webhooks.webhook_configuration(bj1, QUOTAS, base_url=base_url)["webhooks"]
    hooks += webhooks.webhook_configuration(bj1, SCHEDULING, base_url=base_url)["webhooks"]
    for hook in hooks:  # the API server's own lookup: the URL's host, ":443" added when it names no port
        host = re.match(r"https://([^/]+)", hook["clientConfig"]["url"]).group(1)
        assert (host if re.search(r":\d+$", host) else f"{host}:443") == user


def test_both_apps_show_the_same_api_server_files(client, admin_api, admin_user, bj1, settings):
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp"
    quotas = admin_api.get("/api/v1/quotas/webhook-configuration/bj-1/", {"include": "admission-config"}).json()
    scheduling = admin_api.get("/api/v1/scheduling/webhook-configuration/bj-1/").json()
    for key in ("admission_configuration", "kubeconfig", "files", "api_server_flags"):
        assert quotas[key] == scheduling[key], key

    client.force_login(admin_user)
    pages = [client.get("/quotas/webhook/bj-1/").content.decode(),
             client.get("/scheduling/webhook/", {"cluster": "bj-1"}).content.decode()]
    for block in ("webhook-admission-configuration", "webhook-kubeconfig"):
        texts = [re.search(rf'<pre[^>]* id="{block}"[^>]*>(.*?)</pre>', page, re.S).group(1) for page in pages]
        assert texts[0] == texts[1] and texts[0].strip(), block
    assert "MutatingAdmissionWebhook" in pages[0] and "ValidatingAdmissionWebhook" in pages[1]
    assert "name: meridian.corp:443" in pages[0]


# ---------------------------------------------------------------------------- a real cluster


def test_both_webhook_configurations_are_applied_to_a_real_cluster(db, settings):
    """Through the Kubernetes connector over HTTP: what an API server then holds and calls."""
    from fleet.services import register_cluster
    from tests.kubeapi import ApiServer, registration, serve

    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp"
    api = ApiServer(token="admin-token")
    with serve(api) as url:
        cluster = register_cluster(registration("k8s-1", url, "admin-token"))
        for config, resource in ((QUOTAS, "validatingwebhookconfigurations"), (SCHEDULING, "mutatingwebhookconfigurations")):
            applied = webhooks.apply(cluster, config, ca_bundle=CA_PEM)
            stored = api.object(f"admissionregistration.k8s.io/v1/{resource}", config.name)
            assert stored is not None and stored["webhooks"] == applied["webhooks"]
            expected = webhooks.webhook_configuration(cluster, config, ca_bundle=CA_PEM)
            assert stored["webhooks"] == expected["webhooks"]
            for hook in stored["webhooks"]:
                assert hook["clientConfig"]["url"].startswith("https://meridian.corp/")
                assert base64.b64decode(hook["clientConfig"]["caBundle"]).decode().strip() == CA_PEM.strip()
                assert hook["failurePolicy"] == "Fail"
            again = webhooks.apply(cluster, config, ca_bundle=CA_PEM)  # idempotent: the same object, applied again
            assert again["metadata"]["uid"] == stored["metadata"]["uid"]
        assert api.count("PATCH", "webhookconfigurations/") == 4
