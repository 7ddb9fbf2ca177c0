"""Federation Celery tasks."""
