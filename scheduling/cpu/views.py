"""CPU co-location pages: the fleet's sellable exclusive CPUs, one node's CPU map with its
instances and the operators' actions, and the what-if ("which nodes can take 32 CPUs?").

Every write calls ``allocation`` (validated, locked, audited like the API); a refusal comes
back on the form. Reads need ``view_nodecpu``; allocate / place shared / release need
``allocate_nodecpu``; release-isolate needs ``release_isolate_nodecpu``; the what-if, a
preview of an allocation, needs ``allocate_nodecpu`` too (the house rule for previews).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.contrib import messages
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.generic import DetailView, TemplateView

from core import concurrency
from core.permissions import may, restrict
from core.tables import PER_PAGE_CHOICES, TableMixin, build_table
from core.views import PermissionMixin, VerbViewMixin

from ..filtersets import CPUFleetFilterSet
from ..models import NodeCPU
from . import allocation, capacity, store
from .cpuset import format_cpuset
from .forms import AllocateForm, InstanceActionForm, SharedForm, WhatIfForm
from .state import cpu_map
from .tables import ClusterCPUTable, NodeCPUTable

#: What the fleet page's node table never shows: left in the database.
WIDE_FIELDS = ("topology", "io_queues", "refused_io_queues", "problems", "delivered_share_pool", "io_queue_message",
               "topology_message", "cluster__labels", "cluster__taints", "cluster__api_resources", "cluster__allocatable",
               "cluster__requested", "cluster__available", "cluster__sync_errors", "cluster__credentials",
               "cluster__connector_config", "cluster__status_message")
PALETTE = 12
ROLE_LABELS = {
    "reserved": gettext_lazy("reserved"),
    "share": gettext_lazy("share pool"),
    "exclusive": gettext_lazy("exclusive"),
    "disputed": gettext_lazy("disputed"),
}


# ---------------------------------------------------------------------------- the CPU map


def map_context(node: NodeCPU, state) -> dict[str, Any]:
    """Sockets → NUMA nodes → cores → threads, each CPU with its owner, colour and label; and the legend."""
    cells = cpu_map(state)
    owners = sorted({c.owner for c in cells if c.role in ("exclusive", "disputed")})
    colour = {owner: index % PALETTE for index, owner in enumerate(owners)}
    sockets: list[dict[str, Any]] = []
    for cell in cells:
        if not sockets or sockets[-1]["socket"] != cell.socket:
            sockets.append({"socket": cell.socket, "numas": []})
        numas = sockets[-1]["numas"]
        if not numas or numas[-1]["numa"] != cell.numa:
            numas.append({"numa": cell.numa, "cores": []})
        cores = numas[-1]["cores"]
        if not cores or cores[-1]["core"] != cell.core:
            cores.append({"core": cell.core, "cpus": []})
        role_text = ROLE_LABELS[cell.role]
        label = _("CPU %(cpu)s: %(role)s") % {"cpu": cell.cpu, "role": role_text}
        if cell.owner:
            label += f", {cell.owner}"
        if cell.queues:
            label += "; " + _("IO queue %(queues)s") % {"queues": ", ".join(cell.queues)}
        css = [f"role-{cell.role}"]
        if cell.owner:
            css.append(f"own-{colour[cell.owner]}")
        if cell.queues:
            css.append("io")
        cores[-1]["cpus"].append({"cpu": cell.cpu, "role": cell.role, "owner": cell.owner, "queues": cell.queues,
                                  "css": " ".join(css), "label": label})
    held = {owner: sorted(c.cpu for c in cells if c.owner == owner) for owner in owners}
    exclusive = state.exclusive
    legend = [
        {"css": "role-reserved", "label": _("Reserved"), "count": len(state.reserved), "cpuset": format_cpuset(state.reserved)},
        {"css": "role-share", "label": _("Share pool"), "count": len(state.share_pool), "cpuset": format_cpuset(state.share_pool)},
    ]
    for owner in owners:
        disputed = owner not in exclusive
        note = _("disputed") if disputed else (_("release-isolate on") if exclusive[owner].release_isolate else "")
        legend.append({"css": f"role-{'disputed' if disputed else 'exclusive'} own-{colour[owner]}", "label": owner,
                       "count": len(held[owner]), "cpuset": format_cpuset(held[owner]), "note": note})
    queue_cpus = sorted({c.cpu for c in cells if c.queues})
    if queue_cpus:
        legend.append({"css": "role-share io", "label": _("Serves an IO queue"), "count": len(queue_cpus),
                       "cpuset": format_cpuset(queue_cpus)})
    return {"sockets": sockets, "legend": legend}


# ---------------------------------------------------------------------------- fleet


class CPUFleetView(PermissionMixin, TableMixin, TemplateView):
    """Sellable exclusive CPUs and fragmentation, fleet-wide, per cluster and per node (stored
    integers only). Both tables sort, search, page and export like every list (``core.tables``);
    the node table's parameters are unprefixed (``sort``, ``page``), the cluster table's
    ``clusters-``. The filters (``CPUFleetFilterSet``) narrow both; invalid ones show nothing
    and say why."""

    model = NodeCPU
    template_name = "scheduling/cpu/fleet.html"

    @cached_property
    def filtered(self) -> dict[str, Any]:
        """The nodes the user may see in the cluster asked for (``scope``: what the totals and the
        cluster table add up), those that take the request size (``nodes``), and the size."""
        nodes = restrict(NodeCPU.objects.all(), self.request.user)  # a scoped role: its clusters' nodes
        self.filterset = CPUFleetFilterSet(self.request.GET, queryset=nodes)
        if not self.filterset.is_valid():
            return {"scope": nodes.none(), "nodes": nodes.none(), "request": None}
        return {"scope": self.filterset.cluster_scope(nodes), "nodes": self.filterset.qs,
                "request": self.filterset.form.cleaned_data.get("request")}

    @cached_property
    def view(self) -> dict[str, Any]:
        view = capacity.fleet_view(self.filtered["scope"], self.filtered["request"])
        for row in view["clusters"]:
            row["cluster"] = row["cluster__name"]  # an accessor reads "cluster__name" as a path
        return view

    def get_tables(self):
        nodes = self.filtered["nodes"].select_related("cluster").defer(*WIDE_FIELDS)
        return [build_table(self.request, NodeCPUTable, nodes, restricted=True, filterset=self.filterset),
                build_table(self.request, ClusterCPUTable, self.view["clusters"], prefix="clusters-",
                            filterset=self.filterset, request_size=self.filtered["request"])]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        view, request_size = self.view, self.filtered["request"]
        nodes_table, clusters_table = context["tables"]
        return context | {
            "filter_form": self.filterset.form, "total": view["total"], "request_size": request_size,
            "count": view["total"]["fit_nodes"] if request_size else view["total"]["nodes"],
            "nodes_table": nodes_table, "clusters_table": clusters_table, "cluster_count": len(view["clusters"]),
            "all_clusters_url": clusters_table.url(per_page=PER_PAGE_CHOICES[-1]),
            "can_allocate": may(self.request.user, "allocate", NodeCPU),
        }


class CPUWhatIfView(PermissionMixin, TemplateView):
    """Which nodes can take an exclusive instance of N CPUs now, best fit first; why not when none."""

    model = NodeCPU
    template_name = "scheduling/cpu/what_if.html"
    action = "allocate"  # its answer is an allocation's preview (a GET form: nothing is posted)
    form_page = True
    fleet_wide = True  # it looks at every node

    def get_context_data(self, **kwargs):
        form = WhatIfForm(self.request.GET or None)
        cluster = self.request.GET.get("cluster", "")
        answer = None
        if self.request.GET and form.is_valid():
            queryset = NodeCPU.objects.all()
            if cluster:
                queryset = queryset.filter(cluster__name=cluster)
            answer = capacity.candidates(queryset, form.cleaned_data["request"],
                                         form.cleaned_data["strategy"] or "SameCoreFirst", form.cleaned_data["app"])
            answer["fitting"] = [n for n in answer["nodes"] if n["what_if"].ok]
            answer["refused"] = [n for n in answer["nodes"] if not n["what_if"].ok]
        return super().get_context_data(**kwargs) | {"form": form, "answer": answer, "cluster": cluster}


# ---------------------------------------------------------------------------- one node


class CPUNodeView(PermissionMixin, DetailView):
    """The CPU map, the instances, the node's status, what-if and the operators' forms."""

    model = NodeCPU
    template_name = "scheduling/cpu/node.html"
    context_object_name = "node"
    queryset = NodeCPU.objects.select_related("cluster", "node")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        node = self.object
        rows = list(node.allocations.order_by("mode", "namespace", "pod_name"))
        state = store.state_of(node, rows)
        version = concurrency.etag(node)
        can_allocate = self.can("allocate", node)
        can_isolate = self.can("release_isolate", node)
        what_if_form = WhatIfForm(self.request.GET or None) if can_allocate else None
        what_if = None
        if what_if_form is not None and self.request.GET and what_if_form.is_valid():
            data = what_if_form.cleaned_data
            what_if = capacity.what_if(node, data["request"], data["strategy"] or "SameCoreFirst", data["app"])
        context.update(
            map_context(node, state),
            rows=rows,
            state=state,
            sellable=state.sellable,
            share_pool=format_cpuset(state.share_pool),
            version=version,
            can_allocate=can_allocate,
            can_isolate=can_isolate,
            what_if_form=what_if_form,
            what_if=what_if,
        )
        if can_allocate:
            context.setdefault("allocate_form", AllocateForm(prefix="allocate", initial={"version": version}))
            context.setdefault("shared_form", SharedForm(prefix="shared", initial={"version": version}))
        return context


class NodeVerbView(VerbViewMixin, CPUNodeView):
    form_class = InstanceActionForm

    def success_url(self, node: NodeCPU) -> str:
        return reverse("scheduling:cpu-node", args=[node.pk])


class CPUAllocateView(NodeVerbView):
    action, form_class, prefix, form_key = "allocate", AllocateForm, "allocate", "allocate_form"

    def perform(self, node, form):
        data = form.cleaned_data
        row = allocation.allocate_exclusive(node, namespace=data["namespace"], name=data["name"], app=data["app"],
                                          request=data["request"], strategy=data["strategy"],
                                          exclude_reserved=data["exclude_reserved"], reason=data["reason"])
        messages.success(self.request, _("Allocated CPUs %(cpuset)s to %(instance)s.") % {"cpuset": row.cpuset,
                                                                                          "instance": row.instance})


class CPUSharedView(NodeVerbView):
    action, form_class, prefix, form_key = "allocate", SharedForm, "shared", "shared_form"

    def perform(self, node, form):
        data = form.cleaned_data
        row = allocation.place_shared(node, namespace=data["namespace"], name=data["name"], app=data["app"],
                                    request_milli=data["cpu_request"], limit_milli=data["cpu_limit"], reason=data["reason"])
        messages.success(self.request, _("Placed %(instance)s on the share pool.") % {"instance": row.instance})


class CPUReleaseView(NodeVerbView):
    action, prefix, form_key = "allocate", "release", "release_form"

    def perform(self, node, form):
        row = allocation.release(node, form.cleaned_data["instance"], reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Released %(instance)s; its CPUs are back in the share pool.") % {
            "instance": row.instance})


class CPUReleaseIsolateView(NodeVerbView):
    action, prefix, form_key = "release_isolate", "isolate", "isolate_form"

    def perform(self, node, form):
        on = bool(form.cleaned_data.get("on"))
        row = allocation.set_release_isolate(node, form.cleaned_data["instance"], on, reason=form.cleaned_data["reason"])
        messages.success(self.request, (_("Release-isolate is on for %(instance)s: it may use every CPU but the reserved "
                                          "ones.") if on else _("Release-isolate is off for %(instance)s.")) % {
            "instance": row.instance})
