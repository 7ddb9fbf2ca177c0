"""The validating admission webhook ``POST /api/admission/v1/quotas/validate``, and the
``ValidatingWebhookConfiguration`` that points a member cluster's API server at it.

A plain Django view, not DRF: the caller is an API server holding the cluster's webhook
token. Every decision, denials included, is HTTP 200 with ``response.uid`` = ``request.uid``;
only a body that is not an AdmissionReview gets 400. A fault while deciding is a denial
with the reason (the API server would otherwise apply its failure policy blindly), and the
reason is the true one: a database fault says the database is unavailable, any other fault
says Meridian failed, never blaming the database for it. Redis is not needed to decide: the
token cache falls back to the database (``fleet.tokens.token_cluster``) and admission
itself only uses the database.

Connecting a member cluster: ``CONFIGURATION`` describes the ``ValidatingWebhookConfiguration``
``meridian-quotas`` (its two webhooks, below); ``fleet.webhooks`` renders and applies it under
the rules both of Meridian's webhooks share (public URL, CA bundle, the namespaces never
gated, and the one AdmissionConfiguration + kubeconfig pair that makes the API server send
the webhook token): read its docstring. ``GET /api/v1/quotas/webhook-configuration/{cluster}/``
shows it all before anything is applied; ``POST`` applies it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import orjson
from django.contrib.auth.decorators import login_not_required
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.context import acting_as
from core.metrics import count_webhook_answers
from fleet.machine import WEBHOOK_UNAUTHORIZED, bearer, not_a_review, refusal, too_large
from fleet.models import Cluster
from fleet.tokens import token_cluster
from fleet.webhooks import Hook, WebhookConfig
from kube.admission import AdmissionRequest, AdmissionReviewError, allow, deny, parse_admission_review

from .accounting import GROUP_LABEL
from .admission import HPA_RESOURCE, Decision, decide_batch

log = logging.getLogger(__name__)
MAX_REVIEW_BYTES = 3 * 1024 * 1024
WEBHOOK_PATH = "/api/admission/v1/quotas/validate"
CONFIGURATION_NAME = "meridian-quotas"
#: Answers when the caller cannot even be identified: the API server retries or applies its failure policy.
DATABASE_DOWN = refusal(503, "unavailable", "The database is unavailable, so the webhook token cannot be checked; "
                                            "the API server will retry or apply its failure policy.")
INTERNAL_ERROR = refusal(500, "internal", "Meridian failed while checking this call (an internal error, logged on the "
                                          "Meridian side); the API server will retry or apply its failure policy.")


def decide(authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """HTTP status and JSON body for one webhook call."""
    return decide_many([(authorization, body)])[0]


def decide_many(calls: Sequence[tuple[str, bytes]]) -> list[tuple[int, dict[str, Any]]]:
    """Answers for many webhook calls (authorization header, body), admissions decided as one batch."""
    answers: list[tuple[int, dict[str, Any]] | None] = [None] * len(calls)
    callers: dict[str, Cluster | None] = {}
    batch: list[tuple[int, Cluster, AdmissionRequest]] = []
    failed: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, (authorization, body) in enumerate(calls):
        if authorization not in callers and authorization not in failed:
            try:
                callers[authorization] = _caller(authorization)
            except DatabaseError:
                log.warning("webhook token check failed: the database is unavailable", exc_info=True)
                failed[authorization] = DATABASE_DOWN
            except Exception:
                log.exception("webhook token check failed")
                failed[authorization] = INTERNAL_ERROR
        cluster = callers.get(authorization)
        if authorization in failed:
            answers[index] = failed[authorization]
        elif cluster is None:
            answers[index] = WEBHOOK_UNAUTHORIZED
        elif len(body) > MAX_REVIEW_BYTES:
            answers[index] = too_large(MAX_REVIEW_BYTES)
        else:
            try:
                batch.append((index, cluster, _parse(body)))
            except AdmissionReviewError as exc:
                answers[index] = not_a_review(exc)
    for (index, _, review), decision in zip(batch, _decisions(batch), strict=True):
        answers[index] = 200, _review_answer(review, decision)
    return answers  # type: ignore[return-value]


def _caller(authorization: str) -> Cluster | None:
    """The calling cluster (one unsaved instance per token and batch: only its pk and name are read)."""
    caller = token_cluster(bearer(authorization), "webhook")
    return None if caller is None else Cluster(pk=caller[0], name=caller[1])


def _parse(body: bytes) -> AdmissionRequest:
    """``parse_admission_review`` with orjson's decoder, ~15× faster than the standard one.

    orjson refuses a few bodies the standard decoder takes (integers beyond 64 bits); those,
    every malformed body and every JSON value that is not an object go through the standard
    path, so what is accepted and every 400 message stay exactly as they were.
    """
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        decoded = None
    return parse_admission_review(decoded if isinstance(decoded, dict) else body)


class Fault:
    """Why a request could not be decided: the database, or anything else (Meridian's own failure)."""

    def __init__(self, exc: BaseException) -> None:
        self.database = isinstance(exc, DatabaseError)

    def answer(self, review: AdmissionRequest) -> dict[str, Any]:
        if self.database:
            return deny(review, "Meridian could not decide this request: its database is unavailable or busy; "
                                "try again shortly", code=503, reason="ServiceUnavailable")
        return deny(review, "Meridian could not decide this request because of an internal error (logged on the "
                            "Meridian side); try again", code=500, reason="InternalError")


def _decisions(batch: Sequence[tuple[int, Cluster, AdmissionRequest]]) -> list[Decision | Fault]:
    """One batch; should it fail, each request alone, so one fault only costs its own request."""
    if not batch:
        return []
    with acting_as("webhook:" + ",".join(sorted({c.name for _, c, _ in batch})), source="webhook"):
        try:
            return list(decide_batch([(cluster, review) for _, cluster, review in batch]))
        except Exception as exc:
            if len(batch) == 1:
                if isinstance(exc, DatabaseError):
                    log.warning("quota admission of %s failed: the database is unavailable", batch[0][2].uid, exc_info=True)
                else:
                    log.exception("quota admission failed for %s", batch[0][2].uid)
                return [Fault(exc)]
        return [_decisions([item])[0] for item in batch]


def _review_answer(review: AdmissionRequest, decision: Decision | Fault) -> dict[str, Any]:
    if isinstance(decision, Fault):  # a fault is a reasoned denial, never a 500 the API server misreads
        return decision.answer(review)
    if decision.allowed:
        return allow(review, decision.warnings)
    return deny(review, decision.message, code=403, reason="Forbidden", warnings=decision.warnings)


@csrf_exempt
@login_not_required
@require_POST
def validate(request: HttpRequest) -> HttpResponse:
    """The Django route; ``quotas.fastpath`` answers the same calls first in production."""
    try:
        status, body = decide(request.headers.get("Authorization", ""), request.body)
    except DatabaseError:
        log.warning("quota webhook call failed: the database is unavailable", exc_info=True)
        status, body = DATABASE_DOWN
    except Exception:
        log.exception("quota webhook call failed")
        status, body = INTERNAL_ERROR
    count_webhook_answers("quota-webhook", [(status, body)])
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="meridian-webhook"'
    return response


WORKLOAD_RULES = (
    {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments", "statefulsets", "replicasets"]},
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]},
    {"apiGroups": ["argoproj.io"], "apiVersions": ["v1alpha1"], "resources": ["rollouts"]},
    {"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "resources": ["tfjobs"]},
)
SCALE_RULES = (
    {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale", "statefulsets/scale", "replicasets/scale"]},
    {"apiGroups": ["argoproj.io"], "apiVersions": ["v1alpha1"], "resources": ["rollouts/scale"]},
    {"apiGroups": ["autoscaling"], "apiVersions": ["v1", "v2"], "resources": [HPA_RESOURCE]},
)
#: The quota webhook as member clusters get it. Two webhooks: labelled workloads (an
#: ``objectSelector`` keeps every other workload away from Meridian), and ``scale``
#: subresources and HPAs, which carry no labels of their own, so no object selector can pick
#: them (unknown ones are allowed at once). ``failurePolicy: Fail``: admitting unchecked would
#: break the all-or-nothing promise. A dry run commits nothing, hence ``NoneOnDryRun``.
CONFIGURATION = WebhookConfig(
    name=CONFIGURATION_NAME, kind="validating", path=WEBHOOK_PATH, audit_verb="apply_quota_webhook",
    hooks=(
        Hook("workloads.quotas.meridian.io", WORKLOAD_RULES, operations=("CREATE", "UPDATE", "DELETE"),
             side_effects="NoneOnDryRun", timeout_seconds=10, failure_policy="Fail",
             object_selector={"matchExpressions": [{"key": GROUP_LABEL, "operator": "Exists"}]}),
        Hook("scale.quotas.meridian.io", SCALE_RULES, operations=("CREATE", "UPDATE", "DELETE"),
             side_effects="NoneOnDryRun", timeout_seconds=10, failure_policy="Fail"),
    ),
)
