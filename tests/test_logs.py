"""Structured logs: a line carries the request it belongs to, also from the task the request
queued (the id travels in the task message's headers to a real worker)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from core.logs import JsonFormatter, OutageInOneLine
from core.models import Job
from fleet.models import Cluster
from fleet.tasks import cluster_shard_key
from tests.workers import shard_worker, wait_for_job


class Lines(logging.Handler):
    """The JSON lines the root logger's records format to."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


    def attach(self) -> None:
        """On the root logger at DEBUG (again after a test worker started: it sets up logging anew)."""
        root = logging.getLogger()
        if self not in root.handlers:
            root.addHandler(self)
        root.setLevel(logging.DEBUG)


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler, root = Lines(), logging.getLogger()
    level = root.level
    handler.attach()
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def test_a_line_is_one_json_object_with_the_extras_and_the_exception(lines):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("meridian.test").exception("sync of %s failed", "bj-1", extra={"cluster": "bj-1"})
    line = lines.lines[-1]
    assert line["message"] == "sync of bj-1 failed" and line["level"] == "ERROR" and line["logger"] == "meridian.test"
    assert line["cluster"] == "bj-1" and "ValueError: boom" in line["exception"] and line["time"].endswith("Z")
    assert "request_id" not in line and "task" not in line


def test_the_websocket_receivers_retries_during_a_redis_outage_are_one_line_each(lines):
    """channels_redis' pub/sub receiver logs every retry (one a second) with a traceback."""
    import redis

    logger = logging.getLogger("channels_redis.pubsub")
    assert any(isinstance(f, OutageInOneLine) for f in logger.filters), "configured in settings.LOGGING"
    try:
        raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    except redis.exceptions.ConnectionError:
        logger.exception("Unexpected exception in receive task")
    try:
        raise KeyError("a real bug")
    except KeyError:
        logger.exception("Unexpected exception in receive task")
    outage, bug = [line for line in lines.lines if line["logger"] == "channels_redis.pubsub"]
    assert outage["level"] == "WARNING" and "exception" not in outage
    assert outage["message"] == ("Unexpected exception in receive task: Redis unreachable "
                                 "(Error 111 connecting to 127.0.0.1:6379. Connection refused.)")
    assert bug["level"] == "ERROR" and "KeyError: 'a real bug'" in bug["exception"], "anything else keeps its traceback"


@pytest.mark.django_db
def test_a_request_line_carries_the_id_the_response_echoes(client, viewer, lines):
    client.force_login(viewer)
    response = client.get("/fleet/clusters/no-such-cluster/")
    assert response.status_code == 404
    logged = [line for line in lines.lines if line["logger"] == "django.request"]
    assert logged and logged[-1]["request_id"] == response["X-Request-ID"]
    assert logged[-1]["path"] == "/fleet/clusters/no-such-cluster/" and logged[-1]["status_code"] == 404


@pytest.mark.django_db(transaction=True)
def test_a_task_queued_by_a_request_logs_with_the_requests_id(operator_api, lines, purge_shard_queues):
    Cluster.objects.create(name="bj-1", connector="simulated")
    with shard_worker(cluster_shard_key("bj-1")):
        lines.attach()
        response = operator_api.post("/api/v1/fleet/clusters/bj-1/sync/")
        assert response.status_code == 202, response.content
        job = wait_for_job(Job.objects.get(kind="fleet.sync_cluster"))
    assert job.status == Job.Status.SUCCEEDED, job.error
    in_task = [line for line in lines.lines if line.get("task_id") == job.task_id]
    assert in_task, "the worker logged while running the job"
    assert {line.get("request_id") for line in in_task} == {response["X-Request-ID"]}
    assert {line["task"] for line in in_task} == {"fleet.sync_cluster"}
    synced = [line for line in in_task if line["logger"] == "fleet.sync"]
    assert synced and synced[-1]["cluster"] == "bj-1" and synced[-1]["changes"] > 0
