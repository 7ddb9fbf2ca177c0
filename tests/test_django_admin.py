"""Django's admin writes around the services, so production does not mount it and the embedded
default shows it read-only: a superuser can browse the tables and change nothing there —
audit entries, API tokens, jobs, users and groups alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from core.models import APIToken, ObjectChange

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser_client(django_user_model) -> Client:
    user = django_user_model.objects.create_superuser(username="root", password="a-long-enough-passphrase-42")
    client = Client()
    client.force_login(user)
    return client


def test_production_does_not_mount_the_admin():
    """The production settings, in a process of their own (settings are read once per process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "MERIDIAN_"))} | {
        "MERIDIAN_ENV": "production", "SECRET_KEY": "p" * 30 + "roduction-only-for-this-test-0123456789",
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "REDIS_URL": "redis://127.0.0.1:1/0",
        "ALLOWED_HOSTS": "meridian.example", "DJANGO_SETTINGS_MODULE": "config.settings"}
    code = ("import django; django.setup()\n"
            "from django.urls import Resolver404, resolve\n"
            "for path in ('/admin/', '/admin/core/objectchange/', '/admin/login/'):\n"
            "    try:\n        resolve(path)\n    except Resolver404:\n        continue\n"
            "    raise SystemExit('mounted: ' + path)\n"
            "resolve('/administration/'); print('absent')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "absent", done.stdout + done.stderr


def test_the_embedded_admin_browses(superuser_client):
    ObjectChange.objects.create(actor="test", action="action", object_repr="probe", time=timezone.now())
    for path in ("/admin/", "/admin/core/objectchange/", "/admin/core/apitoken/", "/admin/auth/user/"):
        assert superuser_client.get(path).status_code == 200, path


def test_the_embedded_admin_changes_nothing(superuser_client, django_user_model):
    change = ObjectChange.objects.create(actor="test", action="action", object_repr="probe", time=timezone.now())
    token, _ = APIToken.issue(django_user_model.objects.get(username="root"))
    group = Group.objects.get(name="viewer")
    attempts = [
        (f"/admin/core/objectchange/{change.pk}/delete/", {"post": "yes"}),
        (f"/admin/core/objectchange/{change.pk}/change/", {"reason": "rewritten", "actor": "someone else"}),
        ("/admin/core/objectchange/", {"action": "delete_selected", "_selected_action": [change.pk], "post": "yes"}),
        ("/admin/core/objectchange/add/", {"actor": "forged", "action": "action", "object_repr": "x"}),
        (f"/admin/core/apitoken/{token.pk}/change/", {"write_enabled": "on", "expires_0": "", "expires_1": ""}),
        (f"/admin/core/apitoken/{token.pk}/delete/", {"post": "yes"}),
        ("/admin/auth/user/add/", {"username": "sneaky", "password1": "x-long-passphrase-1", "password2": "x-long-passphrase-1"}),
        (f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"}),
    ]
    for path, data in attempts:
        assert superuser_client.post(path, data).status_code in (200, 302, 403), path  # 200: "no action selected"
    assert ObjectChange.objects.filter(pk=change.pk, reason="", actor="test").exists()
    assert ObjectChange.objects.count() == 1
    assert APIToken.objects.filter(pk=token.pk).exists()
    assert not django_user_model.objects.filter(username="sneaky").exists()
    assert Group.objects.filter(pk=group.pk).exists()
    for path in (f"/admin/core/objectchange/{change.pk}/delete/", "/admin/auth/user/add/"):
        assert superuser_client.get(path).status_code == 403, path
