"""The demo quota tree on a synced demo fleet, and a workload admitted through the webhook
landing in the inventory, where the resync then finds exactly what admission charged."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from fleet.models import Cluster
from fleet.services import connector_for
from fleet.simstore import config_for
from fleet.simulator import QUOTA_GROUPS, demo_fleet
from fleet.sync import sync_cluster
from fleet.tokens import issue_token
from kube.quantity import parse_quantity
from quotas.models import QuotaCharge, QuotaGroup
from quotas.reconcile import resync_all

from .conftest import deployment, post_review, review

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db) -> list[Cluster]:
    clusters = []
    for spec in demo_fleet(seed=7, clusters=2, nodes=150):
        cluster = Cluster.objects.create(name=spec.name, connector="simulated", connector_config=config_for(spec))
        with connector_for(cluster) as connector:
            sync_cluster(cluster, connector)
        clusters.append(cluster)
    return clusters


def test_the_demo_tree_is_sized_to_the_fleet_and_consistent(demo):
    call_command("seed_quotas_demo", if_empty=True)
    assert set(QuotaGroup.objects.values_list("name", flat=True)) == set(QUOTA_GROUPS) | {"vision-segmentation"}
    vision = QuotaGroup.objects.get(name="vision")
    assert sorted(vision.children.values_list("name", flat=True)) == ["vision-detection", "vision-ocr", "vision-segmentation"]
    a100 = "requests.nvidia.com/gpu.A100"
    for child in vision.children.all():
        assert child.hard[a100] == "128" and parse_quantity(child.used[a100]) <= parse_quantity("88"), \
            f"{child.name}: room to give 40 A100s away (journey 3)"
    for group in QuotaGroup.objects.all():
        used, hard = parse_quantity(group.used["limits.cpu"]), parse_quantity(group.hard["limits.cpu"])
        assert used <= hard, group.name
        if group.self_used["limits.cpu"] != "0":
            assert used.as_decimal() >= hard.as_decimal() / 2, f"{group.name} is sized to its usage"
    assert set(vision.children.first().hard) >= set(vision.hard), "children carry every key of their parent"
    call_command("seed_quotas_demo", if_empty=True)
    assert QuotaGroup.objects.count() == len(QUOTA_GROUPS) + 1, "seeding twice changes nothing"
    assert resync_all()["groups_changed"] == 0, "the seeded status is what a resync computes"


def test_an_admitted_workload_is_run_by_the_simulated_cluster_and_charged_once(client, demo):
    call_command("seed_quotas_demo", if_empty=True)
    cluster = demo[0]
    token = issue_token(cluster, "webhook")[1]
    group = QuotaGroup.objects.get(name="ads-serving")
    before = parse_quantity(group.used["limits.cpu"])
    room = parse_quantity(group.hard["limits.cpu"]) - before
    cores = max(1, room.value() // 4)
    obj = deployment("checkout", group="ads-serving", cpu=str(cores), replicas=2, namespace="ads")
    obj["metadata"]["namespace"] = "ads"
    assert post_review(client, token, review(obj, namespace="ads"))["allowed"] is True
    assert parse_quantity(QuotaGroup.objects.get(name="ads-serving").used["limits.cpu"]) == before + parse_quantity(str(2 * cores))
    with connector_for(cluster) as connector:
        connector.apply(obj)
        sync_cluster(cluster, connector)
    resync_all()
    charge = QuotaCharge.objects.get(name="checkout")
    assert charge.observed is True and charge.replicas == 2
    after = parse_quantity(QuotaGroup.objects.get(name="ads-serving").used["limits.cpu"])
    assert after == before + parse_quantity(str(2 * cores)), "the resync finds what admission charged, counted once"


def test_the_demo_tree_seeds_a_fleet_larger_than_it_was_sized_for(db):
    """The fixed starting values fit 2,000 nodes; a larger fleet's workloads outgrew vision's
    children and the fit was refused ("parent "vision" has 0 of limits.cpu left")."""
    for spec in demo_fleet(seed=7, clusters=3, nodes=9000):
        cluster = Cluster.objects.create(name=spec.name, connector="simulated", connector_config=config_for(spec))
        with connector_for(cluster) as connector:
            sync_cluster(cluster, connector)
    call_command("seed_quotas_demo")
    for group in QuotaGroup.objects.all():
        used, hard = parse_quantity(group.used["limits.cpu"]), parse_quantity(group.hard["limits.cpu"])
        assert used <= hard, group.name
    assert resync_all()["groups_changed"] == 0
