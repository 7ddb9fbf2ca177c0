"""Django's PostgreSQL backend with a circuit breaker in front of the psycopg pool.

While the database is down, every request would otherwise wait the pool's whole timeout
(``MERIDIAN_DB_POOL_TIMEOUT``, 10 s) for a connection that cannot come, and answer 503 only
then: an API server calling the quota webhook gives up first, and request threads pile up.

- A caller waits for a pooled connection in slices of ``WAIT_SLICE``; a caller whose slice
  ran out asks whether the server is there at all: one direct connection (``probe``), at
  most once per ``PROBE_INTERVAL`` per process. A pool merely busy (the probe connects)
  keeps its callers waiting up to the pool's timeout; a server that is gone opens the
  breaker, and every waiter fails at its next slice. So the first requests after an outage
  begins fail within about a second too, not only the later ones.
- While the breaker is open, callers fail at once with an ``OperationalError`` (503 by the
  error handlers). At most once per ``PROBE_INTERVAL`` one caller probes; when it connects,
  the breaker closes and the pool is told to drop dead connections and grow again (its own
  reconnect attempts back off to long sleeps).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

PROBE_INTERVAL = 1.0  # seconds between probes, per process
PROBE_TIMEOUT = 2  # connect_timeout of a probe (seconds, libpq's unit and minimum)
WAIT_SLICE = 0.5  # seconds a caller waits for a pooled connection before asking whether the server is there
REOPEN_SECONDS = 5.0  # a pool closed under a caller's feet (see get_new_connection): the next one, for this long


class Breaker:
    """Open once the server was found gone; closed again by a successful probe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open = False
        self._probed_at = -PROBE_INTERVAL

    def trip(self) -> None:
        with self._lock:
            self.open = True
            self._probed_at = time.monotonic()

    def _take_probe(self) -> bool:
        """Whether this caller probes now (none did within PROBE_INTERVAL)."""
        with self._lock:
            if time.monotonic() - self._probed_at < PROBE_INTERVAL:
                return False
            self._probed_at = time.monotonic()
            return True

    def admit(self, probe: Callable[[], bool]) -> bool:
        """Whether a caller may go to the pool: closed, or this caller's probe just succeeded."""
        if not self.open:
            return True
        if not self._take_probe() or not probe():
            return False
        with self._lock:
            self.open = False
        return True

    def suspect(self, probe: Callable[[], bool]) -> bool:
        """A caller waited a slice for a connection: False when the server is gone (the breaker
        opens), True when it is there or another caller is finding out right now."""
        if self.open:
            return False
        if not self._take_probe():
            return True
        if probe():
            return True
        self.trip()
        return False


BREAKER = Breaker()


def probe_server(conninfo: str, kwargs: dict) -> bool:
    """One direct connection outside the pool: is the server there?"""
    import psycopg

    try:
        psycopg.connect(conninfo, **{**kwargs, "connect_timeout": PROBE_TIMEOUT}).close()
    except psycopg.Error:
        return False
    return True


class BreakerPool(ConnectionPool):
    """psycopg's pool, whose waits the breaker bounds (see the module docstring)."""

    def getconn(self, timeout: float | None = None):
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            if BREAKER.open:
                raise PoolTimeout("the database is unavailable (connections failing; probing again shortly)")
            remaining = deadline - time.monotonic()
            try:
                return super().getconn(timeout=max(min(WAIT_SLICE, remaining), 0.001))
            except PoolTimeout:
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"couldn't get a connection after {timeout:.2f} sec") from None
                if not BREAKER.suspect(lambda: probe_server(self.conninfo, self.kwargs)):
                    raise PoolTimeout("the database is unavailable (a direct connection failed too)") from None


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        """Django's own pool property, building a ``BreakerPool``."""
        pool_options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == base.NO_DB_ALIAS or not pool_options:
            return None
        if self.alias not in self._connection_pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            pool = BreakerPool(
                kwargs={**self.get_connection_params(), "autocommit": True}, open=False,
                configure=self._configure_connection,
                check=ConnectionPool.check_connection if self.settings_dict["CONN_HEALTH_CHECKS"] else None,
                **({} if pool_options is True else pool_options))
            self._connection_pools.setdefault(self.alias, pool)
        return self._connection_pools[self.alias]

    def get_new_connection(self, conn_params):
        deadline = time.monotonic() + REOPEN_SECONDS
        while True:
            try:
                return self._pooled_connection(conn_params)
            except PoolClosed:
                # Celery's Django fixup closes a prefork worker's pool after every task
                # (``close_pool``, from the task's thread); a thread of ours that took the old
                # pool a moment before (a cluster's watcher, its pod scheduler) finds it closed,
                # or closed before it was opened. ``self.pool`` makes the next one. A time
                # bound, not a count: on a slow machine opening a pool took longer than the
                # closer's period, and ten tries all met a closed pool.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _pooled_connection(self, conn_params):
        if self.pool is None:
            return super().get_new_connection(conn_params)
        if not BREAKER.admit(lambda: self._probe(conn_params)):
            raise self.Database.OperationalError("the database is unavailable (connections failing; probing again shortly)")
        return super().get_new_connection(conn_params)

    def _probe(self, conn_params) -> bool:
        """The server is back: the pool drops dead connections and grows without waiting for its backoff."""
        if not probe_server("", conn_params):
            return False
        self.pool.check()
        return True
