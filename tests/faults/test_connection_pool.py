"""64 concurrent Django requests do not exhaust PostgreSQL: each web process takes its
connections from one bounded pool (Django's psycopg pool), instead of one connection per
request thread kept for ``CONN_MAX_AGE`` (which reached 98 of 100 connections and answered
"too many clients"). On a PostgreSQL of the test's own with 60 connections: 0 errors, and
never more connections than the pool allows."""

from __future__ import annotations

import threading
import time

import httpx
import psycopg

from .processes import Meridian, PrivatePostgres, PrivateRedis

CALLERS = 64
SECONDS = 15
POOL_MAX = 8
WEB_PROCESSES = 2  # the README's web command: each process has a pool of its own


def test_sixty_four_concurrent_requests_stay_within_the_pool(tmp_path):
    postgres = PrivatePostgres().init()
    redis = PrivateRedis().start()
    meridian = Meridian(database_url=postgres.url, redis_url=redis.url, var_dir=tmp_path,
                        extra_env={"MERIDIAN_DB_POOL_MAX": str(POOL_MAX), "MERIDIAN_DB_POOL_TIMEOUT": "20",
                                   "MERIDIAN_WEBHOOK_THREADS": "1",
                                   "MERIDIAN_ADMIN_USERNAME": "pool-admin", "MERIDIAN_ADMIN_PASSWORD": "pool-admin-password-1"})
    try:
        meridian.manage("migrate", "--noinput")
        meridian.manage("bootstrap_admin")
        token = meridian.manage("shell", "--verbosity", "0", "-c", "from django.contrib.auth import get_user_model; from core.models import APIToken; "
                                "print(APIToken.issue(get_user_model().objects.get(username='pool-admin'))[1])").stdout.strip()
        meridian.start_web(workers=WEB_PROCESSES)
        statuses: dict[int, int] = {}
        failures: list[str] = []
        peak = [0]
        stop = time.monotonic() + SECONDS

        def caller() -> None:
            with httpx.Client(base_url=meridian.base, headers={"Authorization": f"Token {token}"}, timeout=60) as client:
                while time.monotonic() < stop:
                    try:
                        code = client.get("/api/v1/core/jobs/").status_code
                    except httpx.HTTPError as exc:
                        failures.append(type(exc).__name__)
                        continue
                    statuses[code] = statuses.get(code, 0) + 1

        def watch() -> None:
            with psycopg.connect(f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres", autocommit=True) as conn:
                while time.monotonic() < stop:
                    count = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'meridian'").fetchone()[0]
                    peak[0] = max(peak[0], count)
                    time.sleep(0.2)

        threads = [threading.Thread(target=caller) for _ in range(CALLERS)] + [threading.Thread(target=watch)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        served = sum(statuses.values())
        assert failures == [] and set(statuses) == {200}, (statuses, failures[:5])
        assert served > CALLERS, statuses
        bound = WEB_PROCESSES * (POOL_MAX + 1)
        assert peak[0] <= bound, f"{peak[0]} connections ({WEB_PROCESSES} processes × (pool {POOL_MAX} + the admission thread))"
    finally:
        meridian.close()
        redis.close()
        postgres.close()
