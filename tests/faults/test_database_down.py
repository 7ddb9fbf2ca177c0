"""A PostgreSQL of the test's own (initdb in a temp dir, its own port — never the shared
server) is stopped under a running Meridian: requests fail cleanly with 503 (pages, the REST
API and the machine endpoints alike, never a 500 or a traceback), then recover by themselves
when the database is back."""

from __future__ import annotations

import time

import httpx

from .processes import Meridian, PrivatePostgres, PrivateRedis, wait_until


def test_requests_fail_cleanly_while_the_database_is_down_and_recover(tmp_path):
    postgres = PrivatePostgres().init()
    redis = PrivateRedis().start()
    meridian = Meridian(database_url=postgres.url, redis_url=redis.url, var_dir=tmp_path,
                        extra_env={"MERIDIAN_ADMIN_USERNAME": "db-admin", "MERIDIAN_ADMIN_PASSWORD": "db-admin-password-123"})
    try:
        meridian.manage("migrate", "--noinput")
        meridian.manage("bootstrap_admin")
        token = meridian.manage("shell", "--verbosity", "0", "-c", "from django.contrib.auth import get_user_model; from core.models import APIToken; "
                                "print(APIToken.issue(get_user_model().objects.get(username='db-admin'))[1])").stdout.strip()
        meridian.start_web()
        api = httpx.Client(base_url=meridian.base, headers={"Authorization": f"Token {token}"}, timeout=30)
        browser = httpx.Client(base_url=meridian.base, timeout=30)
        browser.get("/accounts/login/")
        assert browser.post("/accounts/login/", data={"username": "db-admin", "password": "db-admin-password-123",
                                                      "csrfmiddlewaretoken": browser.cookies["csrftoken"]}).status_code == 302
        assert api.get("/api/v1/fleet/clusters/").status_code == 200

        postgres.stop()
        rest = api.get("/api/v1/fleet/clusters/")
        assert rest.status_code == 503 and rest.json()["code"] == "unavailable", rest.text
        # Once the first request found the database gone, the next ones fail at once instead of
        # each waiting the pool's timeout (10 s: longer than an API server waits for a webhook).
        started = time.monotonic()
        page = browser.get("/fleet/")
        assert page.status_code == 503 and "Traceback" not in page.text, page.text[:500]
        agent = httpx.get(meridian.base + "/api/agent/v1/clusters/x/nodes/y/config",
                          headers={"Authorization": "Bearer mag_unknown"})
        assert agent.status_code in (401, 503) and agent.status_code != 500
        webhook = httpx.post(meridian.base + "/api/admission/v1/quotas/validate", headers={"Authorization": "Bearer mwh_x"},
                             json={"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}})
        assert webhook.status_code in (401, 503), webhook.text
        assert time.monotonic() - started < 5, "three requests answered while the database is down, without waiting it out"
        assert httpx.get(meridian.base + "/healthz").status_code == 200, "the process itself is up"
        assert httpx.get(meridian.base + "/readyz").status_code == 503

        postgres.start()
        restarted = time.monotonic()
        wait_until(lambda: api.get("/api/v1/fleet/clusters/").status_code == 200, timeout=60, what="the API to recover")
        assert time.monotonic() - restarted < 15, "recovered within seconds, not after the pool's reconnect backoff"
        assert browser.get("/fleet/").status_code == 200, "pages recover, the session still valid"
    finally:
        meridian.close()
        redis.close()
        postgres.close()
