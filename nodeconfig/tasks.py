"""Node config Celery tasks."""
