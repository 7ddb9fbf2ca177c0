"""Scheduling pages (Part A): policies, templates and bindings (list, detail with history, diff and
rollback, create/edit with preview), YAML import/export, the render preview, the placement
simulator and the webhook configuration preview.

Every write calls ``services`` inside the view, so the pages validate, version and audit
exactly like the API, and a refusal comes back on the form, never as a 500. Permissions go
through ``core.permissions``: reads need ``view``, each write its action or verb; forms carry
the object's version (ETag), so a stale form is refused.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import cached_property
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.generic import DetailView, FormView, TemplateView

from core import concurrency
from core.errors import Refused
from core.forms import ReasonForm, RollbackForm, add_refusal
from core.permissions import restrict
from core.tables import TableMixin, build_table
from core.views import PermissionMixin, RevisionDiffMixin, VerbViewMixin
from fleet.models import Cluster
from fleet.views import WebhookPageMixin

from . import schedconfig, services, webhook, whatif_inventory
from .forms import (
    BindingForm,
    ImportForm,
    PolicyForm,
    PreviewForm,
    SimulateForm,
    TemplateForm,
    WebhookForm,
    as_yaml,
    parse_document,
    pretty,
)
from .models import NodeSchedulerConfig, PodSchedulerConfig, SchedulerConfigBinding, SchedulingPolicy
from .tables import (
    NodeSchedulerConfigTable,
    PodSchedulerConfigTable,
    SchedulerConfigBindingTable,
    SchedulingPolicyTable,
)

SAMPLE_POD = """apiVersion: v1
kind: Pod
metadata:
  name: web-0
  namespace: web
  labels:
    app: web
  annotations:
    scb.sched.cloud.ctrip.com/nsc: resource-pool-example
    scb.sched.cloud.ctrip.com/nsc-args: '{"DefaultPool":"B","PrefferredPool":"A"}'
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests:
        cpu: "2"
        memory: 4Gi
"""


def scheduling_labels() -> dict[str, str]:
    """What scheduling.js prints, in the user's language."""
    return {"replicas": _("Replicas"), "cpu": _("CPU requested / allocatable"), "memory": _("Memory requested / allocatable"),
            "allocation": _("Allocation rate"), "stranded": _("Stranded (fragmentation)"), "node": _("Node")}


# ---------------------------------------------------------------------------- the index

class IndexView(PermissionMixin, TableMixin, TemplateView):
    """Policies, templates and bindings (a table each, its parameters prefixed), with links to
    import/export, preview and the simulator."""

    model = SchedulingPolicy
    template_name = "scheduling/index.html"
    #: prefix → (table, model): the page's tables in the order shown
    TABLES = {"policy-": (SchedulingPolicyTable, SchedulingPolicy), "nsc-": (NodeSchedulerConfigTable, NodeSchedulerConfig),
              "psc-": (PodSchedulerConfigTable, PodSchedulerConfig), "scb-": (SchedulerConfigBindingTable, SchedulerConfigBinding)}

    def get_tables(self):
        return [build_table(self.request, table_class, model.objects.select_related("revision"), prefix=prefix)
                for prefix, (table_class, model) in self.TABLES.items()]

    def get_context_data(self, **kwargs):
        user = self.request.user
        from core.permissions import may

        context = super().get_context_data(**kwargs)
        policy_table, nsc_table, psc_table, scb_table = context["tables"]
        return context | {
            "policy_table": policy_table, "nsc_table": nsc_table, "psc_table": psc_table, "scb_table": scb_table,
            "can_add_policy": may(user, "add", SchedulingPolicy),
            "can_add_template": may(user, "add", NodeSchedulerConfig),
            "can_add_binding": may(user, "add", SchedulerConfigBinding),
            "topics": ["scheduling"],
        }


# ---------------------------------------------------------------------------- one versioned object

class VersionedDetailView(RevisionDiffMixin, PermissionMixin, DetailView):
    """Spec, revision history with diff, rollback and delete forms (only those the user may use)."""

    template_name = "scheduling/object_detail.html"
    context_object_name = "obj"
    kind_label = ""
    spec_attr = "spec"

    def edit_url(self, obj) -> str:
        raise NotImplementedError

    def action_url(self, obj, action: str) -> str:
        raise NotImplementedError

    def kind_context(self, obj) -> dict[str, Any]:
        return {}

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        obj = self.object
        revisions = list(obj.revisions.order_by("-number"))
        version = {"version": concurrency.etag(obj)}
        forms: dict[str, Any] = {}
        if self.can("rollback", obj) and revisions:
            forms["rollback_form"] = RollbackForm(prefix="rollback", revisions=revisions, initial=version)
        if self.can("delete", obj):
            forms["delete_form"] = ReasonForm(prefix="delete", initial=version)
        spec = getattr(obj, self.spec_attr)
        context.update(kind_label=self.kind_label, revisions=revisions, spec_yaml=as_yaml(spec), spec_json=pretty(spec),
                       edit_url=self.edit_url(obj) if self.can("change", obj) else None,
                       rollback_url=self.action_url(obj, "rollback"), delete_url=self.action_url(obj, "delete"),
                       topics=["scheduling"], **self.diff_context(revisions), **self.kind_context(obj))
        for key, form in forms.items():
            context.setdefault(key, form)
        return context


class PolicyDetailView(VersionedDetailView):
    model = SchedulingPolicy
    slug_field = slug_url_kwarg = "name"
    kind_label = gettext_lazy("Scheduling policy")
    spec_attr = "config"

    def edit_url(self, obj):
        return reverse("scheduling:policy-edit", args=[obj.name])

    def action_url(self, obj, action):
        return reverse(f"scheduling:policy-{action}", args=[obj.name])

    def kind_context(self, obj):
        try:
            return {"plugins": plugin_summary(services.compile_policy(obj.config))}
        except Refused:
            return {"plugins": None}


def plugin_summary(compiled) -> dict[str, Any]:
    """A compiled policy's plugins as the policy page and its preview list them."""
    return {"filters": [s.name for s in compiled.filters], "scores": [(s.name, s.weight) for s in compiled.scores],
            "percentage": compiled.percentage_of_nodes_to_score}


class TemplateKindMixin:
    """Views of one template kind, named by the URL's ``kind`` (pod or node scheduler config)."""

    @property
    def model(self):
        return template_model_or_404(self.kwargs["kind"])

    @property
    def kind_label(self):
        return self.model.KIND


class TemplateDetailView(TemplateKindMixin, VersionedDetailView):
    slug_field = slug_url_kwarg = "name"

    def get_queryset(self):
        return self.model.objects.select_related("revision")

    def edit_url(self, obj):
        return reverse("scheduling:template-edit", args=[obj.SLUG, obj.name])

    def action_url(self, obj, action):
        return reverse(f"scheduling:template-{action}", args=[obj.SLUG, obj.name])

    def kind_context(self, obj):
        return {"placeholders": sorted(services.as_template(obj).placeholders),
                "used_by": services.bindings_naming(obj.KIND, obj.name),
                "manifest_yaml": as_yaml(services.template_manifest(obj.KIND, obj.name, obj.spec))}


class BindingDetailView(VersionedDetailView):
    model = SchedulerConfigBinding
    kind_label = gettext_lazy("Scheduler config binding")

    def edit_url(self, obj):
        return reverse("scheduling:binding-edit", args=[obj.pk])

    def action_url(self, obj, action):
        return reverse(f"scheduling:binding-{action}", args=[obj.pk])

    def kind_context(self, obj):
        return {"manifest_yaml": as_yaml(services.binding_manifest_of(obj))}


def template_model_or_404(slug: str):
    model = services.TEMPLATE_SLUGS.get(slug)
    if model is None:
        raise Http404
    return model


class RollbackMixin(VerbViewMixin):
    action, form_key, prefix, form_class = "rollback", "rollback_form", "rollback", RollbackForm

    def make_form(self, obj):
        return RollbackForm(self.request.POST, prefix=self.prefix, revisions=list(obj.revisions.all()))

    def perform(self, obj, form):
        if isinstance(obj, SchedulingPolicy):
            revision = services.rollback_policy(obj, form.cleaned_data["revision"], reason=form.cleaned_data["reason"])
        else:
            revision = services.rollback_spec(obj, form.cleaned_data["revision"], reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Rolled back to revision %(old)s as new revision %(new)s.")
                         % {"old": form.cleaned_data["revision"], "new": revision.number})


class DeleteMixin(VerbViewMixin):
    action, form_key, prefix, form_class = "delete", "delete_form", "delete", ReasonForm

    def perform(self, obj, form):
        if isinstance(obj, SchedulingPolicy):
            services.delete_policy(obj, reason=form.cleaned_data["reason"])
        else:
            services.delete_spec(obj, reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Deleted %(name)s.") % {"name": obj})
        return reverse("scheduling:index")


class PolicyRollbackView(RollbackMixin, PolicyDetailView):
    pass


class PolicyDeleteView(DeleteMixin, PolicyDetailView):
    pass


class TemplateRollbackView(RollbackMixin, TemplateDetailView):
    pass


class TemplateDeleteView(DeleteMixin, TemplateDetailView):
    pass


class BindingRollbackView(RollbackMixin, BindingDetailView):
    pass


class BindingDeleteView(DeleteMixin, BindingDetailView):
    pass


# ---------------------------------------------------------------------------- create / edit with preview

class ObjectFormView(PermissionMixin, FormView):
    """Create (``action`` add) or edit (change) one object; "Preview" shows what saving would do."""

    template_name = "scheduling/object_form.html"
    action = "add"
    form_page = True
    instance: Any = None
    kind_label = ""

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs() | {"instance": self.instance}
        if self.instance is not None:  # disabled identity fields take their value from here on POST too
            kwargs["initial"] = self.initial_for(self.instance) | {"version": concurrency.etag(self.instance)}
        return kwargs

    def initial_for(self, obj) -> dict[str, Any]:
        return {}

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"instance": self.instance, "kind_label": self.kind_label}

    def save(self, form) -> tuple[Any, bool]:
        raise NotImplementedError

    def preview(self, form) -> dict[str, Any]:
        raise NotImplementedError

    def form_valid(self, form):
        if "preview" in self.request.POST:
            try:
                preview = self.preview(form)
            except Refused as exc:
                preview = {"problem": exc.body()}
            return self.render_to_response(self.get_context_data(form=form, preview=preview))
        try:
            with concurrency.expecting(self.instance, form.cleaned_data.get("version")) if self.instance else nullcontext():
                obj, changed = self.save(form)
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        if self.instance is None:
            messages.success(self.request, _("Created %(name)s.") % {"name": obj})
        elif not changed:
            messages.info(self.request, _("Nothing changed; no new revision."))
        else:
            messages.success(self.request, _("Saved revision %(number)s.") % {"number": obj.revision.number if obj.revision else "—"})
        return redirect(obj.get_absolute_url())


class EditMixin:
    action = "change"

    def lookup(self):
        raise NotImplementedError

    @cached_property
    def instance(self):
        obj = self.lookup()
        if not self.can("change", obj):
            raise PermissionDenied
        return obj


class PolicyCreateView(ObjectFormView):
    model = SchedulingPolicy
    form_class = PolicyForm
    kind_label = gettext_lazy("Scheduling policy")

    def get_initial(self):
        return {"config": as_yaml(services.default_policy_config())}

    def initial_for(self, obj):
        return {"name": obj.name, "description": obj.description, "config": as_yaml(obj.config), "is_default": obj.is_default}

    def spec(self, form) -> services.PolicySpec:
        data = form.cleaned_data
        name = self.instance.name if self.instance else data["name"]
        return services.PolicySpec(name, data["description"], data["config"], data["is_default"])

    def save(self, form):
        return services.save_policy(self.spec(form), reason=form.cleaned_data["reason"], instance=self.instance)

    def preview(self, form):
        return {"plugins": plugin_summary(services.compile_policy(form.cleaned_data["config"]))}


class PolicyEditView(EditMixin, PolicyCreateView):
    def lookup(self):
        return get_object_or_404(SchedulingPolicy, name=self.kwargs["name"])


class TemplateCreateView(TemplateKindMixin, ObjectFormView):
    form_class = TemplateForm

    def get_initial(self):
        if self.model is NodeSchedulerConfig:
            return {"spec": "nodeAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n    nodeSelectorTerms:\n"
                            "    - matchExpressions:\n      - key: cloud.ctrip.com/pool\n        operator: In\n"
                            "        values:\n        - {{.Pool}}\n"}
        return {"spec": "podAntiAffinity:\n  preferredDuringSchedulingIgnoredDuringExecution:\n  - weight: 10\n"
                        "    podAffinityTerm:\n      labelSelector:\n        matchLabels:\n          app: {{.App}}\n"
                        "      topologyKey: kubernetes.io/hostname\n"}

    def initial_for(self, obj):
        return {"name": obj.name, "description": obj.description, "spec": as_yaml(obj.spec)}

    def save(self, form):
        data = form.cleaned_data
        name = self.instance.name if self.instance else data["name"]
        return services.save_template(self.model.KIND, name, data["spec"], description=data["description"],
                                      reason=data["reason"], instance=self.instance, expect_new=self.instance is None)

    def preview(self, form):
        data = form.cleaned_data
        name = self.instance.name if self.instance else data["name"]
        template = services.checked_template(self.model.KIND, name, data["spec"])
        args_text = self.request.POST.get("preview_args", "").strip()
        result: dict[str, Any] = {"placeholders": sorted(template.placeholders), "valid": True, "args": args_text}
        if args_text:
            try:
                args = parse_document(args_text, what="arguments")
                result["rendered"] = as_yaml(schedconfig.render(template, args, args_field="preview_args"))
            except (ValueError, schedconfig.SchedulingConfigError) as exc:
                result["render_problem"] = str(exc)
        return result


class TemplateEditView(EditMixin, TemplateCreateView):
    def lookup(self):
        return get_object_or_404(self.model, name=self.kwargs["name"])


class BindingCreateView(ObjectFormView):
    model = SchedulerConfigBinding
    form_class = BindingForm
    kind_label = gettext_lazy("Scheduler config binding")

    initial = {"spec": "selector:\n  matchLabels:\n    app: web\npriority: 0\nnodeSchedulerConfig:\n"
                       "  name: resource-pool-example\n  args:\n    DefaultPool: B\n    PrefferredPool: A\n"}

    def initial_for(self, obj):
        return {"name": obj.name, "namespace": obj.namespace, "description": obj.description, "spec": as_yaml(obj.spec)}

    def identity(self, form) -> tuple[str, str]:
        if self.instance:
            return self.instance.name, self.instance.namespace
        return form.cleaned_data["name"], form.cleaned_data.get("namespace") or ""

    def save(self, form):
        name, namespace = self.identity(form)
        data = form.cleaned_data
        return services.save_binding(name, namespace, data["spec"], description=data["description"], reason=data["reason"],
                                     instance=self.instance, expect_new=self.instance is None)

    def preview(self, form):
        name, namespace = self.identity(form)
        binding = services.checked_binding(name, namespace, form.cleaned_data["spec"])
        templates = {(t.kind, t.name): t for t in services.all_templates()}
        rendered = {}
        for kind in (NodeSchedulerConfig.KIND, PodSchedulerConfig.KIND):
            ref = binding.ref(kind)
            if ref is not None:
                rendered.update(schedconfig.render(templates[(kind, ref.name)], ref.args))
        return {"valid": True, "rendered": as_yaml(rendered)}


class BindingEditView(EditMixin, BindingCreateView):
    def lookup(self):
        return get_object_or_404(SchedulerConfigBinding, pk=self.kwargs["pk"])


# ---------------------------------------------------------------------------- import

class ImportView(PermissionMixin, FormView):
    """Create or update templates and bindings from upstream YAML; one bad object refuses all."""

    model = SchedulerConfigBinding
    action = "add"
    form_page = True
    template_name = "scheduling/import.html"
    form_class = ImportForm

    def form_valid(self, form):
        try:
            results, warnings = services.import_manifests(form.cleaned_data["yaml"], reason=form.cleaned_data["reason"])
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        changed = sum(1 for r in results if r.changed)
        messages.success(self.request, _("Imported %(total)s objects: %(changed)s created or changed, %(same)s unchanged.")
                         % {"total": len(results), "changed": changed, "same": len(results) - changed})
        for warning in warnings:
            messages.warning(self.request, warning)
        return redirect("scheduling:index")


# ---------------------------------------------------------------------------- render preview

class PreviewView(PermissionMixin, FormView):
    """What the webhook would do to a pod: explanation, merged affinity, JSONPatch, or the denial."""

    model = SchedulerConfigBinding
    action = "add"
    form_page = True
    template_name = "scheduling/preview.html"
    form_class = PreviewForm
    initial = {"pod": SAMPLE_POD}

    def form_valid(self, form):
        result = services.preview_pod(form.cleaned_data["pod"], namespace=form.cleaned_data["namespace"] or None)
        result |= {"affinity_yaml": as_yaml(result["affinity"]) if result["affinity"] else "",
                   "patch_json": pretty(result["patch"])}
        return self.render_to_response(self.get_context_data(form=form, result=result))


# ---------------------------------------------------------------------------- placement simulator

class SimulatorView(PermissionMixin, FormView):
    """N replicas of a pod under one policy (or two side by side) over a cluster's inventory."""

    model = SchedulingPolicy
    action = "add"
    form_page = True
    template_name = "scheduling/simulator.html"
    form_class = SimulateForm

    def get_form_kwargs(self):
        return super().get_form_kwargs() | {
            "clusters": list(Cluster.objects.order_by("name").values_list("name", flat=True)),
            "policies": list(SchedulingPolicy.objects.order_by("name").values_list("name", flat=True))}

    def get_initial(self):
        return {"pod": SAMPLE_POD.replace("  annotations:\n    scb.sched.cloud.ctrip.com/nsc: resource-pool-example\n"
                                          "    scb.sched.cloud.ctrip.com/nsc-args: '{\"DefaultPool\":\"B\",\"PrefferredPool\":\"A\"}'\n", ""),
                "replicas": 20}

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"labels": scheduling_labels()}

    def form_valid(self, form):
        data = form.cleaned_data
        try:
            result = whatif_inventory.run(data["cluster"], data["pod"], data["replicas"], policy=data["policy"],
                                   compare_with=data["compare_with"])
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        charts = {"runs": [{"policy": r["policy"], "chart": r["chart"], "allocation_rate": r["allocation_rate"],
                            "stranded": {k: v["stranded_ratio"] for k, v in r["fragmentation"].items()}}
                           for r in result["results"]]}
        return self.render_to_response(self.get_context_data(form=form, result=result, charts=charts))


# ---------------------------------------------------------------------------- webhook configuration

class WebhookView(WebhookPageMixin, FormView):
    """The MutatingWebhookConfiguration with the API server's token files for the cluster the
    form picks, shown before anything is applied (``fleet.views.WebhookPageMixin``)."""

    webhook = webhook.CONFIGURATION
    template_name = "scheduling/webhook.html"
    form_class = WebhookForm

    def get_form_kwargs(self):
        clusters = restrict(Cluster.objects.order_by("name"), self.request.user).values_list("name", flat=True)
        kwargs = super().get_form_kwargs() | {"clusters": list(clusters)}
        if self.request.method == "GET" and self.request.GET.get("cluster"):
            kwargs["data"] = self.request.GET
        return kwargs

    def webhook_cluster(self, form) -> Cluster | None:
        name = self.form_values(form).get("cluster")
        return get_object_or_404(Cluster, name=name) if name else None

    def applied_url(self, cluster: Cluster) -> str:
        return reverse("scheduling:webhook") + f"?cluster={cluster.name}"
