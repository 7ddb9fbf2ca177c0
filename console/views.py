"""Console pages: overview and the audit log."""

from __future__ import annotations

import csv
import json

from django.contrib.auth.mixins import PermissionRequiredMixin
from django.http import HttpResponse, StreamingHttpResponse
from django.views.generic import DetailView, ListView, TemplateView

from core.filtersets import JobFilterSet, ObjectChangeFilterSet
from core.models import Job, ObjectChange
from core.worker_signals import live_workers
from fleet.queries import fleet_summary
from nodeconfig.views import emergency_panel_context


class OverviewView(TemplateView):
    template_name = "console/overview.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        try:
            workers = live_workers()
        except Exception:  # Redis down: the page still renders and says so
            workers = None
        context.update(
            fleet=fleet_summary(),
            workers=workers,
            jobs_running=Job.objects.filter(status=Job.Status.RUNNING).count(),
            jobs_failed=Job.objects.filter(status=Job.Status.FAILED).count(),
            recent_jobs=Job.objects.all()[:8],
            recent_changes=ObjectChange.objects.select_related("object_type")[:10],
            topics=["system", "fleet"],
        )
        context.update(emergency_panel_context(self.request))
        return context


class AuditLogView(PermissionRequiredMixin, ListView):
    permission_required = "core.view_objectchange"
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


class AuditEntryView(PermissionRequiredMixin, DetailView):
    permission_required = "core.view_objectchange"
    model = ObjectChange
    template_name = "console/audit_detail.html"
    context_object_name = "change"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        change = self.object
        before, after = change.before or {}, change.after or {}
        keys = sorted(set(before) | set(after))
        context["diff"] = [
            {"field": k, "before": _show(before.get(k)), "after": _show(after.get(k)), "changed": before.get(k) != after.get(k)}
            for k in keys
        ]
        return context


def _show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


class _Echo:
    def write(self, value: str) -> str:
        return value


class AuditExportView(PermissionRequiredMixin, ListView):
    """The filtered audit log as CSV, streamed so a large export does not sit in memory."""

    permission_required = "core.view_objectchange"

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


class JobListView(PermissionRequiredMixin, ListView):
    permission_required = "core.view_job"
    template_name = "console/job_list.html"
    paginate_by = 50

    def get_queryset(self):
        self.filterset = JobFilterSet(self.request.GET, queryset=Job.objects.all())
        return self.filterset.qs if self.filterset.is_valid() else Job.objects.none()
