"""Scheduling Celery tasks (one module per part; imported here so Celery's autodiscovery finds them)."""

from .cpu.tasks import cpu_deliver, cpu_reconcile_all, cpu_reconcile_cluster  # noqa: F401
