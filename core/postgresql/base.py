"""Django's PostgreSQL backend with a circuit breaker in front of the psycopg pool.

While the database is down, every request would otherwise wait the pool's whole timeout
(``MERIDIAN_DB_POOL_TIMEOUT``, 10 s) for a connection that cannot come, and answer 503 only then:
an API server calling the quota webhook gives up first, and request threads pile up. The breaker
opens on the first failure to get a connection; while it is open, requests fail at once with
the same ``OperationalError`` (answered 503 by the error handlers). At most once a second per
process one caller probes the server with a direct connection; when it connects, the breaker
closes and the pool is told to grow again (its own reconnect attempts back off to long sleeps).
A pool merely saturated by a burst trips the breaker too, and the next probe closes it again.
"""

from __future__ import annotations

import threading
import time

from django.db.backends.postgresql import base

PROBE_INTERVAL = 1.0  # seconds between probes while open, per process
PROBE_TIMEOUT = 2  # connect_timeout of a probe (seconds, libpq's unit)


class Breaker:
    """Open after a failure to get a connection; closed again by a successful probe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open = False
        self._probed_at = 0.0

    def trip(self) -> None:
        with self._lock:
            self.open = True
            self._probed_at = time.monotonic()

    def admit(self, probe) -> bool:
        """Whether a caller may go to the pool: closed, or this caller's probe just succeeded."""
        if not self.open:
            return True
        with self._lock:
            if not self.open:
                return True
            if time.monotonic() - self._probed_at < PROBE_INTERVAL:
                return False
            self._probed_at = time.monotonic()
        if not probe():
            return False
        with self._lock:
            self.open = False
        return True


BREAKER = Breaker()


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        pool = self.pool
        if pool is None:
            return super().get_new_connection(conn_params)
        if not BREAKER.admit(lambda: self._probe(conn_params)):
            raise self.Database.OperationalError("the database is unavailable (connections failing; probing again shortly)")
        try:
            return super().get_new_connection(conn_params)
        except self.Database.OperationalError:
            BREAKER.trip()
            raise

    def _probe(self, conn_params) -> bool:
        """One direct connection outside the pool; on success the pool is asked to grow now."""
        try:
            self.Database.connect(**{**conn_params, "connect_timeout": PROBE_TIMEOUT}).close()
        except self.Database.Error:
            return False
        self.pool.check()  # drops dead connections and starts growing without waiting for the backoff
        return True
