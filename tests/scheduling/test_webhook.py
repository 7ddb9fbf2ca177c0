"""The mutating webhook: the seed renders exactly through a running server; bad callers, bodies,
templates and arguments are answered as the contract says; the cache follows every change."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from core.context import acting_as
from core.models import ObjectChange
from fleet.services import connector_for
from kube.jsonpatch import apply_patch
from scheduling import services
from scheduling.schedconfig import NSC_ANNOTATION, NSC_ARGS_ANNOTATION, PSC_ANNOTATION
from tests.certificates import CA_PEM
from tests.servers import asgi_server  # noqa: F401  (the fixture)

from .conftest import SEED_ANNOTATIONS, SEED_RENDERED, WEBHOOK, RedisDown, pod, review


def post(client, body, token: str | None = None, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post(WEBHOOK, raw, content_type="application/json", **headers, **extra)


def decision(client, body, token):
    response = post(client, body, token)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == body["request"]["uid"]
    return answer["response"]


def patched(obj: dict, response: dict) -> dict:
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    return apply_patch(obj, json.loads(base64.b64decode(response["patch"])))


# ---------------------------------------------------------------------------- through a running server


@pytest.fixture
def server(asgi_server):  # noqa: F811  (the imported fixture, requested by name)
    """The real ASGI app (the webhook's fast path included) served by uvicorn in a thread."""
    return asgi_server


def test_seed_renders_exactly_through_a_running_server(server, webhook_token, seed_template):
    created = pod(SEED_ANNOTATIONS)
    body = review(created)
    with httpx.Client(timeout=30) as client:
        response = client.post(f"{server}{WEBHOOK}", json=body, headers={"Authorization": f"Bearer {webhook_token}"})
        assert response.status_code == 200, response.text
        answer = response.json()["response"]
        assert answer["uid"] == body["request"]["uid"]
        result = patched(created, answer)
        assert result["spec"]["affinity"] == SEED_RENDERED
        assert result["spec"]["containers"] == created["spec"]["containers"]

        # no token, a bad body, a missing argument: through the same running server
        assert client.post(f"{server}{WEBHOOK}", json=body).status_code == 401
        bad = client.post(f"{server}{WEBHOOK}", content=b"{not json", headers={"Authorization": f"Bearer {webhook_token}"})
        assert bad.status_code == 400
        missing = review(pod({NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: '{"DefaultPool":"B"}'}))
        denied = client.post(f"{server}{WEBHOOK}", json=missing, headers={"Authorization": f"Bearer {webhook_token}"})
        assert denied.status_code == 200
        status = denied.json()["response"]
        assert status["allowed"] is False and status["status"]["code"] == 400 and status["status"]["reason"] == "Invalid"
        assert "PrefferredPool" in status["status"]["message"]

        # a change is seen by the next pod (the version moves, the cache reloads), without a restart
        with acting_as("test"):
            services.save_template("NodeSchedulerConfig", "resource-pool-example", {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "cloud.ctrip.com/pool", "operator": "In", "values": ["{{.DefaultPool}}"]}]}]}}},
                reason="default pool only")
        again = client.post(f"{server}{WEBHOOK}", json=review(created), headers={"Authorization": f"Bearer {webhook_token}"})
        terms = patched(created, again.json()["response"])["spec"]["affinity"]["nodeAffinity"]
        assert terms == {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cloud.ctrip.com/pool", "operator": "In", "values": ["B"]}]}]}}


# ---------------------------------------------------------------------------- the Django route


def test_without_a_token_401(client, cluster):
    response = post(client, review(pod(SEED_ANNOTATIONS)))
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert post(client, review(pod()), "mwh_not-a-real-token").status_code == 401


def test_post_is_not_redirected(client, webhook_token):
    response = client.post(WEBHOOK + "/", "{}", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {webhook_token}")
    assert response.status_code != 301 and response.status_code != 302


@pytest.mark.parametrize("body", [
    b"{not json",
    b"[]",
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}},
    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "operation": "CREATE", "kind": {"version": "v1", "kind": "Pod"}, "resource": {"version": "v1", "resource": "pods"}}},
])
def test_malformed_reviews_400(client, webhook_token, body):
    response = post(client, body, webhook_token)
    assert response.status_code == 400
    assert "AdmissionReview" in response.json()["detail"]


def test_seed_through_the_django_route(client, webhook_token, seed_template):
    created = pod(SEED_ANNOTATIONS)
    assert patched(created, decision(client, review(created), webhook_token))["spec"]["affinity"] == SEED_RENDERED


def test_missing_template_is_a_denial_naming_it(client, webhook_token, db):
    answer = decision(client, review(pod({NSC_ANNOTATION: "no-such-template", NSC_ARGS_ANNOTATION: "{}"})), webhook_token)
    assert answer["allowed"] is False
    assert answer["status"] == {"code": 400, "reason": "Invalid", "status": "Failure", "message": answer["status"]["message"]}
    assert 'NodeSchedulerConfig "no-such-template" does not exist' in answer["status"]["message"]


def test_missing_argument_is_a_denial_naming_it(client, webhook_token, seed_template):
    answer = decision(client, review(pod({NSC_ANNOTATION: "resource-pool-example"})), webhook_token)
    assert answer["allowed"] is False and answer["status"]["code"] == 400
    message = answer["status"]["message"]
    assert 'needs argument "DefaultPool"' in message and 'needs argument "PrefferredPool"' in message


def test_bad_arguments_never_make_a_broken_pod(client, webhook_token, seed_template):
    for args in ('{"DefaultPool": "B", "PrefferredPool": "A\\n  - evil"}', "not json", '{"DefaultPool": ["B"]}'):
        answer = decision(client, review(pod({NSC_ANNOTATION: "resource-pool-example", NSC_ARGS_ANNOTATION: args})),
                          webhook_token)
        assert answer["allowed"] is False and "patch" not in answer
        assert NSC_ARGS_ANNOTATION in answer["status"]["message"] or "spec.affinity" in answer["status"]["message"]


def test_other_kinds_and_operations_pass_unchanged(client, webhook_token, seed_template):
    annotated = pod(SEED_ANNOTATIONS)
    for body in (review(annotated, operation="UPDATE"), review(annotated, operation="DELETE"),
                 review({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
                        kind=("apps", "v1", "Deployment"), resource=("apps", "v1", "deployments")),
                 review(annotated, sub_resource="status")):
        answer = decision(client, body, webhook_token)
        assert answer["allowed"] is True and "patch" not in answer


def test_pod_without_templates_is_allowed_unchanged(client, webhook_token, db):
    answer = decision(client, review(pod(labels={"app": "web"})), webhook_token)
    assert answer == {"uid": answer["uid"], "allowed": True}


def test_binding_applies_to_the_pods_it_selects(client, webhook_token, seed_template):
    with acting_as("test"):
        services.save_binding("web-pools", "web", {"selector": {"matchLabels": {"app": "web"}}, "nodeSchedulerConfig": {
            "name": "resource-pool-example", "args": {"DefaultPool": "B", "PrefferredPool": "A"}}})
    selected = pod(labels={"app": "web"})
    assert patched(selected, decision(client, review(selected), webhook_token))["spec"]["affinity"] == SEED_RENDERED
    other = pod(labels={"app": "api"})
    assert "patch" not in decision(client, review(other), webhook_token)
    elsewhere = pod(labels={"app": "web"}, namespace="batch")
    assert "patch" not in decision(client, review(elsewhere, namespace="batch"), webhook_token)


def test_existing_affinity_is_merged_not_replaced(client, webhook_token, seed_template):
    own = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
        "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}}]}}
    created = pod(SEED_ANNOTATIONS, spec={"containers": [{"name": "app", "image": "nginx"}], "affinity": own})
    result = patched(created, decision(client, review(created), webhook_token))
    assert result["spec"]["affinity"]["podAntiAffinity"] == own["podAntiAffinity"]
    assert result["spec"]["affinity"]["nodeAffinity"] == SEED_RENDERED["nodeAffinity"]


def test_unknown_policy_annotation_is_a_denial(client, webhook_token, db):
    answer = decision(client, review(pod({"sched.cloud.ctrip.com/policy": "no-such-policy"})), webhook_token)
    assert answer["allowed"] is False and 'SchedulingPolicy "no-such-policy" does not exist' in answer["status"]["message"]
    assert decision(client, review(pod({"scheduling.meridian.io/policy": "default"})), webhook_token)["allowed"] is True


def test_a_fault_is_a_reasoned_denial_never_a_500(client, webhook_token, seed_template, monkeypatch):
    from scheduling import admission

    def broken():
        raise RuntimeError("database is on fire")

    monkeypatch.setattr(admission.cache, "current", broken)
    answer = decision(client, review(pod(SEED_ANNOTATIONS)), webhook_token)
    assert answer["allowed"] is False and answer["status"]["code"] == 500 and answer["status"]["reason"] == "InternalError"


def test_cache_is_correct_with_redis_down(client, webhook_token, seed_template, monkeypatch, django_capture_on_commit_callbacks):
    from scheduling import admission

    created = pod({PSC_ANNOTATION: "spread"})
    assert decision(client, review(created), webhook_token)["allowed"] is False  # no such template yet
    monkeypatch.setattr(admission, "_redis", RedisDown)
    with acting_as("test"), django_capture_on_commit_callbacks(execute=True):
        services.save_template("PodSchedulerConfig", "spread", {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}}]}})
    answer = decision(client, review(created), webhook_token)
    assert patched(created, answer)["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 5


def test_webhook_cache_follows_the_version(client, webhook_token, seed_template, django_capture_on_commit_callbacks):
    created = pod(SEED_ANNOTATIONS)
    assert decision(client, review(created), webhook_token)["allowed"] is True
    row = services.template_model("NodeSchedulerConfig").objects.get(name="resource-pool-example")
    with acting_as("test"), django_capture_on_commit_callbacks(execute=True):
        services.delete_spec(row, reason="gone")
    answer = decision(client, review(created), webhook_token)
    assert answer["allowed"] is False and "does not exist" in answer["status"]["message"]


# ---------------------------------------------------------------------------- configuration for a member cluster

CONFIG = "/api/v1/scheduling/webhook-configuration/bj-1/"


@pytest.mark.parametrize(("public_url", "code"), [("", "base_url_required"), ("https://meridian.example.com", "invalid_base_url"),
                                                  ("http://meridian.corp.internal", "invalid_base_url")])
def test_configuration_needs_a_real_https_url(admin_api, cluster, settings, public_url, code):
    settings.MERIDIAN_PUBLIC_URL = public_url
    response = admin_api.get(CONFIG)
    assert response.status_code == 400
    assert response.json()["code"] == code and "base_url" in response.json()["errors"]
    applying = admin_api.post(CONFIG, {"ca_bundle": CA_PEM}, format="json")
    assert applying.status_code == 400 and applying.json()["code"] == code
    with connector_for(cluster) as connector:
        assert connector.get("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "meridian-scheduling") is None


def test_configuration_is_safe_and_applies_through_the_connector(admin_api, viewer_api, cluster, settings):
    settings.MERIDIAN_PUBLIC_URL = "https://meridian.corp.internal:8443"
    settings.MERIDIAN_NAMESPACE = "meridian-system"
    body = admin_api.get(CONFIG).json()
    mwc = body["mutating_webhook_configuration"]
    assert mwc["kind"] == "MutatingWebhookConfiguration"
    (hook,) = mwc["webhooks"]
    assert hook["clientConfig"] == {"url": "https://meridian.corp.internal:8443/api/admission/v1/scheduling/mutate"}
    assert hook["namespaceSelector"] == {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                               "values": ["kube-system", "meridian-system"]}]}
    assert (hook["failurePolicy"], hook["sideEffects"], hook["reinvocationPolicy"]) == ("Fail", "None", "Never")
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"],
                              "scope": "Namespaced"}]
    assert [p["name"] for p in body["admission_configuration"]["plugins"]] == ["MutatingAdmissionWebhook",
                                                                                "ValidatingAdmissionWebhook"]
    assert body["kubeconfig"]["users"][0]["name"] == "meridian.corp.internal:8443"

    assert "ca_bundle" in body["missing"] and "ca_bundle" in admin_api.get(CONFIG).headers["Warning"]

    no_ca = admin_api.post(CONFIG, {}, format="json")
    assert no_ca.status_code == 400 and no_ca.json()["code"] == "ca_bundle_required"
    not_pem = admin_api.post(CONFIG, {"ca_bundle": "LS0tLS1CRUdJTg=="}, format="json")  # base64 of "-----BEGIN"
    assert not_pem.status_code == 400 and not_pem.json()["code"] == "invalid_ca_bundle" and "ca_bundle" in not_pem.json()["errors"]
    assert viewer_api.post(CONFIG, {"ca_bundle": CA_PEM}, format="json").status_code == 403
    assert not ObjectChange.objects.filter(verb="apply_scheduling_webhook").exists(), "nothing refused is applied"
    applied = admin_api.post(CONFIG, {"ca_bundle": CA_PEM}, format="json")
    assert applied.status_code == 200, applied.json()
    assert applied.json()["webhooks"][0]["clientConfig"]["caBundle"] == base64.b64encode(CA_PEM.strip().encode()).decode()
    with connector_for(cluster) as connector:
        stored = connector.get("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "meridian-scheduling")
    assert stored["webhooks"] == applied.json()["webhooks"]
    change = ObjectChange.objects.get(verb="apply_scheduling_webhook", object_repr="bj-1")
    assert change.after == {"name": "meridian-scheduling",
                            "url": "https://meridian.corp.internal:8443/api/admission/v1/scheduling/mutate"}
