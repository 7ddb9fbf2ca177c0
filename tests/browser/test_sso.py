"""Single sign-on in a real browser against a real provider (``tests/oidc/provider.mjs``):
sign in through the provider's own login page and land on the overview with the mapped role;
a group removed at the provider is a right gone at the next sign-in; signing out ends both
sessions (Meridian's, and the provider's through RP-initiated logout: signing in again shows
the provider's login form, not a silent sign-in)."""

from __future__ import annotations

import pytest

from core import oidc
from tests.oidc_provider import PASSWORD, OIDCProvider, configure_meridian

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sso(asgi_server, tmp_path, oidc_users, settings):
    provider = OIDCProvider(tmp_path, oidc_users, meridian_url=asgi_server).start()
    configure_meridian(settings, provider)
    yield provider
    provider.stop()
    oidc.forget()


def sign_in_at_the_provider(page, provider: OIDCProvider, username: str) -> None:
    page.wait_for_url(f"{provider.issuer}/interaction/**")
    page.fill("#op-username", username)
    page.fill("#op-password", PASSWORD)
    page.click("#op-submit")


def test_sign_in_group_change_and_sign_out_through_the_provider(page, asgi_server, sso):
    page.goto(f"{asgi_server}/accounts/login/")
    page.click("#sso-login")
    sign_in_at_the_provider(page, sso, "oscar")
    page.wait_for_url(f"{asgi_server}/")
    assert page.inner_text("header .user").replace("\n", " ").strip() == "oscar · operator"
    assert page.locator("#attention").count() or page.locator("main").inner_text()

    # The provider takes oscar out of the operators: the next sign-in lacks the right.
    sso.change_user("oscar", groups=["meridian-viewers"])

    # Signing out ends Meridian's session and, through the provider's end-session page, its own.
    page.click("header form[action='/accounts/logout/'] button")
    page.wait_for_url(f"{sso.issuer}/session/end**")
    page.click("#op-logout")
    page.wait_for_url(f"{asgi_server}/accounts/login/**")
    page.goto(f"{asgi_server}/fleet/")
    page.wait_for_url(f"{asgi_server}/accounts/login/**")

    page.click("#sso-login")
    sign_in_at_the_provider(page, sso, "oscar")  # the provider asks again: its session ended too
    page.wait_for_url(f"{asgi_server}/**")
    assert page.inner_text("header .user").replace("\n", " ").strip() == "oscar · viewer"


def test_a_refused_sign_in_says_why_on_the_login_page(page, asgi_server, sso, django_user_model):
    django_user_model.objects.create_user(username="vic", password="a-local-password-42")
    page.goto(f"{asgi_server}/accounts/login/")
    page.click("#sso-login")
    sign_in_at_the_provider(page, sso, "vic")
    page.wait_for_url(f"{asgi_server}/accounts/oidc/callback/**")
    assert "exists" in page.inner_text("#sso-error")
    page.goto(f"{asgi_server}/fleet/")
    page.wait_for_url(f"{asgi_server}/accounts/login/**")
