"""Fleet pages: clusters with water levels, a cluster's nodes (and, for those who may, its
cordon / drain / uncordon), one node; and the page logic both admission webhook configuration
pages share (``WebhookPageMixin``).

Reads need ``view`` on clusters; cordoning needs ``fleet.cordon_cluster`` (``core.permissions``),
and its form is only shown to those who hold it. The write goes through ``fleet.services``
like the API's, so the federation scheduler reschedules what runs there in the same commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import F, Value
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.translation import gettext as _
from django.views.generic import DetailView, TemplateView

from core import concurrency
from core.errors import Refused
from core.forms import add_refusal
from core.tables import TableMixin, build_table
from core.views import PermissionMixin, VerbViewMixin
from kube.labels import SelectorError, parse_selector
from kube.manifests import dump_documents

from . import services, webhooks
from .connectors.base import ConnectorError
from .forms import CordonForm
from .models import Cluster, Node, Pod
from .queries import cluster_water_levels, fleet_summary, percent
from .selectors import selector_q
from .tables import NODE_FIELDS, ClusterTable, NodePodTable, NodeTable



class ClusterListView(PermissionMixin, TableMixin, TemplateView):
    model = Cluster
    template_name = "fleet/cluster_list.html"
    table_class = ClusterTable

    def table_rows(self, queryset):
        return cluster_water_levels(queryset)

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"summary": fleet_summary(), "topics": ["fleet"]}


class ClusterDetailView(PermissionMixin, TableMixin, DetailView):
    """A cluster's water level, its cordon state (with the cordon form for those who may) and
    its node table: the label selector narrows it (as the API's ``labelSelector``), the table
    searches names, sorts by name and pages."""

    model = Cluster
    slug_field = slug_url_kwarg = "name"
    template_name = "fleet/cluster_detail.html"
    context_object_name = "cluster"
    table_class = NodeTable

    def get_table_queryset(self):
        nodes = (Node.objects.filter(cluster=self.object).only(*NODE_FIELDS)
                 .annotate(cluster_name=Value(self.object.name)))
        self.selector = self.request.GET.get("labelSelector", "").strip()
        self.selector_error = None
        if self.selector:
            try:
                nodes = nodes.filter(selector_q(parse_selector(self.selector)))
            except SelectorError as exc:
                self.selector_error = str(exc)
                nodes = nodes.none()
        return nodes

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        cluster = self.object
        context.update(
            water=cluster_water_levels(Cluster.objects.filter(pk=cluster.pk))[0],
            selector=self.selector,
            selector_error=self.selector_error,
            topics=[f"cluster-{cluster.name}"],
        )
        if self.can("cordon", cluster):
            context.setdefault("cordon_form", CordonForm(prefix="cordon", initial={"version": concurrency.etag(cluster)}))
        return context


class ClusterCordonView(VerbViewMixin, ClusterDetailView):
    """Cordon, drain or uncordon from the cluster's page; a refusal (a missing reason, a stale
    version) comes back on the page's form with what was typed."""

    action, form_class, prefix, form_key = "cordon", CordonForm, "cordon", "cordon_form"

    def perform(self, cluster, form):
        action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
        if action == "uncordon":
            if not cluster.cordoned:
                messages.info(self.request, _("%(cluster)s was not cordoned.") % {"cluster": cluster.name})
            else:
                services.uncordon(cluster, reason=reason)
                messages.success(self.request, _("Uncordoned %(cluster)s: it takes new replicas again.")
                                 % {"cluster": cluster.name})
        else:
            services.cordon(cluster, drain=action == "drain", reason=reason)
            text = (_("Draining %(cluster)s: its replicas move to other clusters within each rollout budget.")
                    if action == "drain" else _("Cordoned %(cluster)s: no new replicas go there."))
            messages.success(self.request, text % {"cluster": cluster.name})
        return cluster.get_absolute_url() + "#cordon"


class NodeDetailView(PermissionMixin, TableMixin, DetailView):
    """One node: resources, labels, taints, conditions, CPU topology, and the pods running on
    it in a table (sorted by namespace and name until the user sorts otherwise)."""

    model = Node
    template_name = "fleet/node_detail.html"
    context_object_name = "node"
    table_class = NodePodTable

    def get_object(self, queryset=None):
        node = get_object_or_404(
            Node.objects.select_related("cluster").annotate(cluster_name=F("cluster__name")),
            cluster__name=self.kwargs["cluster"], name=self.kwargs["name"],
        )
        if not self.can("view", node):  # as PermissionMixin.get_object: a scoped viewer sees their clusters' nodes only
            raise PermissionDenied
        return node

    def get_tables(self):
        node = self.object
        pods = (Pod.objects.filter(cluster_id=node.cluster_id, node_name=node.name, finished_at__isnull=True)
                .only("namespace", "name", "phase", "requests", "cpu_request_milli", "memory_request_bytes"))
        return [build_table(self.request, NodePodTable, pods, export_name=f"meridian-pods-{node.cluster_name}-{node.name}")]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        node = self.object
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


class WebhookPageMixin(PermissionMixin):
    """A page (a ``FormView`` with ``fleet.forms.WebhookConfigurationForm`` or a subclass) that
    shows one of Meridian's webhook configurations for a cluster, with the API server's token
    files, before anything is applied; holders of ``fleet.change_cluster`` apply it from there.

    A refusal (no real URL, a bad or missing CA bundle) lands on its field with everything
    typed kept, and nothing is written; the preview stays in view. Subclasses set ``webhook``
    and say which cluster the form is about and where to go once applied.
    """

    model = Cluster
    action = "change"
    webhook: ClassVar[webhooks.WebhookConfig]

    def webhook_cluster(self, form: forms.Form) -> Cluster | None:
        raise NotImplementedError

    @staticmethod
    def form_values(form: forms.Form) -> Mapping[str, Any]:
        """The typed values once cleaned (a field a refusal was put on is left out), or the
        initial ones while the form is unbound."""
        if not form.is_bound:
            return form.initial
        form.is_valid()
        return form.cleaned_data

    def applied_url(self, cluster: Cluster) -> str:
        raise NotImplementedError

    def get(self, request, *args, **kwargs) -> HttpResponse:
        form = self.get_form()  # type: ignore[attr-defined]
        return self.render_to_response(self.get_context_data(form=form, **self.shown(form)))  # type: ignore[attr-defined]

    def form_valid(self, form: forms.Form) -> HttpResponse:
        cluster = self.webhook_cluster(form)
        if cluster is not None and "apply" in self.request.POST and self.apply_webhook(form, cluster):
            return redirect(self.applied_url(cluster))
        return self.render_to_response(self.get_context_data(form=form, **self.shown(form)))  # type: ignore[attr-defined]

    def shown(self, form: forms.Form) -> dict[str, Any]:
        """The preview for the form's values (its initial ones while unbound), as YAML; a
        refusal goes on the bound form and into ``missing``."""
        cluster = self.webhook_cluster(form)
        if cluster is None:
            return {}
        values = self.form_values(form)
        try:
            preview = webhooks.preview(cluster, self.webhook, base_url=values.get("base_url") or None,
                                       ca_bundle=values.get("ca_bundle") or "")
        except Refused as exc:
            if form.is_bound and not form.errors:
                add_refusal(form, exc)
            return {"manifest_yaml": None, "missing": exc.errors}
        return {"manifest_kind": preview.configuration["kind"], "manifest_yaml": dump_documents([preview.configuration]),
                "admission_yaml": dump_documents([preview.files["admission_configuration"]]),
                "kubeconfig_yaml": dump_documents([preview.files["kubeconfig"]]),
                "files": preview.files["files"], "missing": preview.missing}

    def apply_webhook(self, form: forms.Form, cluster: Cluster) -> bool:
        """Apply through ``fleet.webhooks.apply``; a refusal or a cluster fault goes on the form."""
        data = form.cleaned_data
        try:
            webhooks.apply(cluster, self.webhook, base_url=data["base_url"] or None, ca_bundle=data["ca_bundle"])
        except Refused as exc:
            add_refusal(form, exc)
            return False
        except ConnectorError as exc:
            form.add_error(None, _("The cluster refused or could not be reached: %(error)s") % {"error": exc})
            return False
        messages.success(self.request, _("Applied %(name)s to %(cluster)s.") % {"name": self.webhook.name,
                                                                                "cluster": cluster.name})
        return True

    def get_context_data(self, **kwargs):
        cluster = self.webhook_cluster(kwargs["form"]) if "form" in kwargs else None
        return super().get_context_data(**kwargs) | {"may_apply": self.can("change", cluster)}  # type: ignore[misc]
