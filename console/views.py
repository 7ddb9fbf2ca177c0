"""Console pages: overview and the audit log."""

from __future__ import annotations

import csv
import json

from django.http import HttpResponse, StreamingHttpResponse
from django.views.generic import DetailView, ListView, TemplateView

from core.diff import shallow
from core.filtersets import JobFilterSet, ObjectChangeFilterSet
from core.models import Job, ObjectChange
from core.permissions import may
from core.views import PermissionMixin
from core.worker_signals import live_workers
from fleet.models import Cluster
from fleet.queries import fleet_summary
from nodeconfig.views import emergency_panel_context


class OverviewView(TemplateView):
    """The fleet at a glance. Every part is shown only to those who may read what it shows:
    a signed-in user without a role sees that they have none, not the audit log or the jobs."""

    template_name = "console/overview.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        can = {"fleet": may(user, "view", Cluster), "jobs": may(user, "view", Job),
               "changes": may(user, "view", ObjectChange)}
        try:
            workers = live_workers()
        except Exception:  # Redis down: the page still renders and says so
            workers = None
        topics = ["system"] + (["fleet"] if can["fleet"] else [])
        context.update(can=can, workers=workers, topics=topics, has_role=any(can.values()))
        if can["fleet"]:
            context["fleet"] = fleet_summary()
        if can["jobs"]:
            context.update(jobs_running=Job.objects.filter(status=Job.Status.RUNNING).count(),
                           jobs_failed=Job.objects.filter(status=Job.Status.FAILED).count(),
                           recent_jobs=Job.objects.exclude(triggered_by="system:beat")[:8])
        if can["changes"]:
            context["recent_changes"] = ObjectChange.objects.select_related("object_type")[:10]
        context.update(emergency_panel_context(self.request))
        return context


class AuditLogView(PermissionMixin, ListView):
    model = ObjectChange
    template_name = "console/audit_list.html"
    paginate_by = 50

    def get_queryset(self):
        self.filterset = ObjectChangeFilterSet(self.request.GET, queryset=ObjectChange.objects.select_related("object_type"))
        return self.filterset.qs if self.filterset.is_valid() else ObjectChange.objects.none()

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["filterset"] = self.filterset
        query = self.request.GET.copy()
        query.pop("page", None)
        context["query"] = query.urlencode()
        context["actions"] = ObjectChange.Action.choices
        return context


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


class _Echo:
    def write(self, value: str) -> str:
        return value


class AuditExportView(PermissionMixin, ListView):
    """The filtered audit log as CSV, streamed so a large export does not sit in memory."""

    model = ObjectChange

    def get(self, request, *args, **kwargs) -> HttpResponse:
        filterset = ObjectChangeFilterSet(request.GET, queryset=ObjectChange.objects.select_related("object_type"))
        if not filterset.is_valid():
            return HttpResponse(f"invalid filter: {filterset.errors.as_text()}", status=400, content_type="text/plain")
        writer = csv.writer(_Echo())
        header = ["time", "actor", "source", "request_id", "action", "verb", "object_type", "object_id", "object", "reason", "before", "after"]

        def rows():
            yield writer.writerow(header)
            for c in filterset.qs.iterator(chunk_size=2000):
                ct = f"{c.object_type.app_label}.{c.object_type.model}" if c.object_type else ""
                yield writer.writerow([
                    c.time.isoformat(), c.actor, c.source, c.request_id or "", c.action, c.verb, ct, c.object_id,
                    c.object_repr, c.reason, json.dumps(c.before, ensure_ascii=False), json.dumps(c.after, ensure_ascii=False),
                ])

        response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="meridian-audit-log.csv"'
        return response


class JobListView(PermissionMixin, ListView):
    model = Job
    template_name = "console/job_list.html"
    paginate_by = 50

    def get_queryset(self):
        self.filterset = JobFilterSet(self.request.GET, queryset=Job.objects.all())
        return self.filterset.qs if self.filterset.is_valid() else Job.objects.none()
