"""The pod scheduler's pure parts: the scheduling queue (kube-scheduler's PriorityQueue rules), the
engine's state following a live cluster (pods removed as well as added), and ``LiveCluster``,
the cache that keeps the engine in step with a member cluster's informer events."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduling.cluster import ClusterState, PodInfo
from scheduling.cpu.cpuset import TOPOLOGY_ANNOTATION, CPUTopology
from scheduling.cpu.state import ALLOC_SPEC, CPU_ISOLATE_MODE
from scheduling.engine import Policy, Scheduler, Snapshot
from scheduling.livecache import LiveCluster, usage_from_metrics, with_cpu_plugins
from scheduling.schedqueue import ACTIVE, BACKOFF, UNSCHEDULABLE, SchedulingQueue
from scheduling.whatif import simulate

STACK = Policy.from_config({"schedulerName": "stack", "plugins": {"score": {
    "enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
    "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]})


def node(name: str, cpu: str = "8", memory: str = "32Gi", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {}, "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str = "1", *, node_name: str = "", scheduler: str = "meridian", uid: str = "",
        priority: int | None = None, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    containers = [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]
    body: dict[str, Any] = {"schedulerName": scheduler, "containers": containers, **spec}
    if node_name:
        body["nodeName"] = node_name
    if priority is not None:
        body["priority"] = priority
    return {"metadata": {"name": name, "namespace": "shop", "uid": uid or f"uid-{name}", "labels": labels or {"app": "web"},
                         "annotations": annotations or {}}, "spec": body, "status": {"phase": "Pending"}}


# ------------------------------------------------------------------------ the queue


def test_the_queue_pops_by_priority_then_arrival():
    queue = SchedulingQueue()
    for i, priority in enumerate((0, 10, 0, 10)):
        queue.add(("shop", f"p{i}"), pod(f"p{i}", priority=priority), now=0)
    assert [item.key[1] for item in queue.pop(0, 10)] == ["p1", "p3", "p0", "p2"]
    assert queue.pop(0, 10) == [], "popped pods are in flight, not queued twice"


def test_backoff_doubles_to_ten_seconds_and_unschedulable_pods_wait_for_a_change():
    queue = SchedulingQueue()
    assert [queue.backoff(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10], "upstream's 1 s doubling to 10 s"
    queue.add(("shop", "a"), pod("a"), now=0)
    [a] = queue.pop(0, 1)
    queue.failed(a, 0, unschedulable=True, message="0/3 nodes are available: 3 Insufficient cpu.")
    assert a.where == UNSCHEDULABLE and queue.pop(100, 1) == [], "no change, no retry (before five minutes)"
    assert queue.next_wake(100) == pytest.approx(200)
    queue.cluster_changed(100.5)
    [again] = queue.pop(100.5, 1)
    assert again is a and a.attempts == 1
    queue.failed(a, 101, unschedulable=False)  # an error: straight to backoff, 2 s for the second attempt
    assert a.where == BACKOFF and queue.pop(102.9, 1) == [] and queue.pop(103, 1) == [a]
    queue.failed(a, 104, unschedulable=True)
    assert queue.pop(104 + 300, 1) == [a], "at most five minutes among the unschedulable"


def test_a_change_during_the_attempt_sends_the_pod_to_backoff_not_to_wait():
    """upstream's moveRequestCycle: the node that would fit may have come while the pod was tried."""
    queue = SchedulingQueue()
    queue.add(("shop", "a"), pod("a"), now=0)
    [a] = queue.pop(0, 1)
    queue.cluster_changed(0.5)
    queue.failed(a, 0.5, unschedulable=True)
    assert a.where == BACKOFF and queue.pop(1.5, 1) == [a]


def test_an_update_that_may_help_moves_an_unschedulable_pod_and_a_delete_forgets_it():
    queue = SchedulingQueue()
    queue.add(("shop", "a"), pod("a", cpu="64"), now=0)
    [a] = queue.pop(0, 1)
    queue.failed(a, 0, unschedulable=True)
    queue.add(("shop", "a"), {**pod("a", cpu="64"), "status": {"phase": "Pending", "conditions": []}}, now=5)
    assert a.where == UNSCHEDULABLE, "a status update changes nothing"
    queue.add(("shop", "a"), pod("a", cpu="2"), now=5)
    assert a.where == ACTIVE, "a smaller request may fit"
    queue.delete(("shop", "a"))
    assert queue.pop(5, 1) == [] and len(queue) == 0


# ------------------------------------------------------------------------ the engine's state follows removals


def test_removing_pods_leaves_the_state_a_fresh_build_of_the_rest_would_have():
    rng = random.Random(5)
    nodes = [node(f"n{i}", zone=f"z{i % 2}") for i in range(6)]
    pods = []
    for i in range(40):
        term = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
        affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": term}]}} if i % 3 == 0 else None
        pods.append(pod(f"p{i}", cpu=f"{rng.choice((100, 250, 500))}m", node_name=f"n{rng.randrange(6)}",
                        labels={"app": rng.choice("ab")}, **({"affinity": affinity} if affinity else {})))
    state = ClusterState.build(nodes, [])
    infos = [PodInfo(p) for p in pods]
    for info in infos:
        state.add_pod(info, state.by_name[info.node_name])
    gone = set(rng.sample(range(40), 25))
    for i in sorted(gone):
        state.remove_pod(infos[i], state.by_name[infos[i].node_name])
    fresh = ClusterState.build(nodes, [p for i, p in enumerate(pods) if i not in gone])

    def aggregates(s: ClusterState) -> Any:
        per_node = [(n.req_cpu, n.req_mem, n.nz_cpu, n.nz_mem, n.req_scalars, sorted(p.name for p in n.pods)) for n in s.nodes]
        groups = {k: dict(g.nodes) for k, g in s.affinity.groups.items()}
        return per_node, groups, s.affinity.preferred, s.affinity.required_anti, s.total_req, s.pod_count

    assert aggregates(state) == aggregates(fresh)
    assert state.columns().table.tolist() == fresh.columns().table.tolist()
    new = pod("new", cpu="500m", labels={"app": "a"})
    scores = [Scheduler(Policy.default(), cluster=s).explain(new).scores for s in (state, fresh)]
    assert scores[0] == scores[1]


# ------------------------------------------------------------------------ LiveCluster


def live_with(nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = ()) -> LiveCluster:
    live = LiveCluster("meridian")
    live.load(nodes, pods, now=0)
    return live


def schedule_all(live: LiveCluster, policy: Policy, now: float = 0) -> list[tuple[str, str | None]]:
    out = []
    for item in live.pending(now, 10_000):
        attempt = live.attempt(item, policy)
        out.append((item.key[1], attempt.node))
    return out


def test_only_pending_pods_of_this_scheduler_are_queued():
    live = live_with([node("n1")], [pod("mine"), pod("theirs", scheduler="default-scheduler"), pod("bound", node_name="n1"),
                                    {**pod("done"), "status": {"phase": "Succeeded"}},
                                    {**pod("going"), "metadata": {**pod("going")["metadata"],
                                                                  "deletionTimestamp": "2025-01-01T00:00:00Z"}}])
    assert list(live.queue.pods) == [("shop", "mine")]
    assert live.state().by_name["n1"].req_cpu == 1000, "the bound pod counts"


def test_a_run_of_pods_lands_where_the_simulator_predicts_and_assumed_pods_count_before_their_echo():
    nodes = [node(f"n{i:02d}", cpu=str(4 + i % 5)) for i in range(30)]
    existing = [pod(f"old{i}", cpu="2", node_name=f"n{(i * 7) % 30:02d}") for i in range(20)]
    pending = [pod(f"web-{i:03d}", cpu="1500m") for i in range(60)]
    for policy in (Policy.default(), STACK):
        live = live_with(nodes, existing + pending)
        placed = schedule_all(live, policy)
        predicted = simulate(policy, Snapshot(nodes, existing), pending[0], 60)
        assert [node_name for _, node_name in placed] == list(predicted.placements)
        # nothing echoed yet: every assumed pod counts
        assert sum(n.req_cpu for n in live.state().nodes) == 20 * 2000 + 1500 * sum(1 for _, n in placed if n)


def test_echoes_confirm_a_failed_bind_is_taken_back_and_a_deleted_pod_frees_its_node():
    live = live_with([node("n1", cpu="2"), node("n2", cpu="2")], [pod("a", cpu="2"), pod("b", cpu="2"), pod("c", cpu="2")])
    first = schedule_all(live, Policy.default())
    assert [n for _, n in first].count(None) == 1
    (a_node,) = [n for name, n in first if name == "a"]
    rebuilds = live.rebuilds
    echo = pod("a", cpu="2", node_name=a_node)
    echo["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-01-01T00:00:05Z"}]
    assert live.pod_event("MODIFIED", echo, now=1) is False
    assert live.rebuilds == rebuilds and live.state().by_name[a_node].req_cpu == 2000, "confirmed in place"
    (b_node,) = [n for name, n in first if name == "b"]
    live.bind_failed(("shop", "b"), "uid-b")
    assert live.state().by_name[b_node].req_cpu == 0, "the failed bind is undone"
    assert live.pod_event("DELETED", echo, now=2) is True, "a deleted pod frees its node: waiting pods may fit"
    assert live.state().by_name[a_node].req_cpu == 0 and live.rebuilds == rebuilds


def test_a_node_added_rebuilds_the_state_with_assumed_pods_kept():
    live = live_with([node("n1", cpu="2")], [pod("a", cpu="2"), pod("b", cpu="2")])
    assert schedule_all(live, Policy.default()) == [("a", "n1"), ("b", None)]
    assert live.node_event("ADDED", node("n2", cpu="2")) is True
    heartbeat = {**node("n2", cpu="2"), "metadata": {**node("n2")["metadata"], "resourceVersion": "9"}}
    assert live.node_event("MODIFIED", heartbeat) is False
    live.queue.add(("shop", "b"), pod("b", cpu="2"), now=1)
    assert live.queue.pods[("shop", "b")].where != ACTIVE  # b is in flight since the pop above ...
    live.queue.retry(live.queue.pods[("shop", "b")])  # ... until the caller puts it back
    assert schedule_all(live, Policy.default(), now=1) == [("b", "n2")]
    assert live.state().by_name["n1"].req_cpu == 2000, "the assumed pod a survived the rebuild"


def test_two_policies_share_one_state_and_one_scan_position():
    nodes = [node(f"n{i}", cpu="4") for i in range(4)]
    live = live_with(nodes, [pod("s1", cpu="3"), pod("t1", cpu="1", annotations={"p": "stack"})])
    s1, t1 = live.pending(0, 2)
    assert live.attempt(s1, Policy.default()).node == "n0"
    assert live.attempt(t1, STACK).node == "n0", "stacking sees the spread pod's placement"


def test_usage_reports_reach_the_load_aware_plugin_and_count_pods_bound_since():
    load_aware = Policy.from_config({"plugins": {"score": {"enabled": [{"name": "MostAvailable", "weight": 10}],
                                                            "disabled": [{"name": "*"}]}}})
    live = live_with([node("n1", cpu="8"), node("n2", cpu="8")], [pod("a", cpu="1"), pod("b", cpu="1")])
    report = datetime(2025, 1, 1, tzinfo=UTC)
    metrics = {"metadata": {"name": "n1"}, "timestamp": "2025-01-01T00:00:00Z", "usage": {"cpu": "6", "memory": "1Gi"}}
    name, usage, at = usage_from_metrics(metrics)
    assert (name, usage["cpu"], at) == ("n1", 6000, report)
    live.report_usage("n1", usage, at)
    live.report_usage("n2", {"cpu": 2000, "memory": 2**30}, report)
    a, b = live.pending(0, 2)
    assert live.attempt(a, load_aware).node == "n2", "n1 is busy by its report"
    live.bind_succeeded(a.key, a.uid, report + timedelta(seconds=5))
    assert live.state().by_name["n2"].virtual_since == {"cpu": 1000, "memory": 2**30}, "bound after the report: still counted"
    live.report_usage("n2", {"cpu": 6500, "memory": 2**30}, report + timedelta(seconds=15))
    assert live.state().by_name["n2"].virtual_since == {}, "a later report includes it"
    assert live.attempt(b, load_aware).node == "n1", "now n2 is the busier one"


def test_an_exclusive_pod_is_placed_under_the_cpu_plugins_whatever_its_policy():
    topology = CPUTopology.from_rows([(c, c // 8, c // 8, c // 2) for c in range(16)])
    small = node("small", cpu="16")
    small["metadata"]["annotations"] = {TOPOLOGY_ANNOTATION: topology.to_annotation()}
    plain = node("plain", cpu="64")
    exclusive = pod("db", cpu="12", annotations={CPU_ISOLATE_MODE: "exclusive", ALLOC_SPEC: '{"cpu":"SameCoreFirst"}'})
    live = live_with([plain, small], [exclusive])
    [item] = live.pending(0, 1)
    attempt = live.attempt(item, Policy.default())
    assert attempt.node is None
    assert attempt.placement.reasons == ("0/2 nodes are available: 1 node(s) had no CPU topology, "
                                         "1 request exceeds 2/3 of sellable CPUs (10)."), "as kube-scheduler words a FitError"
    assert [s.name for s in attempt.policy.filters][-2:] == ["CPUSetExclusive", "CPUSetShared"]
    assert with_cpu_plugins(attempt.policy, exclusive=True) is attempt.policy
    smaller = pod("db2", cpu="4", annotations={CPU_ISOLATE_MODE: "exclusive", ALLOC_SPEC: '{"cpu":"SameCoreFirst"}'})
    live.pod_event("ADDED", smaller, now=1)
    [item] = live.pending(1, 1)
    assert live.attempt(item, Policy.default()).node == "small", "the larger plain node has no CPU topology"


def test_pods_replaced_by_others_of_the_same_name_and_relistings():
    live = live_with([node("n1", cpu="4")], [pod("a", cpu="1")])
    [a] = live.pending(0, 1)
    assert live.attempt(a, Policy.default()).node == "n1"
    # the listing (a relist) still shows a pending: its bind is in flight, so it stays assumed
    live.load([node("n1", cpu="4")], [pod("a", cpu="1")], now=1)
    assert live.state().by_name["n1"].req_cpu == 1000 and live.queue.pods[("shop", "a")].where != ACTIVE
    live.bind_succeeded(a.key, a.uid, datetime(2025, 1, 1, tzinfo=UTC))
    live.queue.done(a)
    live.load([node("n1", cpu="4")], [pod("a", cpu="1")], now=2)  # a listing read before the bind
    assert live.state().by_name["n1"].req_cpu == 1000 and ("shop", "a") not in live.queue
    other = copy.deepcopy(pod("a", cpu="2", uid="uid-a2"))
    live.pod_event("DELETED", pod("a", cpu="1", node_name="n1"), now=3)
    live.pod_event("ADDED", other, now=3)
    assert live.state().by_name["n1"].req_cpu == 0 and live.queue.pods[("shop", "a")].uid == "uid-a2"


# ------------------------------------------------------------------------ Events as kube-scheduler records them


def test_events_are_named_worded_and_made_series_as_the_event_recorder_does():
    from scheduling.recorder import FAILED_SCHEDULING, SCHEDULED, EventRecorder

    recorder = EventRecorder("meridian", "meridian-host-1")
    at = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
    p = pod("web-1")
    first = recorder.record(p, FAILED_SCHEDULING, "0/3 nodes are available: 3 Insufficient cpu.", at)
    assert first is not None and first.verb == "create"
    event = first.body
    assert event["metadata"] == {"name": f"web-1.{int(at.timestamp() * 1e9):x}", "namespace": "shop"}
    assert (event["type"], event["reason"], event["action"], event["eventTime"]) == (
        "Warning", "FailedScheduling", "Scheduling", "2025-01-01T12:00:00.123456Z")
    assert (event["reportingController"], event["reportingInstance"]) == ("meridian", "meridian-host-1")
    assert event["regarding"]["kind"] == "Pod" and event["regarding"]["uid"] == "uid-web-1"
    second = recorder.record(p, FAILED_SCHEDULING, "0/3 nodes are available: 3 Insufficient cpu.", at + timedelta(seconds=1))
    assert second is not None and second.verb == "patch" and second.body["series"]["count"] == 2, "the second makes a series"
    assert recorder.record(p, FAILED_SCHEDULING, "again", at + timedelta(seconds=3)) is None, "later ones only count"
    assert recorder.flush(at + timedelta(minutes=5)) == []
    [final] = recorder.flush(at + timedelta(minutes=7))
    assert final.body["series"]["count"] == 3 and len(recorder) == 0, "written once quiet, then forgotten"
    scheduled = recorder.record(p, SCHEDULED, "Successfully assigned shop/web-1 to n1", at)
    assert scheduled.verb == "create" and scheduled.body["type"] == "Normal" and scheduled.body["action"] == "Binding"
    long = recorder.record(pod("web-2"), FAILED_SCHEDULING, "x" * 2000, at)
    assert len(long.body["note"].encode()) == 1024 and long.body["note"].endswith(" ..."), "upstream's truncateMessage"
