from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from core.models import APIToken, Job, hash_token
from tests.conftest import PASSWORD, token_client


@pytest.mark.django_db
def test_password_exchange_gives_a_token_stored_only_as_a_hash(viewer):
    response = APIClient().post("/api/v1/auth/token/", {"username": viewer.username, "password": PASSWORD}, format="json")
    assert response.status_code == 201, response.content
    raw = response.json()["token"]
    stored = APIToken.objects.get(user=viewer)
    assert stored.key_hash == hash_token(raw) and raw not in (stored.key_hash, stored.key_prefix)

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    me = client.get("/api/v1/auth/me/")
    assert me.status_code == 200 and me.json() == {"username": viewer.username, "role": "viewer", "is_superuser": False,
                                                   "scoped_roles": []}
    listed = client.get("/api/v1/auth/tokens/").json()["results"]
    assert [t["key_prefix"] for t in listed] == [raw[:8]] and "token" not in listed[0]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body,field",
    [({"username": "vera-viewer", "password": "wrong"}, "non_field_errors"), ({"username": "vera-viewer"}, "password"), ({}, "username")],
)
def test_bad_credentials_are_a_400_naming_the_problem(viewer, body, field):
    response = APIClient().post("/api/v1/auth/token/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"]
    assert not APIToken.objects.exists()


@pytest.mark.django_db
def test_expired_unknown_and_malformed_tokens_are_refused(viewer):
    token, raw = APIToken.issue(viewer, ttl=timedelta(seconds=60))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    assert client.get("/api/v1/core/jobs/").status_code == 200
    APIToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/v1/core/jobs/").status_code == 401
    for header in ("Token not-a-token", "Token a b", "Token"):
        client.credentials(HTTP_AUTHORIZATION=header)
        assert client.get("/api/v1/core/jobs/").status_code == 401, header


@pytest.mark.django_db
def test_read_only_token_cannot_write_even_for_an_operator(operator):
    job = Job.objects.create(kind="probe", triggered_by="test")
    read_only = token_client(operator, write_enabled=False)
    assert read_only.get(f"/api/v1/core/jobs/{job.pk}/").status_code == 200
    assert read_only.post(f"/api/v1/core/jobs/{job.pk}/cancel/").status_code == 403
    assert token_client(operator).post(f"/api/v1/core/jobs/{job.pk}/cancel/").status_code == 200


@pytest.mark.django_db
def test_a_user_revokes_only_their_own_tokens(viewer, operator):
    mine, _ = APIToken.issue(viewer)
    theirs, _ = APIToken.issue(operator)
    client = token_client(viewer)
    assert client.delete(f"/api/v1/auth/tokens/{theirs.pk}/").status_code == 404
    assert client.delete(f"/api/v1/auth/tokens/{mine.pk}/").status_code == 204
    assert APIToken.objects.filter(pk=theirs.pk).exists() and not APIToken.objects.filter(pk=mine.pk).exists()


@pytest.mark.django_db
def test_browser_session_writes_need_csrf(operator):
    job = Job.objects.create(kind="probe", triggered_by="test")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.get(f"/api/v1/core/jobs/{job.pk}/").status_code == 200
    assert client.post(f"/api/v1/core/jobs/{job.pk}/cancel/").status_code == 403
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING
