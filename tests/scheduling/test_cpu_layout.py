"""What the ``scheduling/cpu/`` layout must not change for the outside: Celery task names (queued
messages and the beat schedule carry them), the allocator's path in the contracts
(``scheduling.cpuset``), and the URL names and paths of the pages and the agent API."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse


def test_the_cpu_tasks_keep_their_registered_names():
    from celery import current_app

    from scheduling.cpu import store, tasks

    assert {tasks.cpu_deliver.name, tasks.cpu_reconcile_cluster.name, tasks.cpu_reconcile_all.name} == {
        "scheduling.cpu_deliver", "scheduling.cpu_reconcile_cluster", "scheduling.cpu_reconcile_all"}
    assert (store.DELIVER_TASK, store.RECONCILE_TASK) == ("scheduling.cpu_deliver", "scheduling.cpu_reconcile_cluster")
    assert {"scheduling.cpu_deliver", "scheduling.cpu_reconcile_cluster", "scheduling.cpu_reconcile_all"} <= set(current_app.tasks)
    assert settings.CELERY_BEAT_SCHEDULE["scheduling-cpu-reconcile"]["task"] == "scheduling.cpu_reconcile_all"


def test_the_contract_path_of_the_allocator_is_the_allocator():
    import scheduling.cpuset as contract
    from scheduling.cpu import cpuset

    assert contract.allocate is cpuset.allocate and contract.CPUTopology is cpuset.CPUTopology
    assert contract.AllocationError is cpuset.AllocationError and issubclass(contract.AllocationError, ValueError)
    assert sorted(contract.__all__) == sorted(cpuset.__all__)
    assert all(getattr(contract, name) is getattr(cpuset, name) for name in cpuset.__all__)


def test_urls_keep_their_names_and_paths():
    assert reverse("scheduling:cpu-fleet") == "/scheduling/cpu/"
    assert reverse("scheduling:cpu-what-if") == "/scheduling/cpu/what-if/"
    assert reverse("scheduling:cpu-node", args=[7]) == "/scheduling/cpu/nodes/7/"
    for name, tail in (("cpu-allocate", "allocate"), ("cpu-place-shared", "place-shared"), ("cpu-release", "release"),
                       ("cpu-release-isolate", "release-isolate")):
        assert reverse(f"scheduling:{name}", args=[7]) == f"/scheduling/cpu/nodes/7/{tail}/"
    assert reverse("agent-node-cpuset", args=["bj-1", "n1"]) == "/api/agent/v1/clusters/bj-1/nodes/n1/cpuset"
