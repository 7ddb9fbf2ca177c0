"""Fleet Celery tasks."""
