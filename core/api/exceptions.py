"""The REST API's one exception handler: every 4xx and 5xx answer has the one error body.

``{"code", "detail", "errors": {field: [messages]}}`` (``core.errors``) whichever app or DRF
layer refused: a service's ``Refused``, a serializer's or filter's ``ValidationError`` (its
field paths flattened with dots, list items as ``[i]``), authentication, permission,
throttling, a stale ``If-Match``. Database faults are 503 (retry), a constraint race
(``IntegrityError``) is 409, a value the database cannot represent (``DataError``: a number
or a time zone offset out of its range, from a filter the validators let through) and input
too deeply nested to parse are 400 — never a 500 page.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db import DatabaseError, DataError, IntegrityError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..errors import NON_FIELD, Refused, error_body

logger = logging.getLogger(__name__)
OUT_OF_RANGE = "A value in the request is out of the range the database can store (a number or a time zone offset)."


def exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response | None:
    if isinstance(exc, Refused):
        return Response(exc.body(), status=exc.status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = drf_error_body(exc, response.data)
        return response
    if isinstance(exc, IntegrityError):
        logger.info("integrity race in %s: %s", context.get("view"), exc)
        return Response(error_body("conflict", "A concurrent change got there first; reload and try again."),
                        status=status.HTTP_409_CONFLICT)
    if isinstance(exc, DataError):
        logger.warning("value out of the database's range in %s: %s", context.get("view"), exc)
        return Response(error_body("out_of_range", OUT_OF_RANGE), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DatabaseError):
        logger.exception("database error in %s", context.get("view"))
        return Response(error_body("unavailable", "The database is unavailable or busy; retry shortly."),
                        status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, RecursionError):
        return Response(error_body("too_deep", "The request body is nested too deeply."), status=status.HTTP_400_BAD_REQUEST)
    return None


def drf_error_body(exc: Exception, data: Any) -> dict[str, Any]:
    """DRF's ``detail`` structures in the one body."""
    if isinstance(exc, exceptions.ValidationError):
        errors = flatten(data)
        first_field, first = next(iter(errors.items()), (NON_FIELD, ["Invalid input."]))
        detail = first[0] if first_field == NON_FIELD else f"{first_field}: {first[0]}"
        return error_body("invalid", detail, errors)
    code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
    detail = data.get("detail", "") if isinstance(data, Mapping) else str(data)
    return error_body(code if isinstance(code, str) else "error", str(detail))


def flatten(data: Any, prefix: str = "") -> dict[str, list[str]]:
    """``{"hard": {"cpu": ["bad"]}, "items": [{}, {"name": ["x"]}]}`` →
    ``{"hard.cpu": ["bad"], "items[1].name": ["x"]}``; a bare list is non-field errors."""
    out: dict[str, list[str]] = {}
    if isinstance(data, Mapping):
        for key, value in data.items():
            name = NON_FIELD if key in (NON_FIELD, "detail") and not prefix else (f"{prefix}.{key}" if prefix else str(key))
            _merge(out, flatten(value, name))
    elif isinstance(data, list) and data and all(isinstance(v, (str, exceptions.ErrorDetail)) for v in data):
        out[prefix or NON_FIELD] = [str(v) for v in data]
    elif isinstance(data, list):
        for index, value in enumerate(data):
            if value:
                _merge(out, flatten(value, f"{prefix}[{index}]" if prefix else f"[{index}]"))
    elif data not in (None, ""):
        out[prefix or NON_FIELD] = [str(data)]
    return out


def _merge(into: dict[str, list[str]], more: dict[str, list[str]]) -> None:
    for key, messages in more.items():
        into.setdefault(key, []).extend(messages)
