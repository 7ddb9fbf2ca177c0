"""A small fleet with hand-picked labels, and helpers to run the reconciler like the worker does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db.models import Max

from core.models import Job
from fleet.models import Cluster, Node
from nodeconfig.models import ConfigTarget, ConfigType
from nodeconfig.rollout import reconcile_targets

MODELS = ("A1", "A2", "A3", "A4")
#: The seed examples as upstream YAML: reclaim off everywhere, a grey release on node1/node2, HDD nodes.
SEED_EXAMPLES = (Path(__file__).resolve().parents[2] / "nodeconfig" / "examples" / "seed-targets.yaml").read_text()


def seed_examples(first: str, second: str) -> str:
    """The seed examples, their grey release naming ``first`` and ``second`` instead of node1/node2."""
    return SEED_EXAMPLES.replace("- node1", f"- {first}").replace("- node2", f"- {second}")


def make_nodes(cluster: Cluster, count: int) -> list[Node]:
    nodes = []
    for i in range(count):
        labels = {"kubernetes.io/hostname": f"{cluster.name}-n{i:03d}", "machineModel": MODELS[i % 4],
                  "diskMode": "hdd" if i % 3 == 0 else "ssd", "pool": "online" if i % 2 else "offline"}
        nodes.append(Node(cluster=cluster, name=f"{cluster.name}-n{i:03d}", labels=labels, ready=True))
    return Node.objects.bulk_create(nodes)


@pytest.fixture(autouse=True)
def clean_agent_cache():
    """Redis outlives each test's rolled-back database: drop the ETags and token cache."""
    yield
    from core.redis import get_redis

    redis = get_redis()
    keys = list(redis.scan_iter("meridian:nodeconfig:*", count=1000))
    if keys:
        redis.delete(*keys)


@pytest.fixture
def fleet(db):
    bj = Cluster.objects.create(name="bj-1", connector="simulated", connector_config={"node_count": 12, "seed": 3})
    sh = Cluster.objects.create(name="sh-1", connector="simulated", connector_config={"node_count": 6, "seed": 4})
    make_nodes(bj, 12)
    make_nodes(sh, 6)
    return {"bj-1": bj, "sh-1": sh}


@pytest.fixture
def admin_qos(db) -> ConfigType:
    return ConfigType.objects.get(name="AdminQoSConfiguration")


def settle(target: ConfigTarget | int) -> None:
    """Run what the worker runs after a target change (the task body, synchronously)."""
    target = target if isinstance(target, ConfigTarget) else ConfigTarget.objects.get(pk=target)
    reconcile_targets(target.config_type, [target.pk])


@pytest.fixture
def deliver(django_capture_on_commit_callbacks):
    """``with deliver():`` — the work the block's changes ask for happens as in production.

    A change enqueues its jobs in its own transaction (``core.jobs.enqueue``); when the block
    ends, its on-commit callbacks run, so ``core.jobs`` sends the jobs' messages (``dispatch_many``), and
    Celery runs each sent task at once in this process (eager, inside this test's transaction)
    as that job (``core.taskbase.MeridianTask``): pending → running → succeeded. Anything the
    answer said *before* the block ended was said before any delivery ran. Every job created
    in the block must have succeeded: a failed or stuck job fails the test, nothing is skipped.
    """
    from config.celery import app

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        first = Job.objects.aggregate(n=Max("pk"))["n"] or 0
        eager = app.conf.task_always_eager
        app.conf.task_always_eager = True
        try:
            with django_capture_on_commit_callbacks(execute=True):
                yield
        finally:
            app.conf.task_always_eager = eager
        unfinished = [(j.pk, j.kind, j.status, j.error) for j in Job.objects.filter(pk__gt=first)
                      .exclude(status=Job.Status.SUCCEEDED)]
        assert not unfinished, f"jobs that did not succeed: {unfinished}"

    return block


def type_key(config_type: ConfigType | int) -> str:
    """The shard key of a config type's reconcile jobs (``nodeconfig.tasks.type_shard_key``)."""
    from nodeconfig.tasks import type_shard_key

    return type_shard_key(config_type if isinstance(config_type, int) else config_type.pk)
