"""Meridian schedules member clusters' pods, end to end over HTTP against ``tests.kubeapi``'s API
server: clusters registered from kubeconfigs and synced by a real Celery worker, whose periodic
sync starts each cluster's watcher and, beside it, its pod scheduler (``scheduling.podscheduler``).

Pods naming ``schedulerName: meridian`` are bound through ``pods/binding`` where the placement
simulator predicts for the same snapshot and policy; a pod no node can take gets a
``FailedScheduling`` Event naming the reasons and is bound once a node comes; exclusive pods get
disjoint CPU sets (written before the bind, served to the node's agent) given back on delete."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from core.jobs import enqueue
from core.locks import is_held
from core.models import Job
from fleet import informer
from fleet.models import Cluster
from fleet.services import SYNC_TASK, register_cluster
from fleet.tasks import cluster_shard_key
from fleet.tokens import issue_token
from scheduling import podscheduler, services
from scheduling.cpu.cpuset import TOPOLOGY_ANNOTATION, format_cpuset, generate_topology, reserve_cpus
from scheduling.cpu.state import (
    ALLOC_SPEC,
    ALLOC_STATUS,
    CPU_ISOLATE_MODE,
    CPU_SHAREPOOL,
    CUSTOM_CGROUP_INFO,
    RESERVED_CPUS_ANNOTATION,
)
from scheduling.models import CPUAllocation
from scheduling.whatif import simulate
from scheduling.whatif_inventory import cluster_snapshot
from tests.kubeapi import ApiServer, registration, serve
from tests.workers import shard_worker, wait_for_job

TOKEN = "emulated-cluster-token"
STACK = {"schedulerName": "stack", "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}
SPREAD = {"schedulerName": "spread", "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}}}


def node(name: str, cpu: int = 16, annotations: dict[str, str] | None = None, **labels: str) -> dict[str, Any]:
    resources = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}, "annotations": annotations or {}},
            "status": {"allocatable": resources, "capacity": resources, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str = "1", *, node_name: str = "", annotations: dict[str, str] | None = None,
        scheduler: str = "meridian", namespace: str = "shop") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [
        {"name": "app", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    meta = {"name": name, "namespace": namespace, "labels": {"app": name.rsplit("-", 1)[0]}, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def until(condition, timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


def events(api: ApiServer, reason: str | None = None) -> list[dict[str, Any]]:
    with api.lock:
        found = [stored.obj for key, stored in api.objects.items() if key[0] == "events.k8s.io/v1/events"]
    return [e for e in found if reason is None or e["reason"] == reason]


def bound(api: ApiServer, names: list[str], namespace: str = "shop") -> dict[str, str]:
    out = {}
    for name in names:
        obj = api.object("v1/pods", name, namespace)
        if obj and obj["spec"].get("nodeName"):
            out[name] = obj["spec"]["nodeName"]
    return out


@pytest.fixture
def scheduled(transactional_db, purge_shard_queues, settings):
    """Start clusters served by emulators: registered, synced, then watched (and scheduled)."""
    settings.MERIDIAN_CLUSTER_WATCH_SECONDS = 2  # watches end soon after the test
    informer.forget()
    started: list[tuple[ApiServer, Any]] = []
    names: list[str] = []

    def start(name: str, api: ApiServer, *, labels: dict[str, str] | None = None) -> Cluster:
        context = serve(api)
        url = context.__enter__()
        started.append((api, context))
        cluster = register_cluster(registration(name, url, TOKEN))
        if labels:
            Cluster.objects.filter(pk=cluster.pk).update(labels=labels)
        names.append(name)
        first = wait_for_job(Job.objects.get(kind=SYNC_TASK, object_id=str(cluster.pk)), timeout=60)
        assert first.status == Job.Status.SUCCEEDED, first.error
        return cluster

    def watch(name: str) -> podscheduler.ClusterScheduler:
        """A periodic sync, which starts the watcher (once a stopped one has let its lease go)."""
        until(lambda: not is_held(f"fleet-watch-{name}"), what="the lease to be free")
        periodic = wait_for_job(enqueue(SYNC_TASK, name), timeout=60)  # requested=False: a periodic-style sync, recorded
        assert periodic.result.get("ok"), periodic.result
        scheduler = until(lambda: podscheduler.running.get(name), what=f"the scheduler of {name} to start")
        assert scheduler.started.wait(30)
        return scheduler

    keys = [cluster_shard_key(f"k8s-{i}") for i in range(2)]
    with shard_worker(*keys):
        yield start, watch
        informer.forget()  # watchers (and their schedulers) stop before their servers do
        until(lambda: not podscheduler.running, timeout=30, what="the schedulers to stop")
    for _, context in reversed(started):
        context.__exit__(None, None, None)


@pytest.mark.django_db(transaction=True)
def test_pending_pods_of_two_clusters_and_two_policies_are_bound_where_the_simulator_predicts(scheduled):
    start, watch = scheduled
    services.save_policy(services.PolicySpec("stack", config=STACK))
    services.save_policy(services.PolicySpec("spread", config=SPREAD))
    apis, clusters, expected = [], [], []
    for i, (key, policy) in enumerate((("sched.cloud.ctrip.com/policy", "stack"), ("scheduling.meridian.io/policy", "spread"))):
        api = ApiServer(token=TOKEN, bookmark_seconds=0.5)
        for n in range(40):
            api.put("v1/nodes", node(f"n{n:03d}", cpu=8 + 4 * (n % 3)))
        for n in range(30):  # pods already running, bound by someone else
            api.put("v1/pods", pod(f"old-{n:03d}", cpu="2", node_name=f"n{(n * 7) % 40:03d}", scheduler="default-scheduler"))
        api.put("v1/pods", pod("not-ours", scheduler="default-scheduler"))
        cluster = start(f"k8s-{i}", api)
        snapshot = cluster_snapshot(cluster)
        pending = [pod(f"web-{n:04d}", cpu="500m", annotations={key: policy}) for n in range(500)]
        expected.append(list(simulate(services.policy_named(policy)[0], snapshot, pending[0], 500).placements))
        for item in pending:
            api.put("v1/pods", item)
        apis.append(api)
        clusters.append(cluster)
    schedulers = [watch("k8s-0"), watch("k8s-1")]
    names = [f"web-{n:04d}" for n in range(500)]
    for api in apis:
        until(lambda api=api: len(bound(api, names)) == 500, timeout=120, what="every pending pod bound")
    for api, predicted, scheduler in zip(apis, expected, schedulers, strict=True):
        placed = bound(api, names)
        assert [placed[name] for name in names] == predicted, "the simulator's prediction, pod for pod"
        assert all(len(nodes) == 1 for nodes in api.bindings().values()), "every pod bound once"
        assert set(api.bindings()) == {("shop", name) for name in names}
        assert api.object("v1/pods", "not-ours", "shop")["spec"].get("nodeName") is None, "kube-scheduler's pods are its own"
        until(lambda api=api: len(events(api, "Scheduled")) == 500, what="a Scheduled event per pod")
        sample = next(e for e in events(api, "Scheduled") if e["regarding"]["name"] == "web-0000")
        assert sample["note"] == f"Successfully assigned shop/web-0000 to {placed['web-0000']}"
        assert (sample["type"], sample["action"], sample["reportingController"]) == ("Normal", "Binding", "meridian")
        assert sample["regarding"]["uid"] == api.object("v1/pods", "web-0000", "shop")["metadata"]["uid"]
        assert scheduler.stats.bound == 500 and scheduler.stats.errors == 0
    assert Counter(expected[0]) != Counter(expected[1]), "stacking and spreading place differently"
    assert len(set(expected[0])) < len(set(expected[1]))


@pytest.mark.django_db(transaction=True)
def test_an_unplaceable_pod_is_told_why_and_bound_once_a_node_comes(scheduled):
    start, watch = scheduled
    services.save_policy(services.PolicySpec("stack", config=STACK))
    api = ApiServer(token=TOKEN, bookmark_seconds=0.5)
    for n in range(3):
        api.put("v1/nodes", node(f"n{n}", cpu=8))
    start("k8s-0", api, labels={podscheduler.CLUSTER_POLICY_LABEL: "stack"})
    api.put("v1/pods", pod("big-0", cpu="12"))
    api.put("v1/pods", pod("typo-0", annotations={"scheduling.meridian.io/policy": "nope"}))
    scheduler = watch("k8s-0")
    failed = until(lambda: {e["regarding"]["name"]: e for e in events(api, "FailedScheduling")}.keys() >= {"big-0", "typo-0"}
                   and {e["regarding"]["name"]: e for e in events(api, "FailedScheduling")})
    big = failed["big-0"]
    assert big["note"] == "0/3 nodes are available: 3 Insufficient cpu.", "kube-scheduler's words"
    assert (big["type"], big["action"], big["reportingController"]) == ("Warning", "Scheduling", "meridian")
    assert big["reportingInstance"].startswith("meridian-") and big["metadata"]["name"].startswith("big-0.")
    assert failed["typo-0"]["note"] == "Scheduling policy nope does not exist."
    assert bound(api, ["big-0", "typo-0"]) == {}

    api.put("v1/pods", pod("small-0", cpu="1"))  # the cluster's label names the stacking policy
    until(lambda: bound(api, ["small-0"]), what="a pod of the cluster's default policy bound")
    api.put("v1/pods", pod("small-1", cpu="1"))
    until(lambda: bound(api, ["small-1"]), what="the next one")
    assert bound(api, ["small-0", "small-1"])["small-0"] == bound(api, ["small-1"])["small-1"], "stacked"

    api.put("v1/nodes", node("n9", cpu=32))
    until(lambda: bound(api, ["big-0"]) == {"big-0": "n9"}, what="the big pod bound on the new node")
    until(lambda: any(e["regarding"]["name"] == "big-0" for e in events(api, "Scheduled")))
    assert api.bindings()[("shop", "big-0")] == ["n9"]
    time.sleep(1.5)  # its retries (backoff 1 s doubling) would show by now
    typo = [e for e in events(api, "FailedScheduling") if e["regarding"]["name"] == "typo-0"]
    assert len(typo) == 1, "repeats of a failure are one event's series, as the EventRecorder makes them"
    assert scheduler.stats.gone == 0


@pytest.mark.django_db(transaction=True)
def test_a_pod_bound_meanwhile_is_no_error(scheduled):
    """409 (bound by someone else between the decision and the bind) and 404 (deleted) end the
    attempt quietly: no error, no event, no retry."""
    start, watch = scheduled
    api = ApiServer(token=TOKEN, bookmark_seconds=0.5)
    api.put("v1/nodes", node("n0"))
    start("k8s-0", api)
    scheduler = watch("k8s-0")
    api.put("v1/pods", pod("theirs-0", scheduler="default-scheduler"))
    time.sleep(0.5)
    assert not scheduler.active and scheduler.live.cluster is None, "no pod of ours yet: dormant, no engine state"
    api.slow(1.0, match="/binding")
    api.put("v1/pods", pod("raced-0"))
    until(lambda: api.count("POST", "/binding") == 1, what="the bind to be sent")
    raced = api.object("v1/pods", "raced-0", "shop")
    raced["spec"]["nodeName"] = "n0"
    api.put("v1/pods", raced)  # bound behind Meridian's back while its bind is on the wire
    until(lambda: scheduler.stats.gone == 1, what="the 409 taken as the pod being bound")
    assert scheduler.active, "woken by the first pod naming it"
    assert scheduler.stats.errors == 0 and events(api, "FailedScheduling") == []


def cpu_host(name: str) -> dict[str, Any]:
    topology = generate_topology(sockets=2, numa_per_socket=1, cores_per_numa=8, threads_per_core=2)  # 32 CPUs
    return node(name, cpu=32, annotations={TOPOLOGY_ANNOTATION: topology.to_annotation(),
                                           RESERVED_CPUS_ANNOTATION: format_cpuset(reserve_cpus(topology, 4))})


@pytest.mark.django_db(transaction=True)
def test_exclusive_pods_get_disjoint_cpusets_before_their_bind_served_to_the_agent_and_given_back(scheduled, client):
    start, watch = scheduled
    api = ApiServer(token=TOKEN, bookmark_seconds=0.5)
    for n in range(2):
        api.put("v1/nodes", cpu_host(f"db-{n}"))
    cluster = start("k8s-0", api)
    scheduler = watch("k8s-0")
    exclusive = {CPU_ISOLATE_MODE: "exclusive", ALLOC_SPEC: json.dumps({"cpu": "SameCoreFirst"})}
    names = [f"mysql-{n}" for n in range(5)]
    for name in names:
        api.put("v1/pods", pod(name, cpu="8", annotations=exclusive, namespace="db"))
    placed = until(lambda: len(bound(api, names, "db")) == 5 and bound(api, names, "db"), what="every exclusive pod bound")
    cpus: dict[str, list[int]] = {}
    for name in names:
        obj = api.object("v1/pods", name, "db")
        annotations = obj["metadata"]["annotations"]
        cpus[name] = json.loads(annotations[ALLOC_STATUS])["cpu"]
        assert json.loads(annotations[CUSTOM_CGROUP_INFO]) == {"app": {"cpuset": format_cpuset(cpus[name])}}
        history = [(rv, o["spec"].get("nodeName"), ALLOC_STATUS in (o["metadata"].get("annotations") or {}))
                   for rv, resource, kind, o in api.events if resource == "v1/pods" and o["metadata"]["name"] == name]
        first_annotated = min(rv for rv, _, annotated in history if annotated)
        first_bound = min(rv for rv, node_name, _ in history if node_name)
        assert first_annotated < first_bound, "the CPU set is written before the bind"
    for host in ("db-0", "db-1"):
        held = [cpus[name] for name in names if placed[name] == host]
        flat = [cpu for group in held for cpu in group]
        assert len(flat) == len(set(flat)) == 8 * len(held), "disjoint CPU sets"
    assert Counter(placed.values()) in (Counter({"db-0": 3, "db-1": 2}), Counter({"db-0": 2, "db-1": 3})), \
        "18 of 28 sellable CPUs at most per instance set (2/3 cap: 18), at most three 8-CPU sets per node"

    raw = issue_token(cluster, "agent")[1]
    victim = names[0]
    host = placed[victim]
    url = f"/api/agent/v1/clusters/k8s-0/nodes/{host}/cpuset"
    served = client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert {i["name"]: i["cpus"] for i in served["instances"]} == {n: cpus[n] for n in names if placed[n] == host}
    pool = json.loads(api.object("v1/nodes", host)["metadata"]["annotations"][CPU_SHAREPOOL])["cpuIDs"]
    assert set(pool) == set(served["sharePool"]["cpuIDs"]) and not set(pool) & set(cpus[victim])

    api.delete_object("v1/pods", victim, "db")
    until(lambda: not CPUAllocation.objects.filter(pod_name=victim).exclude(delivery="releasing").exists(),
          what="the CPUs released")
    until(lambda: victim not in {i["name"] for i in client.get(url, HTTP_AUTHORIZATION=f"Bearer {raw}").json()["instances"]})

    def share_pool() -> set[int]:
        return set(json.loads(api.object("v1/nodes", host)["metadata"]["annotations"][CPU_SHAREPOOL])["cpuIDs"])

    until(lambda: set(cpus[victim]) <= share_pool(), what="the node's share pool to take them back")
    assert scheduler.stats.errors == 0


LOAD_AWARE = {"schedulerName": "load-aware",
              "plugins": {"score": {"enabled": [{"name": "MostAvailable", "weight": 10}], "disabled": [{"name": "*"}]}}}


def usage(cpu: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": "8Gi"}


@pytest.mark.django_db(transaction=True)
def test_load_aware_scoring_reads_node_metrics_and_counts_the_pods_bound_since(scheduled, monkeypatch):
    """MostAvailable places by the NodeMetrics the watcher's pass reads (VirtualAvailable), minus
    the pods bound since that report (VirtualRequest), so pods do not pile onto the idlest node
    between two reports; a newer report replaces the estimate. The usage is stored with its time."""
    from datetime import UTC, datetime

    from fleet import sync
    from fleet.models import Node

    monkeypatch.setattr(sync, "METRICS_SECONDS", 0.2)
    start, watch = scheduled
    services.save_policy(services.PolicySpec("load-aware", config=LOAD_AWARE))
    api = ApiServer(token=TOKEN, bookmark_seconds=0.5)
    reported = datetime.now(UTC).replace(microsecond=0)
    for name, cpu in (("n0", "14"), ("n1", "2"), ("n2", "8")):
        api.put("v1/nodes", node(name, cpu=16))
        api.node_metrics(name, usage(cpu), timestamp=reported.strftime("%Y-%m-%dT%H:%M:%SZ"))
    cluster = start("k8s-0", api, labels={podscheduler.CLUSTER_POLICY_LABEL: "load-aware"})
    stored = Node.objects.get(cluster=cluster, name="n1")
    assert (stored.cpu_usage_milli, stored.usage_time) == (2000, reported), "the usage, stored with its time"
    scheduler = watch("k8s-0")
    names = [f"load-{n}" for n in range(6)]
    for name in names:
        api.put("v1/pods", pod(name, cpu="2"))
    placed = until(lambda: len(bound(api, names)) == 6 and bound(api, names))
    assert [placed[name] for name in names[:3]] == ["n1"] * 3, "the idlest node by its report"
    assert "n0" not in placed.values() and "n2" in placed.values(), "pods bound since the report count: no pile-up"

    later = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.node_metrics("n1", usage("15"), timestamp=later)  # n1 got busy, n2 quiet
    api.node_metrics("n2", usage("3"), timestamp=later)
    api.put("v1/nodes", node("n0", cpu=16, touched="yes"))  # a change: the watcher's next pass reads the metrics
    until(lambda: scheduler.live.usage.get("n1", ({}, None))[0].get("cpu") == 15000, what="the new report read")
    api.put("v1/pods", pod("load-6", cpu="2"))
    assert until(lambda: bound(api, ["load-6"])) == {"load-6": "n2"}, "the newer report decides"


@pytest.mark.django_db
def test_the_fleet_simulator_places_each_clusters_pods_with_that_clusters_policy():
    from fleet.connectors.base import Connector
    from fleet.services import connector_for
    from tests.scheduling.cpu_fixtures import simulated_cluster

    services.save_policy(services.PolicySpec("stack", config=STACK))
    used = {}
    for name, labels in (("sim-spread", {}), ("sim-stack", {podscheduler.CLUSTER_POLICY_LABEL: "stack"})):
        cluster = simulated_cluster(name, nodes=60, seed=21)
        config = {**cluster.connector_config, "workloads_per_100_nodes": 40}
        Cluster.objects.filter(pk=cluster.pk).update(labels=labels, connector_config=config)
        cluster.refresh_from_db()
        connector: Connector
        with connector_for(cluster) as connector:
            pods = connector.list_pods().items
        used[name] = {p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")}
        assert pods and used[name]
    assert len(used["sim-stack"]) < len(used["sim-spread"]), "stacking fills fewer nodes"


@pytest.mark.django_db(transaction=True)
def test_a_restarted_scheduler_rebuilds_cpu_allocations_from_the_annotations_and_never_gives_a_cpu_twice(scheduled):
    """Meridian restarted with its CPU state gone (a database restored from before): the pods'
    annotations are the truth; the next scheduler adopts them before giving any CPU away."""
    from scheduling.models import NodeCPU

    start, watch = scheduled
    api = ApiServer(token=TOKEN, bookmark_seconds=0.5)
    api.put("v1/nodes", cpu_host("db-0"))
    start("k8s-0", api)
    watch("k8s-0")
    exclusive = {CPU_ISOLATE_MODE: "exclusive", ALLOC_SPEC: json.dumps({"cpu": "Spread"})}
    first = [f"pg-{n}" for n in range(2)]
    for name in first:
        api.put("v1/pods", pod(name, cpu="8", annotations=exclusive, namespace="db"))
    until(lambda: len(bound(api, first, "db")) == 2, what="the first pods bound")
    informer.forget()  # Meridian stops ...
    until(lambda: not podscheduler.running, what="the scheduler to stop")
    NodeCPU.objects.all().delete()  # ... and comes back without its CPU state
    later = ["pg-2"]
    api.put("v1/pods", pod("pg-2", cpu="8", annotations=exclusive, namespace="db"))
    watch("k8s-0")
    until(lambda: bound(api, later, "db"), what="the next pod bound")
    held = [json.loads(api.object("v1/pods", name, "db")["metadata"]["annotations"][ALLOC_STATUS])["cpu"]
            for name in first + later]
    flat = [cpu for group in held for cpu in group]
    assert len(flat) == len(set(flat)) == 24, "no CPU twice"
    adopted = set(CPUAllocation.objects.filter(source=CPUAllocation.Source.ADOPTED).values_list("pod_name", flat=True))
    assert adopted == set(first), "the annotated pods' CPUs adopted from their annotations"


@pytest.mark.django_db(transaction=True)
def test_an_exclusive_pod_whose_bind_is_refused_gives_its_cpus_back(scheduled):
    start, watch = scheduled
    api = ApiServer(token=TOKEN, bookmark_seconds=0.5)
    api.put("v1/nodes", cpu_host("db-0"))
    start("k8s-0", api)
    scheduler = watch("k8s-0")
    api.slow(1.0, match="/binding")
    exclusive = {CPU_ISOLATE_MODE: "exclusive", ALLOC_SPEC: json.dumps({"cpu": "SameCoreFirst"})}
    api.put("v1/pods", pod("late-0", cpu="8", annotations=exclusive, namespace="db"))
    until(lambda: api.count("POST", "/binding") == 1, what="the bind to be sent, its CPUs allocated")
    assert CPUAllocation.objects.filter(pod_name="late-0").exclude(delivery="releasing").exists()
    raced = api.object("v1/pods", "late-0", "db")
    raced["spec"]["nodeName"] = "db-0"
    api.put("v1/pods", raced)  # bound behind Meridian's back: its bind is refused (409)
    until(lambda: scheduler.stats.gone == 1, what="the refused bind")
    until(lambda: not CPUAllocation.objects.filter(pod_name="late-0").exclude(delivery="releasing").exists(),
          what="its CPUs given back")
