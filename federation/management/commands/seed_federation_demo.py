"""Seed the federation demo: policies, a 300-replica storefront spread over the demo fleet by
water level with its ConfigMap following it, the 30-replica ``checkout`` on three member
clusters (``bj-1``, ``sh-1``, ``gz-1``: journey 4), and four weeks of water-level history
from the simulator (journey 5's capacity review), so the pages have real placements and
charts."""

from __future__ import annotations

from core.management.demo import DemoSeedCommand
from federation import services
from federation.models import FederatedObject, OverridePolicy, PropagationPolicy
from federation.reconcile import reconcile_object
from federation.water import record_samples, simulate_history

POLICIES = {
    "spread-by-water-level": {"schedulingMode": "Divide", "replicaRescheduling": {"avoidDisruption": True}},
    "everywhere": {"schedulingMode": "Duplicate"},
    "two-regions": {"schedulingMode": "Divide", "maxClusters": 2},
    "three-clusters": {"schedulingMode": "Divide", "replicaRescheduling": {"avoidDisruption": True},
                       "placement": [{"cluster": "bj-1"}, {"cluster": "sh-1"}, {"cluster": "gz-1"}]},
}
OVERRIDES = {"region-tuning": {"overrideRules": [{"overriders": {"jsonpatch": [
    {"operator": "add", "path": "/metadata/labels/meridian.io~1federated", "value": "true"}]}}]}}


def _deployment(name: str, replicas: int, rolling_update: dict, container: dict) -> dict:
    """A rolling-update Deployment in ``shop`` of one container, labelled and selected by ``app: <name>``."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling_update},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
        },
    }


def storefront(replicas: int = 300, image: str = "registry.local/storefront:1.4.2") -> dict:
    return _deployment("storefront", replicas, {"maxSurge": "5%", "maxUnavailable": "5%"}, {
        "name": "web", "image": image, "envFrom": [{"configMapRef": {"name": "storefront-config"}}],
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}},
    })


def checkout(replicas: int = 30, image: str = "registry.local/checkout:2.3.0") -> dict:
    """Journey 4's service: 30 replicas, one global budget of 3 unavailable and 3 surge."""
    return _deployment("checkout", replicas, {"maxSurge": 3, "maxUnavailable": 3}, {
        "name": "checkout", "image": image, "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
    })


CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "storefront-config", "namespace": "shop"},
          "data": {"CACHE_TTL": "30s", "FEATURE_FLAGS": "search-v2"}}


class Command(DemoSeedCommand):
    help = "Create demo propagation/override policies and a federated storefront Deployment unless objects exist."

    demo, seeded = "federation demo", "federated objects or policies"

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--history-days", type=int, default=28,
                            help="days of simulated water-level history to write (0: none)")

    def already_seeded(self) -> bool:
        return FederatedObject.objects.exists() or PropagationPolicy.objects.exists()

    def seed(self, **options) -> None:
        for name, spec in POLICIES.items():
            services.save_policy(PropagationPolicy, namespace="", name=name, spec=spec,
                                 description="Demo policy seeded by make run")
        for name, spec in OVERRIDES.items():
            services.save_policy(OverridePolicy, namespace="", name=name, spec=spec, description="Demo override policy")
        config, _ = services.submit(CONFIG)
        web, _ = services.submit(storefront(), propagation_policy="spread-by-water-level",
                                 override_policy="region-tuning", change_cause="demo seed")
        shop, _ = services.submit(checkout(), propagation_policy="three-clusters", change_cause="demo seed")
        for fed in (web, config, shop):
            reconcile_object(fed.pk)
        if options["history_days"]:
            counts = simulate_history(days=options["history_days"])
            self.stdout.write(f"federation demo: {options['history_days']} days of water-level history "
                              f"({counts['hourly']} hourly, {counts['daily']} daily, {counts['raw']} raw points)")
        record_samples()
        web.refresh_from_db()
        shop.refresh_from_db()
        self.stdout.write(f"federation demo: storefront placed {web.placement} ({web.phase}), "
                          f"checkout placed {shop.placement} ({shop.phase})")
