"""Meridian's PostgreSQL database backend (``ENGINE = "core.postgresql"``): Django's own, with a
circuit breaker around its connection pool (see ``base``)."""
