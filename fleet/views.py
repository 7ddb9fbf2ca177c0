"""Fleet pages: clusters with water levels, a cluster's nodes, one node."""

from __future__ import annotations

from django.contrib.auth.mixins import PermissionRequiredMixin
from django.db.models import F
from django.shortcuts import get_object_or_404
from django.views.generic import DetailView, TemplateView

from kube.labels import SelectorError, parse_selector

from .models import Cluster, Node
from .queries import cluster_water_levels, fleet_summary, percent
from .selectors import selector_q

NODE_PAGE = 100


class ClusterListView(PermissionRequiredMixin, TemplateView):
    permission_required = "fleet.view_cluster"
    template_name = "fleet/cluster_list.html"

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {
            "clusters": cluster_water_levels(),
            "summary": fleet_summary(),
            "topics": ["fleet"],
        }


class ClusterDetailView(PermissionRequiredMixin, DetailView):
    """A cluster's water level and a searchable node table (label selector, keyset pages)."""

    permission_required = "fleet.view_cluster"
    model = Cluster
    slug_field = slug_url_kwarg = "name"
    template_name = "fleet/cluster_detail.html"
    context_object_name = "cluster"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        cluster = self.object
        selector_text = self.request.GET.get("labelSelector", "").strip()
        nodes = Node.objects.filter(cluster=cluster).order_by("name")
        try:
            if selector_text:
                nodes = nodes.filter(selector_q(parse_selector(selector_text)))
            context["selector_error"] = None
        except SelectorError as exc:
            context["selector_error"] = str(exc)
            nodes = nodes.none()
        after = self.request.GET.get("after", "")
        if after:
            nodes = nodes.filter(name__gt=after)
        page = list(nodes.only(
            "name", "labels", "ready", "unschedulable", "cpu_allocatable_milli", "cpu_requested_milli",
            "memory_allocatable_bytes", "memory_requested_bytes", "gpu_allocatable", "gpu_requested", "pod_count", "cpu_usage_milli",
        )[: NODE_PAGE + 1])
        for node in page:
            node.cpu_level = percent(node.cpu_requested_milli, node.cpu_allocatable_milli)
            node.memory_level = percent(node.memory_requested_bytes, node.memory_allocatable_bytes)
            node.usage_level = percent(node.cpu_usage_milli, node.cpu_allocatable_milli)
        context.update(
            water=cluster_water_levels(Cluster.objects.filter(pk=cluster.pk))[0],
            nodes=page[:NODE_PAGE],
            next_after=page[NODE_PAGE - 1].name if len(page) > NODE_PAGE else None,
            selector=selector_text,
            topics=[f"cluster-{cluster.name}"],
        )
        return context


class NodeDetailView(PermissionRequiredMixin, DetailView):
    permission_required = "fleet.view_node"
    template_name = "fleet/node_detail.html"
    context_object_name = "node"

    def get_object(self, queryset=None):
        return get_object_or_404(
            Node.objects.select_related("cluster").annotate(cluster_name=F("cluster__name")),
            cluster__name=self.kwargs["cluster"], name=self.kwargs["name"],
        )

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        node = self.object
        context["pods"] = node.cluster.pods.filter(node_name=node.name, finished_at__isnull=True).order_by("namespace", "name")[:200]
        context["cpu_map"] = _cpu_map(node.cpu_topology)
        context["levels"] = {
            "cpu": percent(node.cpu_requested_milli, node.cpu_allocatable_milli),
            "memory": percent(node.memory_requested_bytes, node.memory_allocatable_bytes),
            "usage": percent(node.cpu_usage_milli, node.cpu_allocatable_milli),
        }
        context["topics"] = [f"cluster-{node.cluster.name}"]
        return context


def _cpu_map(rows: list | None) -> list[dict]:
    """Logical CPUs grouped socket → NUMA node → core, for the topology grid."""
    if not rows:
        return []
    sockets: dict[int, dict[int, dict[int, list[int]]]] = {}
    for cpu, socket, numa, core in rows:
        sockets.setdefault(socket, {}).setdefault(numa, {}).setdefault(core, []).append(cpu)
    return [
        {"socket": s, "numas": [{"numa": n, "cores": [{"core": c, "cpus": sorted(cpus)} for c, cpus in sorted(cores.items())]}
                                for n, cores in sorted(numas.items())]}
        for s, numas in sorted(sockets.items())
    ]
