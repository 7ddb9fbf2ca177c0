"""A Celery prefork worker's pool is closed after every task by Celery's Django fixup
(``close_pool``, from the task's thread), while threads of Meridian's own in the same process
(a cluster's watcher, its pod scheduler) keep querying: one that took the old pool a moment
before used to fail with ``PoolClosed`` ("pool has already been opened/closed and cannot be
reused") and the pod scheduler of a cluster stopped. It takes the next pool instead."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections


@pytest.mark.django_db(transaction=True)
def test_a_thread_querying_while_another_closes_the_pool_gets_a_connection():
    if connection.vendor != "postgresql" or connection.pool is None:
        pytest.skip("the pool is PostgreSQL's")
    stop = threading.Event()
    errors: list[BaseException] = []
    closes = [0]
    queries = [0, 0, 0]

    def closer() -> None:  # what Celery's fixup does after each task
        while not stop.is_set():
            conn = connections["default"]
            conn.close()
            conn.close_pool()
            closes[0] += 1
            time.sleep(0.02)  # a short task
        connections.close_all()

    def querier(i: int) -> None:  # a watcher's or pod scheduler's thread
        try:
            while not stop.is_set():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT 1")
                queries[i] += 1
                connection.close()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=closer), *[threading.Thread(target=querier, args=(i,)) for i in range(3)]]
    for thread in threads:
        thread.start()
    # Until the pool was closed under the queriers many times (not a fixed time: opening pools
    # is slow on a busy machine, and a run of three seconds there saw only 18 queries).
    deadline = time.monotonic() + 120
    while not errors and (closes[0] < 50 or min(queries) < 20) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    assert errors == [], errors[:1]
    assert closes[0] >= 50 and min(queries) >= 20, (closes[0], queries)
