"""Node config pages: targets with live rollout progress, one target's history and nodes,
create/edit with preview, YAML import, config types, one node's effective config, and the
emergency downgrade.

Every write calls ``services`` / ``rollout`` inside the view, so the UI validates, versions
and audits exactly like the API, and a refusal comes back as a form error, never a 500.
Permissions go through ``core.permissions`` like the API's: reads need ``view``, each write
its action or verb (``rollback``, ``rollout``, ``downgrade``); writes carry the target's
version, so a stale form is refused.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from functools import cached_property
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.generic import DetailView, FormView, TemplateView

from core import concurrency
from core.errors import Refused
from core.forms import ReasonForm, add_refusal
from core.permissions import may, may_any_or_role, restrict
from core.tables import TableMixin, build_table, query_param
from core.views import PermissionMixin, RevisionDiffMixin, VerbViewMixin
from fleet.models import Cluster, Node

from . import rollout, services
from .agent import effective_config
from .filtersets import TargetNodeFilterSet
from .forms import (
    EmergencyForm,
    ImportForm,
    RollbackForm,
    RolloutForm,
    TargetForm,
)
from .models import ConfigTarget, ConfigType, NodeConfig
from .tables import ConfigTargetTable, ConfigTypeTable, TargetNodeTable

SEGMENTS = ("applied", "failed", "pending", "held")


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def target_url(target: ConfigTarget) -> str:
    return reverse("nodeconfig:target-detail", args=[target.pk])


def targets_with_relations() -> QuerySet[ConfigTarget]:
    return ConfigTarget.objects.select_related("config_type", "cluster", "revision")


# ---------------------------------------------------------------------------- progress

def with_bar(progress: dict[str, Any]) -> dict[str, Any]:
    """Add segment widths (percent of targeted, as unlocalized strings for inline styles)."""
    total = progress["targeted"]
    progress["pct"] = {s: f"{(100 * progress[s] / total) if total else 0:.2f}" for s in SEGMENTS}
    return progress


def live_context() -> dict[str, Any]:
    """What nodeconfig.js needs to relabel state badges in the user's language."""
    return {"state_labels": dict(ConfigTarget.RolloutState.choices)}


def emergency_panel_context(request) -> dict[str, Any]:
    """The overview's emergency panel: active downgrades with live progress, and the form."""
    user = request.user
    if not may_any_or_role(user, "view", ConfigTarget):
        return {}
    active = list(restrict(targets_with_relations().filter(emergency=True, deleted=False), user))
    progress = rollout.progress_many(active)
    for target in active:
        target.progress = with_bar(progress[target.pk])
        target.scope = services.scope_text(target)
    can_downgrade = may_any_or_role(user, "downgrade", ConfigTarget)
    return {"emergency_targets": active, "emergency_form": emergency_form(user) if can_downgrade else None,
            "can_downgrade": can_downgrade, **live_context()}


def emergency_form(user: Any, *args: Any, **kwargs: Any) -> EmergencyForm:
    """The downgrade form as this user may use it: a scoped operator picks among their own
    clusters and is not offered the whole fleet (the downgrade is checked again when made)."""
    form = EmergencyForm(*args, **kwargs)
    if not may(user, "downgrade", ConfigTarget):
        form.fields["cluster"].queryset = restrict(form.fields["cluster"].queryset, user, "view")
        form.fields["scope"].choices = [c for c in form.fields["scope"].choices if c[0] != "fleet"]
        form.fields["scope"].initial = "cluster"
    return form


# ---------------------------------------------------------------------------- lists

class IndexView(PermissionMixin, TableMixin, TemplateView):
    """Live targets of every type in one table (sorted by type, then name, until the user
    sorts otherwise), each with its rollout progress bar; ``?type=`` shows one type's."""

    model = ConfigTarget
    template_name = "nodeconfig/index.html"
    table_class = ConfigTargetTable

    def get_table_queryset(self):
        targets = targets_with_relations().filter(deleted=False)
        chosen = query_param(self.request, "type")
        return targets.filter(config_type__name=chosen) if chosen else targets

    def table_rows(self, queryset):
        """The searched targets with their progress (two grouped queries for all of them)."""
        targets = list(queryset)
        progress = rollout.progress_many(targets)
        now = timezone.now()
        for target in targets:
            target.progress = with_bar(progress[target.pk])
            p = target.progress
            target.applied_share = p["applied"] / p["targeted"] if p["targeted"] else 0.0
            target.expired = target.expires_at is not None and target.expires_at <= now
        return targets

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        emergencies = list(restrict(targets_with_relations().filter(deleted=False, emergency=True), self.request.user))
        progress = rollout.progress_many(emergencies)
        for target in emergencies:
            target.progress = progress[target.pk]
        return context | live_context() | {
            "types": ConfigType.objects.order_by("name").only("pk", "name"),
            "chosen_type": query_param(self.request, "type"),
            "emergencies": emergencies,
            "topics": ["nodeconfig"],
        }


class ConfigTypeListView(PermissionMixin, TableMixin, TemplateView):
    """Registered config types: GVR, allowed selector keys per priority (with advice), default body."""

    model = ConfigType
    template_name = "nodeconfig/type_list.html"
    table_class = ConfigTypeTable

    def get_table_queryset(self):
        live = Q(targets__deleted=False)
        return ConfigType.objects.annotate(
            target_count=Count("targets", filter=live),
            emergency_count=Count("targets", filter=live & Q(targets__emergency=True)),
        )


# ---------------------------------------------------------------------------- one target

class TargetDetailView(RevisionDiffMixin, PermissionMixin, TableMixin, DetailView):
    """Spec, status, live progress, history with diff, the write forms, and the node table
    (``core.tables``: sorted, searched, paged, exported; its filters a FilterSet)."""

    model = ConfigTarget
    template_name = "nodeconfig/target_detail.html"
    context_object_name = "target"
    queryset = targets_with_relations()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        target = self.object
        revisions = list(target.revisions.all())
        context.update(
            live_context(),
            progress=with_bar(rollout.progress(target)),
            revisions=revisions,
            config_json=pretty(target.config),
            scope=services.scope_text(target),
            expired=target.expires_at is not None and target.expires_at <= timezone.now(),
            manifest_url=reverse("nodeconfig-api:configtarget-manifest", args=[target.pk]),
            topics=[f"nodeconfig-target-{target.pk}"],
            **self.diff_context(revisions),
            node_filter=self.filterset.form,
            clusters=restrict(Cluster.objects.order_by("name"), self.request.user).values_list("name", flat=True),
        )
        for key, form in self.write_forms(target, revisions).items():
            context.setdefault(key, form)  # an action view passes its bound form instead
        return context

    def write_forms(self, target: ConfigTarget, revisions) -> dict[str, Any]:
        """Only the forms this user may submit for this target, each carrying its version."""
        forms: dict[str, Any] = {}
        live = not target.deleted
        version = {"version": concurrency.etag(target)}
        if self.can("rollback", target) and revisions:
            forms["rollback_form"] = RollbackForm(prefix="rollback", revisions=revisions, initial=version)
        if self.can("delete", target) and live and not target.emergency:
            forms["delete_form"] = ReasonForm(prefix="delete", initial=version)
        if self.can("rollout", target) and live and target.wave_size and not target.emergency:
            forms["rollout_form"] = RolloutForm(prefix="rollout", initial=version)
        if self.can("downgrade", target) and live and target.emergency:
            forms["restore_form"] = ReasonForm(prefix="restore", initial=version)
        forms["can_edit"] = self.can("change", target) and live and not target.emergency
        return forms

    def get_tables(self):
        """One table of the target's node config rows (by node name until the user sorts
        otherwise), narrowed by the state and cluster filters (``TargetNodeFilterSet``)."""
        target = self.object
        rows = (NodeConfig.objects.filter(Q(matched_target=target) | Q(target=target))
                .select_related("node", "cluster", "revision", "target"))
        self.filterset = TargetNodeFilterSet(self.request.GET, queryset=rows, target=target)
        shown = self.filterset.qs if self.filterset.is_valid() else rows.none()
        return [build_table(self.request, TargetNodeTable, shown, target=target, filterset=self.filterset,
                            export_name=f"meridian-target-{target.pk}-nodes")]


class TargetVerbView(VerbViewMixin, TargetDetailView):
    """A POST-only write on one target (``core.views.VerbViewMixin``); on a refusal the detail
    page comes back with the bound form saying why."""

    form_class = ReasonForm


class TargetRollbackView(TargetVerbView):
    action, form_key, prefix, form_class = "rollback", "rollback_form", "rollback", RollbackForm

    def make_form(self, target):
        return RollbackForm(self.request.POST, prefix=self.prefix, revisions=list(target.revisions.all()))

    def perform(self, target, form):
        revision = services.rollback_target(target, form.cleaned_data["revision"], reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Rolled back to revision %(old)s as new revision %(new)s.")
                         % {"old": form.cleaned_data["revision"], "new": revision.number})


class TargetDeleteView(TargetVerbView):
    action, form_key, prefix = "delete", "delete_form", "delete"

    def perform(self, target, form):
        services.delete_target(target, reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Deleted %(target)s; its nodes fall back to their next target.") % {"target": target})
        return reverse("nodeconfig:index")


class TargetRolloutView(TargetVerbView):
    """Pause / resume / advance / promote a paced rollout."""

    action, form_key, prefix, form_class = "rollout", "rollout_form", "rollout", RolloutForm

    def perform(self, target, form):
        if target.deleted:
            raise Refused("deleted", _("This target is deleted; roll it back to revive it first."))
        action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
        if action == "pause":
            services.set_paused(target, True, reason=reason)
            messages.success(self.request, _("Rollout paused."))
        elif action == "resume":
            services.resume(target, reason=reason)
            messages.success(self.request, _("Rollout resumed."))
        elif action == "advance":
            released = rollout.advance_rollout(target, force=True).get("released_now", 0)
            messages.success(self.request, _("Released %(count)s more nodes.") % {"count": released})
        else:
            released = rollout.promote(target, reason=reason)["released"]
            messages.success(self.request, _("Promoted: released the %(count)s remaining nodes.") % {"count": released})


class EmergencyRestoreView(TargetVerbView):
    """End an emergency downgrade: nodes return to exactly what they ran before it."""

    action, form_key, prefix = "downgrade", "restore_form", "restore"

    def get_queryset(self):
        return targets_with_relations().filter(emergency=True)

    def perform(self, target, form):
        if target.deleted:
            messages.info(self.request, _("This downgrade was already restored."))
            return None
        services.restore_downgrade(target, reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Restoring: nodes return to the regular targets as the restore is delivered."))
        return None


# ---------------------------------------------------------------------------- create / edit / import

class TargetCreateView(PermissionMixin, FormView):
    """Create a target; "Preview" shows matches and conflicts without saving anything."""

    model = ConfigTarget
    action = "add"
    template_name = "nodeconfig/target_form.html"
    form_class = TargetForm
    form_page = True
    target: ConfigTarget | None = None
    scoped_create = True  # a scoped operator creates targets on their clusters (self.object, checked)

    def get_initial(self):
        return {"type": self.request.GET.get("type")} if self.request.GET.get("type") else {}

    def get_form_kwargs(self):
        return super().get_form_kwargs() | {"target": self.target}

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"target": self.target}

    def form_valid(self, form):
        config_type = self.target.config_type if self.target else form.cleaned_data["type"]
        spec = form.spec()
        if "preview" in self.request.POST:
            return self.render_to_response(self.get_context_data(form=form, preview=services.preview(config_type, spec)))
        before = self.target.revision_id if self.target else None
        try:
            version = form.cleaned_data.get("version") or None  # none sent: no precondition, as without If-Match
            with concurrency.expecting(self.target, version) if self.target else nullcontext():
                target, created = services.save_target(config_type, spec, reason=form.cleaned_data["reason"],
                                                       expect_new=self.target is None)
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        self.object = target  # PermissionMixin: a scoped operator's target must stay on their clusters
        if created:
            messages.success(self.request, _("Created %(target)s.") % {"target": target})
        elif target.revision_id == before:
            messages.info(self.request, _("Nothing changed; no new revision."))
        else:
            messages.success(self.request, _("Saved revision %(number)s.") % {"number": target.revision.number})
        return redirect(target_url(target))


class TargetEditView(TargetCreateView):
    action = "change"

    @cached_property
    def target(self) -> ConfigTarget:
        target = get_object_or_404(targets_with_relations(), pk=self.kwargs["pk"])
        if not self.can("change", target):
            raise PermissionDenied
        return target

    def get(self, request, *args, **kwargs):
        return self.refuse_deleted() or super().get(request, *args, **kwargs)

    def post(self, request, *args, **kwargs):
        return self.refuse_deleted() or super().post(request, *args, **kwargs)

    def refuse_deleted(self):
        """A deleted target comes back through a rollback (which keeps its history), not an edit."""
        if not self.target.deleted:
            return None
        messages.error(self.request, _("This target is deleted; roll back to a revision to revive it."))
        return redirect(target_url(self.target))


class ImportView(PermissionMixin, FormView):
    """Create or update targets from upstream YAML; one bad object refuses the whole import."""

    model = ConfigTarget
    action = "add"
    form_page = True
    template_name = "nodeconfig/import.html"
    form_class = ImportForm

    def form_valid(self, form):
        try:
            results = services.import_manifests(form.cleaned_data["yaml"], reason=form.cleaned_data["reason"])
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        created = sum(1 for _, was_created in results if was_created)
        messages.success(self.request, _("Imported %(total)s targets: %(created)s created, %(updated)s updated or unchanged.")
                         % {"total": len(results), "created": created, "updated": len(results) - created})
        return redirect("nodeconfig:index")


# ---------------------------------------------------------------------------- emergency downgrade

class EmergencyView(PermissionMixin, FormView):
    """Active downgrades (anyone may look) and the downgrade form (POST needs the permission).

    The overview page posts here too, so a refused downgrade is explained on this page.
    """

    model = ConfigTarget
    action = "downgrade"
    template_name = "nodeconfig/emergency.html"
    form_class = EmergencyForm

    def get_form(self, form_class=None):
        return emergency_form(self.request.user, **self.get_form_kwargs())

    def get_context_data(self, **kwargs):
        context = emergency_panel_context(self.request) | super().get_context_data(**kwargs)
        context.update(emergency_form=context["form"], topics=["nodeconfig"] if may(self.request.user, "view", ConfigTarget)
                       else [])
        return context

    def form_valid(self, form):
        try:
            target, created, _job = services.emergency_downgrade(**form.scope_args(), reason=form.cleaned_data["reason"])
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        self.object = target  # PermissionMixin: a scoped operator's downgrade must be of their clusters
        if created:
            messages.warning(self.request, _("Emergency downgrade started for %(scope)s: reclaim goes off as the "
                                             "downgrade is delivered to the nodes.") % {"scope": services.scope_text(target)})
        else:
            messages.info(self.request, _("This downgrade was already active; nothing new was created."))
        return redirect(target_url(target))


# ---------------------------------------------------------------------------- one node

class NodeConfigView(PermissionMixin, TemplateView):
    """What one node runs per config type (as its agent receives it) and what the agent reported."""

    model = NodeConfig
    template_name = "nodeconfig/node_config.html"

    def get_context_data(self, **kwargs):
        node = get_object_or_404(Node.objects.select_related("cluster"), cluster__name=self.kwargs["cluster"],
                                 name=self.kwargs["node"])
        payload, etag = effective_config(node)
        rows = {row.config_type.name: row for row in NodeConfig.objects.filter(node=node).select_related(
            "config_type", "matched_target", "target", "revision")}
        entries = [entry | {"type": name, "config_json": pretty(entry["config"]), "row": rows.get(name)}
                   for name, entry in payload["configs"].items()]
        return super().get_context_data(**kwargs) | {"node": node, "entries": entries, "etag": etag}
