"""The validating admission webhook ``POST /api/admission/v1/quotas/validate``, and the
``ValidatingWebhookConfiguration`` that points a member cluster's API server at it.

A plain Django view, not DRF: the caller is an API server holding the cluster's webhook
token. Every decision, denials included, is HTTP 200 with ``response.uid`` = ``request.uid``;
only a body that is not an AdmissionReview gets 400. A fault while deciding is a denial
with the reason (the API server would otherwise apply its failure policy blindly).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.context import acting_as
from fleet.models import Cluster
from fleet.tokens import token_cluster
from kube.admission import AdmissionRequest, AdmissionReviewError, allow, deny, parse_admission_review

from .accounting import GROUP_LABEL
from .admission import HPA_RESOURCE, Decision, decide_batch

log = logging.getLogger(__name__)
MAX_REVIEW_BYTES = 3 * 1024 * 1024
WEBHOOK_PATH = "/api/admission/v1/quotas/validate"
CONFIGURATION_NAME = "meridian-quotas"


def _bearer(authorization: str) -> str:
    scheme, _, raw = authorization.partition(" ")
    return raw.strip() if scheme.lower() == "bearer" else ""


def decide(authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
    """HTTP status and JSON body for one webhook call."""
    return decide_many([(authorization, body)])[0]


def decide_many(calls: Sequence[tuple[str, bytes]]) -> list[tuple[int, dict[str, Any]]]:
    """Answers for many webhook calls (authorization header, body), admissions decided as one batch."""
    answers: list[tuple[int, dict[str, Any]] | None] = [None] * len(calls)
    callers: dict[str, Cluster | None] = {}
    batch: list[tuple[int, Cluster, AdmissionRequest]] = []
    for index, (authorization, body) in enumerate(calls):
        if authorization not in callers:
            callers[authorization] = _caller(authorization)
        cluster = callers[authorization]
        if cluster is None:
            answers[index] = 401, {"detail": "Send Authorization: Bearer <webhook token> of the calling cluster."}
        elif len(body) > MAX_REVIEW_BYTES:
            answers[index] = 413, {"detail": f"An AdmissionReview is at most {MAX_REVIEW_BYTES} bytes."}
        else:
            try:
                batch.append((index, cluster, _parse(body)))
            except AdmissionReviewError as exc:
                answers[index] = 400, {"detail": f"Not an AdmissionReview: {exc}"}
    for (index, _, review), decision in zip(batch, _decisions(batch), strict=True):
        answers[index] = 200, _review_answer(review, decision)
    return answers  # type: ignore[return-value]


def _caller(authorization: str) -> Cluster | None:
    """The calling cluster (one unsaved instance per token and batch: only its pk and name are read)."""
    caller = token_cluster(_bearer(authorization), "webhook")
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


def _decisions(batch: Sequence[tuple[int, Cluster, AdmissionRequest]]) -> list[Decision | None]:
    """One batch; should it fail, each request alone, so one fault only costs its own request."""
    if not batch:
        return []
    with acting_as("webhook:" + ",".join(sorted({c.name for _, c, _ in batch})), source="webhook"):
        try:
            return decide_batch([(cluster, review) for _, cluster, review in batch])
        except Exception:
            if len(batch) == 1:
                log.exception("quota admission failed for %s", batch[0][2].uid)
                return [None]
        return [_decisions([item])[0] for item in batch]


def _review_answer(review: AdmissionRequest, decision: Decision | None) -> dict[str, Any]:
    if decision is None:  # a fault is a reasoned denial, never a 500 the API server misreads
        return deny(review, "Meridian could not decide this request; try again", code=500, reason="InternalError")
    if decision.allowed:
        return allow(review, decision.warnings)
    return deny(review, decision.message, code=403, reason="Forbidden", warnings=decision.warnings)


@csrf_exempt
@login_not_required
@require_POST
def validate(request: HttpRequest) -> HttpResponse:
    """The Django route; ``quotas.fastpath`` answers the same calls first in production."""
    status, body = decide(request.headers.get("Authorization", ""), request.body)
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="meridian-webhook"'
    return response


WORKLOAD_RULES = [
    {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments", "statefulsets", "replicasets"]},
    {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]},
    {"apiGroups": ["argoproj.io"], "apiVersions": ["v1alpha1"], "resources": ["rollouts"]},
    {"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"], "resources": ["tfjobs"]},
]
SCALE_RULES = [
    {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale", "statefulsets/scale", "replicasets/scale"]},
    {"apiGroups": ["argoproj.io"], "apiVersions": ["v1alpha1"], "resources": ["rollouts/scale"]},
    {"apiGroups": ["autoscaling"], "apiVersions": ["v1", "v2"], "resources": [HPA_RESOURCE]},
]


def webhook_configuration(cluster: Cluster, *, base_url: str | None = None, ca_bundle: str = "") -> dict[str, Any]:
    """The ``admissionregistration.k8s.io/v1`` object that sends the cluster's workload writes here.

    Two webhooks: labelled workloads (an ``objectSelector`` keeps every other workload
    away from Meridian), and ``scale`` subresources and HPAs, which carry no labels of their
    own, so no selector can pick them; unknown ones are allowed at once. ``failurePolicy:
    Fail``: admitting unchecked would break the all-or-nothing promise. A dry run commits
    nothing, hence ``NoneOnDryRun``.
    """
    base = (base_url or getattr(settings, "MERIDIAN_PUBLIC_URL", "") or "https://meridian.example.com").rstrip("/")
    client: dict[str, Any] = {"url": f"{base}{WEBHOOK_PATH}"}
    if ca_bundle:
        client["caBundle"] = ca_bundle

    def webhook(name: str, rules: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun", "failurePolicy": "Fail",
                "timeoutSeconds": 10, "matchPolicy": "Equivalent", "clientConfig": client,
                "rules": [dict(rule, operations=["CREATE", "UPDATE", "DELETE"], scope="Namespaced") for rule in rules],
                **extra}

    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION_NAME, "labels": {"app.kubernetes.io/managed-by": "meridian"},
                     "annotations": {"meridian.io/cluster": cluster.name}},
        "webhooks": [
            webhook("workloads.quotas.meridian.io", WORKLOAD_RULES,
                    objectSelector={"matchExpressions": [{"key": GROUP_LABEL, "operator": "Exists"}]}),
            webhook("scale.quotas.meridian.io", SCALE_RULES),
        ],
    }


def apply_configuration(cluster: Cluster, **kwargs: Any) -> dict[str, Any]:
    """Write the configuration to the cluster through its connector (server-side apply)."""
    from fleet.services import connector_for

    with connector_for(cluster) as connector:
        return connector.apply(webhook_configuration(cluster, **kwargs))
