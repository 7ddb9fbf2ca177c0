"""Annotations through the connector, and the reconciler that trusts them: nothing leaks.

A simulated cluster (the connector a real cluster would use, backed by the simulator) whose
first node publishes the seed's 104-CPU topology with 8 reserved CPUs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from core.models import ObjectChange
from fleet.services import connector_for
from scheduling.cpu import allocation, delivery, reconcile, store
from scheduling.cpu.cpuset import IO_QUEUES_ANNOTATION, format_cpuset
from scheduling.cpu.state import CPU_SHAREPOOL
from scheduling.models import CPUAllocation, CPUClaim, NodeCPU

from .cpu_fixtures import annotations_of, cpus_of, instance_pod, synced_host

pytestmark = pytest.mark.django_db
LATER = timedelta(minutes=10)  # past the annotation grace


@pytest.fixture
def host():
    return synced_host()


@contextmanager
def delivered(host, pod: str, cpus: int) -> Iterator[tuple[CPUAllocation, Any]]:
    """``db/<pod>`` allocated ``cpus`` exclusive CPUs, its pod created and its annotations delivered:
    the allocation and the connector, open for the rest of the test's steps."""
    cluster, name, node = host
    row = allocation.allocate_exclusive(node, namespace="db", name=pod, request=cpus)
    with connector_for(cluster) as connector:
        connector.apply(instance_pod("db", pod, name, cpu=str(cpus)))
        delivery.deliver(node.pk, connector)
        yield row, connector


def node_annotations(connector, name: str) -> dict:
    return dict(connector.get("v1", "Node", name)["metadata"].get("annotations") or {})


def test_the_node_topology_comes_from_its_annotation(host):
    cluster, name, node = host
    assert (node.cpus, node.sockets, node.numa_nodes, node.cores, node.reserved_cpus) == (104, 2, 2, 52, "0-3,52-55")
    assert node.sellable == 96
    others = NodeCPU.objects.filter(cluster=cluster).exclude(pk=node.pk)
    assert others.exists() and all(o.cpus in (32, 48, 64, 96) for o in others)  # the simulator's machine models


def test_allocation_is_delivered_as_annotations_and_the_share_pool_follows(host):
    cluster, name, node = host
    row = allocation.allocate_exclusive(node, namespace="db", name="core-a", app="core-a", request=32, strategy="Spread")
    shared = allocation.place_shared(node, namespace="db", name="edge-a", app="edge-a", request_milli=8000, limit_milli=8000)
    with connector_for(cluster) as connector:
        connector.apply(instance_pod("db", "core-a", name, cpu="32", annotations={"cpu-isolate-mode": "exclusive"}))
        connector.apply(instance_pod("db", "edge-a", name, cpu="8"))
        report = delivery.deliver(node.pk, connector)
        assert report.pods == 2 and not report.errors
        pod = annotations_of(connector, "db", "core-a")
        assert cpus_of(pod) == row.cpus
        assert json.loads(pod["custom-cgroup-info"]) == {"engine": {"cpuset": row.cpuset}}
        assert json.loads(pod["alloc-spec"]) == {"cpu": "Spread"} and pod["exclude-reserve-cpuset"] == "true"
        pool = json.loads(node_annotations(connector, name)[CPU_SHAREPOOL])["cpuIDs"]
        assert set(pool) == set(range(104)) - set(row.cpus) - {0, 1, 2, 3, 52, 53, 54, 55}
        edge = json.loads(annotations_of(connector, "db", "edge-a")["custom-cgroup-info"])["engine"]
        assert edge == {"cpuset": format_cpuset(pool), "cpuShares": 8192, "cfsQuotaUs": 800000}
        # another exclusive instance shrinks the pool: every shared pod is re-bound
        second = allocation.allocate_exclusive(node, namespace="db", name="core-b", request=16)
        connector.apply(instance_pod("db", "core-b", name, cpu="16"))
        delivery.deliver(node.pk, connector)
        pool2 = set(json.loads(node_annotations(connector, name)[CPU_SHAREPOOL])["cpuIDs"])
        assert pool2 == set(pool) - set(second.cpus)
        edge = json.loads(annotations_of(connector, "db", "edge-a")["custom-cgroup-info"])["engine"]
        assert edge["cpuset"] == format_cpuset(pool2)
        # release-isolate widens the container's cpuset, not the allocation
        allocation.set_release_isolate(node, "db/core-a", True)
        delivery.deliver(node.pk, connector)
        pod = annotations_of(connector, "db", "core-a")
        assert pod["release-isolate-mode"] == "true" and cpus_of(pod) == row.cpus
        assert json.loads(pod["custom-cgroup-info"])["engine"]["cpuset"] == "4-51,56-103"
        allocation.set_release_isolate(node, "db/core-a", False)
        delivery.deliver(node.pk, connector)
        pod = annotations_of(connector, "db", "core-a")
        assert "release-isolate-mode" not in pod and json.loads(pod["custom-cgroup-info"])["engine"]["cpuset"] == row.cpuset
        # the reconciler finds everything consistent
        outcome = reconcile.reconcile_node(NodeCPU.objects.get(pk=node.pk), connector.get("v1", "Node", name),
                                     [p for p in connector.list_pods().items if p["spec"].get("nodeName") == name])
        assert not outcome.released and not outcome.adopted and not outcome.conflicts and not outcome.redeliver
    assert CPUAllocation.objects.filter(node_cpu=node, delivery="delivered").count() == 3
    assert shared.pk


def test_an_allocation_whose_annotation_was_never_written_is_reconciled_away(host, caplog):
    cluster, name, node = host
    with connector_for(cluster) as connector:
        connector.apply(instance_pod("db", "crashed", name, cpu="8", annotations={"cpu-isolate-mode": "exclusive"}))
        lost = allocation.allocate_exclusive(node, namespace="db", name="crashed", request=8)  # then the process died
        never = allocation.allocate_exclusive(node, namespace="db", name="never-created", request=8)
        assert NodeCPU.objects.get(pk=node.pk).exclusive_used == 16
        # within the grace the allocations wait for their pod / annotation
        report = reconcile.reconcile_cluster(cluster, connector)
        assert not report.released and CPUAllocation.objects.filter(node_cpu=node).count() == 2
        report = reconcile.reconcile_cluster(cluster, connector, now=timezone.now() + LATER)
    assert sorted(r.split(" ")[1] for r in report.released) == ["db/crashed", "db/never-created"]
    assert not CPUAllocation.objects.filter(pk__in=[lost.pk, never.pk]).exists()
    assert not CPUClaim.objects.filter(node_cpu=node).exists()
    node.refresh_from_db()
    assert (node.exclusive_used, node.largest_exclusive) == (0, 64)
    assert "db/crashed is exclusive but has no alloc-status: not allocated" in node.problems
    # a routine correction: counted in the job's result and written to its log, not to the audit log
    assert not ObjectChange.objects.filter(verb="reconcile").exists()
    assert report.as_dict()["released_count"] == 2
    assert any("released db/crashed" in r.getMessage() and r.name == "scheduling.cpu.reconcile" for r in caplog.records)


def test_a_deleted_pod_releases_its_cpus(host):
    cluster, name, node = host
    with delivered(host, "gone", 24) as (row, connector):
        assert cpus_of(annotations_of(connector, "db", "gone")) == row.cpus
        connector.delete("v1", "Pod", "gone", namespace="db")
        report = reconcile.reconcile_cluster(cluster, connector)
        assert report.released == [f"{name}: db/gone (its pod is gone)"]
        delivery.deliver(node.pk, connector)
        pool = json.loads(node_annotations(connector, name)[CPU_SHAREPOOL])["cpuIDs"]
    assert set(row.cpus) <= set(pool)
    node.refresh_from_db()
    assert node.exclusive_used == 0 and not CPUClaim.objects.filter(node_cpu=node).exists()


def test_released_instances_lose_their_annotations(host):
    node = host[2]
    with delivered(host, "short", 4) as (_, connector):
        allocation.release(node, "db/short")
        report = delivery.deliver(node.pk, connector)
        assert report.removed == 1
        assert not {"alloc-status", "custom-cgroup-info", "cpu-isolate-mode"} & set(annotations_of(connector, "db", "short"))
    assert not CPUAllocation.objects.filter(node_cpu=node).exclude(mode="shared").exists()


def test_pods_annotated_elsewhere_are_adopted_and_conflicts_reported(host):
    cluster, name, node = host
    with connector_for(cluster) as connector:
        connector.apply(instance_pod("db", "first", name, cpu="4", annotations={
            "cpu-isolate-mode": "exclusive", "alloc-status": '{"cpu":[4,5,56,57]}',
            "custom-cgroup-info": '{"engine":{"cpuset":"4-5,56-57"}}'}))
        connector.apply(instance_pod("db", "second", name, cpu="2", annotations={
            "cpu-isolate-mode": "exclusive", "alloc-status": '{"cpu":[5,6]}', "custom-cgroup-info": '{"engine":{"cpuset":"5-6"}}'}))
        report = reconcile.reconcile_cluster(cluster, connector)
    assert report.conflicts == 1
    node.refresh_from_db()
    assert node.conflicts == ["CPU 5 is claimed by db/first (kept) and db/second (disputed)"]
    first = CPUAllocation.objects.get(pod_name="first")
    second = CPUAllocation.objects.get(pod_name="second")
    assert (first.cpus, first.source, first.disputed) == ([4, 5, 56, 57], "adopted", False)
    assert (second.cpus, second.disputed) == ([6], True)  # held back from everybody until fixed
    state = store.current_state(node)
    assert not {4, 5, 6, 56, 57} & state.share_pool
    row = allocation.allocate_exclusive(node, namespace="db", name="third", request=60)
    assert not {4, 5, 6, 56, 57} & set(row.cpus)


def test_io_queue_distribution_is_accepted_only_as_a_growth(host):
    cluster, name, node = host
    with connector_for(cluster) as connector:
        connector.patch("v1", "Node", name, {"metadata": {"annotations": {
            IO_QUEUES_ANNOTATION: json.dumps({"queues": {"nvme0q0": [4, 56], "nvme0q1": [30, 82]}})}}})
        reconcile.reconcile_cluster(cluster, connector)
        node.refresh_from_db()
        assert node.io_queue_state == "accepted" and node.io_queues == {"nvme0q0": [4, 56], "nvme0q1": [30, 82]}
        first = allocation.allocate_exclusive(node, namespace="db", name="q", request=2, strategy="Spread")
        assert set(first.cpus) & {4, 56, 30, 82}  # exclusive CPUs follow the IO-queue priority order
        connector.patch("v1", "Node", name, {"metadata": {"annotations": {
            IO_QUEUES_ANNOTATION: json.dumps({"queues": {"nvme0q0": [4, 57], "nvme0q1": [30, 82]}})}}})
        reconcile.reconcile_cluster(cluster, connector)
        node.refresh_from_db()
        assert node.io_queue_state == "refused" and "moved" in node.io_queue_message
        assert node.io_queues == {"nvme0q0": [4, 56], "nvme0q1": [30, 82]}  # the accepted one stays
        assert ObjectChange.objects.filter(verb="io_queues_refused", object_id=str(node.pk)).count() == 1
        connector.patch("v1", "Node", name, {"metadata": {"annotations": {
            IO_QUEUES_ANNOTATION: json.dumps({"queues": {"nvme0q0": [4, 56], "nvme0q1": [30, 82], "nvme1q0": [10]}})}}})
        reconcile.reconcile_cluster(cluster, connector)
    node.refresh_from_db()
    assert node.io_queue_state == "accepted" and "nvme1q0" in node.io_queues


def test_stale_annotations_are_rewritten(host):
    cluster, name, node = host
    with delivered(host, "drift", 4) as (row, connector):
        connector.patch("v1", "Pod", "drift", {"metadata": {"annotations": {
            "custom-cgroup-info": '{"engine":{"cpuset":"0-103"}}'}}}, namespace="db")
        outcome = reconcile.reconcile_node(NodeCPU.objects.get(pk=node.pk), connector.get("v1", "Node", name),
                                     [connector.get("v1", "Pod", "drift", namespace="db")])
        assert outcome.redeliver == ["db/drift"] and not outcome.released
        delivery.deliver(node.pk, connector)
        assert json.loads(annotations_of(connector, "db", "drift")["custom-cgroup-info"])["engine"]["cpuset"] == row.cpuset


def test_a_listing_older_than_a_write_leaves_the_node_to_the_next_pass(host):
    cluster, name, node = host
    with connector_for(cluster) as connector:
        node_obj = connector.get("v1", "Node", name)
        pods = [p for p in connector.list_pods().items if p["spec"].get("nodeName") == name]
        touched = NodeCPU.objects.get(pk=node.pk).touched
        row = allocation.allocate_exclusive(node, namespace="db", name="fresh", request=4)  # lands after the listing
        stale = reconcile.reconcile_node(NodeCPU.objects.get(pk=node.pk), node_obj, pods, now=timezone.now() + LATER,
                                   touched=touched)
    assert stale.skipped and CPUAllocation.objects.filter(pk=row.pk).exists()


def test_inventory_syncs_queue_a_reconcile_of_clusters_using_cpu_colocation(host, django_capture_on_commit_callbacks):
    from core.models import Job
    from fleet.signals import workloads_changed

    cluster, _, _ = host
    Job.objects.filter(task_name=store.RECONCILE_TASK).delete()
    workloads_changed.send(sender=type(cluster), cluster=cluster, keys=[])
    workloads_changed.send(sender=type(cluster), cluster=cluster, keys=[])
    assert Job.objects.filter(task_name=store.RECONCILE_TASK, status="pending").count() == 1  # coalesced


def test_a_syncs_reconcile_starts_no_sooner_than_the_spacing_after_the_clusters_last(host, settings):
    """Every sync of a busy cluster changes something: its reconciles are spaced, the last
    started one (the periodic pass's or an enqueued one) counting."""
    from datetime import datetime

    from core.models import Job
    from fleet.signals import workloads_changed

    cluster, _, _ = host
    settings.MERIDIAN_CPU_RECONCILE_SPACING_SECONDS = 30
    Job.objects.filter(task_name=store.RECONCILE_TASK).delete()
    started = timezone.now() - timedelta(seconds=10)
    Job.objects.create(kind=store.RECONCILE_TASK, task_name=store.RECONCILE_TASK, task_args=[cluster.name],
                       status=Job.Status.SUCCEEDED, started=started, finished=started + timedelta(seconds=4))
    workloads_changed.send(sender=type(cluster), cluster=cluster, keys=[])
    waiting = Job.objects.get(task_name=store.RECONCILE_TASK, status=Job.Status.PENDING)
    assert datetime.fromisoformat(waiting.params["not_before"]) == started + timedelta(seconds=30)

    long_ago = started - timedelta(seconds=60)
    Job.objects.filter(task_name=store.RECONCILE_TASK).update(status=Job.Status.SUCCEEDED, started=long_ago)
    before = timezone.now()
    workloads_changed.send(sender=type(cluster), cluster=cluster, keys=[])
    now = Job.objects.get(task_name=store.RECONCILE_TASK, status=Job.Status.PENDING)
    assert before <= datetime.fromisoformat(now.params["not_before"]) <= timezone.now(), "none recent: at once"


def _replace_annotated_pods(connector, name: str, count: int, generation: int) -> None:
    """``count`` exclusive pods annotated outside Meridian, replaced by new ones (new names) each generation."""
    for i in range(count):
        if generation:
            connector.delete("v1", "Pod", f"churn-{generation - 1}-{i}", namespace="db")
        cpus = [4 + 2 * i, 5 + 2 * i]
        connector.apply(instance_pod("db", f"churn-{generation}-{i}", name, cpu="2", annotations={
            "cpu-isolate-mode": "exclusive", "alloc-status": json.dumps({"cpu": cpus}),
            "custom-cgroup-info": json.dumps({"engine": {"cpuset": format_cpuset(cpus)}})}))


def test_a_node_whose_pods_were_all_replaced_costs_the_same_queries_as_one(host):
    """A simulated or busy cluster replaces thousands of pods between passes: the released and
    adopted rows of a node are written together, not a query (or three) a row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cluster, name, node = host
    queries = {}
    with connector_for(cluster) as connector:
        for count in (1, 8):
            _replace_annotated_pods(connector, name, count, 0)
            reconcile.reconcile_cluster(cluster, connector, node_names=[name])
            _replace_annotated_pods(connector, name, count, 1)
            with CaptureQueriesContext(connection) as captured:
                report = reconcile.reconcile_cluster(cluster, connector, node_names=[name], now=timezone.now() + LATER)
            assert len(report.released) == len(report.adopted) == count
            assert sorted(CPUAllocation.objects.filter(node_cpu=node).values_list("pod_name", flat=True)) == \
                sorted(f"churn-1-{i}" for i in range(count))
            queries[count] = len(captured.captured_queries)
            for i in range(count):
                connector.delete("v1", "Pod", f"churn-1-{i}", namespace="db")
            reconcile.reconcile_cluster(cluster, connector, node_names=[name], now=timezone.now() + LATER)
            assert not CPUAllocation.objects.filter(node_cpu=node).exists()
    assert queries[8] == queries[1], queries


def test_a_periodic_reconcile_that_found_nothing_to_do_records_no_job(host):
    """Housekeeping that did nothing writes nothing (#32 goal 8): a pass over nodes as the last
    one left them records no Job row; one that released something does, with what it did."""
    from core.models import Job
    from scheduling.cpu.tasks import cpu_reconcile_cluster

    cluster, name, node = host
    cpu_reconcile_cluster.apply(args=(cluster.name,), headers={"celery_beat_task": True}).result  # the first pass may rebuild what the sync brought
    before = Job.objects.filter(kind="scheduling.cpu_reconcile_cluster").count()
    result = cpu_reconcile_cluster.apply(args=(cluster.name,), headers={"celery_beat_task": True}).result
    assert result["skipped"] > 0 and not result["nodes"]
    assert Job.objects.filter(kind="scheduling.cpu_reconcile_cluster").count() == before

    with delivered(host, "gone", 8) as (_, connector):
        connector.delete("v1", "Pod", "gone", namespace="db")
    result = cpu_reconcile_cluster.apply(args=(cluster.name,), headers={"celery_beat_task": True}).result
    assert result["released_count"] == 1
    job = Job.objects.filter(kind="scheduling.cpu_reconcile_cluster").latest("pk")
    assert Job.objects.filter(kind="scheduling.cpu_reconcile_cluster").count() == before + 1
    assert job.result["released"] == [f"{name}: db/gone (its pod is gone)"]
