"""Single sign-on against a real OpenID Connect provider (``tests/oidc/provider.mjs``: panva's
oidc-provider in a Node process; ``tests/oidc_provider.py``), never a mock.

- Sign-in: Meridian's ``/accounts/oidc/login/`` → the provider's own login form (over HTTP
  here; the browser test clicks it) → ``/accounts/oidc/callback/``: the user is created with
  the role their groups map to, updated at every sign-in (a group removed at the provider is
  a right gone at the next sign-in), re-checked with the provider during the session (a user
  disabled there is signed out), and signing out sends the browser to the provider's
  end-session endpoint.
- Access tokens on the API: the provider's JWT lists clusters; an expired, wrong-audience or
  foreign-signed token is a 401; the provider rotating its signing key is followed.
- Local passwords can be turned off.
"""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urljoin, urlparse

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from joserfc import jwt
from joserfc.jwk import RSAKey
from joserfc.jws import extract_compact
from rest_framework.test import APIClient

from core import oidc
from core.models import Identity, ObjectChange, RoleBinding
from core.roles import user_role
from fleet.models import Cluster
from tests.oidc_provider import (
    OTHER_AUDIENCE,
    PASSWORD,
    SHORT_LIVED,
    OIDCProvider,
    configure_meridian,
    signing_key,
)

pytestmark = pytest.mark.django_db(transaction=True)
TESTSERVER = "http://testserver"


@pytest.fixture
def provider(tmp_path, oidc_users, settings):
    """The provider, its Meridian client returning to Django's test client (``testserver``)."""
    running = OIDCProvider(tmp_path, oidc_users, meridian_url=TESTSERVER).start()
    configure_meridian(settings, running)
    yield running
    running.stop()
    oidc.forget()


@pytest.fixture
def clusters(db):
    return [Cluster.objects.create(name=name, connector=Cluster.ConnectorKind.SIMULATED) for name in ("a-1", "a-2", "b-1")]


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def cluster_names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return sorted(row["name"] for row in response.json()["results"])


# ------------------------------------------------------------------------------ the browser flow, over HTTP


class Browser:
    """Django's test client for Meridian and httpx for the provider, one cookie jar each: what
    a browser does between the two, without rendering anything."""

    def __init__(self, provider: OIDCProvider) -> None:
        self.provider = provider
        self.meridian = Client()
        self.op = httpx.Client(base_url=provider.issuer, follow_redirects=False, timeout=10)

    def sign_in(self, username: str, *, password: str = PASSWORD, next_url: str = "") -> object:
        """Through the provider's login form; returns Meridian's answer to the callback."""
        start = self.meridian.get("/accounts/oidc/login/" + (f"?next={next_url}" if next_url else ""))
        assert start.status_code == 302, start.content
        location = start["Location"]
        assert location.startswith(self.provider.issuer)
        query = parse_qs(urlparse(location).query)
        assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0], "PKCE"
        assert query["nonce"][0] and query["state"][0]
        response = self.op.get(location)
        for _ in range(10):
            target = response.headers.get("location", "")
            if target.startswith(TESTSERVER):
                parsed = urlparse(target)
                return self.meridian.get(parsed.path, dict(parse_qs(parsed.query)) and
                                         {k: v[0] for k, v in parse_qs(parsed.query).items()})
            if response.status_code in (302, 303):
                response = self.op.get(urljoin(self.provider.issuer + "/", target))
                continue
            form = re.search(r'action="([^"]+/login)"', response.text)
            assert form, response.text[:500]
            response = self.op.post(form.group(1), data={"username": username, "password": password})
            if response.status_code == 200:
                return response  # the provider refused (wrong password, disabled)
        raise AssertionError("the provider never sent the browser back")

    def sign_out(self) -> str:
        """Meridian's sign-out, then the provider's confirmation; returns where it lands."""
        self.meridian.get("/accounts/login/")
        response = self.meridian.post("/accounts/logout/")
        assert response.status_code == 302, response.content
        location = response["Location"]
        assert location.startswith(f"{self.provider.issuer}/session/end"), location
        page = self.op.get(location)
        if page.status_code in (302, 303):
            page = self.op.get(urljoin(self.provider.issuer + "/", page.headers["location"]))
        form = re.search(r'<form[^>]*action="([^"]+)"[^>]*>(.*?)</form>', page.text, re.S)
        assert form, page.text[:500]
        fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(2)))
        done = self.op.post(urljoin(self.provider.issuer + "/", form.group(1)), data=fields | {"logout": "yes"})
        return done.headers.get("location", "")


def test_sign_in_creates_the_user_with_the_mapped_role(provider, clusters):
    browser = Browser(provider)
    answer = browser.sign_in("oscar", next_url="/fleet/")
    assert answer.status_code == 302 and answer["Location"] == "/fleet/", getattr(answer, "content", answer)
    user = get_user_model().objects.get(username="oscar")
    assert user_role(user) == "operator" and not user.has_usable_password()
    assert user.email == "oscar@example.com" and user.first_name == "Oscar"
    identity = Identity.objects.get(user=user)
    assert identity.issuer == provider.issuer and identity.subject == "sub-oscar" and identity.groups == ["meridian-operators"]
    assert browser.meridian.get("/fleet/").status_code == 200
    assert ObjectChange.objects.filter(verb="sso_first_sign_in", object_repr="oscar").exists()
    assert ObjectChange.objects.filter(verb="set_role", actor="sso:oscar").exists()


def test_a_group_removed_at_the_provider_is_a_right_gone_at_the_next_sign_in(provider, clusters):
    browser = Browser(provider)
    browser.sign_in("oscar")
    assert user_role(get_user_model().objects.get(username="oscar")) == "operator"
    provider.change_user("oscar", groups=["meridian-viewers"])
    Browser(provider).sign_in("oscar")
    assert user_role(get_user_model().objects.get(username="oscar")) == "viewer"
    provider.change_user("oscar", groups=[])
    fresh = Browser(provider)
    fresh.sign_in("oscar")
    assert user_role(get_user_model().objects.get(username="oscar")) is None
    assert fresh.meridian.get("/fleet/").status_code == 403


def test_scoped_bindings_follow_the_groups(provider, clusters):
    browser = Browser(provider)
    browser.sign_in("tess")
    tess = get_user_model().objects.get(username="tess")
    binding = RoleBinding.objects.get(user=tess)
    assert (binding.role, binding.scope, binding.names, binding.source, binding.group) == \
        ("operator", "clusters", ["a-1", "a-2"], "sso", "team-a-ops")
    assert user_role(tess) is None
    page = browser.meridian.get("/fleet/")
    assert page.status_code == 200 and b"a-1" in page.content and b"b-1" not in page.content
    provider.change_user("tess", groups=[])
    Browser(provider).sign_in("tess")
    assert not RoleBinding.objects.filter(user=tess).exists()
    assert ObjectChange.objects.filter(verb="revoke_scoped_role", object_id=str(binding.pk)).exists()


def test_a_user_disabled_at_the_provider_is_signed_out_at_the_next_check(provider, clusters, settings):
    browser = Browser(provider)
    browser.sign_in("vic")
    assert browser.meridian.get("/fleet/").status_code == 200
    settings.MERIDIAN_OIDC_RECHECK_SECONDS = 0  # every request re-checks (300 s by default)
    assert browser.meridian.get("/fleet/").status_code == 200  # the provider renews: still signed in
    provider.change_user("vic", disabled=True)
    response = browser.meridian.get("/fleet/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    refused = Browser(provider).sign_in("vic")
    assert refused.status_code == 200 and "disabled" in refused.text  # the provider's own login page says no
    assert not Browser(provider).meridian.session.get("_auth_user_id")


def test_the_session_recheck_applies_group_changes(provider, clusters, settings):
    browser = Browser(provider)
    browser.sign_in("oscar")
    settings.MERIDIAN_OIDC_RECHECK_SECONDS = 0
    provider.change_user("oscar", groups=["meridian-viewers"])
    assert browser.meridian.get("/fleet/").status_code == 200
    assert user_role(get_user_model().objects.get(username="oscar")) == "viewer"


def test_sign_out_ends_the_provider_session_too(provider, clusters):
    browser = Browser(provider)
    browser.sign_in("oscar")
    landed = browser.sign_out()
    assert landed.startswith(f"{TESTSERVER}/accounts/login/"), landed
    assert browser.meridian.get("/fleet/").status_code == 302
    # The provider's session is gone: signing in again shows its login form (no silent re-login).
    start = browser.meridian.get("/accounts/oidc/login/")
    page = browser.op.get(start["Location"])
    page = browser.op.get(urljoin(provider.issuer + "/", page.headers["location"]))
    assert page.status_code == 200 and 'name="password"' in page.text


def test_a_local_user_is_never_taken_over(provider, clusters, django_user_model):
    django_user_model.objects.create_user(username="oscar", password="local-password-123")
    answer = Browser(provider).sign_in("oscar")
    assert answer.status_code == 403 and b"exists" in answer.content
    assert not Identity.objects.exists()


def test_a_user_deactivated_in_meridian_stays_out(provider, clusters):
    Browser(provider).sign_in("oscar")
    get_user_model().objects.filter(username="oscar").update(is_active=False)
    answer = Browser(provider).sign_in("oscar")
    assert answer.status_code == 403 and b"deactivated" in answer.content


def test_a_forged_callback_signs_nobody_in(provider):
    client = Client()
    response = client.get("/accounts/oidc/callback/", {"code": "made-up", "state": "made-up"})
    assert response.status_code == 403 and "_auth_user_id" not in client.session


def test_local_passwords_can_be_turned_off(provider, settings, django_user_model):
    django_user_model.objects.create_user(username="local", password="local-password-123")
    settings.MERIDIAN_LOCAL_LOGIN = False
    client = Client()
    page = client.get("/accounts/login/")
    assert b'id="sso-login"' in page.content and b'name="password"' not in page.content
    assert client.post("/accounts/login/", {"username": "local", "password": "local-password-123"}).status_code == 403
    assert "_auth_user_id" not in client.session
    api = APIClient().post("/api/v1/auth/token/", {"username": "local", "password": "local-password-123"}, format="json")
    assert api.status_code in (400, 401, 403)
    settings.MERIDIAN_LOCAL_LOGIN = True
    assert client.post("/accounts/login/", {"username": "local", "password": "local-password-123"}).status_code == 302


# ------------------------------------------------------------------------------ access tokens on the API


def test_a_provider_access_token_lists_clusters(provider, clusters):
    tokens = provider.login("vic")
    assert cluster_names(bearer(tokens.access_token).get("/api/v1/fleet/clusters/")) == ["a-1", "a-2", "b-1"]
    me = bearer(tokens.access_token).get("/api/v1/auth/me/").json()
    assert me["username"] == "vic" and me["role"] == "viewer"
    assert bearer(tokens.access_token).post("/api/v1/fleet/clusters/a-1/cordon/", {}, format="json").status_code == 403


def test_a_scoped_operators_token_sees_their_clusters_only(provider, clusters):
    tokens = provider.login("tess")
    client = bearer(tokens.access_token)
    assert cluster_names(client.get("/api/v1/fleet/clusters/")) == ["a-1", "a-2"]
    assert client.get("/api/v1/fleet/clusters/b-1/").status_code == 404
    assert client.post("/api/v1/fleet/clusters/b-1/cordon/", {"reason": "x"}, format="json").status_code == 404
    assert client.post("/api/v1/fleet/clusters/a-1/cordon/", {"reason": "maintenance"}, format="json").status_code == 200


def test_a_token_whose_groups_changed_applies_them(provider, clusters):
    first = provider.login("oscar")
    assert bearer(first.access_token).get("/api/v1/auth/me/").json()["role"] == "operator"
    provider.change_user("oscar", groups=["meridian-viewers"])
    second = provider.login("oscar")
    assert bearer(second.access_token).get("/api/v1/auth/me/").json()["role"] == "viewer"


def test_an_expired_token_is_refused(provider, clusters, monkeypatch):
    monkeypatch.setattr(oidc, "LEEWAY", 0)  # 30 s of clock skew by default
    tokens = provider.login("vic", client_id=SHORT_LIVED)  # lives 2 s
    assert bearer(tokens.access_token).get("/api/v1/fleet/clusters/").status_code == 200
    time.sleep(3)
    response = bearer(tokens.access_token).get("/api/v1/fleet/clusters/")
    assert response.status_code == 401 and "expired" in response.json()["detail"]


def test_a_token_for_another_audience_is_refused(provider, clusters):
    tokens = provider.login("vic", resource=OTHER_AUDIENCE)
    response = bearer(tokens.access_token).get("/api/v1/fleet/clusters/")
    assert response.status_code == 401 and "aud" in response.json()["detail"]


def test_a_token_signed_by_another_key_is_refused(provider, clusters):
    """Same claims, same key id, the wrong key: the signature decides."""
    genuine = provider.login("vic")
    claims = jwt.decode(genuine.access_token, RSAKey.import_key(provider.keys[0])).claims
    forged = jwt.encode({"alg": "RS256", "kid": provider.keys[0]["kid"], "typ": "at+jwt"}, claims,
                        RSAKey.generate_key(2048, private=True))
    response = bearer(forged).get("/api/v1/fleet/clusters/")
    assert response.status_code == 401 and "signature" in response.json()["detail"]
    for junk in ("not-a-jwt", "a.b.c", genuine.id_token):  # an ID token is for Meridian's client, not its API
        assert bearer(junk).get("/api/v1/fleet/clusters/").status_code == 401, junk


def test_a_symmetric_or_unsigned_token_is_refused(provider, clusters):
    genuine = provider.login("vic")
    claims = jwt.decode(genuine.access_token, RSAKey.import_key(provider.keys[0])).claims
    from joserfc.jwk import OctKey

    hs256 = jwt.encode({"alg": "HS256"}, claims, OctKey.generate_key(256))
    assert bearer(hs256).get("/api/v1/fleet/clusters/").status_code == 401


def test_the_provider_rotating_its_signing_key_is_followed(provider, clusters, monkeypatch, settings):
    monkeypatch.setattr(oidc, "UNKNOWN_KID_REFETCH_SECONDS", 0.0)  # 10 s between refetches by default
    old_key = provider.keys[0]
    before = provider.login("vic")
    assert bearer(before.access_token).get("/api/v1/fleet/clusters/").status_code == 200
    new_key = signing_key("key-2")
    provider.rotate([new_key, old_key])  # the new key signs, the old one still verifies
    after = provider.login("vic")
    assert extract_compact(after.access_token.encode()).headers()["kid"] == "key-2"
    assert bearer(after.access_token).get("/api/v1/fleet/clusters/").status_code == 200  # an unknown kid refetched the keys
    assert bearer(before.access_token).get("/api/v1/fleet/clusters/").status_code == 200
    provider.rotate([new_key])  # the old key retired
    settings.MERIDIAN_OIDC_JWKS_SECONDS = 0  # the cache renews (an hour by default)
    assert bearer(before.access_token).get("/api/v1/fleet/clusters/").status_code == 401
    assert bearer(after.access_token).get("/api/v1/fleet/clusters/").status_code == 200


def test_meridian_api_tokens_keep_working(provider, clusters, viewer):
    from tests.conftest import token_client

    assert cluster_names(token_client(viewer).get("/api/v1/fleet/clusters/")) == ["a-1", "a-2", "b-1"]


def test_without_sso_a_bearer_token_is_simply_unauthenticated(settings, clusters):
    settings.MERIDIAN_OIDC_ISSUER = ""
    oidc.forget()
    assert bearer("a.b.c").get("/api/v1/fleet/clusters/").status_code == 401
    assert Client().get("/accounts/oidc/login/").status_code == 404
