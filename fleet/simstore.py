"""The database side of simulated clusters: their applied objects and their spec."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from .connectors.simulated import Key
from .models import Cluster, SimulatedObject
from .simulator import ClusterSpec

SPEC_FIELDS = ("region", "node_count", "seed", "zones", "gpu_fraction", "workloads_per_100_nodes", "churn_rate",
               "label_change_rate", "not_ready_rate", "tick_seconds", "kubernetes_version")


SPEC_TYPES: dict[str, tuple[type, ...]] = {
    "region": (str,), "node_count": (int,), "seed": (int,), "zones": (int,), "gpu_fraction": (int, float),
    "workloads_per_100_nodes": (int,), "churn_rate": (int, float), "label_change_rate": (int, float),
    "not_ready_rate": (int, float), "tick_seconds": (int, float), "kubernetes_version": (str,),
}
LIMITS = {"node_count": (1, 20_000), "zones": (1, 8), "workloads_per_100_nodes": (0, 1000), "tick_seconds": (1, 3600),
          "gpu_fraction": (0, 1), "churn_rate": (0, 1), "label_change_rate": (0, 1), "not_ready_rate": (0, 1)}


def spec_problems(config: dict[str, Any]) -> list[str]:
    """What is wrong with a simulated cluster's ``connector_config``, field by field."""
    problems = []
    for key, value in config.items():
        if key not in SPEC_TYPES:
            problems.append(_("%(key)s: unknown setting (known: %(known)s)") % {"key": key, "known": ", ".join(SPEC_FIELDS)})
        elif isinstance(value, bool) or not isinstance(value, SPEC_TYPES[key]):
            types = " or ".join(t.__name__ for t in SPEC_TYPES[key])
            problems.append(_("%(key)s: must be %(types)s") % {"key": key, "types": types})
        elif key in LIMITS and not LIMITS[key][0] <= value <= LIMITS[key][1]:
            problems.append(_("%(key)s: must be between %(low)s and %(high)s") % {"key": key, "low": LIMITS[key][0],
                                                                                  "high": LIMITS[key][1]})
    return problems


def spec_for(cluster: Cluster) -> ClusterSpec:
    """A cluster's simulation parameters from ``connector_config`` (unknown keys ignored)."""
    config = cluster.connector_config or {}
    values: dict[str, Any] = {k: config[k] for k in SPEC_FIELDS if k in config}
    values.setdefault("region", cluster.labels.get("topology.kubernetes.io/region", cluster.name.split("-")[0]))
    values.setdefault("node_count", 100)
    values.setdefault("seed", cluster.pk or 1)
    return ClusterSpec(name=cluster.name, **values)


def config_for(spec: ClusterSpec) -> dict[str, Any]:
    return {k: getattr(spec, k) for k in SPEC_FIELDS}


class DatabaseObjectStore:
    """Objects applied to one simulated cluster, one row each."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _rows(self):
        return SimulatedObject.objects.filter(cluster=self.cluster)

    def get(self, key: Key) -> dict[str, Any] | None:
        api_version, kind, namespace, name = key
        row = self._rows().filter(api_version=api_version, kind=kind, namespace=namespace, name=name).first()
        return row.body if row else None

    def put(self, key: Key, obj: dict[str, Any]) -> None:
        api_version, kind, namespace, name = key
        SimulatedObject.objects.update_or_create(
            cluster=self.cluster, api_version=api_version, kind=kind, namespace=namespace, name=name, defaults={"body": obj}
        )

    def delete(self, key: Key) -> bool:
        api_version, kind, namespace, name = key
        deleted, _ = self._rows().filter(api_version=api_version, kind=kind, namespace=namespace, name=name).delete()
        return bool(deleted)

    def all(self) -> list[dict[str, Any]]:
        return list(self._rows().order_by("pk").values_list("body", flat=True))
