"""CPU co-location pages: the fleet's sellable exclusive CPUs, one node's CPU map with its
instances and the operators' actions, and the what-if ("which nodes can take 32 CPUs?").

Every write calls ``allocation`` (validated, locked, audited like the API); a refusal comes
back on the form. Reads need ``view_nodecpu``; allocate / place shared / release need
``allocate_nodecpu``; release-isolate needs ``release_isolate_nodecpu``; the what-if, a
preview of an allocation, needs ``allocate_nodecpu`` too (the house rule for previews).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.generic import DetailView, TemplateView

from core import concurrency
from core.permissions import may, restrict
from core.views import PermissionMixin, VerbViewMixin

from ..models import NodeCPU
from . import allocation, capacity, store
from .cpuset import format_cpuset
from .forms import SORTS, AllocateForm, FleetFilterForm, InstanceActionForm, SharedForm, WhatIfForm
from .state import cpu_map

PAGE = 50
CLUSTER_ROWS = 50
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


class CPUFleetView(PermissionMixin, TemplateView):
    """Sellable exclusive CPUs and fragmentation per cluster and per node (stored integers only)."""

    model = NodeCPU
    template_name = "scheduling/cpu/fleet.html"

    def get_context_data(self, **kwargs):
        form = FleetFilterForm(self.request.GET or None)
        values = form.values() if self.request.GET else FleetFilterForm().initial | {
            "cluster": "", "request": None, "sort": SORTS[0][0], "page": 1}
        queryset = restrict(NodeCPU.objects.all(), self.request.user)  # a scoped role: its clusters' nodes
        if values["cluster"]:
            queryset = queryset.filter(cluster__name=values["cluster"])
        view = capacity.fleet_view(queryset, values["request"])
        nodes_qs = queryset.filter(largest_exclusive__gte=values["request"]) if values["request"] else queryset
        count = view["total"]["fit_nodes"] if values["request"] else view["total"]["nodes"]
        pages = max(1, -(-count // PAGE))
        page = min(values["page"], pages)
        order = values["sort"].split(",") + ["-pk" if values["sort"].startswith("-") else "pk"]  # each order has an index
        nodes = list(nodes_qs.select_related("cluster").defer(*WIDE_FIELDS).order_by(*order)[(page - 1) * PAGE: page * PAGE])
        query = self.request.GET.copy()
        query.pop("page", None)
        clusters = view["clusters"]
        all_clusters = self.request.GET.get("clusters") == "all" or len(clusters) <= CLUSTER_ROWS
        if not all_clusters:  # the clusters with the most to sell first; the rest one click away
            clusters = sorted(clusters, key=lambda c: (-c["exclusive_left"], c["cluster__name"]))[:CLUSTER_ROWS]
        return super().get_context_data(**kwargs) | {
            "form": form if self.request.GET else FleetFilterForm(), "view": view, "total": view["total"],
            "clusters": clusters, "cluster_count": len(view["clusters"]), "all_clusters": all_clusters,
            "nodes": nodes, "page": page, "pages": pages, "count": count,
            "query": query.urlencode(), "request_size": values["request"],
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
