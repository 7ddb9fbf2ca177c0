"""The allocator service over the database: the seed's example, sellable rules, release, audit."""

from __future__ import annotations

import pytest

from core.errors import Conflict, NotFound, Refused
from core.models import Job, ObjectChange
from fleet.models import Cluster
from scheduling.cpu import allocation, delivery, store
from scheduling.cpu.cpuset import parse_cpuset
from scheduling.models import CPUAllocation, CPUClaim, NodeCPU

from .cpu_fixtures import SEED_RESERVED, seed_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster():
    return Cluster.objects.create(name="db-pool", connector=Cluster.ConnectorKind.SIMULATED)


@pytest.fixture
def host(cluster):
    return seed_node(cluster)


def test_a_104_cpu_host_reserving_8_sells_96(host):
    state = store.current_state(host)
    assert len(state.topology) == 104 and len(state.reserved) == 8
    host.refresh_from_db()
    assert (host.cpus, host.sellable, host.exclusive_used, host.exclusive_left) == (104, 96, 0, 96)
    assert state.sellable.physical == 96 and state.sellable.max_instance == 64
    assert host.largest_exclusive == 64  # one instance: at most 2/3 of 96


def test_one_exclusive_instance_is_at_most_64(host):
    with pytest.raises(Conflict) as refused:
        allocation.allocate_exclusive(host, namespace="db", name="big", request=65)
    assert refused.value.code == "instance_cap" and "2/3 of sellable CPUs (64)" in refused.value.detail
    row = allocation.allocate_exclusive(host, namespace="db", name="big", request=64)
    assert len(row.cpus) == 64 and not set(row.cpus) & set(parse_cpuset(SEED_RESERVED))


def test_two_exclusive_and_two_shared_instances_on_one_host(cluster):
    """The customer of the seed: 2 core instances exclusive, 2 others shared, one machine."""
    host = seed_node(cluster, ratio="2")
    a = allocation.allocate_exclusive(host, namespace="db", name="core-a", app="core-a", request=32)
    b = allocation.allocate_exclusive(host, namespace="db", name="core-b", app="core-b", request=32, strategy="Spread")
    s1 = allocation.place_shared(host, namespace="db", name="edge-a", app="edge-a", request_milli=8000, limit_milli=8000)
    s2 = allocation.place_shared(host, namespace="db", name="edge-b", app="edge-b", request_milli=8000, limit_milli=8000)
    assert not set(a.cpus) & set(b.cpus)
    state = store.current_state(host)
    assert len(state.share_pool) == 104 - 8 - 64
    # a = 96 - 2*8 = 80, b = (96*2 - 16)/2 = 88: 80 sellable exclusive, 64 sold, 16 left
    assert (state.sellable.a, state.sellable.b, state.sellable.capacity, state.sellable.left) == (80, 88, 80, 16)
    with pytest.raises(Conflict) as refused:
        allocation.allocate_exclusive(host, namespace="db", name="core-c", request=32)
    assert refused.value.code == "insufficient_cpu" and refused.value.detail == "Insufficient exclusive cpu"
    assert {s1.mode, s2.mode} == {"shared"}


def test_the_seed_figure_two_32c_shared_leave_one_32c_exclusive(cluster):
    host = seed_node(cluster)
    allocation.place_shared(host, namespace="db", name="s1", request_milli=32000, limit_milli=32000)
    allocation.place_shared(host, namespace="db", name="s2", request_milli=32000, limit_milli=32000)
    host.refresh_from_db()
    assert host.exclusive_left == 32 and host.largest_exclusive == 32  # a = 96 - 64 = 32, b = 96 - 64 = 32
    allocation.allocate_exclusive(host, namespace="db", name="e1", request=32)
    with pytest.raises(Conflict):
        allocation.allocate_exclusive(host, namespace="db", name="e2", request=1)
    with pytest.raises(Conflict) as refused:  # a third shared instance would oversell the exclusive CPUs
        allocation.place_shared(host, namespace="db", name="s3", request_milli=1000)
    assert refused.value.detail == "Insufficient shared cpu"


def test_machine_max_list_keeps_one_instance_of_an_app_per_node(host):
    allocation.allocate_exclusive(host, namespace="db", name="inv-0", app="inve", request=4, machine_max={"inve": 1})
    with pytest.raises(Conflict) as refused:
        allocation.place_shared(host, namespace="db", name="inv-1", app="inve", request_milli=1000, machine_max={"inve": 1})
    assert refused.value.code == "machine_max" and "machineMaxList" in refused.value.detail


def test_every_change_is_audited_and_asks_for_delivery(host):
    row = allocation.allocate_exclusive(host, namespace="db", name="a", request=8, reason="new instance")
    entry = ObjectChange.objects.filter(verb="allocate").get()
    assert entry.after["cpuset"] == row.cpuset and entry.reason == "new instance"
    assert Job.objects.filter(task_name=store.DELIVER_TASK, object_id=str(host.pk)).count() == 1
    allocation.allocate_exclusive(host, namespace="db", name="b", request=8)
    assert Job.objects.filter(task_name=store.DELIVER_TASK).count() == 1  # the queued one reads both
    allocation.set_release_isolate(host, "db/a", True, reason="11.11")
    assert ObjectChange.objects.filter(verb="release_isolate_on", reason="11.11").exists()
    state = store.current_state(NodeCPU.objects.get(pk=host.pk))
    assert state.effective_cpuset("db/a") == state.topology.cpu_set - state.reserved
    assert state.exclusive["db/a"].cpus == frozenset(row.cpus)  # the allocation itself is unchanged
    allocation.release(host, "db/a", reason="deleted")
    assert ObjectChange.objects.filter(verb="release", reason="deleted").exists()
    assert CPUAllocation.objects.get(pod_name="a").delivery == CPUAllocation.Delivery.RELEASING
    assert not CPUClaim.objects.filter(allocation__pod_name="a").exists()
    with pytest.raises(NotFound):
        allocation.release(host, "db/a")


def test_the_claims_table_refuses_a_cpu_held_twice(host):
    row = allocation.allocate_exclusive(host, namespace="db", name="a", request=4)
    other = CPUAllocation.objects.create(node_cpu=host, namespace="db", pod_name="rogue", mode="exclusive", cpus=row.cpus[:1])
    with pytest.raises(Conflict) as refused:
        store.claim_cpus(host, other)
    assert refused.value.code == "cpu_taken"


def test_bad_input_is_refused_with_field_errors(host):
    with pytest.raises(Refused) as refused:
        allocation.allocate_exclusive(host, namespace="", name="a/b", request=1)
    assert set(refused.value.errors) == {"namespace", "name"}
    with pytest.raises(Refused) as refused:
        allocation.allocate_exclusive(host, namespace="db", name="a", request=1, strategy="Tightest")
    assert refused.value.field == "strategy"
    allocation.allocate_exclusive(host, namespace="db", name="a", request=1)
    with pytest.raises(Conflict) as refused:
        allocation.allocate_exclusive(host, namespace="db", name="a", request=1)
    assert refused.value.code == "exists"


def test_a_delivery_whose_older_share_pool_lands_after_a_newer_one_writes_the_newer_again(host):
    """Two deliveries of one node at once (the pod scheduler's bind threads, a delivery job): the
    one that read the older state may send its node write last; it must not stop there."""
    import json

    from scheduling.cpu.state import CPU_SHAREPOOL

    allocation.allocate_exclusive(host, namespace="db", name="a", request=4)
    node_writes: list[list[int]] = []

    class Connector:
        raced = False

        def patch(self, api_version, kind, name, patch, namespace=None):
            if kind == "Node" and not Connector.raced:  # the newer delivery overtakes this write
                Connector.raced = True
                allocation.allocate_exclusive(host, namespace="db", name="b", request=4)
                delivery.deliver(host.pk, self)
            if kind == "Node":
                node_writes.append(json.loads(patch["metadata"]["annotations"][CPU_SHAREPOOL])["cpuIDs"])
            return {}

    delivery.deliver(host.pk, Connector())
    host.refresh_from_db()
    assert node_writes[-1] == sorted(store.current_state(host).share_pool), "the node ends with the newest share pool"
    assert len(node_writes) == 3
