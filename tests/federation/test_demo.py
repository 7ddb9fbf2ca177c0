"""The demo `make run` seeds: policies, a 300-replica storefront spread by water level with its
ConfigMap following it, journey 4's 30-replica checkout on three clusters, and four weeks of
simulated water-level history (journey 5)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from federation.models import FederatedObject, PropagationPolicy, WaterLevelRollup, WaterLevelSample

pytestmark = pytest.mark.django_db


def test_the_demo_places_the_storefront_and_its_config_and_seeds_once(fleet3):
    call_command("seed_federation_demo", if_empty=True)
    web = FederatedObject.objects.get(name="storefront")
    config = FederatedObject.objects.get(name="storefront-config")
    assert sum(web.placement.values()) == 300
    assert web.schedule["weights_source"] == "dynamic"
    assert web.phase == FederatedObject.Phase.READY and web.status["availableReplicas"] == 300
    assert set(config.placement) == set(web.placement), "the ConfigMap follows the storefront"
    checkout = FederatedObject.objects.get(name="checkout")
    assert set(checkout.placement) == {"bj-1", "sh-1", "gz-1"} and sum(checkout.placement.values()) == 30
    assert all(checkout.placement.values()), "every one of the three clusters runs some"
    hourly = WaterLevelRollup.objects.filter(grain="hour")
    assert hourly.count() == 672 * len(fleet3), "four weeks of hours"
    assert WaterLevelRollup.objects.filter(grain="day").count() >= 27 * len(fleet3)
    assert WaterLevelSample.objects.count() == 289 * len(fleet3), "a raw day every 5 minutes (the oldest aged out as the live sample came)"
    call_command("seed_federation_demo", if_empty=True)
    assert PropagationPolicy.objects.count() == 4 and FederatedObject.objects.count() == 3


def test_the_history_command_replaces_the_history(fleet3, capsys):
    call_command("simulate_water_history", days=7, raw_minutes=10)
    assert WaterLevelRollup.objects.filter(grain="hour").count() == 168 * len(fleet3)
    assert "7 days of water-level history for 3 clusters" in capsys.readouterr().out
    call_command("simulate_water_history", days=2)
    assert WaterLevelRollup.objects.filter(grain="hour").count() == 48 * len(fleet3), "replaced, not added"
