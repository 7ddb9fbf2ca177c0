"""The mutating admission webhook ``POST /api/admission/v1/scheduling/mutate``: scheduling templates
rendered into a pod's ``spec.affinity`` at creation; and the configuration a member cluster's
API server needs to call it.

The call
--------
A plain Django view (``mutate``) and, in production, the ASGI fast path in front of it
(``scheduling.fastpath``) both answer with ``decide_many``. The caller is a member cluster's
API server holding that cluster's webhook token (``Authorization: Bearer <token>``; none or
a wrong one: 401). The body is an ``admission.k8s.io/v1`` AdmissionReview; one that is not
(bad JSON, no ``request``/``uid``) gets 400. Every decision is HTTP 200 with
``response.uid`` = ``request.uid``:

* CREATE of a ``v1`` Pod: the templates the pod gets (its annotations
  ``scb.sched.cloud.ctrip.com/nsc`` / ``nsc-args`` / ``psc`` / ``psc-args``, else the
  matching SchedulerConfigBindings; ``scheduling.schedconfig.resolve``) are rendered and
  merged into ``spec.affinity``; the answer is a JSONPatch (``kube.admission.patch``), or a
  plain allow when nothing applies. A missing template or argument, invalid arguments, a
  rendered affinity the API server would refuse, or a policy annotation
  (``sched.cloud.ctrip.com/policy``) naming no policy: a denial naming it (code 400, reason
  ``Invalid``). Never a partial patch, never a broken pod;
* anything else (other kinds, other operations, subresources): allowed unchanged;
* any fault while deciding (database down, a bug): a reasoned denial (code 500,
  ``InternalError``), never an HTTP 500 the API server would misread.

Templates, bindings and policy names are cached per process (``SnapshotCache``) keyed by
``SchedulingConfigVersion``, which every change bumps in its transaction. The version is read
from Redis (``VERSION_KEY``, set when a change commits); with Redis down, or the key absent,
it is read from the database, so a change is never missed because Redis is down. (Should
Redis be reachable by the webhook but not by the process committing a change, the key
expires after ``VERSION_TTL`` seconds: that is the longest a cache can lag.)

Configuring a member cluster
----------------------------
``CONFIGURATION`` describes the ``MutatingWebhookConfiguration`` ``meridian-scheduling``: one
webhook for pod CREATE, ``failurePolicy: Fail`` (a pod must never start without the affinity
its binding promises), ``sideEffects: None`` (a dry run is safe), ``reinvocationPolicy: Never``.
``fleet.webhooks`` renders and applies it under the rules both of Meridian's webhooks share
(public URL, CA bundle, ``kube-system`` and Meridian's namespace never gated, and the one
AdmissionConfiguration + kubeconfig pair that makes the API server send the webhook token):
read its docstring. ``GET /api/v1/scheduling/webhook-configuration/<cluster>/`` shows it all;
``POST`` applies it through the cluster's connector; the page "Webhook configuration" shows
the same.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.metrics import count_webhook_answers
from fleet.machine import WEBHOOK_UNAUTHORIZED, bearer, not_a_review, too_large
from fleet.tokens import token_cluster
from fleet.webhooks import Hook, WebhookConfig
from kube.admission import AdmissionRequest, AdmissionReviewError, allow, deny, parse_admission_review, patch

from .admission import VERSION_KEY, VERSION_TTL, cache, decide_pod  # noqa: F401 (for tests and tools)

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/api/admission/v1/scheduling/mutate"
CONFIGURATION_NAME = "meridian-scheduling"
MAX_REVIEW_BYTES = 3 * 1024 * 1024
POD_KIND = {"group": "", "version": "v1", "kind": "Pod"}

# ---------------------------------------------------------------------------- deciding


def _answer(review: AdmissionRequest, snapshot) -> dict[str, Any]:
    """The AdmissionReview answering one parsed request."""
    if (review.operation != "CREATE" or review.sub_resource or dict(review.kind) != POD_KIND
            or review.resource.get("resource") != "pods"):
        return allow(review)
    if not isinstance(review.object, Mapping):
        return deny(review, "request.object: a pod CREATE must carry the pod", code=400, reason="Invalid")
    outcome = decide_pod(review.object, namespace=review.namespace or None, snapshot=snapshot, full=False)
    if not outcome["allowed"]:
        return deny(review, outcome["denial"]["detail"], code=400, reason="Invalid")
    return patch(review, outcome["patch"], outcome["warnings"])


def _fault(review: AdmissionRequest) -> dict[str, Any]:
    return deny(review, "Meridian could not decide this request (scheduling templates unavailable); try again",
                code=500, reason="InternalError")


# ---------------------------------------------------------------------------- HTTP


def _parse(body: bytes) -> AdmissionRequest:
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        decoded = None
    return parse_admission_review(decoded if isinstance(decoded, dict) else body)


def decide_many(calls: Sequence[tuple[str, bytes]]) -> list[tuple[int, dict[str, Any]]]:
    """(HTTP status, JSON body) for each call (authorization header, body); one config snapshot
    and one token lookup per distinct header serve the whole batch."""
    answers: list[tuple[int, dict[str, Any]]] = []
    callers: dict[str, bool | None] = {}
    snapshot: Any = None
    for authorization, body in calls:
        if authorization not in callers:
            try:
                callers[authorization] = token_cluster(bearer(authorization), "webhook") is not None
            except Exception:  # the database is down: decided below as a reasoned denial
                log.exception("scheduling webhook: token check failed")
                callers[authorization] = None
        known = callers[authorization]
        if known is False:
            answers.append(WEBHOOK_UNAUTHORIZED)
            continue
        if len(body) > MAX_REVIEW_BYTES:
            answers.append(too_large(MAX_REVIEW_BYTES))
            continue
        try:
            review = _parse(body)
        except AdmissionReviewError as exc:
            answers.append(not_a_review(exc))
            continue
        try:
            if known is None:
                raise RuntimeError("token check failed")
            if snapshot is None:
                snapshot = cache.current()
            answers.append((200, _answer(review, snapshot)))
        except Exception:
            log.exception("scheduling webhook could not decide %s", review.uid)
            answers.append((200, _fault(review)))
    return answers


def batch_failed(bodies: Sequence[bytes]) -> list[tuple[int, dict[str, Any]]]:
    """The answers when a whole batch failed (the database went away mid-batch): each call a
    reasoned denial, or 400 for a body that is not an AdmissionReview."""
    answers: list[tuple[int, dict[str, Any]]] = []
    for body in bodies:
        try:
            answers.append((200, _fault(_parse(body))))
        except AdmissionReviewError as exc:
            answers.append(not_a_review(exc))
    return answers


def decide(authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
    return decide_many([(authorization, body)])[0]


@csrf_exempt
@login_not_required
@require_POST
def mutate(request: HttpRequest) -> HttpResponse:
    """The Django route; ``scheduling.fastpath`` answers the same calls first under ASGI."""
    status, body = decide(request.headers.get("Authorization", ""), request.body)
    count_webhook_answers("scheduling-webhook", [(status, body)])
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="meridian-webhook"'
    return response


# ---------------------------------------------------------------------------- configuration

CONFIGURATION = WebhookConfig(
    name=CONFIGURATION_NAME, kind="mutating", path=WEBHOOK_PATH, audit_verb="apply_scheduling_webhook",
    hooks=(Hook("pods.scheduling.meridian.io", ({"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},),
                operations=("CREATE",), side_effects="None", timeout_seconds=5, failure_policy="Fail"),),
)
