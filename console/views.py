"""Console pages: overview and the audit log."""

from __future__ import annotations

import json

from django import forms
from django.utils.translation import gettext as _
from django.views.generic import DetailView, TemplateView

from core.diff import shallow
from core.filtersets import JobFilterSet, ObjectChangeFilterSet
from core.jobs import cancel_job
from core.models import Job, ObjectChange
from core.permissions import may, may_any_or_role, restrict
from core.tables import JobTable, ObjectChangeTable, TableMixin
from core.views import PermissionMixin, VerbViewMixin
from core.worker_signals import live_workers
from federation.models import FederatedObject
from fleet.models import Cluster
from fleet.queries import fleet_summary
from nodeconfig.models import ConfigTarget
from nodeconfig.views import emergency_panel_context
from quotas.models import QuotaGroup

from .overview import attention

#: The overview's live topics, each for those who may view its model fleet-wide (as the consumer checks).
TOPICS = (("fleet", Cluster), ("nodeconfig", ConfigTarget), ("federation", FederatedObject), ("quotas", QuotaGroup))


class OverviewView(TemplateView):
    """The fleet at a glance. Every part is shown only to those who may read what it shows:
    a signed-in user without a role sees that they have none, not the audit log or the jobs."""

    template_name = "console/overview.html"

    def get_template_names(self):
        """``?fragment=attention``: only the sections needing attention, re-fetched live."""
        if self.request.GET.get("fragment") == "attention":
            return ["console/_attention.html"]
        return [self.template_name]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        context["attention"] = attention(user)
        if self.request.GET.get("fragment") == "attention":
            return context
        # Fleet-wide figures for fleet-wide roles; jobs and changes as far as the user may see
        # them (a scoped role: those of the objects in its scope).
        can = {"fleet": may(user, "view", Cluster), "jobs": may_any_or_role(user, "view", Job),
               "changes": may_any_or_role(user, "view", ObjectChange)}
        try:
            workers = live_workers()
        except Exception:  # Redis down: the page still renders and says so
            workers = None
        topics = ["system"] + [topic for topic, model in TOPICS if may(user, "view", model)]
        has_role = any(can.values()) or any(section.count or section.items for section in context["attention"])
        context.update(can=can, workers=workers, topics=topics, has_role=has_role, feed_labels=feed_labels())
        if can["fleet"]:
            context["fleet"] = fleet_summary()
        if can["jobs"]:
            jobs = restrict(Job.objects.all(), user)
            context.update(jobs_running=jobs.filter(status=Job.Status.RUNNING).count(),
                           jobs_failed=jobs.filter(status=Job.Status.FAILED).count(),
                           recent_jobs=jobs.exclude(triggered_by="system:beat")[:8])
        if can["changes"]:
            context["recent_changes"] = restrict(ObjectChange.objects.select_related("object_type"), user)[:10]
        context.update(emergency_panel_context(self.request))
        return context


def feed_labels() -> dict[str, str]:
    """The live feed's sentences per event type (``%(field)s`` filled from the event's data by
    overview.js). Only what a person acts on is here: heartbeats, water-level samples and
    per-node progress are not, so the feed stays readable during a fleet-wide rollout."""
    return {
        "cluster.registered": _("Cluster %(cluster)s registered"),
        "cluster.deleted": _("Cluster %(cluster)s removed"),
        "cluster.cordoned": _("Cluster %(cluster)s cordoned"),
        "cluster.drained": _("Cluster %(cluster)s cordoned and draining"),
        "cluster.uncordoned": _("Cluster %(cluster)s uncordoned"),
        "cluster.unreachable": _("Cluster %(cluster)s unreachable: %(message)s"),
        "object.changed": _("Federated %(kind)s %(key)s changed"),
        "object.status": _("Federated object %(key)s is %(phase)s"),
        "object.deleted": _("Federated object %(key)s deleted"),
        "quotas.cash_exhausted": _("Quota group %(group)s spent its budget: %(exhausted)s"),
        "quotas.cash_replenished": _("Quota group %(group)s has budget again"),
    }


class AuditLogView(PermissionMixin, TableMixin, TemplateView):
    """The audit log: the filterset's filters (actor, action, since, …) narrow it, the table
    sorts, searches, pages and exports it (``?export=csv``, every matching row)."""

    model = ObjectChange
    template_name = "console/audit_list.html"
    table_class = ObjectChangeTable

    def get_table_queryset(self):
        self.filterset = ObjectChangeFilterSet(self.request.GET, queryset=ObjectChange.objects.select_related("object_type"))
        return self.filterset.qs if self.filterset.is_valid() else ObjectChange.objects.none()

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"filterset": self.filterset, "actions": ObjectChange.Action.choices}


class AuditEntryView(PermissionMixin, DetailView):
    model = ObjectChange
    template_name = "console/audit_detail.html"
    context_object_name = "change"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        change = self.object
        context["diff"] = [{"field": row["field"], "before": _show(row["old"]), "after": _show(row["new"]),
                            "changed": row["changed"]} for row in shallow(change.before, change.after)]
        return context


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class JobDetailView(PermissionMixin, DetailView):
    """One job: what it ran, its state, its log as it is written (``job.log`` events), and
    cancel while it has not finished."""

    model = Job
    template_name = "console/job_detail.html"
    context_object_name = "job"

    def get_context_data(self, **kwargs):
        job = self.object
        return super().get_context_data(**kwargs) | {
            "topics": [f"job-{job.pk}"], "may_cancel": job.status not in Job.FINISHED and self.can("cancel", job),
            "cancel_form": kwargs.get("cancel_form") or forms.Form(prefix="cancel")}


class JobCancelView(VerbViewMixin, JobDetailView):
    """POST: cancel the job (``core.jobs.cancel_job``: running work stops at its next checkpoint)."""

    action = "cancel"
    form_class = forms.Form
    prefix = "cancel"
    form_key = "cancel_form"

    def perform(self, obj: Job, form) -> None:
        cancel_job(obj)


class JobListView(PermissionMixin, TableMixin, TemplateView):
    model = Job
    template_name = "console/job_list.html"
    table_class = JobTable

    def get_table_queryset(self):
        self.filterset = JobFilterSet(self.request.GET, queryset=Job.objects.all())
        return self.filterset.qs if self.filterset.is_valid() else Job.objects.none()
