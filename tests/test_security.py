"""Secure defaults: a Content-Security-Policy on every page, no inline code, logins that lock."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.conftest import PASSWORD

TEMPLATE_DIRS = [Path(settings.BASE_DIR) / "templates", *Path(settings.BASE_DIR).glob("*/templates")]
INLINE_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/(?:ld\+)?json)[^>]*>", re.IGNORECASE)


def templates():
    for directory in TEMPLATE_DIRS:
        yield from directory.rglob("*.html")


def test_no_template_carries_inline_script_or_event_handlers():
    """The CSP allows scripts from files only: an inline handler would silently stop working."""
    offenders = [f"{path}: {match.group(0)[:60]}" for path in templates()
                 for match in [*INLINE_HANDLER.finditer(path.read_text()), *INLINE_SCRIPT.finditer(path.read_text())]]
    assert offenders == []


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/nodeconfig/", "/quotas/", "/federation/", "/fleet/", "/accounts/login/", "/api/docs/"])
def test_every_page_sends_a_content_security_policy(client, viewer, path):
    if path != "/accounts/login/":
        client.force_login(viewer)
    policy = client.get(path)["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'", "no inline scripts, no CDN"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert "'self'" in directives["connect-src"]


@pytest.mark.django_db
def test_a_brute_forced_browser_login_locks_that_user_from_that_address(client, viewer, operator):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/accounts/login/", {"username": viewer.username, "password": "wrong"})
        assert response.status_code == 200 and "__all__" in response.context["form"].errors
    assert client.post("/accounts/login/", {"username": viewer.username, "password": "wrong"}).status_code == 429
    locked = client.post("/accounts/login/", {"username": viewer.username, "password": PASSWORD})
    assert locked.status_code == 429, "even the right password is refused while locked"
    other = client.post("/accounts/login/", {"username": operator.username, "password": PASSWORD})
    assert other.status_code == 302, "another user behind the same address still logs in"


@pytest.mark.django_db
def test_the_token_endpoint_shares_the_lockout_with_the_browser_login(client, viewer):
    """Failures are counted in the database (django-axes), so every process sees them: the
    token endpoint and the browser login lock the same (user, address) together."""
    api = APIClient()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert api.post("/api/v1/auth/token/", {"username": viewer.username, "password": "wrong"}, format="json").status_code == 400
    assert api.post("/api/v1/auth/token/", {"username": viewer.username, "password": "wrong"}, format="json").status_code == 429
    refused = api.post("/api/v1/auth/token/", {"username": viewer.username, "password": PASSWORD}, format="json")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert client.post("/accounts/login/", {"username": viewer.username, "password": PASSWORD}).status_code == 429


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/docs/", "/api/redoc/"])
def test_the_api_documentation_loads_nothing_from_outside(client, viewer, path):
    client.force_login(viewer)
    response = client.get(path)
    assert response.status_code == 200
    html = response.content.decode()
    outside = re.findall(r"""(?:src|href)\s*=\s*["']((?:https?:)?//[^"']+)""", html)
    assert outside == [], "fonts, scripts and styles come from Meridian's own static files"
    assert re.search(r"""<script src=["']/(?:static|api/redoc)/""", html), "the viewer's script is served by Meridian"


@pytest.mark.django_db
def test_redocs_script_fetches_nothing_from_outside(client, viewer):
    """The sidecar's ReDoc bundle loads its footer's logo from cdn.redoc.ly; Meridian serves the
    bundle with that one address replaced (offline installations, nobody told who reads the docs)."""
    assert client.get("/api/redoc/bundles/redoc.standalone.js").status_code == 302, "signed in, as the docs page"
    client.force_login(viewer)
    response = client.get("/api/redoc/bundles/redoc.standalone.js")
    script = response.content.decode()
    assert response.status_code == 200 and response["Content-Type"].startswith("application/javascript")
    assert "cdn.redoc.ly" not in script and len(script) > 500_000, "the whole bundle, less the logo's address"
