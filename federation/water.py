"""Water levels per member cluster: what the dashboard shows now and over time.

Deploy rate is requested / allocatable (the seed's 部署率); the dynamic weight is the one a
CPU workload would get now (``weights.dynamic_weights`` over every ready, uncordoned
cluster). One query for the clusters (cordons included), one bulk insert per sample.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core import events
from fleet.models import Cluster

from .models import WaterLevelSample
from .weights import dynamic_weights

#: (key, label, allocatable column, requested column, display divisor, unit)
#: (key, label, allocatable column, requested column, divisor, unit): labels and units as the
#: pages show them (lazily translated; JSON payloads encode them as text).
RESOURCES = (
    ("cpu", gettext_lazy("CPU"), "cpu_allocatable_milli", "cpu_requested_milli", 1000, gettext_lazy("cores")),
    ("memory", gettext_lazy("Memory"), "memory_allocatable_bytes", "memory_requested_bytes", 2**30, "GiB"),
    ("gpu", gettext_lazy("GPU"), "gpu_allocatable", "gpu_requested", 1, gettext_lazy("GPUs")),
)
_COLUMNS = ("name", "ready", "pk", "cordoned", "drain", *(c for r in RESOURCES for c in r[2:4]))


def _cores(milli: int) -> int:
    return -(-milli // 1000) if milli >= 0 else -(-(-milli) // 1000)


def current_weights(rows: list[dict[str, Any]]) -> dict[str, int]:
    """CPU dynamic weights over the clusters that could take new replicas (others get 0)."""
    usable = [r for r in rows if r["ready"] and not r["cordoned"]]
    weights = dynamic_weights([
        (r["name"], {"cpu": _cores(r["cpu_allocatable_milli"])},
         {"cpu": _cores(r["cpu_allocatable_milli"] - r["cpu_requested_milli"])}) for r in usable])
    return {r["name"]: weights.get(r["name"], 0) for r in rows}


def _resource(row: dict[str, Any], key: str, alloc: str, req: str, divisor: int) -> dict[str, Any]:
    allocatable, requested = row[alloc], row[req]
    return {
        "resource": key,
        "allocatable": round(allocatable / divisor, 1),
        "requested": round(requested / divisor, 1),
        "available": round((allocatable - requested) / divisor, 1),
        "deploy_rate": round(100.0 * requested / allocatable, 1) if allocatable else 0.0,
    }


def water_levels() -> dict[str, Any]:
    """Every cluster's levels, its weight and cordon state, and fleet totals."""
    rows = list(Cluster.objects.order_by("name").values(*_COLUMNS))
    weights = current_weights(rows)
    clusters = []
    for row in rows:
        clusters.append({
            "name": row["name"], "ready": row["ready"], "weight": weights[row["name"]],
            "cordoned": row["cordoned"], "draining": row["cordoned"] and row["drain"],
            "resources": {key: _resource(row, key, alloc, req, div) for key, _, alloc, req, div, _ in RESOURCES},
        })
    totals = {}
    for key, _, alloc, req, div, _ in RESOURCES:
        summed = {alloc: sum(r[alloc] for r in rows), req: sum(r[req] for r in rows)}
        totals[key] = _resource(summed, key, alloc, req, div)
    return {"clusters": clusters, "totals": totals, "units": {key: unit for key, _, _, _, _, unit in RESOURCES},
            "at": timezone.now().isoformat()}


def record_samples(now: datetime | None = None) -> int:
    """One history point per cluster; points older than the retention are dropped."""
    now = now or timezone.now()
    rows = list(Cluster.objects.values(*_COLUMNS))
    weights = current_weights(rows)
    WaterLevelSample.objects.bulk_create([
        WaterLevelSample(cluster_id=r["pk"], at=now, weight=weights[r["name"]],
                         **{c: r[c] for res in RESOURCES for c in res[2:4]}) for r in rows])
    retention = timedelta(days=getattr(settings, "MERIDIAN_WATER_LEVEL_RETENTION_DAYS", 7))
    WaterLevelSample.objects.filter(at__lt=now - retention).delete()
    events.publish("water-levels", "water_level.sampled", {"at": now.isoformat(), "clusters": len(rows)})
    return len(rows)


def _sample_times(samples, max_points: int) -> list[datetime]:
    """At most ``max_points`` sample times spread over the window.

    Every sample pass writes one row per cluster at the same time, so the times of one
    cluster in the latest pass are every pass's times: read through the (cluster, at) index
    instead of a DISTINCT over every row of the window.
    """
    latest = samples.order_by("-at").values_list("cluster_id", flat=True).first()
    if latest is None:
        return []
    times = list(samples.filter(cluster_id=latest).order_by("at").values_list("at", flat=True))
    stride = max(1, -(-len(times) // max(1, max_points)))
    picked = times[::stride]
    if times[-1] not in picked:
        picked.append(times[-1])
    return picked


def history(cluster: Cluster | None = None, *, hours: float = 24, max_points: int = 500) -> dict[str, Any]:
    """Series per cluster (or one cluster): times, deploy rate per resource, weight.

    Long windows are thinned in SQL to ``max_points`` sample times, so a day at 500 clusters
    reads ``500 × max_points`` rows, never the whole window.
    """
    since = timezone.now() - timedelta(hours=hours)
    samples = WaterLevelSample.objects.filter(at__gte=since)
    if cluster is not None:
        samples = samples.filter(cluster=cluster)
    times = _sample_times(samples, max_points)
    names = dict(Cluster.objects.values_list("pk", "name"))
    series: dict[str, dict[str, list]] = {}
    fields = ("cluster_id", "at", "weight", *(c for r in RESOURCES for c in r[2:4]))
    for row in samples.filter(at__in=times).order_by("cluster_id", "at").values_list(*fields):
        sample = dict(zip(fields, row, strict=True))
        entry = series.setdefault(names.get(sample["cluster_id"], "?"), {"at": [], "weight": [], "cpu": [], "memory": [], "gpu": []})
        entry["at"].append(sample["at"].isoformat())
        entry["weight"].append(sample["weight"])
        for key, _, alloc, req, _, _ in RESOURCES:
            entry[key].append(round(100.0 * sample[req] / sample[alloc], 1) if sample[alloc] else 0.0)
    return {"since": since.isoformat(), "series": series}
