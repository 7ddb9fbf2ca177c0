"""The CPU co-location demo seed: every demo node gets its topology; one host runs the seed's example."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from fleet.models import Node
from fleet.services import connector_for
from scheduling.models import CPUAllocation, NodeCPU

pytestmark = pytest.mark.django_db


def test_seed_scheduling_demo(client, viewer):
    call_command("seed_demo", clusters=2, nodes=60, seed=3, stdout=open("/dev/null", "w"))
    call_command("seed_scheduling_demo", stdout=open("/dev/null", "w"))
    assert NodeCPU.objects.count() == Node.objects.exclude(cpu_topology__isnull=True).count() > 0
    host = NodeCPU.objects.get(cpus=104)
    rows = {r.pod_name: r for r in CPUAllocation.objects.filter(node_cpu=host, namespace="db")}
    assert set(rows) == {"mysql-core-a", "mysql-core-b", "mysql-edge-a", "mysql-edge-b"}
    assert {r.delivery for r in rows.values()} == {"delivered"}
    assert (host.sellable, host.reserved_cpus, host.io_queue_state) == (96, "0-3,52-55", "accepted")
    with connector_for(host.cluster) as connector:
        pod = connector.get("v1", "Pod", "mysql-core-a", namespace="db")
    assert json.loads(pod["metadata"]["annotations"]["alloc-status"])["cpu"] == rows["mysql-core-a"].cpus
    client.force_login(viewer)
    page = client.get(reverse("scheduling:cpu-node", args=[host.pk])).content.decode()
    assert page.count('data-owner="db/mysql-core-a"') == 32 and page.count('data-owner="db/mysql-core-b"') == 16
    call_command("seed_scheduling_demo", if_empty=True, stdout=open("/dev/null", "w"))  # idempotent
    assert NodeCPU.objects.filter(cpus=104).count() == 1
