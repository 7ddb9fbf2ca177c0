"""Shared fixtures: users in each role and clients authenticated as them."""

from __future__ import annotations

import functools

import pytest
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from core.models import APIToken
from core.roles import ADMIN, OPERATOR, VIEWER
from tests.oidc_provider import oidc_provider, oidc_users  # noqa: F401  (fixtures for every test module)
from tests.workers import purge_queues

PASSWORD = "correct-horse-battery-staple"


@pytest.fixture(scope="session", autouse=True)
def _no_leftover_processes_on_the_test_database():
    """End what an interrupted earlier run left connected to this suite's test database.

    The fault suite's Meridian processes (web, worker, beat) use the test database; when
    pytest itself is killed they outlive it, reconnect once the next run has made the database
    again and hold idle sessions there — and that run's restore tests find "other sessions
    connected". Before the database is made (this fixture comes first), they are stopped.
    """
    from django.conf import settings

    from tests.faults.processes import end_processes, processes_using_database

    database = settings.DATABASES["default"]
    if "sqlite" not in database["ENGINE"]:
        end_processes(processes_using_database(database.get("TEST", {}).get("NAME") or f"test_{database['NAME']}"),
                      why="left connected to the test database by an earlier run")


@functools.cache
def password_hash() -> str:
    """PASSWORD as the product stores it (PBKDF2, a million rounds), hashed once per run.

    Hashing the same password again for every test's users was a third of the suite's time;
    the stored hash is the real one, so signing in (here or in a real web process) checks it
    as it checks any other.
    """
    return make_password(PASSWORD)


def make_user(django_user_model, username: str, role: str | None):
    user = django_user_model.objects.create(username=username, password=password_hash())
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


def user_fixture(username: str, role: str | None):
    """A fixture of a user in ``role``; ``None``: signed in, but holding no role."""
    @pytest.fixture
    def user(django_user_model):
        return make_user(django_user_model, username, role)

    return user


viewer = user_fixture("vera-viewer", VIEWER)
operator = user_fixture("otto-operator", OPERATOR)
admin_user = user_fixture("ada-admin", ADMIN)
nobody = user_fixture("nora-norole", None)


@pytest.fixture
def cluster(db):
    """A small simulated member cluster (the quota and scheduling webhooks' tests); a test module
    that needs another defines its own."""
    from fleet.models import Cluster

    return Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 4, "seed": 1})


@pytest.fixture
def webhook_token(cluster) -> str:
    """A webhook token of ``cluster``, as its admission webhooks present it."""
    from fleet.tokens import issue_token

    return issue_token(cluster, "webhook")[1]


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
