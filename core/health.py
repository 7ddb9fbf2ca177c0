"""Liveness and readiness probes (JSON, no login)."""

from __future__ import annotations

import time

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .worker_signals import live_workers
from .redis import get_redis


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up and serving."""
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready when the database and Redis answer and at least one worker sent a heartbeat.

    ``?checks=database`` (comma-separated names) runs only those: a web pod's readiness probe
    asks for the database alone — a web process serves without workers, and through a Redis
    outage, and must not drop out of its Service for either. Anyone (a load balancer) learns
    whether each check passed; only signed-in staff see the details (worker names, the
    database vendor, error texts), which help an attacker too.
    """
    wanted = [name for name in request.GET.get("checks", "").split(",") if name] or list(PROBES)
    unknown = sorted(set(wanted) - set(PROBES))
    if unknown:
        return JsonResponse({"code": "invalid", "detail": f"Unknown check {', '.join(unknown)}.",
                             "errors": {"checks": [f"Choose among {', '.join(PROBES)}."]}}, status=400)
    checks = {name: _check(PROBES[name]) for name in wanted}
    ready = all(check["ok"] for check in checks.values())
    user = getattr(request, "user", None)
    if not (user is not None and user.is_authenticated and user.is_staff):
        checks = {name: {"ok": check["ok"]} for name, check in checks.items()}
    return JsonResponse({"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503)


def _check(probe) -> dict:
    started = time.perf_counter()
    try:
        detail = probe()
        ok = True
    except Exception as exc:  # a probe reports any failure; it must never raise
        detail, ok = f"{type(exc).__name__}: {exc}", False
    return {"ok": ok, "detail": detail, "ms": round((time.perf_counter() - started) * 1000, 1)}


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return connection.vendor


def _redis() -> str:
    get_redis().ping()
    return "pong"


def _workers() -> list[str]:
    workers = live_workers()
    if not workers:
        raise RuntimeError("no Celery worker heartbeat in the last 30 s")
    return workers


#: The checks ``/readyz`` runs, by name.
PROBES = {"database": _database, "redis": _redis, "workers": _workers}
