"""API error shape: DRF's field errors as they are; unexpected database faults become 503, never a bare 500 page."""

from __future__ import annotations

import logging

from django.db import DatabaseError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)


def exception_handler(exc, context):
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    if isinstance(exc, DatabaseError):
        logger.exception("database error in %s", context.get("view"))
        return Response({"detail": "The database is unavailable or busy; retry shortly."}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    return None
