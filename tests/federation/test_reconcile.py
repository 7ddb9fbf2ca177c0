"""The reconciler against simulated member clusters: spread by dynamic weights, pods really
run, status aggregates, a cross-cluster rolling upgrade never exceeds maxUnavailable at any
step, drains respect the budget, and a failing member is retried without holding others."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from core import jobs
from core.models import Job
from federation import services
from federation.models import FederatedObject, MemberObject, OverridePolicy, PropagationPolicy
from federation.reconcile import RECONCILE_TASK, fleet_snapshot, needs_attention, reconcile_object, resync_backoff
from federation.render import TEMPLATE_HASH_ANNOTATION
from federation.tasks import reconcile_object_task, reschedule_all_task, resync
from federation.weights import dynamic_weights
from fleet import services as fleet_services
from fleet.models import Cluster, Pod
from fleet.services import connector_for

from .conftest import deployment, sync

pytestmark = pytest.mark.django_db


def member_states(fed: FederatedObject) -> dict[str, dict]:
    """Each member Deployment's status, read from its cluster right now."""
    states = {}
    for member in fed.members.select_related("cluster"):
        with connector_for(member.cluster) as connector:
            obj = connector.get("apps/v1", "Deployment", fed.name, namespace=fed.namespace)
        if obj is not None:
            states[member.cluster.name] = obj
    return states


def total_available(fed: FederatedObject) -> int:
    return sum(int((o.get("status") or {}).get("availableReplicas", 0)) for o in member_states(fed).values())


def total_pods(fed: FederatedObject) -> int:
    return sum(int((o.get("status") or {}).get("replicas", 0)) for o in member_states(fed).values())


def converge(fed: FederatedObject, *, seconds: float = 90, on_step=None) -> FederatedObject:
    """Reconcile once per simulated tick until Ready, calling ``on_step`` after every pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        reconcile_object(fed.pk)
        fed.refresh_from_db()
        if on_step:
            on_step(fed)
        if fed.phase == FederatedObject.Phase.READY:
            return fed
        time.sleep(0.35)
    raise AssertionError(f"{fed} did not converge: {fed.phase} {fed.message}")


def test_300_replicas_spread_by_dynamic_weights_run_and_become_ready(fleet3, spread_policy):
    fed, created = services.submit(deployment("shop-web", replicas=300), propagation_policy="spread")
    assert created
    fed = converge(fed)
    fleet = fleet_snapshot()
    expected = dynamic_weights([(i.name, {"cpu": -(-i.allocatable["cpu"] // 1000)},
                                 {"cpu": -(-i.available["cpu"] // 1000)}) for i in fleet.infos])
    assert fed.schedule["weights_source"] == "dynamic"
    assert fed.schedule["weights"] == expected
    assert sum(fed.placement.values()) == 300
    biggest = max(expected, key=expected.get)
    assert fed.placement[biggest] == max(fed.placement.values()), "the cluster with most room gets most replicas"
    assert fed.status["availableReplicas"] == fed.status["readyReplicas"] == 300
    assert fed.status["clusters"].keys() == fed.placement.keys()
    for cluster in Cluster.objects.filter(name__in=fed.placement):
        sync(cluster)
        running = Pod.objects.filter(cluster=cluster, namespace="shop", phase="Running", labels__app="shop-web").count()
        assert running == fed.placement[cluster.name], cluster.name


def test_an_image_change_rolls_across_clusters_within_max_unavailable_at_every_step(fleet3, spread_policy):
    template = deployment("shop-web", replicas=300, max_surge="5%", max_unavailable="5%")
    fed, _ = services.submit(template, propagation_policy="spread")
    fed = converge(fed)
    max_unavailable, max_surge = 15, 15  # 5% of 300, unavailable rounded down, surge up
    template["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    fed, created = services.submit(template, change_cause="nginx 1.28")
    assert not created and fed.revision == 2

    worst = {"unavailable": 0, "surge": 0, "steps": 0}
    rolling_clusters: set[str] = set()

    def check(current: FederatedObject) -> None:
        states = member_states(current)
        available = sum(int(o["status"].get("availableReplicas", 0)) for o in states.values())
        pods = sum(int(o["status"].get("replicas", 0)) for o in states.values())
        worst["unavailable"] = max(worst["unavailable"], 300 - available)
        worst["surge"] = max(worst["surge"], pods - 300)
        worst["steps"] += 1
        assert 300 - available <= max_unavailable, f"{300 - available} unavailable at step {worst['steps']}"
        assert pods - 300 <= max_surge, f"{pods - 300} surge pods at step {worst['steps']}"
        rolling_clusters.update(name for name, o in states.items()
                                if o["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION] == current.template_hash
                                and o["status"].get("updatedReplicas", 0) < o["spec"]["replicas"])

    fed = converge(fed, seconds=180, on_step=check)
    assert worst["steps"] > 3, "the rollout took several steps"
    assert worst["unavailable"] > 0, "the budget was used"
    for obj in member_states(fed).values():
        assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
        assert obj["status"]["updatedReplicas"] == obj["spec"]["replicas"]
    assert fed.status["updatedReplicas"] == 300
    assert len(rolling_clusters) >= 2


def test_pause_holds_clusters_that_have_not_started(fleet3, spread_policy):
    template = deployment("api", replicas=60, max_surge=0, max_unavailable=3)
    fed, _ = services.submit(template, propagation_policy="spread")
    fed = converge(fed)
    services.set_paused(fed, True)
    template["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    fed, _ = services.submit(template)
    for _ in range(4):
        reconcile_object(fed.pk)
        time.sleep(0.4)
    fed.refresh_from_db()
    assert fed.phase == FederatedObject.Phase.ROLLING
    updated = [name for name, o in member_states(fed).items()
               if o["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION] == fed.template_hash]
    assert updated == [], "nothing starts while paused"
    services.set_paused(fed, False)
    fed = converge(fed)
    assert fed.status["updatedReplicas"] == 60


def test_rollback_rolls_the_earlier_template_out_as_a_new_revision(fleet3, spread_policy):
    template = deployment("api", replicas=20)
    fed, _ = services.submit(template, propagation_policy="spread")
    converge(fed)
    template["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:broken"
    fed, _ = services.submit(template)
    revision = services.rollback(fed, 1, reason="broken image")
    assert (revision.number, revision.rollback_of, revision.action) == (3, 1, "rollback")
    fed.refresh_from_db()
    assert fed.revision == 3 and fed.template == revision.template
    fed = converge(fed)
    for obj in member_states(fed).values():
        assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"


def test_drain_moves_replicas_away_within_the_budget(fleet3, spread_policy):
    fed, _ = services.submit(deployment("api", replicas=90, max_surge=10, max_unavailable=10), propagation_policy="spread")
    fed = converge(fed)
    victim = Cluster.objects.get(name=max(fed.placement, key=fed.placement.get))
    fleet_services.cordon(victim, drain=True, reason="kernel upgrade")

    def check(current: FederatedObject) -> None:
        assert 90 - total_available(current) <= 10
        assert total_pods(current) - 90 <= 10

    fed = converge(fed, on_step=check)
    assert victim.name not in fed.placement
    assert sum(fed.placement.values()) == 90
    assert victim.name not in member_states(fed), "the member object was deleted from the drained cluster"
    assert "cordoned" in " ".join(fed.schedule["filtered"].get(victim.name, []))
    fleet_services.uncordon(victim)
    assert not Cluster.objects.filter(cordoned=True).exists()


def test_cordon_without_drain_keeps_running_replicas_but_takes_no_new_ones(fleet3, spread_policy):
    fed, _ = services.submit(deployment("api", replicas=30), propagation_policy="spread")
    fed = converge(fed)
    cordoned = Cluster.objects.get(name=min(fed.placement, key=fed.placement.get))
    kept = fed.placement[cordoned.name]
    fleet_services.cordon(cordoned, reason="maintenance")
    template = deployment("api", replicas=60)
    fed, _ = services.submit(template)
    fed = converge(fed)
    assert fed.placement[cordoned.name] <= kept
    assert sum(fed.placement.values()) == 60


def test_a_member_that_fails_to_apply_shows_the_error_is_retried_and_the_others_proceed(fleet3):
    bad, good = fleet3[0], fleet3[1:]
    PropagationPolicy.objects.create(name="all", spec={"schedulingMode": "Duplicate"})
    OverridePolicy.objects.create(name="break-one", spec={"overrideRules": [
        {"targetClusters": {"clusters": [bad.name]},
         "overriders": {"jsonpatch": [{"operator": "replace", "path": "/data/missing", "value": "x"}]}}]})
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "shop"},
              "data": {"mode": "fast"}}
    fed, _ = services.submit(config, propagation_policy="all", override_policy="break-one")
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    assert fed.phase == FederatedObject.Phase.DEGRADED
    assert bad.name in fed.message
    failed = fed.members.get(cluster=bad)
    assert failed.state == MemberObject.State.ERROR and "missing" in failed.error and failed.attempts == 1
    assert fed.status["clusters"][bad.name]["error"] == failed.error
    for cluster in good:
        member = fed.members.get(cluster=cluster)
        assert member.state == MemberObject.State.APPLIED
        with connector_for(cluster) as connector:
            assert connector.get("v1", "ConfigMap", "settings", namespace="shop")["data"] == {"mode": "fast"}
    assert fed.pk in needs_attention()

    MemberObject.objects.filter(pk=failed.pk).update(next_retry=None)
    OverridePolicy.objects.filter(name="break-one").update(spec={"overrideRules": [
        {"targetClusters": {"clusters": [bad.name]},
         "overriders": {"jsonpatch": [{"operator": "add", "path": "/data/region", "value": bad.name}]}}]})
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    assert fed.phase == FederatedObject.Phase.READY
    with connector_for(bad) as connector:
        assert connector.get("v1", "ConfigMap", "settings", namespace="shop")["data"] == {"mode": "fast", "region": bad.name}


def test_an_unreachable_member_is_retried_with_backoff(fleet3):
    PropagationPolicy.objects.create(name="all", spec={"schedulingMode": "Duplicate"})
    broken = fleet3[0]
    Cluster.objects.filter(pk=broken.pk).update(connector="kubernetes", connector_config={"kubeconfig_path": "/nonexistent"})
    fed, _ = services.submit({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls", "namespace": "shop"},
                              "data": {"k": "dg=="}}, propagation_policy="all")
    reconcile_object(fed.pk)
    member = fed.members.get(cluster=broken)
    assert member.state == MemberObject.State.ERROR and member.next_retry is not None
    first_retry = member.next_retry
    reconcile_object(fed.pk)
    member.refresh_from_db()
    assert member.attempts == 1 and member.next_retry == first_retry, "not retried before its time"
    MemberObject.objects.filter(pk=member.pk).update(next_retry=None)
    reconcile_object(fed.pk)
    member.refresh_from_db()
    assert member.attempts == 2 and member.next_retry > first_retry


def test_followers_go_where_their_workload_goes(fleet3):
    PropagationPolicy.objects.create(name="two", spec={"schedulingMode": "Divide", "maxClusters": 2})
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-config", "namespace": "shop"}, "data": {}}
    follower, _ = services.submit(config)
    web = deployment("web", replicas=10)
    web["spec"]["template"]["spec"]["volumes"] = [{"name": "c", "configMap": {"name": "web-config"}}]
    leader, _ = services.submit(web, propagation_policy="two")
    reconcile_object(leader.pk)
    reconcile_object(follower.pk)
    leader.refresh_from_db()
    follower.refresh_from_db()
    assert len(leader.placement) == 2
    assert set(follower.placement) == set(leader.placement)
    assert follower.phase == FederatedObject.Phase.READY
    assert follower.schedule["follows"] == ["shop/web"]


def test_delete_removes_members_everywhere(fleet3, spread_policy):
    fed, _ = services.submit(deployment("gone", replicas=6), propagation_policy="spread")
    reconcile_object(fed.pk)
    clusters = list(fed.members.values_list("cluster__name", flat=True))
    services.delete(fed)
    assert reconcile_object(fed.pk) is None
    assert not FederatedObject.objects.filter(pk=fed.pk).exists()
    for cluster in Cluster.objects.filter(name__in=clusters):
        with connector_for(cluster) as connector:
            assert connector.get("apps/v1", "Deployment", "gone", namespace="shop") is None


def test_unchanged_inputs_do_not_reschedule(fleet3, spread_policy):
    fed, _ = services.submit(deployment("steady", replicas=12), propagation_policy="spread")
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    first = fed.scheduled_at
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    assert fed.scheduled_at == first
    Cluster.objects.filter(pk=fleet3[0].pk).update(labels={"tier": "gold"})
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    assert fed.scheduled_at > first, "a cluster label change reschedules"


def test_a_full_reschedule_finds_exactly_the_objects_whose_placement_changes(fleet3, spread_policy):
    from federation.reconcile import reschedule_all

    PropagationPolicy.objects.create(name="pinned", spec={"placement": [{"cluster": fleet3[1].name}]})
    spread, _ = services.submit(deployment("spread", replicas=12), propagation_policy="spread")
    pinned, _ = services.submit(deployment("pinned", replicas=4), propagation_policy="pinned")
    for fed in (spread, pinned):
        reconcile_object(fed.pk)
    assert reschedule_all() == ({"objects": 2, "changed": 0}, []), "nothing changed, nothing moves"

    spread.refresh_from_db()
    drained = next(name for name in spread.placement if name != fleet3[1].name)
    Cluster.objects.filter(name=drained).update(cordoned=True, drain=True)
    assert reschedule_all(chunk_size=1) == ({"objects": 2, "changed": 1}, [spread.pk])
    spread.refresh_from_db()
    pinned.refresh_from_db()
    assert spread.schedule_digest == "" and pinned.schedule_digest != ""

    # The periodic task asks for a reconcile job of exactly the changed objects.
    before = set(Job.objects.filter(kind=RECONCILE_TASK).values_list("pk", flat=True))
    assert reschedule_all_task() == {"objects": 2, "changed": 1}
    asked = Job.objects.filter(kind=RECONCILE_TASK).exclude(pk__in=before)
    assert [(job.task_args, job.status) for job in asked] == [([spread.pk, spread.key], Job.Status.PENDING)]
    reconcile_object(spread.pk)
    spread.refresh_from_db()
    assert drained not in spread.placement and sum(spread.placement.values()) == 12


def run_job(job: Job) -> Job:
    """Deliver a job's message as a worker would, with its task id (``core.taskbase.MeridianTask`` runs it as that job)."""
    from celery import current_app

    current_app.tasks[job.task_name].apply(args=job.task_args, kwargs={**job.task_kwargs, "job_id": job.pk}, task_id=job.task_id)
    job.refresh_from_db()
    return job


def test_a_change_asks_for_reconcile_jobs_sent_after_commit_and_running_one_reconciles(
        fleet3, spread_policy, django_capture_on_commit_callbacks, monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(jobs, "dispatch_many", lambda job_ids, countdown=None: sent.extend(job_ids) or len(job_ids))
    with django_capture_on_commit_callbacks(execute=True):
        fed, _ = services.submit(deployment("queued", replicas=6), propagation_policy="spread")
    job = Job.objects.get(kind=RECONCILE_TASK)
    assert job.task_args == [fed.pk, fed.key] and job.status == Job.Status.PENDING
    assert sent == [job.pk], "the message goes out once the change commits"

    done = run_job(job)
    assert done.status == Job.Status.SUCCEEDED and done.result == {"phase": "Ready"}, done.error
    fed.refresh_from_db()
    assert fed.phase == FederatedObject.Phase.READY and sum(fed.placement.values()) == 6
    assert run_job(done).attempts == done.attempts, "a finished job delivered again is dropped"

    with django_capture_on_commit_callbacks(execute=True):
        services.set_paused(fed, True, reason="hold")
        services.reschedule(fed, reason="again")
    assert Job.objects.filter(kind=RECONCILE_TASK, status=Job.Status.PENDING).count() == 2 and len(sent) == 3


def test_live_events_carry_the_consolidated_names(fleet3, spread_policy, django_capture_on_commit_callbacks,
                                                 monkeypatch):
    """object.changed on a submit, one coalesced object.status per object and tick (core.live),
    object.deleted once it is gone, and the fleet's cluster.cordoned on ``fleet`` and the
    cluster's own topic (was federation's cluster_cordoned)."""
    from core import events, live
    from federation.models import OBJECT_LIVE

    sent: list[tuple[str, str, dict]] = []
    monkeypatch.setattr(events, "send_many", lambda items: [sent.append((t, e, dict(d))) or 1 for t, e, d in items])
    monkeypatch.setattr(jobs, "dispatch_many", lambda job_ids, countdown=None: len(job_ids))
    live.publish_pending()
    with django_capture_on_commit_callbacks(execute=True):
        fed, _ = services.submit(deployment("told", replicas=3), propagation_policy="spread")
    assert ("federation", "object.changed", {"id": fed.pk, "key": fed.key, "kind": "Deployment"}) in sent
    with django_capture_on_commit_callbacks(execute=True):
        reconcile_object(fed.pk)
        reconcile_object(fed.pk)
    assert str(fed.pk) in live.pending(OBJECT_LIVE)
    sent.clear()
    live.publish_pending()
    fed.refresh_from_db()
    mine = [(topic, event) for topic, event, data in sent if data.get("id") == fed.pk]
    assert mine == [(f"federation-object-{fed.pk}", "object.status"), ("federation", "object.status")], "one per tick"

    name = next(iter(fed.placement))
    with django_capture_on_commit_callbacks(execute=True):
        fleet_services.cordon(Cluster.objects.get(name=name), drain=True, reason="move")
    assert ("fleet", "cluster.cordoned", {"cluster": name, "drain": True}) in sent
    assert (f"cluster-{name}", "cluster.cordoned", {"cluster": name, "drain": True}) in sent
    with django_capture_on_commit_callbacks(execute=True):
        services.delete(fed)
        assert reconcile_object(fed.pk) is None
    assert ("federation", "object.deleted", {"id": fed.pk, "key": fed.key}) in sent


def test_the_periodic_resync_sends_a_reconcile_of_each_unsettled_object(fleet3, spread_policy, monkeypatch):
    fed, _ = services.submit(deployment("waiting", replicas=3), propagation_policy="spread")
    calls: list[tuple] = []
    monkeypatch.setattr(reconcile_object_task, "delay", lambda *args: calls.append(args))
    assert resync() == {"objects": 1}
    assert calls == [(fed.pk, fed.key)]
    assert not Job.objects.filter(kind="federation.resync").exists(), \
        "a fan-out leaves no job of its own: the reconciles it sends record theirs"


def test_an_object_that_stays_stuck_is_looked_at_less_and_less_often_until_something_changes(fleet3):
    PropagationPolicy.objects.create(name="nowhere", spec={"schedulingMode": "Divide",
                                                           "clusterSelector": {"region": "mars"}})
    fed, _ = services.submit(deployment("lost", replicas=3), propagation_policy="nowhere")
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    assert fed.phase == FederatedObject.Phase.UNSCHEDULABLE
    assert (fed.quiet_passes, fed.next_resync) == (0, None), "the first pass changed its phase: no backoff yet"
    assert fed.pk in needs_attention()

    delays = []
    for _ in range(6):
        started = timezone.now()
        reconcile_object(fed.pk)
        fed.refresh_from_db()
        delays.append((fed.next_resync - fed.updated).total_seconds())  # both stamped with the pass's clock
        assert fed.pk not in needs_attention(now=started), "backing off"
        assert fed.pk in needs_attention(now=fed.next_resync + timedelta(milliseconds=1))
    assert delays == [3, 6, 12, 24, 48, 60], "3 s doubling, at most a minute once stuck"

    PropagationPolicy.objects.filter(name="nowhere").update(spec={"schedulingMode": "Divide"})
    reconcile_object(fed.pk)
    fed.refresh_from_db()
    assert fed.phase != FederatedObject.Phase.UNSCHEDULABLE and sum(fed.placement.values()) == 3
    assert (fed.quiet_passes, fed.next_resync) == (0, None), "progress brings the normal pace back"
    assert fed.pk in needs_attention() or fed.phase == FederatedObject.Phase.READY


def test_a_moving_object_backs_off_at_most_30_seconds(fleet3, spread_policy):
    fed, _ = services.submit(deployment("paced", replicas=3), propagation_policy="spread")
    FederatedObject.objects.filter(pk=fed.pk).update(phase=FederatedObject.Phase.ROLLING, quiet_passes=20)
    fed.refresh_from_db()
    now = timezone.now()
    resync_backoff(fed, progressed=False, now=now)
    assert fed.next_resync == now + timedelta(seconds=30) and fed.quiet_passes == 21
    fed.rollout_paused = True
    resync_backoff(fed, progressed=False, now=now)
    assert fed.next_resync == now + timedelta(seconds=60), "a paused rollout waits for a person: stuck"
    fed.phase = FederatedObject.Phase.READY
    resync_backoff(fed, progressed=False, now=now)
    assert (fed.quiet_passes, fed.next_resync) == (0, None)
