"""Quotas Celery tasks."""
