"""The fleet's list tables: clusters with their water levels, and one cluster's nodes."""

from __future__ import annotations

from typing import Any

import django_tables2 as tables
from django.template.loader import render_to_string
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from core.tables import BaseTable, TimeColumn

from .queries import percent

RESOURCE_INDEX = {"cpu": 0, "memory": 1, "gpu": 2, "pods": 3}


def level_html(level: float, detail: str = "") -> str:
    """The level bar every fleet page draws (``fleet/_level.html``), with an optional figure after it."""
    bar = render_to_string("fleet/_level.html", {"level": level})
    return format_html('{}<span class="muted small">{}</span>', bar, detail) if detail else bar


class ResourceColumn(tables.Column):
    """One resource of ``cluster_water_levels``' row: the bar and requested / allocatable,
    sorted by the level; the export has the level in percent."""

    def __init__(self, resource: str, **kwargs: Any) -> None:
        self.resource = resource
        index = RESOURCE_INDEX[resource]
        super().__init__(accessor=f"resources__{index}", order_by=f"resources__{index}__level", **kwargs)

    def render(self, value: dict[str, Any]) -> str:
        unit = " GiB" if value["resource"] == "memory" else ""
        detail = f"{value['requested']:.0f} / {value['allocatable']:.0f}{unit}"
        return format_html('<span data-sort="{}">{}</span>', value["level"], level_html(value["level"], detail))

    def value(self, value: dict[str, Any]) -> float:
        return value["level"]


class ClusterTable(BaseTable):
    """Clusters with their water levels: rows are ``fleet.queries.cluster_water_levels``' dicts."""

    name = tables.Column(verbose_name=_("Cluster"), linkify=("fleet:cluster-detail", {"name": tables.A("name")}))
    status = tables.Column(verbose_name=_("Status"), accessor="ready", empty_values=())
    nodes = tables.Column(verbose_name=_("Nodes"), accessor="node_count")
    cpu = ResourceColumn("cpu", verbose_name=_("CPU (requested / allocatable)"))
    memory = ResourceColumn("memory", verbose_name=_("Memory"))
    gpu = ResourceColumn("gpu", verbose_name=_("GPU"))
    pods = ResourceColumn("pods", verbose_name=_("Pods"))
    last_sync = TimeColumn(verbose_name=_("Last sync"), format="H:i:s")

    search_fields = ("name", "display_name", "labels")
    export_name = "meridian-clusters"

    class Meta(BaseTable.Meta):
        order_by = ("name",)
        empty_text = _("No clusters registered yet.")
        attrs = {"class": "table", "id": "cluster-table", "data-live-fragment": "", "data-refresh-on": "fleet.summary"}
        row_attrs = {"data-cluster": lambda record: record["name"]}

    def render_status(self, record: dict[str, Any]) -> str:
        ready = (format_html('<span class="badge succeeded">{}</span>', _("Ready")) if record["ready"] else
                 format_html('<span class="badge failed" title="{}">{}</span>', record["status_message"], _("Not ready")))
        if not record["cordoned"]:
            return ready
        state, label = ("draining", _("draining")) if record["drain"] else ("cordoned", _("cordoned"))
        return format_html('{} <span class="badge fed-cordon {}">{}</span>', ready, state, label)

    def value_status(self, record: dict[str, Any]) -> str:
        state = "ready" if record["ready"] else "not ready"
        return f"{state}, {'draining' if record['drain'] else 'cordoned'}" if record["cordoned"] else state

    def render_nodes(self, record: dict[str, Any]) -> str:
        return f"{record['ready_node_count']}/{record['node_count']}"


NODE_FIELDS = ("name", "labels", "ready", "unschedulable", "cpu_allocatable_milli", "cpu_requested_milli",
               "memory_allocatable_bytes", "memory_requested_bytes", "gpu_allocatable", "gpu_requested", "pod_count",
               "cpu_usage_milli")


class NodeTable(BaseTable):
    """A cluster's nodes. Only the name sorts: it is the indexed column (cluster, name), so a
    page stays one index range scan at 200k nodes; levels are computed for the rows shown."""

    name = tables.Column(verbose_name=_("Node"),
                         linkify=("fleet:node-detail", {"cluster": tables.A("cluster_name"), "name": tables.A("name")}))
    status = tables.Column(verbose_name=_("Status"), accessor="ready", orderable=False, empty_values=())
    cpu = tables.Column(verbose_name=_("CPU requested"), accessor="cpu_requested_milli", orderable=False)
    usage = tables.Column(verbose_name=_("CPU used"), accessor="cpu_usage_milli", orderable=False, empty_values=())
    memory = tables.Column(verbose_name=_("Memory requested"), accessor="memory_requested_bytes", orderable=False)
    gpu = tables.Column(verbose_name=_("GPU"), accessor="gpu_allocatable", orderable=False, empty_values=())
    pods = tables.Column(verbose_name=_("Pods"), accessor="pod_count", orderable=False)
    labels = tables.Column(verbose_name=_("Labels"), orderable=False, attrs={"td": {"class": "labels"}})

    search_fields = ("name",)
    export_name = "meridian-nodes"

    class Meta(BaseTable.Meta):
        order_by = ("name",)
        empty_text = _("No nodes match.")
        attrs = {"class": "table", "id": "node-table", "data-live-fragment": "", "data-refresh-on": "cluster.synced"}

    def render_status(self, record) -> str:
        ready = _("Ready") if record.ready else format_html('<span class="error">{}</span>', _("NotReady"))
        return format_html("{} · {}", ready, _("cordoned")) if record.unschedulable else ready

    def value_status(self, record) -> str:
        return ("Ready" if record.ready else "NotReady") + (", cordoned" if record.unschedulable else "")

    def render_cpu(self, record) -> str:
        return level_html(percent(record.cpu_requested_milli, record.cpu_allocatable_milli))

    def value_cpu(self, record) -> float:
        return percent(record.cpu_requested_milli, record.cpu_allocatable_milli)

    def render_usage(self, record) -> str:
        return level_html(percent(record.cpu_usage_milli, record.cpu_allocatable_milli))

    def value_usage(self, record) -> float:
        return percent(record.cpu_usage_milli, record.cpu_allocatable_milli)

    def render_memory(self, record) -> str:
        return level_html(percent(record.memory_requested_bytes, record.memory_allocatable_bytes))

    def value_memory(self, record) -> float:
        return percent(record.memory_requested_bytes, record.memory_allocatable_bytes)

    def render_gpu(self, record) -> str:
        return f"{record.gpu_requested}/{record.gpu_allocatable}" if record.gpu_allocatable else "—"

    def value_gpu(self, record) -> str:
        return f"{record.gpu_requested}/{record.gpu_allocatable}" if record.gpu_allocatable else ""

    def render_labels(self, value: dict[str, str]) -> str:
        shown = [(k, v) for k, v in value.items() if k != "kubernetes.io/hostname"]
        return format_html_join(" ", "<code>{}={}</code>", shown)

    def value_labels(self, value: dict[str, str]) -> str:
        return ",".join(f"{k}={v}" for k, v in value.items())


class NodePodTable(BaseTable):
    """The pods running on one node, with what they request (rows: ``Pod``; sorted by the
    requests' numbers, shown as the pod spec wrote them)."""

    pod = tables.Column(verbose_name=_("Pod"), accessor="name", order_by=("namespace", "name"))
    phase = tables.Column(verbose_name=_("Phase"))
    cpu = tables.Column(verbose_name="CPU", accessor="requests__cpu", order_by=("cpu_request_milli",), default="0")
    memory = tables.Column(verbose_name=_("Memory"), accessor="requests__memory", order_by=("memory_request_bytes",),
                           default="0")

    search_fields = ("namespace", "name", "phase")
    export_name = "meridian-pods"

    class Meta(BaseTable.Meta):
        order_by = ("pod",)
        empty_text = _("No pods.")
        attrs = {"class": "table", "id": "pod-table"}
        row_attrs = {"data-pod": lambda record: f"{record.namespace}/{record.name}"}

    def render_pod(self, record) -> str:
        return f"{record.namespace}/{record.name}"

    def value_pod(self, record) -> str:
        return f"{record.namespace}/{record.name}"
