"""A PostgreSQL of the test's own (initdb in a temp dir, its own port — never the shared
server) is stopped for 20 s under 16 concurrent clients, three times in a row, with the web
server run as the README says: every answer while it is down is a clean 503 within 2 s —
pages, the REST API and the machine endpoints alike, the first requests after it stopped
included (they waited the pool's whole 10 s before) — and service is back within 15 s of
its return, the browser session still valid."""

from __future__ import annotations

import time

import httpx

from tests.ha.load import Call, Load, Result

from .processes import Meridian, PrivatePostgres, PrivateRedis, wait_until

CLIENTS = 16
OUTAGE_SECONDS = 20
ROUNDS = 3
ANSWER_WITHIN = 2.0
RECOVER_WITHIN = 15.0


def calls(token: str, session_cookies: httpx.Cookies) -> list[Call]:
    """A page, REST lists and the machine endpoints (with tokens they do not know: 401 while
    healthy, and they must not wait for the database to say so)."""
    api = {"Authorization": f"Token {token}"}
    browser = {"Cookie": "; ".join(f"{name}={value}" for name, value in session_cookies.items())}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}
    return [(path, method, path, headers, body) for method, path, headers, body in [
        ("GET", "/api/v1/fleet/clusters/", api, None),
        ("GET", "/api/v1/core/jobs/", api, None),
        ("GET", "/api/v1/nodeconfig/targets/", api, None),
        ("GET", "/fleet/", browser, None),
        ("GET", "/nodeconfig/", browser, None),
        ("GET", "/api/agent/v1/clusters/x/nodes/y/config", {"Authorization": "Bearer mag_unknown"}, None),
        ("POST", "/api/admission/v1/quotas/validate", {"Authorization": "Bearer mwh_unknown"}, review),
    ]]


def test_sixteen_clients_get_a_503_within_two_seconds_while_the_database_is_down_three_times(tmp_path):
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

        with Load(meridian.base, calls(token, browser.cookies), threads=CLIENTS, pause=0) as load:
            for round_ in range(ROUNDS):
                time.sleep(3)
                healthy = load.between(time.monotonic() - 3, time.monotonic())
                assert healthy and all(served(a) for a in healthy), (round_, _summary(healthy))

                postgres.stop()
                stopped = time.monotonic()
                while time.monotonic() - stopped < OUTAGE_SECONDS:
                    assert httpx.get(meridian.base + "/healthz", timeout=5).status_code == 200, "the process itself is up"
                    time.sleep(1)
                assert httpx.get(meridian.base + "/readyz", timeout=5).status_code == 503
                postgres.start()
                restarted = time.monotonic()

                # Requests already in flight when the server stopped may have been answered before
                # it did: judge those sent after the stop finished.
                down = load.between(stopped, restarted - ANSWER_WITHIN)
                assert len(down) > CLIENTS * 5, f"round {round_}: the clients kept asking ({len(down)} answers)"
                slow = [a for a in down if a.took > ANSWER_WITHIN]
                assert not slow, f"round {round_}: {len(slow)} answers slower than {ANSWER_WITHIN} s: {_summary(slow)}"
                wrong = [a for a in down if not clean_refusal(a)]
                assert not wrong, f"round {round_}: answers other than a clean 503: {_summary(wrong)}"
                assert not [a for a in down if "Traceback" in a.detail]

                wait_until(lambda: api.get("/api/v1/fleet/clusters/").status_code == 200, timeout=RECOVER_WITHIN + 5,
                           interval=0.2, what="the API to recover")
                recovered = time.monotonic() - restarted
                assert recovered < RECOVER_WITHIN, f"round {round_}: recovered in {recovered:.1f} s"
                print(f"round {round_}: {len(down)} answers while down, slowest {max(a.took for a in down):.2f} s, "
                      f"all clean refusals; recovered {recovered:.1f} s after the restart")
                assert browser.get("/fleet/").status_code == 200, "pages recover, the session still valid"
                time.sleep(2)
                settled = load.between(time.monotonic() - 1.5, time.monotonic())
                assert settled and all(served(a) for a in settled), (round_, _summary(settled))
    finally:
        meridian.close()
        redis.close()
        postgres.close()


def served(answer: Result) -> bool:
    """What a healthy Meridian answers: 200, and 401 to the machine endpoints' unknown tokens
    (a call's kind is its path)."""
    return answer.status == (401 if answer.kind.startswith(("/api/agent/", "/api/admission/")) else 200)


def clean_refusal(answer: Result) -> bool:
    """A 503 (the REST API's with the one error body); a machine endpoint may also refuse an
    unknown token it could tell without the database (401)."""
    if answer.kind.startswith(("/api/agent/", "/api/admission/")):
        return answer.status in (401, 503)
    if answer.kind.startswith("/api/"):
        return answer.status == 503 and '"unavailable"' in answer.detail
    return answer.status == 503


def _summary(answers: list[Result]) -> list[tuple]:
    return [(a.kind, a.status, round(a.took, 2), a.detail[:80]) for a in answers[:8]]
