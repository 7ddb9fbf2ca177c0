"""Login everywhere, and roles: walk every URL the project serves instead of listing a few."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.views import APIView

from core.models import Job

#: Paths that are public on purpose (health, login, language switch, machine endpoints with their own auth).
PUBLIC = {"/healthz", "/readyz", "/accounts/login/", "/accounts/logout/", "/i18n/setlang/", "/api/v1/auth/token/",
          "/accounts/oidc/login/", "/accounts/oidc/callback/"}
#: Django's own flows that are not Meridian pages.
SKIPPED_PREFIXES = ("/admin/", "/accounts/password_reset", "/accounts/reset/")
UNSAFE = ("post", "put", "patch", "delete")
#: Machine endpoints (agents, webhooks) authenticate with cluster tokens and never redirect.
MACHINE_PREFIXES = ("/api/agent/", "/api/admission/")


def _walk(resolver: URLResolver, prefix: str = ""):
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _walk(entry, route)
        elif isinstance(entry, URLPattern):
            yield route, entry.callback


SAMPLES = ("1", "a", "agent", "x1")


def _sample(group: str) -> str:
    inner = group[group.index(">") + 1 : -1]
    return next((s for s in SAMPLES if re.fullmatch(inner, s)), "1")


def _replace_groups(route: str) -> str:
    """Replace each regex named group (nested parentheses included) with a value it matches."""
    out, i = [], 0
    while (start := route.find("(?P<", i)) != -1:
        out.append(route[i:start])
        depth, j = 0, start
        while True:
            depth += {"(": 1, ")": -1}.get(route[j], 0)
            j += 1
            if depth == 0:
                break
        out.append(_sample(route[start:j]))
        i = j
    out.append(route[i:])
    return "".join(out)


def _concrete(route: str) -> str:
    path = _replace_groups(route)
    path = re.sub(r"<int:[^>]+>", "1", path)
    path = re.sub(r"<[^>]+>", "x", path)
    return "/" + path.replace("^", "").replace("$", "").replace("\\.", ".").replace("\\", "")


def all_routes():
    seen = {}
    for route, callback in _walk(get_resolver()):
        path = _concrete(route)
        if "(?P<format>" in route or "<drf_format_suffix" in route or path in seen:
            continue
        seen[path] = callback
    return sorted(seen.items())


def _is_api(callback) -> bool:
    cls = getattr(callback, "cls", None)
    return isinstance(cls, type) and issubclass(cls, APIView)


PROTECTED = [(p, cb) for p, cb in all_routes() if p not in PUBLIC and not p.startswith(SKIPPED_PREFIXES)]


def test_the_walk_covers_the_main_pages_and_api():
    paths = {path for path, _ in PROTECTED}
    assert {"/", "/audit/", "/fleet/", "/nodeconfig/", "/quotas/", "/federation/", "/scheduling/", "/api/v1/", "/api/schema/", "/api/docs/", "/api/v1/core/jobs/"} <= paths


@pytest.mark.django_db
@pytest.mark.parametrize("path,callback", PROTECTED, ids=[p for p, _ in PROTECTED])
def test_anonymous_requests_are_refused(client, path, callback):
    response = client.get(path)
    if path.startswith(MACHINE_PREFIXES):
        assert response.status_code in (401, 405), path  # 405: POST-only, refused before anything runs
    elif _is_api(callback):
        assert response.status_code in (401, 403), path
    else:
        assert response.status_code == 302, path
        assert response["Location"].startswith("/accounts/login/"), path


def _api_writes():
    writes = []
    for path, callback in PROTECTED:
        if not _is_api(callback):
            continue
        actions = getattr(callback, "actions", None)
        methods = [m for m in UNSAFE if (m in actions if actions else hasattr(callback.cls, m))]
        writes.extend((path, m) for m in methods)
    return writes


API_WRITES = _api_writes()


def test_there_are_api_writes_to_check():
    assert ("/api/v1/core/jobs/1/cancel/", "post") in API_WRITES


@pytest.mark.django_db
@pytest.mark.parametrize("path,method", API_WRITES, ids=[f"{m} {p}" for p, m in API_WRITES])
def test_a_viewer_cannot_change_anything_through_the_api(viewer, viewer_api, path, method):
    Job.objects.create(pk=1, kind="probe", triggered_by="test")
    response = getattr(viewer_api, method)(path, {}, format="json")
    if path.startswith("/api/v1/auth/tokens/"):
        assert response.status_code in (201, 204, 404), "a user manages only their own tokens (and may issue one)"
    else:
        assert response.status_code == 403, f"{method} {path} -> {response.status_code}"
    assert Job.objects.get(pk=1).status == Job.Status.PENDING


@pytest.mark.django_db
def test_a_viewer_reads_what_an_operator_may_change(viewer_api, operator_api):
    job = Job.objects.create(kind="probe", triggered_by="test")
    assert viewer_api.get(f"/api/v1/core/jobs/{job.pk}/").status_code == 200
    assert viewer_api.post(f"/api/v1/core/jobs/{job.pk}/cancel/").status_code == 403
    response = operator_api.post(f"/api/v1/core/jobs/{job.pk}/cancel/")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "canceled"
    assert operator_api.post(f"/api/v1/core/jobs/{job.pk}/cancel/").status_code == 409


@pytest.mark.django_db
def test_a_user_without_a_role_sees_no_data(nobody):
    from tests.conftest import token_client

    api = token_client(nobody)
    assert api.get("/api/v1/core/jobs/").status_code == 403
    assert api.get("/api/v1/core/audit-log/").status_code == 403
    assert api.get("/api/v1/auth/me/").json()["role"] is None


@pytest.mark.django_db
def test_a_viewer_gets_403_on_pages_needing_a_permission(client, nobody, viewer):
    client.force_login(nobody)
    assert client.get("/audit/").status_code == 403
    client.force_login(viewer)
    assert client.get("/audit/").status_code == 200
    assert client.get("/").status_code == 200
