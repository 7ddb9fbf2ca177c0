"""Seed the federation demo: policies and a 300-replica storefront spread over the demo fleet
by water level, with its ConfigMap following it, so the pages have real placements."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from core.context import acting_as
from federation import services
from federation.models import FederatedObject, OverridePolicy, PropagationPolicy
from federation.reconcile import reconcile_object
from federation.water import record_samples

POLICIES = {
    "spread-by-water-level": {"schedulingMode": "Divide", "replicaRescheduling": {"avoidDisruption": True}},
    "everywhere": {"schedulingMode": "Duplicate"},
    "two-regions": {"schedulingMode": "Divide", "maxClusters": 2},
}
OVERRIDES = {"region-tuning": {"overrideRules": [{"overriders": {"jsonpatch": [
    {"operator": "add", "path": "/metadata/labels/meridian.io~1federated", "value": "true"}]}}]}}


def storefront(replicas: int = 300, image: str = "registry.local/storefront:1.4.2") -> dict:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "storefront", "namespace": "shop", "labels": {"app": "storefront"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "storefront"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "5%", "maxUnavailable": "5%"}},
            "template": {"metadata": {"labels": {"app": "storefront"}}, "spec": {
                "containers": [{"name": "web", "image": image, "envFrom": [{"configMapRef": {"name": "storefront-config"}}],
                                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                              "limits": {"cpu": "500m", "memory": "512Mi"}}}]}},
        },
    }


CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "storefront-config", "namespace": "shop"},
          "data": {"CACHE_TTL": "30s", "FEATURE_FLAGS": "search-v2"}}


class Command(BaseCommand):
    help = "Create demo propagation/override policies and a federated storefront Deployment unless objects exist."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--if-empty", action="store_true", help="do nothing when any federated object exists")

    def handle(self, *args, **options) -> None:
        if options["if_empty"] and (FederatedObject.objects.exists() or PropagationPolicy.objects.exists()):
            self.stdout.write("federation demo: objects already exist; nothing to seed")
            return
        with acting_as("system:seed-demo"):
            for name, spec in POLICIES.items():
                services.save_policy(PropagationPolicy, namespace="", name=name, spec=spec,
                                     description="Demo policy seeded by make run")
            for name, spec in OVERRIDES.items():
                services.save_policy(OverridePolicy, namespace="", name=name, spec=spec, description="Demo override policy")
            config, _ = services.submit(CONFIG)
            web, _ = services.submit(storefront(), propagation_policy="spread-by-water-level",
                                     override_policy="region-tuning", change_cause="demo seed")
            for fed in (web, config):
                reconcile_object(fed.pk)
            record_samples()
        web.refresh_from_db()
        self.stdout.write(f"federation demo: storefront placed {web.placement} ({web.phase})")
