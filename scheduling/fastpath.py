"""The scheduling webhook's ASGI fast path (``core.fastpath.BatchingWebhook``):
``POST /api/admission/v1/scheduling/mutate`` decided by ``webhook.decide_many``, which checks
the config version once per batch (Redis, or the database when Redis is down) and decides from
the in-process cache. A free pool thread starts the next batch at once: decisions take no row
locks, so batches never wait for each other.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.fastpath import Answer, BatchingWebhook

from .webhook import MAX_REVIEW_BYTES, WEBHOOK_PATH, batch_failed, decide_many


class SchedulingWebhookFastPath(BatchingWebhook):
    path = WEBHOOK_PATH
    max_body = MAX_REVIEW_BYTES
    thread_name = "scheduling-webhook"

    def decide(self, calls: list[tuple[str, bytes]]) -> list[Answer]:
        return decide_many(calls)

    def failed(self, bodies: Sequence[bytes], error: BaseException | None) -> list[Answer]:
        return batch_failed(bodies)
