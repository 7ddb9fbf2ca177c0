"""The console's Administration section: admins only; users and roles, API tokens (shown once,
revoked → refused by the API), cluster registration from a kubeconfig against the API server
emulator (test connection, register), cluster tokens and the webhook configurations.

Through the real paths: Django's test client with CSRF checks on for the pages, the REST API
with the issued keys, the emulator over HTTP for the connection."""

from __future__ import annotations

import html
import json
import re

import pytest
import yaml
from django.contrib.auth.models import Group, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from core.models import APIToken, ObjectChange
from core.roles import ADMIN, OPERATOR
from fleet.models import Cluster, ClusterToken, Node
from tests.kubeapi import ApiServer, kubeconfig, serve

pytestmark = pytest.mark.django_db

ADMIN_PAGES = ["/administration/", "/administration/users/", "/administration/users/new/", "/administration/users/{user}/",
               "/administration/tokens/", "/administration/tokens/new/", "/administration/clusters/",
               "/administration/clusters/new/", "/administration/clusters/c1/", "/administration/clusters/c1/webhooks.yaml"]
ADMIN_POSTS = ["/administration/users/new/", "/administration/users/{user}/change/", "/administration/tokens/new/",
               "/administration/tokens/{token}/revoke/", "/administration/clusters/new/", "/administration/clusters/c1/tokens/",
               "/administration/clusters/c1/tokens/{ctoken}/revoke/"]
STRONG = "a-long-enough-passphrase-42"


def csrf_client(user=None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def post(client: Client, path: str, data: dict, **extra):
    """A POST the way a browser sends it: with the CSRF token of the page's cookie."""
    client.get("/administration/" if path.startswith("/administration/") else path)
    token = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else ""
    return client.post(path, {"csrfmiddlewaretoken": token, **data}, **extra)


def api(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return client


def errors_of(response) -> str:
    html = response.content.decode()
    return " ".join(re.sub(r"<[^>]+>", " ", m) for m in re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', html, re.S))


@pytest.fixture
def world(admin_user, viewer):
    cluster = Cluster.objects.create(name="c1", connector=Cluster.ConnectorKind.SIMULATED)
    from fleet.tokens import issue_token

    ctoken, _ = issue_token(cluster, "agent")
    token, _ = APIToken.issue(viewer)
    return {"user": viewer.pk, "token": token.pk, "ctoken": ctoken.pk}


@pytest.mark.parametrize("persona", ["viewer", "operator", "nobody"])
def test_only_admins_reach_the_section(request, world, persona):
    user = request.getfixturevalue(persona)
    client = csrf_client(user)
    for path in ADMIN_PAGES:
        assert client.get(path.format(**world)).status_code == 403, path
    before = (User.objects.count(), APIToken.objects.count(), ClusterToken.objects.filter(revoked__isnull=True).count())
    for path in ADMIN_POSTS:
        response = post(client, path.format(**world), {"username": "x", "kind": "agent", "name": "x", "user": user.pk, "days": 1})
        assert response.status_code == 403, path
    assert (User.objects.count(), APIToken.objects.count(), ClusterToken.objects.filter(revoked__isnull=True).count()) == before
    assert "/administration/" not in client.get("/").content.decode(), "no link to a section they cannot open"


def test_anonymous_callers_are_sent_to_the_login(world):
    for path in ADMIN_PAGES:
        response = Client().get(path.format(**world))
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], path


def test_every_page_renders_for_an_admin(world, admin_user):
    client = csrf_client(admin_user)
    for path in ADMIN_PAGES[:-1]:
        assert client.get(path.format(**world)).status_code == 200, path
    assert 'href="/administration/"' in client.get("/").content.decode()


def test_a_post_without_the_csrf_token_is_refused(admin_user):
    response = csrf_client(admin_user).post("/administration/users/new/", {"username": "eve", "password": STRONG})
    assert response.status_code == 403 and not User.objects.filter(username="eve").exists()


# ------------------------------------------------------------------------------------------ users

def test_creating_a_user_with_a_role_is_audited(admin_user):
    client = csrf_client(admin_user)
    response = post(client, "/administration/users/new/", {"username": "carol", "password": STRONG, "email": "carol@example.com",
                                                            "role": OPERATOR})
    carol = User.objects.get(username="carol")
    assert response.status_code == 302 and response["Location"] == f"/administration/users/{carol.pk}/"
    assert carol.check_password(STRONG) and list(carol.groups.values_list("name", flat=True)) == [OPERATOR]
    entry = ObjectChange.objects.get(object_repr="carol", action="create")
    assert entry.actor == admin_user.username and entry.after["role"] == OPERATOR and "password" not in entry.after
    assert STRONG not in str(entry.after)
    listed = client.get("/administration/users/?q=carol").content.decode()
    assert 'id="user-carol"' in listed and OPERATOR in listed


@pytest.mark.parametrize("data, field, says", [
    ({"username": "dave", "password": "short"}, "password", "too short"),
    ({"username": "davidson-lee", "password": "davidson-lee1"}, "password", "too similar"),
    ({"username": "ada-admin", "password": STRONG}, "username", "already exists"),
    ({"username": "bad name!", "password": STRONG}, "username", "valid username"),
    ({"username": "dave", "password": STRONG, "email": "not-an-email"}, "email", "valid email"),
    ({"username": "dave", "password": STRONG, "role": "root"}, "role", "not one of the available choices"),
])
def test_bad_input_reads_as_field_errors_and_creates_nothing(admin_user, data, field, says):
    client = csrf_client(admin_user)
    count, changes = User.objects.count(), ObjectChange.objects.count()
    response = post(client, "/administration/users/new/", data)
    assert response.status_code == 200
    assert says in errors_of(response), errors_of(response)
    assert (User.objects.count(), ObjectChange.objects.count()) == (count, changes), "nothing half made"


def test_changing_a_role_and_deactivating_are_audited_and_take_effect(admin_user, viewer):
    _, raw = APIToken.issue(viewer)
    assert api(raw).get("/api/v1/fleet/clusters/").status_code == 200
    client = csrf_client(admin_user)
    response = post(client, f"/administration/users/{viewer.pk}/change/", {"role-role": OPERATOR, "role-reason": "on call now"})
    assert response.status_code == 302
    assert list(viewer.groups.values_list("name", flat=True)) == [OPERATOR]
    entry = ObjectChange.objects.get(verb="set_role")
    assert entry.before["role"] == "viewer" and entry.after["role"] == OPERATOR and entry.reason == "on call now"

    response = post(client, f"/administration/users/{viewer.pk}/change/", {"active-active": "0", "active-reason": "left"})
    assert response.status_code == 302
    viewer.refresh_from_db()
    assert not viewer.is_active and ObjectChange.objects.filter(verb="deactivate_user", reason="left").exists()
    assert api(raw).get("/api/v1/fleet/clusters/").status_code == 401, "a deactivated user's tokens are refused"
    page = client.get(f"/administration/users/{viewer.pk}/").content.decode()
    assert 'id="user-inactive"' in page

    post(client, f"/administration/users/{viewer.pk}/change/", {"active-active": "1"})
    assert api(raw).get("/api/v1/fleet/clusters/").status_code == 200


def test_an_admin_cannot_demote_or_deactivate_themselves(admin_user):
    client = csrf_client(admin_user)
    changes = ObjectChange.objects.count()
    for data in ({"role-role": "viewer"}, {"active-active": "0"}):
        response = post(client, f"/administration/users/{admin_user.pk}/change/", data)
        assert response.status_code == 200 and "ask another admin" in response.content.decode()
    admin_user.refresh_from_db()
    assert admin_user.is_active and list(admin_user.groups.values_list("name", flat=True)) == [ADMIN]
    assert ObjectChange.objects.count() == changes


# ------------------------------------------------------------------------------------- API tokens

def test_a_token_is_shown_once_works_and_once_revoked_is_refused(admin_user, operator):
    client = csrf_client(admin_user)
    response = post(client, "/administration/tokens/new/", {"user": operator.pk, "name": "ci-pipeline", "days": 7})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    raw = re.search(r'<pre class="nc-json" id="issued-token" tabindex="0">([^<]+)</pre>', response.content.decode()).group(1)
    token = APIToken.objects.get(name="ci-pipeline")
    assert token.user == operator and token.write_enabled and raw.startswith(token.key_prefix)
    assert 6 <= (token.expires - token.created).days <= 7

    me = api(raw).get("/api/v1/auth/me/")
    assert me.status_code == 200 and me.json()["username"] == operator.username
    entry = ObjectChange.objects.get(verb="issue_token")
    later = [client.get(p).content.decode() for p in ("/administration/tokens/", f"/administration/users/{operator.pk}/",
                                                      "/audit/", f"/audit/{entry.pk}/", "/administration/")]
    assert all(raw not in html for html in later), "the key is on no later page"
    assert token.key_prefix in later[0] and raw not in str(entry.after)
    row = re.search(rf'<tr[^>]*id="apitoken-{token.pk}".*?</tr>', later[0], re.S).group(0)
    assert all(text in row for text in (operator.username, "ci-pipeline", "read-write", token.key_prefix))

    response = post(client, f"/administration/tokens/{token.pk}/revoke/", {})
    assert response.status_code == 302 and not APIToken.objects.filter(pk=token.pk).exists()
    assert api(raw).get("/api/v1/auth/me/").status_code == 401
    assert ObjectChange.objects.filter(verb="revoke_token", object_repr__startswith=token.key_prefix).exists()


def test_a_read_only_token_only_reads(admin_user, operator):
    client = csrf_client(admin_user)
    response = post(client, "/administration/tokens/new/", {"user": operator.pk, "read_only": "on", "days": 1})
    raw = re.search(r'id="issued-token" tabindex="0">([^<]+)<', response.content.decode()).group(1)
    assert api(raw).get("/api/v1/fleet/clusters/").status_code == 200
    assert api(raw).post("/api/v1/fleet/clusters/c1/sync/").status_code == 403
    assert "read-only" in client.get("/administration/tokens/").content.decode()


def test_issuing_for_nobody_or_for_ever_is_refused_readably(admin_user):
    client = csrf_client(admin_user)
    count = APIToken.objects.count()
    response = post(client, "/administration/tokens/new/", {"user": 999999, "days": 0})
    assert response.status_code == 200 and APIToken.objects.count() == count
    text = errors_of(response)
    assert "Select a valid choice" in text and "greater than or equal to 1" in text


def test_last_used_shows_once_the_token_was_used(admin_user, viewer):
    token, raw = APIToken.issue(viewer, name="probe")
    client = csrf_client(admin_user)
    row = re.search(rf'<tr[^>]*id="apitoken-{token.pk}".*?</tr>', client.get("/administration/tokens/").content.decode(), re.S)
    assert ">never<" in row.group(0).replace(" ", "")
    api(raw).get("/api/v1/auth/me/")
    token.refresh_from_db()
    row = re.search(rf'<tr[^>]*id="apitoken-{token.pk}".*?</tr>', client.get("/administration/tokens/").content.decode(), re.S)
    assert token.last_used.strftime("%Y-%m-%d %H:%M") in row.group(0)


# --------------------------------------------------------------------------------------- clusters

@pytest.fixture
def emulator():
    api_server = ApiServer(token="cluster-admin-token")
    with serve(api_server) as url:
        yield url


def test_test_connection_reaches_the_api_server_and_saves_nothing(admin_user, emulator):
    client = csrf_client(admin_user)
    response = post(client, "/administration/clusters/new/", {"name": "k8s-1", "kubeconfig": kubeconfig(emulator, "cluster-admin-token"),
                                                              "test": "1"})
    html = response.content.decode()
    assert response.status_code == 200 and 'data-ok="true"' in html and "Kubernetes v1.30" in html, html[:3000]
    assert not Cluster.objects.filter(name="k8s-1").exists() and not ObjectChange.objects.exists()

    wrong = post(client, "/administration/clusters/new/", {"name": "k8s-1", "kubeconfig": kubeconfig(emulator, "wrong"), "test": "1"})
    assert 'data-ok="false"' in wrong.content.decode() and "Cannot reach the cluster" in wrong.content.decode()


@pytest.mark.parametrize("kubeconfig_text, says", [
    ("::: not yaml", "unusable cluster configuration"),
    ("", "Paste the kubeconfig or upload it"),
])
def test_a_bad_kubeconfig_is_refused_readably(admin_user, kubeconfig_text, says):
    client = csrf_client(admin_user)
    for button in ("test", "register"):
        response = post(client, "/administration/clusters/new/", {"name": "k8s-2", "kubeconfig": kubeconfig_text, button: "1"})
        assert response.status_code == 200 and says in response.content.decode(), button
    assert not Cluster.objects.filter(name="k8s-2").exists()


def test_an_unreachable_server_is_refused_and_nothing_is_saved(admin_user):
    from tests.servers import free_port

    client = csrf_client(admin_user)
    response = post(client, "/administration/clusters/new/",
                    {"name": "k8s-3", "kubeconfig": kubeconfig(f"http://127.0.0.1:{free_port()}"), "register": "1"})
    assert response.status_code == 200 and "Cannot reach the cluster" in response.content.decode()
    assert not Cluster.objects.filter(name="k8s-3").exists() and not ObjectChange.objects.exists()


def test_registering_from_an_uploaded_kubeconfig(admin_user, emulator):
    client = csrf_client(admin_user)
    upload = SimpleUploadedFile("config", kubeconfig(emulator, "cluster-admin-token").encode(), content_type="application/yaml")
    response = post(client, "/administration/clusters/new/", {"name": "k8s-4", "kubeconfig_file": upload, "register": "1"})
    assert response.status_code == 302 and response["Location"] == "/administration/clusters/k8s-4/"
    cluster = Cluster.objects.get(name="k8s-4")
    assert cluster.connector == "kubernetes" and "cluster-admin-token" in cluster.credentials
    entry = ObjectChange.objects.get(action="create", object_repr="k8s-4")
    assert "cluster-admin-token" not in str(entry.after) and entry.actor == admin_user.username

    bad = post(client, "/administration/clusters/new/", {"name": "k8s-4", "kubeconfig": kubeconfig(emulator, "cluster-admin-token"),
                                                         "register": "1"})
    assert bad.status_code == 200 and "already registered" in bad.content.decode()
    binary = SimpleUploadedFile("config", b"\xff\xfe\x00binary", content_type="application/octet-stream")
    bad = post(client, "/administration/clusters/new/", {"name": "k8s-5", "kubeconfig_file": binary, "register": "1"})
    assert "not text" in bad.content.decode() and not Cluster.objects.filter(name="k8s-5").exists()


def test_cluster_tokens_are_shown_once_and_revoked_ones_refused(admin_user, django_capture_on_commit_callbacks):
    cluster = Cluster.objects.create(name="c2", connector=Cluster.ConnectorKind.SIMULATED)
    Node.objects.create(cluster=cluster, name="n1", labels={})
    client = csrf_client(admin_user)
    response = post(client, "/administration/clusters/c2/tokens/", {"token-kind": "agent", "token-name": "agents"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    raw = re.search(r'id="issued-token" tabindex="0">([^<]+)<', response.content.decode()).group(1)
    token = ClusterToken.objects.get(cluster=cluster, kind="agent")
    assert raw.startswith("mag_") and token.created_by == admin_user.username
    page = client.get("/administration/clusters/c2/").content.decode()
    assert raw not in page and f'id="clustertoken-{token.pk}"' in page

    agent = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert agent.get("/api/agent/v1/clusters/c2/nodes/n1/config").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):  # the token cache is dropped after commit
        post(client, f"/administration/clusters/c2/tokens/{token.pk}/revoke/", {})
    token.refresh_from_db()
    assert token.revoked is not None
    assert agent.get("/api/agent/v1/clusters/c2/nodes/n1/config").status_code == 401
    assert ObjectChange.objects.filter(verb="revoke_token").count() == 1

    bad = post(client, "/administration/clusters/c2/tokens/", {"token-kind": "root"})
    assert bad.status_code == 200 and "Select a valid choice" in errors_of(bad)


def test_the_webhook_configurations_download(admin_user, settings):
    Cluster.objects.create(name="c3", connector=Cluster.ConnectorKind.SIMULATED)
    client = csrf_client(admin_user)
    settings.MERIDIAN_PUBLIC_URL = ""
    page = client.get("/administration/clusters/c3/").content.decode()
    assert 'id="webhook-error"' in page and "MERIDIAN_PUBLIC_URL" in page
    assert client.get("/administration/clusters/c3/webhooks.yaml").status_code == 400

    page = client.get("/administration/clusters/c3/?base_url=https://meridian.corp.net").content.decode()
    assert "meridian-quotas" in page and "meridian-scheduling" in page
    response = client.get("/administration/clusters/c3/webhooks.yaml?base_url=https://meridian.corp.net")
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    documents = list(yaml.safe_load_all(response.content))
    kinds = [d["kind"] for d in documents]
    assert kinds == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "AdmissionConfiguration", "Config"]
    assert documents[0]["webhooks"][0]["clientConfig"]["url"].startswith("https://meridian.corp.net/")


def test_admin_role_groups_stay_exact(admin_user):
    """The section leans on ``auth.view_user`` being the admin role's alone."""
    assert not Group.objects.get(name=OPERATOR).permissions.filter(content_type__app_label="auth").exists()
    assert Group.objects.get(name=ADMIN).permissions.filter(codename="view_user").exists()


# ---------------------------------------------------------------------------------- config types

SCHEMA = {"type": "object", "properties": {"threshold": {"type": "integer", "minimum": 0}}, "additionalProperties": False}


def test_registering_and_editing_a_config_type_with_its_schema(admin_user):
    from nodeconfig.models import ConfigType

    client = csrf_client(admin_user)
    response = post(client, "/administration/config-types/new/", {
        "name": "DiskIOConfiguration", "group": "config.katalyst.kubewharf.io", "version": "v1alpha1", "resource": "diskioconfigurations",
        "allowed_keys": '[{"priority": 0, "keyList": ["pool"]}]', "schema": json.dumps(SCHEMA), "default_config": '{"threshold": 3}'})
    assert response.status_code == 302, errors_of(response)
    kind = ConfigType.objects.get(name="DiskIOConfiguration")
    assert kind.schema == SCHEMA and kind.default_config == {"threshold": 3} and kind.allowed_keys[0]["keyList"] == ["pool"]
    assert ObjectChange.objects.filter(action="create", object_repr="DiskIOConfiguration").exists()
    listed = client.get("/administration/config-types/").content.decode()
    assert 'id="configtype-DiskIOConfiguration"' in listed

    edit = client.get("/administration/config-types/DiskIOConfiguration/").content.decode()
    etag = html.unescape(re.search(r'name="etag" value="([^"]+)"', edit).group(1))
    fields = {"group": kind.group, "version": kind.version, "resource": kind.resource, "schema": json.dumps(SCHEMA),
              "allowed_keys": "[]", "etag": etag}
    bad = post(client, "/administration/config-types/DiskIOConfiguration/", fields | {"default_config": '{"threshold": -1}'})
    assert bad.status_code == 200 and "Does not satisfy the schema" in errors_of(bad)
    broken = post(client, "/administration/config-types/DiskIOConfiguration/", fields | {"schema": '{"type": "object",'})
    assert "Invalid YAML at line 1, column" in errors_of(broken)
    wrong = post(client, "/administration/config-types/DiskIOConfiguration/", fields | {"schema": '{"type": "nonsense"}'})
    assert "Not a valid JSON schema" in errors_of(wrong)
    kind.refresh_from_db()
    assert kind.default_config == {"threshold": 3} and kind.allowed_keys, "refusals changed nothing"

    good = post(client, "/administration/config-types/DiskIOConfiguration/", fields | {"default_config": '{"threshold": 5}'})
    assert good.status_code == 302
    kind.refresh_from_db()
    assert kind.default_config == {"threshold": 5} and kind.allowed_keys == []
    stale = post(client, "/administration/config-types/DiskIOConfiguration/", fields | {"default_config": '{"threshold": 7}'})
    assert stale.status_code == 200 and "changed since" in stale.content.decode()
    kind.refresh_from_db()
    assert kind.default_config == {"threshold": 5}, "a save made on a stale read is refused"
    assert ObjectChange.objects.filter(action="update", object_repr="DiskIOConfiguration").count() == 1


def test_operators_cannot_reach_config_types_here(operator):
    client = csrf_client(operator)
    assert client.get("/administration/config-types/").status_code == 403
    assert post(client, "/administration/config-types/new/", {"name": "X"}).status_code == 403


def test_quota_owners_list_who_manages_which_subtree(admin_user, viewer, operator):
    from quotas.models import QuotaGroup

    root = QuotaGroup.objects.create(name="vision", path="/vision/", hard={"limits.cpu": "10"})
    detection = QuotaGroup.objects.create(name="detection", parent=root, path="/vision/detection/", depth=1, hard={"limits.cpu": "5"})
    QuotaGroup.objects.create(name="ocr", parent=root, path="/vision/ocr/", depth=1, hard={"limits.cpu": "5"})
    detection.owners.add(viewer, operator)
    client = csrf_client(admin_user)
    page = client.get("/administration/quota-owners/").content.decode()
    row = re.search(r'<tr[^>]*id="quota-owners-detection".*?</tr>', page, re.S).group(0)
    assert viewer.username in row and operator.username in row and f'href="{detection.get_absolute_url()}"' in row
    assert 'id="quota-owners-ocr"' not in page and 'id="quota-owners-vision"' not in page, "only groups with owners"
    assert client.get(f"/administration/quota-owners/?q={viewer.username}").content.decode().count('id="quota-owners-') == 1
    user_page = client.get(f"/administration/users/{viewer.pk}/").content.decode()
    assert re.search(r'id="user-owned-groups"><a href="[^"]+">detection</a>', user_page)
    assert csrf_client(viewer).get("/administration/quota-owners/").status_code == 403
