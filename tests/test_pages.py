"""Pages render for signed-in users, in both languages, and the OpenAPI schema builds."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from core.models import Job

PAGES = ["/", "/audit/", "/jobs/", "/fleet/", "/nodeconfig/", "/quotas/", "/federation/", "/scheduling/", "/api/docs/"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_pages_render_for_a_viewer(client, viewer, path):
    Job.objects.create(kind="probe", triggered_by="test", status=Job.Status.FAILED)
    client.force_login(viewer)
    response = client.get(path)
    assert response.status_code == 200, path
    external = re.findall(r'(?:src|href)=["\'](?:https?:)?//[^"\']+', response.content.decode())
    assert external == [], "every asset is served from our own static files"


@pytest.mark.django_db
def test_navigation_and_live_indicator_are_on_every_page(client, viewer):
    client.force_login(viewer)
    html = client.get("/").content.decode()
    for label in ("Overview", "Node config", "Quotas", "Federation", "Scheduling", "Audit log"):
        assert f">{label}</a>" in html
    assert 'id="live-indicator"' in html and 'data-topics="system fleet nodeconfig federation quotas"' in html, "the areas the overview lists"


@pytest.mark.django_db
def test_simplified_chinese(client, viewer):
    client.cookies["django_language"] = "zh-hans"
    login = client.get("/accounts/login/")
    assert "登录 Meridian" in login.content.decode()
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert "总览" in html and "审计日志" in html and 'lang="zh-hans"' in html


@pytest.mark.django_db
def test_login_page_and_login_flow(client, viewer):
    from tests.conftest import PASSWORD

    assert client.get("/accounts/login/").status_code == 200
    bad = client.post("/accounts/login/", {"username": viewer.username, "password": "nope"})
    assert bad.status_code == 200 and b'Please try again' in bad.content
    good = client.post("/accounts/login/", {"username": viewer.username, "password": PASSWORD})
    assert good.status_code == 302 and good["Location"] == "/"


@pytest.mark.django_db
def test_static_assets_are_served_locally(client):
    for path in ("/static/meridian/css/meridian.css", "/static/meridian/js/live.js", "/static/vendor/plotly/plotly.min.js",
                 "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"):
        response = client.get(path)
        assert response.status_code == 200, path


@pytest.mark.django_db
def test_static_files_are_scanned_once_per_process(monkeypatch):
    """Each test client builds its own middleware chain: the static files are scanned for the
    first one only (the scan was four fifths of the access matrix's time), and served by both."""
    from django.test import Client
    from servestatic.base import ServeStaticBase

    from core.middleware import StaticFilesMiddleware

    monkeypatch.setattr(StaticFilesMiddleware, "_scanned", None)
    scanned = []
    add = ServeStaticBase.add_file_to_dictionary
    monkeypatch.setattr(ServeStaticBase, "add_file_to_dictionary", lambda self, url, *a, **k: (scanned.append(url), add(self, url, *a, **k)))
    bodies = []
    for expected in ("first client scans", "second client does not"):
        response = Client().get("/static/meridian/js/live.js")
        assert response.status_code == 200, expected
        bodies.append(int(response["Content-Length"]))
        assert ("/static/meridian/js/live.js" in scanned) == (expected == "first client scans"), expected
        scanned.clear()
    assert bodies[0] == bodies[1] > 1000


@pytest.mark.django_db
def test_openapi_schema_builds_without_warnings(tmp_path, viewer_api):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    response = viewer_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/core/jobs/{id}/cancel/" in paths and "/api/v1/auth/token/" in paths


@pytest.mark.django_db
def test_bootstrap_admin_is_idempotent(monkeypatch, django_user_model, capsys):
    monkeypatch.setenv("MERIDIAN_ADMIN_USERNAME", "root-admin")
    monkeypatch.delenv("MERIDIAN_ADMIN_PASSWORD", raising=False)
    call_command("bootstrap_admin")
    first = capsys.readouterr().out
    assert "password '" in first
    call_command("bootstrap_admin")
    assert "already exists" in capsys.readouterr().out
    admin = django_user_model.objects.get(username="root-admin")
    assert admin.is_superuser and admin.groups.filter(name="admin").exists()
    assert django_user_model.objects.filter(username="root-admin").count() == 1


def test_make_run_takes_the_demo_fleet_size_from_the_flag_or_the_environment(monkeypatch):
    """``MERIDIAN_DEMO_NODES=10000 make run`` (the live console bench's fleet) or --demo-nodes; a
    value that is not a number is refused by name, not with a traceback. (That the size reaches
    seed_demo is shown by bench/bench_live.py, which seeds 10,000 nodes through it.)"""
    from django.core.management.base import CommandError

    from core.management.commands.meridian_run import Command

    monkeypatch.delenv("MERIDIAN_DEMO_NODES", raising=False)
    assert Command().create_parser("manage.py", "meridian_run").parse_args([]).demo_nodes == 2000
    monkeypatch.setenv("MERIDIAN_DEMO_NODES", "10000")
    parser = Command().create_parser("manage.py", "meridian_run")
    assert parser.parse_args([]).demo_nodes == 10000
    assert parser.parse_args(["--demo-nodes", "500"]).demo_nodes == 500
    monkeypatch.setenv("MERIDIAN_DEMO_NODES", "lots")
    with pytest.raises(CommandError, match="--demo-nodes: invalid int value: 'lots'"):
        Command().create_parser("manage.py", "meridian_run").parse_args([])


@pytest.mark.django_db
def test_roles_hold_the_right_permissions():
    from django.contrib.auth.models import Group

    viewer, operator, admin = (set(Group.objects.get(name=r).permissions.values_list("codename", flat=True)) for r in ("viewer", "operator", "admin"))
    assert "view_job" in viewer and not any(p.startswith(("add_", "change_", "delete_")) for p in viewer)
    assert "cancel_job" in operator and viewer < operator
    assert operator < admin and "add_user" in admin
