"""Scheduling Celery tasks."""
