"""Prometheus metrics at ``/metrics``, in the text exposition format.

Two kinds of figures:

- **counted in this process** as things happen: request latency by route (the URL pattern,
  never the path, so the series stay few), including the webhooks' ASGI fast paths, and
  webhook decisions by result (``allowed``, ``denied``, or the HTTP status of an answer that
  is no decision: 400 malformed, 401, 503 …). A deployment with several web processes
  scrapes each (they are labelled apart by the scrape target);
- **read at scrape time** from the shared state, so every process answers the same: queue
  depth per Celery queue and live workers (Redis), how long the oldest unfinished job of
  each kind has waited (the reconcile lag), and what apps register with ``register``
  (node-config rollout progress per target).

Scraping needs an API token (or a session) of a user who may view jobs: the figures name
clusters, targets and queues. A source that is down (Redis, the database) leaves its
families out and sets ``meridian_metrics_source_up{source}`` to 0, instead of failing the scrape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from django.db.models import Count, Min
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from rest_framework.renderers import BaseRenderer
from rest_framework.views import APIView

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=False)

REQUEST_SECONDS = Histogram(
    "meridian_http_request_duration_seconds", "Time to answer an HTTP request, by route (URL pattern), method and status.",
    ["route", "method", "status"], registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
WEBHOOK_DECISIONS = Counter(
    "meridian_webhook_decisions", "Admission webhook answers, by webhook and result (allowed, denied, or the HTTP status).",
    ["webhook", "result"], registry=REGISTRY)

Collect = Callable[[], Iterable[Metric]]
_sources: dict[str, Collect] = {}


def register(source: str, collect: Collect) -> None:
    """Add figures read at scrape time (an app's ``ready``); ``collect`` yields metric families."""
    _sources[source] = collect


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    REQUEST_SECONDS.labels(route or "unmatched", method, str(status)).observe(seconds)


def count_webhook_answers(webhook: str, answers: Sequence[tuple[int, Mapping[str, Any]]]) -> None:
    """One count per answer: ``allowed``/``denied`` for an AdmissionReview answered, else its status."""
    for status, body in answers:
        if status == 200:
            response = body.get("response") if isinstance(body, Mapping) else None
            result = "allowed" if isinstance(response, Mapping) and response.get("allowed") else "denied"
        else:
            result = str(status)
        WEBHOOK_DECISIONS.labels(webhook, result).inc()


class MetricsMiddleware:
    """Times every request Django answers, labelled by the route that matched."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        observe_request(route_label(match.route) if match is not None else "", request.method, response.status_code,
                        time.perf_counter() - started)
        return response


def route_label(route: str) -> str:
    """``/api/v1/fleet/clusters/<name>/`` for a path pattern or a router's regex alike: each
    named group (nested parentheses and escapes included) becomes ``<name>``, anchors go."""
    out: list[str] = []
    i = 0
    while i < len(route):
        if route.startswith("(?P<", i):
            end_name = route.index(">", i)
            out.append(f"<{route[i + 4:end_name]}>")
            depth, i = 1, end_name + 1
            while i < len(route) and depth:
                if route[i] == "\\":
                    i += 1
                elif route[i] == "(":
                    depth += 1
                elif route[i] == ")":
                    depth -= 1
                i += 1
            continue
        if route[i] == "\\" and i + 1 < len(route):
            out.append(route[i + 1])
            i += 2
            continue
        if route[i] not in "^$":
            out.append(route[i])
        i += 1
    return "/" + "".join(out)


# ---------------------------------------------------------------------------- read at scrape time


def _queues() -> Iterator[Metric]:
    from .redis import get_redis
    from .sharding import all_shard_queues
    from .worker_signals import live_workers

    redis = get_redis()
    depth = GaugeMetricFamily("meridian_queue_depth", "Task messages waiting in each Celery queue.", labels=["queue"])
    queues = ["default", *all_shard_queues()]
    with redis.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.llen(queue)
        for queue, length in zip(queues, pipe.execute(), strict=True):
            depth.add_metric([queue], float(length))
    yield depth
    workers = live_workers()
    alive = GaugeMetricFamily("meridian_worker_up", "Workers whose heartbeat is current (1 each).", labels=["worker"])
    for worker in workers:
        alive.add_metric([worker], 1.0)
    yield alive
    yield GaugeMetricFamily("meridian_workers", "Workers whose heartbeat is current.", value=float(len(workers)))


def _jobs() -> Iterator[Metric]:
    from .models import Job

    lag = GaugeMetricFamily("meridian_job_oldest_unfinished_seconds",
                            "How long the oldest pending, waiting or running job of each kind has waited (the reconcile lag).", labels=["kind"])
    unfinished = GaugeMetricFamily("meridian_jobs_unfinished", "Pending, waiting or running jobs, by kind and status.", labels=["kind", "status"])
    now = timezone.now()
    rows = Job.objects.filter(status__in=Job.UNFINISHED).values("kind", "status").annotate(
        oldest=Min("created"), n=Count("pk")).order_by()
    oldest: dict[str, Any] = {}
    for row in rows:
        unfinished.add_metric([row["kind"], row["status"]], float(row["n"]))
        oldest[row["kind"]] = min(oldest.get(row["kind"], row["oldest"]), row["oldest"])
    for kind, created in sorted(oldest.items()):
        lag.add_metric([kind], max(0.0, (now - created).total_seconds()))
    yield lag
    yield unfinished


register("redis", _queues)
register("database", _jobs)


class _ScrapeTime:
    """The registered sources, each on its own: one that fails is reported down, not raised."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("meridian_metrics_source_up", "Whether a source of scrape-time figures answered.", labels=["source"])
        for source, collect in sorted(_sources.items()):
            try:
                families = list(collect())
            except Exception:
                log.warning("metrics source %s failed", source, exc_info=True)
                up.add_metric([source], 0.0)
                continue
            up.add_metric([source], 1.0)
            yield from families
        yield up


REGISTRY.register(_ScrapeTime())


class _Exposition(BaseRenderer):
    media_type = "*/*"
    format = "prometheus"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return data if isinstance(data, bytes) else str(data).encode()


class MetricsView(APIView):
    """``GET /metrics``: for an API token or session of a user who may view jobs."""

    required_permissions = {"GET": ("core.view_job",)}
    renderer_classes = [_Exposition]
    schema = None  # not part of the REST API's OpenAPI document

    def get(self, request: Any) -> HttpResponse:
        """The format the scraper asks for (``Accept``): Prometheus's text format 0.0.4 by default."""
        encode, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
        return HttpResponse(encode(REGISTRY), content_type=content_type)
