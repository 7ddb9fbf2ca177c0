"""The seed examples on a synced demo fleet: matching, simulated agents, Katalyst mirror, a real worker."""

from __future__ import annotations

import time

import pytest

from core.sharding import shard_queue
from fleet.connectors.simulated import SimulatedConnector
from fleet.models import Cluster, Node, SimulatedObject
from fleet.simstore import DatabaseObjectStore, config_for, spec_for
from fleet.simulator import CHURN_TICKS, EPOCH, demo_fleet, node_indices
from fleet.sync import sync_cluster
from nodeconfig.models import ConfigTarget, NodeConfig
from nodeconfig.rollout import progress
from nodeconfig.services import delete_target, import_manifests
from nodeconfig.tasks import push_to_cluster, simulate_agents
from tests.workers import solo_worker

from .conftest import SEED_EXAMPLES, seed_examples, settle

pytestmark = pytest.mark.django_db


#: The simulator's clock for the sync: a fixed instant, so the churn window (which nodes left,
#: which spares joined) is the same on every run instead of whatever the wall clock says.
SIM_NOW = float(EPOCH)


def demo_node_count() -> int:
    """How many nodes the two demo clusters have at ``SIM_NOW``, from the simulator itself."""
    specs = demo_fleet(seed=7, clusters=2, nodes=120)
    return sum(len(node_indices(spec, spec.tick(SIM_NOW) // CHURN_TICKS)) for spec in specs)


@pytest.fixture
def demo(db):
    clusters = []
    for spec in demo_fleet(seed=7, clusters=2, nodes=120):
        cluster = Cluster.objects.create(name=spec.name, connector="simulated", connector_config=config_for(spec))
        connector = SimulatedConnector(spec_for(cluster), store=DatabaseObjectStore(cluster), clock=lambda: SIM_NOW)
        with connector:
            sync_cluster(cluster, connector)
        clusters.append(cluster)
    return clusters


def gray_yaml() -> str:
    """The grey-release example naming two real demo nodes instead of node1/node2."""
    first, second = Node.objects.order_by("name").values_list("name", flat=True)[:2]
    return seed_examples(first, second)


def test_the_seed_examples_reach_the_right_demo_nodes_and_the_simulated_agents_ack(demo):
    import_manifests(gray_yaml(), reason="seed examples")
    for target in ConfigTarget.objects.all():
        settle(target)
    hdd = set(Node.objects.filter(labels__diskMode="hdd").values_list("name", flat=True))
    first, second = Node.objects.order_by("name").values_list("name", flat=True)[:2]
    got = dict(NodeConfig.objects.values_list("node__name", "target__name"))
    assert len(got) == Node.objects.count() == demo_node_count() >= 120
    assert got[first] == got[second] == "numa-memory-eviction-gray"
    assert {n for n, t in got.items() if t == "hybrid-for-disk-hdd"} == hdd - {first, second}
    assert {t for n, t in got.items() if n not in hdd | {first, second}} == {"global"}
    # agents report after a per-node delay (2–20 s after delivery), 1% with an error
    from django.utils import timezone

    now = timezone.now().timestamp()
    assert simulate_agents(now=now) == 0
    simulate_agents(now=now + 60)
    for target in ConfigTarget.objects.all():
        counts = progress(target)
        assert counts["pending"] == 0 and counts["applied"] + counts["failed"] == counts["targeted"] > 0
        assert counts["failed"] <= max(1, counts["targeted"] // 10)
    assert simulate_agents(now=now + 120) == 0  # nothing left to report


def test_an_unchanged_node_list_as_written_matches_nothing_but_is_accepted(demo):
    results = import_manifests(SEED_EXAMPLES)
    assert [created for _, created in results] == [True, True, True]
    gray = ConfigTarget.objects.get(name="numa-memory-eviction-gray")
    settle(gray)
    assert not NodeConfig.objects.filter(target=gray).exists()


def running_katalyst(cluster: Cluster) -> Cluster:
    """The demo cluster running Katalyst's agents, with the seed's targets and the gray one settled."""
    cluster.connector_config = cluster.connector_config | {"katalyst_agents": True}
    cluster.save()
    import_manifests(gray_yaml())
    for target in ConfigTarget.objects.all():
        settle(target)
    return cluster


def test_clusters_running_katalyst_get_cncs_and_target_objects(demo):
    cluster = running_katalyst(demo[0])
    written = push_to_cluster(cluster.name)["written"]
    assert written == Node.objects.filter(cluster=cluster).count()
    node = NodeConfig.objects.filter(cluster=cluster, target__name="hybrid-for-disk-hdd").select_related("node").first()
    cnc = SimulatedObject.objects.get(cluster=cluster, kind="CustomNodeConfig", name=node.node.name).body
    assert cnc["status"]["katalystCustomConfigList"] == [{
        "configType": {"group": "config.katalyst.kubewharf.io", "version": "v1alpha1", "resource": "adminqosconfigurations"},
        "configNamespace": "default", "configName": "hybrid-for-disk-hdd", "hash": node.config_hash}]
    hdd = SimulatedObject.objects.get(cluster=cluster, kind="AdminQoSConfiguration", name="hybrid-for-disk-hdd").body
    assert hdd["spec"]["nodeLabelSelector"] == "diskMode=hdd" and hdd["metadata"]["namespace"] == "default"
    assert push_to_cluster(demo[1].name) == {"written": 0, "removed": 0}  # not a Katalyst cluster


def test_a_deleted_targets_object_leaves_the_clusters_it_was_pushed_to(demo):
    """Katalyst's own controllers read the target objects in a member cluster: one left there
    after its target is deleted in Meridian would still match nodes (the object stayed, a finding
    of the production-style trials). The next push removes the objects of deleted targets that
    Meridian wrote (labelled as its own), and only those."""
    cluster = running_katalyst(demo[0])
    push_to_cluster(cluster.name)
    pushed = set(SimulatedObject.objects.filter(cluster=cluster, kind="AdminQoSConfiguration").values_list("name", flat=True))
    assert "hybrid-for-disk-hdd" in pushed
    hdd = SimulatedObject.objects.get(cluster=cluster, kind="AdminQoSConfiguration", name="hybrid-for-disk-hdd").body
    assert hdd["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "meridian"
    by_hand = {**hdd, "metadata": {"name": "made-by-hand", "namespace": "default"}}
    SimulatedObject.objects.create(cluster=cluster, api_version=hdd["apiVersion"], kind="AdminQoSConfiguration",
                                   namespace="default", name="made-by-hand", body=by_hand)

    target = ConfigTarget.objects.get(name="hybrid-for-disk-hdd")
    moved = list(NodeConfig.objects.filter(cluster=cluster, target=target).values_list("node__name", flat=True))
    delete_target(target, reason="retired")
    settle(target)
    assert push_to_cluster(cluster.name, moved) == {"written": len(moved), "removed": 1}  # what the reconcile queues

    left = set(SimulatedObject.objects.filter(cluster=cluster, kind="AdminQoSConfiguration").values_list("name", flat=True))
    assert left == pushed - {"hybrid-for-disk-hdd"} | {"made-by-hand"}, "only Meridian's object of the deleted target goes"


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_reconciles_after_a_target_change(demo):
    """save_target queues the sharded reconcile after commit; a worker on that shard runs it."""
    import time

    from nodeconfig.models import ConfigType
    from nodeconfig.services import TargetSpec, save_target

    config_type = ConfigType.objects.get(name="AdminQoSConfiguration")
    hdd = Node.objects.filter(labels__diskMode="hdd").count()
    queue = shard_queue(f"nodeconfig-type/{config_type.pk}")
    with solo_worker([queue]):
        target, _ = save_target(config_type, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}))
        for _ in range(300):
            if NodeConfig.objects.filter(target=target).count() == hdd:
                break
            time.sleep(0.1)
    assert NodeConfig.objects.filter(target=target).count() == hdd > 0
    assert ConfigTarget.objects.get(pk=target.pk).matched_node_count == hdd


def test_the_demo_seed_imports_the_machine_type_example_once(demo):
    from django.core.management import call_command

    call_command("seed_nodeconfig_demo", if_empty=True)
    call_command("seed_nodeconfig_demo", if_empty=True)
    target = ConfigTarget.objects.get()
    assert target.name == "hybrid-for-disk-hdd" and target.node_label_selector == "diskMode=hdd,machineModel in (A1,A2,A3)"
    assert target.revisions.get().created_by == "system:seed-demo"


def test_journey_2_can_be_played_on_the_seeded_demo(demo):
    """The demo seed leaves room for journey 2: the A4 HDD target at the default priority
    previews its nodes with no conflict and is accepted; the seeded HDD policy does not already
    give those nodes the 20Gi the journey raises them to (a target with the same body would
    have the same hash: nothing to roll out)."""
    from django.core.management import call_command

    from nodeconfig.models import ConfigType
    from nodeconfig.services import TargetSpec, preview, save_target

    call_command("seed_nodeconfig_demo", if_empty=True)
    settle(ConfigTarget.objects.get())
    a4_hdd = set(Node.objects.filter(labels__diskMode="hdd", labels__machineModel="A4").values_list("name", flat=True))
    assert a4_hdd, "the demo fleet has A4 HDD nodes"
    assert not NodeConfig.objects.filter(node__name__in=a4_hdd).exists(), "they run the type's default (10Gi)"
    config_type = ConfigType.objects.get(name="AdminQoSConfiguration")
    spec = TargetSpec(name="a4-hdd-eviction", node_label_selector="diskMode=hdd,machineModel=A4",
                      config={"evictionConfig": {"memoryPressureEvictionConfig": {"systemFreeMemoryThresholdMinimum": "20Gi"}}})
    seen = preview(config_type, spec)
    assert seen["problem"] is None and seen["conflicts"] == [] and seen["matched_count"] == len(a4_hdd)
    target, created = save_target(config_type, spec)
    settle(target)
    assert created and set(NodeConfig.objects.filter(target=target).values_list("node__name", flat=True)) == a4_hdd
    # the upstream example as written (machineModel unconstrained) overlaps it at priority 0
    from core.errors import Refused

    with pytest.raises(Refused) as refused:
        import_manifests(SEED_EXAMPLES.split("\n---\n")[3].replace("hybrid-for-disk-hdd", "hdd-as-written"))
    assert refused.value.code == "selector_overlap" and "a4-hdd-eviction" in refused.value.detail


@pytest.mark.django_db(transaction=True)
def test_push_jobs_are_routed_to_their_clusters_shard_and_run(fleet, admin_qos, purge_shard_queues):
    """A target change reaches a Katalyst cluster's CNCs through jobs: the reconcile job queues a
    push job per such cluster (``core.jobs.enqueue``), the shard router sends it to the cluster's
    queue, and a worker of that shard runs it. ``.delay(cluster, names)`` routes the same way
    (the old router called the key function with every argument: TypeError, swallowed after commit)."""
    from config.celery import route_task
    from core.models import Job
    from nodeconfig.models import ConfigType
    from nodeconfig.reconcile import PUSH_TASK
    from nodeconfig.services import RECONCILE_TASK, TargetSpec, save_target
    from nodeconfig.tasks import cluster_shard_key
    from tests.workers import shard_worker, wait_for_job

    from .conftest import type_key

    bj = fleet["bj-1"]
    bj.connector_config = bj.connector_config | {"katalyst_agents": True}
    bj.save()
    hdd_names = sorted(Node.objects.filter(cluster=bj, labels__diskMode="hdd").values_list("name", flat=True))
    config_type = ConfigType.objects.get(pk=admin_qos.pk)
    queue = shard_queue(cluster_shard_key("bj-1"))
    for args, kwargs in ((("bj-1", hdd_names), {}), (("bj-1",), {"node_names": hdd_names}),
                         ((), {"cluster_name": "bj-1", "node_names": None, "job_id": 7})):
        assert route_task(PUSH_TASK, args, kwargs, {}) == {"queue": queue}, (args, kwargs)

    with shard_worker(type_key(config_type), cluster_shard_key("bj-1")):
        target, _ = save_target(config_type, TargetSpec(name="hdd", node_label_selector="diskMode=hdd", config={}))
        reconciled = wait_for_job(Job.objects.get(kind=RECONCILE_TASK, object_id=str(target.pk)))
        assert reconciled.status == Job.Status.SUCCEEDED, reconciled.error
        pushes = Job.objects.filter(kind=PUSH_TASK)
        assert pushes.count() == 1, "one push, for the one cluster that runs Katalyst agents"
        push = wait_for_job(pushes.get())
    assert push.status == Job.Status.SUCCEEDED, push.error
    assert push.task_args == ["bj-1", hdd_names] and push.result == {"written": len(hdd_names), "removed": 0}
    cnc = SimulatedObject.objects.get(cluster=bj, kind="CustomNodeConfig", name=hdd_names[0]).body
    assert [entry["configName"] for entry in cnc["status"]["katalystCustomConfigList"]] == ["hdd"]

    with shard_worker(cluster_shard_key("bj-1")):  # a worker of that one shard only
        sent = push_to_cluster.delay("bj-1", ["bj-1-n001"])
        deadline = time.monotonic() + 30
        while not Job.objects.filter(task_id=sent.id).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        delayed = wait_for_job(Job.objects.get(task_id=sent.id))
    assert delayed.status == Job.Status.SUCCEEDED and delayed.result == {"written": 1, "removed": 0}
    assert SimulatedObject.objects.filter(cluster=bj, kind="CustomNodeConfig", name="bj-1-n001").exists()
