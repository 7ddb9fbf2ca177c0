"""Journey 6 (Automation), walked as written, starting in the console.

An admin, in a real browser, creates a CI user with the operator role and issues it a token
(read once, on the page that issued it), and issues a token for the cluster bootstrap script.
Then, over real HTTP against the running ASGI server and following the OpenAPI document
(every path used is looked up in ``/api/schema/``):

- the CI pipeline creates a node-config target, polls its rollout status while a real worker
  reconciles and the nodes' agents (through the real agent API) apply it, changes it, sees
  the rollout fail on two nodes, and rolls back;
- the bootstrap script registers a new member cluster (the API server emulator), creates its
  agent and webhook tokens and applies the generated webhook configurations to it.

Last, the admin revokes the CI token in the console and the API refuses it.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest
import yaml

from fleet.models import Cluster
from fleet.tokens import issue_token as issue_cluster_token
from tests.certificates import CA_PEM
from tests.kubeapi import ApiServer, kubeconfig, registration, serve
from tests.nodeconfig.conftest import admin_qos, clean_agent_cache, fleet, type_key  # noqa: F401 (fixtures)
from tests.quotas.conftest import review
from tests.workers import shard_worker

from .test_console_live import log_in

pytestmark = pytest.mark.browser
TYPE = "AdminQoSConfiguration"
GOOD = {"reclaimedResourceConfig": {"enableReclaim": False}}
CHANGED = {"reclaimedResourceConfig": {"enableReclaim": True}}
PUBLIC_URL = "https://meridian.corp.net"


class OpenAPI:
    """The API as its OpenAPI document describes it: every call names a documented path."""

    def __init__(self, client: httpx.Client) -> None:
        response = client.get("/api/schema/", params={"format": "json"})
        assert response.status_code == 200, response.text[:500]
        self.paths = response.json()["paths"]
        self.client = client
        self.used: set[str] = set()

    def call(self, method: str, template: str, *, json=None, params=None, **names) -> httpx.Response:
        assert template in self.paths, f"{template} is not in the OpenAPI document"
        assert method.lower() in self.paths[template], f"{method} {template} is not documented"
        self.used.add(f"{method} {template}")
        return self.client.request(method, template.format(**names), json=json, params=params)


def issue_in_console(page, base: str, *, owner: str, name: str) -> str:
    """Issue a token from the API tokens page and read its key from the page that shows it once."""
    page.goto(f"{base}/administration/tokens/")
    page.click("#apitoken-issue-link")
    page.select_option("#id_user", label=owner)
    page.fill("#id_name", name)
    page.fill("#id_days", "1")
    page.click("#apitoken-form button[type=submit]")
    raw = page.locator("#issued-token").inner_text().strip()
    assert re.fullmatch(r"[A-Za-z0-9_-]{40,}", raw), raw
    page.click("#token-done")
    page.wait_for_url(f"{base}/administration/tokens/")
    assert raw not in page.content(), "the key is shown once, never on a later page"
    assert name in page.locator("#apitoken-table").inner_text()
    return raw


def agents_apply(agents: dict[str, httpx.Client], nodes: list[tuple[str, str]], revision: int, failing: set[str]) -> None:
    """Each node's agent polls its config through the agent API until it serves ``revision``,
    then reports it applied (or, on ``failing`` nodes, the error it hit)."""
    for cluster, node in nodes:
        agent = agents[cluster]
        deadline = time.monotonic() + 30
        while True:
            served = agent.get(f"/api/agent/v1/clusters/{cluster}/nodes/{node}/config")
            assert served.status_code == 200, served.text
            entry = served.json()["configs"][TYPE]
            if entry["revision"] == revision:
                break
            assert time.monotonic() < deadline, f"{node} never served revision {revision}: {entry}"
            time.sleep(0.1)
        report = {"errors": {TYPE: "reclaim cgroup missing on this kernel"}} if node in failing else {"applied": {TYPE: entry["hash"]}}
        assert agent.post(f"/api/agent/v1/clusters/{cluster}/nodes/{node}/status", json=report).status_code == 204


def poll_progress(api: OpenAPI, target_id: int, until, timeout: float = 30) -> dict:
    """What the CI pipeline does between steps: read the rollout status until it settles."""
    deadline = time.monotonic() + timeout
    while True:
        response = api.call("GET", "/api/v1/nodeconfig/targets/{id}/progress/", id=target_id)
        assert response.status_code == 200, response.text
        status = response.json()
        if until(status):
            return status
        assert time.monotonic() < deadline, f"rollout status never settled: {status}"
        time.sleep(0.2)


def test_journey_6_automation_with_tokens_issued_in_the_console(page, asgi_server, admin_user, fleet, admin_qos,  # noqa: F811
                                                                  purge_shard_queues):
    base = asgi_server
    # -- the admin, in the console: a CI user with the operator role, and two tokens
    log_in(page, base, admin_user.username)
    page.goto(f"{base}/")
    page.click("nav >> text=Administration")
    page.click("#admin-users")
    page.click("#user-create-link")
    page.fill("#id_username", "ci-bot")
    page.fill("#id_password", "a-long-enough-passphrase-42")
    page.select_option("#id_role", "operator")
    page.click("#user-form button[type=submit]")
    assert page.locator("#user-role").inner_text().strip() == "operator"
    ci_key = issue_in_console(page, base, owner="ci-bot", name="ci-pipeline")
    bootstrap_key = issue_in_console(page, base, owner=admin_user.username, name="cluster-bootstrap")

    # The agents' own credentials (issued at their clusters' bootstrap, long before this run).
    nodes = sorted((n.cluster.name, n.name) for c in fleet.values() for n in c.nodes.select_related("cluster")
                   if n.labels["diskMode"] == "hdd")
    agents = {name: httpx.Client(base_url=base, headers={"Authorization": f"Bearer {issue_cluster_token(cluster, 'agent')[1]}"},
                                 timeout=10) for name, cluster in fleet.items()}

    # -- the CI pipeline: create, poll, change, poll, roll back on failure
    with httpx.Client(base_url=base, headers={"Authorization": f"Token {ci_key}"}, timeout=20) as client, \
            shard_worker(type_key(admin_qos), purge=False):
        ci = OpenAPI(client)
        created = ci.call("POST", "/api/v1/nodeconfig/targets/", json={
            "type": TYPE, "name": "ci-hdd-reclaim", "node_label_selector": "diskMode=hdd", "config": GOOD, "reason": "CI run 41"})
        assert created.status_code == 201, created.text
        target = created.json()
        assert target["revision"] == 1
        agents_apply(agents, nodes, 1, failing=set())
        status = poll_progress(ci, target["id"], lambda s: s["targeted"] == len(nodes) and s["pending"] == 0)
        assert status["applied"] == len(nodes) == 6 and status["failed"] == 0

        changed = ci.call("PATCH", "/api/v1/nodeconfig/targets/{id}/", id=target["id"], json={"config": CHANGED, "reason": "CI run 42"})
        assert changed.status_code == 200 and changed.json()["revision"] == 2, changed.text
        failing = {nodes[0][1], nodes[-1][1]}
        agents_apply(agents, nodes, 2, failing=failing)
        status = poll_progress(ci, target["id"], lambda s: s["pending"] == 0 and s["applied"] + s["failed"] == len(nodes))
        assert status["failed"] == 2, status

        rolled = ci.call("POST", "/api/v1/nodeconfig/targets/{id}/rollback/", id=target["id"],
                         json={"revision": 1, "reason": "CI run 42: 2 nodes failed"})
        assert rolled.status_code == 201, rolled.text
        assert rolled.json()["number"] == 3 and rolled.json()["rollback_of"] == 1
        agents_apply(agents, nodes, 3, failing=set())
        status = poll_progress(ci, target["id"], lambda s: s["pending"] == 0 and s["applied"] == len(nodes))
        back = ci.call("GET", "/api/v1/nodeconfig/targets/{id}/", id=target["id"]).json()
        assert back["revision"] == 3 and back["config"] == GOOD and status["failed"] == 0

        refused = ci.call("POST", "/api/v1/fleet/clusters/", json=registration("nope", "http://127.0.0.1:9"))
        assert refused.status_code == 403, "the CI token is scoped to its owner's role: operators register no clusters"

    # -- the cluster bootstrap script: register, tokens, webhook configurations applied
    emulated = ApiServer(token="bootstrap-cluster-admin")
    with serve(emulated) as cluster_url, \
            httpx.Client(base_url=base, headers={"Authorization": f"Token {bootstrap_key}"}, timeout=20) as client:
        boot = OpenAPI(client)
        registered = boot.call("POST", "/api/v1/fleet/clusters/", json=registration("gz-1", cluster_url, "bootstrap-cluster-admin"))
        assert registered.status_code == 201, registered.text
        agent_token = boot.call("POST", "/api/v1/fleet/clusters/{name}/agent-tokens/", name="gz-1", json={"name": "node-agents"})
        webhook_token = boot.call("POST", "/api/v1/fleet/clusters/{name}/webhook-tokens/", name="gz-1", json={"name": "apiserver"})
        assert agent_token.status_code == webhook_token.status_code == 201
        assert agent_token.json()["token"].startswith("mag_") and webhook_token.json()["token"].startswith("mwh_")
        for app, kind, resource in (("quotas", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
                                    ("scheduling", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations")):
            template = f"/api/v1/{app}/webhook-configuration/{{cluster}}/"
            shown = boot.call("GET", template, cluster="gz-1", params={"base_url": PUBLIC_URL, "include": "admission-config"}
                              if app == "quotas" else {"base_url": PUBLIC_URL})
            assert shown.status_code == 200, shown.text
            body = shown.json()
            assert body["kubeconfig"]["users"][0]["name"] == "meridian.corp.net:443", "the API server's token file"
            assert body["admission_configuration"]["kind"] == "AdmissionConfiguration"
            applied = boot.call("POST", template, cluster="gz-1", json={"base_url": PUBLIC_URL, "ca_bundle": CA_PEM})
            assert applied.status_code == 200, applied.text
            stored = emulated.object(f"admissionregistration.k8s.io/v1/{resource}", f"meridian-{app}")
            assert stored is not None and stored["kind"] == kind
            assert stored["webhooks"][0]["clientConfig"]["url"].startswith(PUBLIC_URL + "/api/admission/v1/")
    assert Cluster.objects.filter(name="gz-1", connector="kubernetes").exists()
    used = ci.used | boot.used
    assert {"POST /api/v1/nodeconfig/targets/", "GET /api/v1/nodeconfig/targets/{id}/progress/",
            "POST /api/v1/nodeconfig/targets/{id}/rollback/", "POST /api/v1/fleet/clusters/",
            "POST /api/v1/fleet/clusters/{name}/agent-tokens/", "POST /api/v1/fleet/clusters/{name}/webhook-tokens/",
            "POST /api/v1/quotas/webhook-configuration/{cluster}/"} <= used

    # -- the admin revokes the CI token in the console; the API refuses it from then on
    page.goto(f"{base}/administration/tokens/?q=ci-pipeline")
    page.locator("#apitoken-table button", has_text="Revoke").click()
    page.wait_for_url(f"{base}/administration/tokens/")
    assert "ci-pipeline" not in page.locator("#apitoken-table").inner_text()
    assert httpx.get(f"{base}/api/v1/auth/me/", headers={"Authorization": f"Token {ci_key}"}).status_code == 401
    assert httpx.get(f"{base}/api/v1/auth/me/", headers={"Authorization": f"Token {bootstrap_key}"}).status_code == 200
    for agent in agents.values():
        agent.close()


def test_an_admin_registers_a_cluster_from_a_kubeconfig_in_the_console(page, asgi_server, admin_user, purge_shard_queues,
                                                                       settings):
    """Paste a kubeconfig, test the connection (the emulator answers with its version; a wrong
    token is refused, readably), register, issue the agent and webhook tokens (each read once)
    and download the webhook configurations."""
    settings.MERIDIAN_PUBLIC_URL = PUBLIC_URL
    base = asgi_server
    emulated = ApiServer(token="console-cluster-admin", version="v1.31.4")
    with serve(emulated) as cluster_url:
        log_in(page, base, admin_user.username)
        page.goto(f"{base}/administration/clusters/")
        page.click("#cluster-register-link")
        page.fill("#id_name", "sz-2")
        page.fill("#id_kubeconfig", kubeconfig(cluster_url, "a-stale-token"))
        page.click("#test-connection")
        result = page.locator("#connection-result")
        assert result.get_attribute("data-ok") == "false" and "Cannot reach the cluster" in result.inner_text()
        assert page.input_value("#id_name") == "sz-2", "what was typed stays"

        page.fill("#id_kubeconfig", kubeconfig(cluster_url, "console-cluster-admin"))
        page.click("#test-connection")
        assert page.locator("#connection-result").get_attribute("data-ok") == "true"
        assert "Kubernetes v1.31.4 answered" in page.locator("#connection-result").inner_text()
        assert not Cluster.objects.filter(name="sz-2").exists(), "testing saves nothing"
        page.click("#register-cluster")
        page.wait_for_url(f"{base}/administration/clusters/sz-2/")
        assert Cluster.objects.get(name="sz-2").kubernetes_version in ("", "v1.31.4")

        keys = {}
        for kind, prefix in (("agent", "mag_"), ("webhook", "mwh_")):
            page.select_option("#id_token-kind", kind)
            page.fill("#id_token-name", f"bootstrap-{kind}")
            page.click("#clustertoken-form button[type=submit]")
            keys[kind] = page.locator("#issued-token").inner_text().strip()
            assert keys[kind].startswith(prefix)
            page.click("#token-done")
            page.wait_for_url(f"{base}/administration/clusters/sz-2/")
            assert keys[kind] not in page.content()
        rows = page.locator("#clustertoken-table tbody tr")
        assert rows.count() == 2 and "active" in rows.first.inner_text()

        assert "meridian-quotas" in page.locator("#webhook-yaml").inner_text()
        with page.expect_download() as download_info:
            page.click("#webhook-download")
        documents = list(yaml.safe_load_all(open(download_info.value.path()).read()))
        assert [d["kind"] for d in documents] == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                                                  "AdmissionConfiguration", "Config"]
        assert documents[0]["webhooks"][0]["clientConfig"]["url"].startswith(PUBLIC_URL)

        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                      "spec": {"replicas": 1}}
        webhook = httpx.post(f"{base}/api/admission/v1/quotas/validate", headers={"Authorization": f"Bearer {keys['webhook']}"},
                             json=review(deployment))
        assert httpx.post(f"{base}/api/admission/v1/quotas/validate", headers={"Authorization": f"Bearer {keys['agent']}"},
                          json=review(deployment)).status_code == 401, "an agent token is no webhook token"
        assert webhook.status_code == 200 and webhook.json()["response"]["allowed"] is True, "the webhook token is the cluster's"
