"""Shared fixtures: users in each role and clients authenticated as them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from core.models import APIToken
from core.roles import ADMIN, OPERATOR, VIEWER
from tests.workers import purge_queues

PASSWORD = "correct-horse-battery-staple"


def make_user(django_user_model, username: str, role: str | None):
    user = django_user_model.objects.create_user(username=username, password=PASSWORD)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def viewer(django_user_model):
    return make_user(django_user_model, "vera-viewer", VIEWER)


@pytest.fixture
def operator(django_user_model):
    return make_user(django_user_model, "otto-operator", OPERATOR)


@pytest.fixture
def admin_user(django_user_model):
    return make_user(django_user_model, "ada-admin", ADMIN)


@pytest.fixture
def nobody(django_user_model):
    """Signed in, but holding no role."""
    return make_user(django_user_model, "nora-norole", None)


def token_client(user, *, write_enabled: bool = True) -> APIClient:
    _, raw = APIToken.issue(user, write_enabled=write_enabled)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return client


@pytest.fixture
def viewer_api(viewer) -> APIClient:
    return token_client(viewer)


@pytest.fixture
def operator_api(operator) -> APIClient:
    return token_client(operator)


@pytest.fixture
def admin_api(admin_user) -> APIClient:
    return token_client(admin_user)


@pytest.fixture
def purge_shard_queues():
    """For ``transaction=True`` tests whose commits send job messages that no worker consumes:
    the messages go with the test, so no later test's worker runs them against its own rows."""
    yield
    purge_queues()
