"""The demo `make run` seeds: policies, a 300-replica storefront spread by water level with its
ConfigMap following it, and a first water-level sample."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from federation.models import FederatedObject, PropagationPolicy, WaterLevelSample

pytestmark = pytest.mark.django_db


def test_the_demo_places_the_storefront_and_its_config_and_seeds_once(fleet3):
    call_command("seed_federation_demo", if_empty=True)
    web = FederatedObject.objects.get(name="storefront")
    config = FederatedObject.objects.get(name="storefront-config")
    assert sum(web.placement.values()) == 300
    assert web.schedule["weights_source"] == "dynamic"
    assert web.phase == FederatedObject.Phase.READY and web.status["availableReplicas"] == 300
    assert set(config.placement) == set(web.placement), "the ConfigMap follows the storefront"
    assert WaterLevelSample.objects.count() == len(fleet3)
    call_command("seed_federation_demo", if_empty=True)
    assert PropagationPolicy.objects.count() == 3 and FederatedObject.objects.count() == 2
