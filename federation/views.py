"""Federation pages: federated objects (list, detail with live per-cluster progress, submit,
edit, rollout controls), propagation and override policies, the water-level dashboard with
cordon/drain, and the what-if simulation.

Every write calls ``services`` inside the view, so the UI validates, versions and audits
exactly like the API; a ``Refused`` comes back as errors on the fields it names, with
everything typed kept and nothing changed. Permissions go through ``core.permissions``:
reads need ``view``, each write its action or verb (``rollback``, ``rollout``,
``reschedule``; cordoning is the cluster's ``cordon``), and its controls are only shown to
those who hold it.

Live: the index and an object's page subscribe to "federation" / "federation-object-<pk>"
and re-render their live parts from ``?fragment=live`` (a small template, not the page);
the water-level dashboard refetches its JSON on "water-levels". The dashboard must stay
fast at 500 clusters: a fixed number of queries (``water.water_levels`` and
``water.history`` read every cluster at once), the table's rows built in Python, the charts
drawn client-side from one compact columnar JSON blob (the history embedded only while the
window is small; a big fleet's page fetches it from the JSON endpoint after load).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views import View
from django.views.generic import DetailView, FormView, TemplateView

from core import concurrency
from core.errors import Refused
from core.forms import add_refusal
from core.permissions import may
from core.tables import TableMixin, build_table
from core.views import PermissionMixin, RevisionDiffMixin, VerbViewMixin
from fleet import services as fleet_services
from fleet.models import Cluster

from . import services, water, whatif
from .filtersets import FederatedObjectFilterSet
from .forms import (
    EXAMPLE_OBJECT,
    POLICY_KINDS,
    POLICY_TITLES,
    CordonForm,
    DeleteForm,
    EditTemplateForm,
    PolicyForm,
    ReasonForm,
    RollbackForm,
    SubmitForm,
    WhatIfForm,
    to_yaml,
)
from .models import FederatedObject, MemberObject, PropagationPolicy
from .policy import desired_replicas
from .render import fenceposts
from .scheduler import format_amount
from .tables import (
    FederatedObjectTable,
    MemberTable,
    PlacementTable,
    PolicyTable,
    WaterLevelTable,
    fixed_number,
    placement_summary,
    readiness,
)

REVISIONS_SHOWN = 50
#: The history's windows (hours → label): up to the four weeks a capacity review looks back.
WINDOWS = {1: gettext_lazy("last hour"), 6: gettext_lazy("last 6 hours"), 24: gettext_lazy("last 24 hours"),
           168: gettext_lazy("last 7 days"), 672: gettext_lazy("last 4 weeks")}
HOURS = tuple(WINDOWS)
#: History points on the dashboard in all (thinned per cluster), so 500 clusters stay small.
HISTORY_POINT_BUDGET = 12_000
#: Samples in the window up to which the page embeds the history (above: fetched after load).
HISTORY_EMBED_SAMPLES = 5_000


def object_url(fed: FederatedObject | int) -> str:
    return reverse("federation:object-detail", args=[getattr(fed, "pk", fed)])


def pct(part: float | None, whole: float | None) -> str:
    """A bar width for an inline style: unlocalized, 0..100."""
    if not whole or not part:
        return "0"
    return f"{min(max(100.0 * part / whole, 0.0), 100.0):.1f}"


def phase_labels() -> dict[str, str]:
    return {value: str(label) for value, label in FederatedObject.Phase.choices}


def script_labels() -> dict[str, Any]:
    """What federation.js prints, in the user's language."""
    return {
        "phases": phase_labels(), "cpu": _("CPU"), "memory": _("Memory"), "gpu": _("GPU"),
        "deployRate": _("Deploy rate (%)"), "weight": _("Dynamic weight (‰)"), "before": _("Before"), "after": _("After"),
        "cordoned": _("cordoned"), "draining": _("draining"), "deleted": _("This object was deleted."),
        "reason": _("Reason (kept in the audit log)"), "cordon": _("Cordon"), "drain": _("Drain"),
        "uncordon": _("Uncordon"), "free": _("free"),
        "events": {"drain": _("drain"), "cordon": _("cordon"), "uncordon": _("uncordon"),
                   "emergency_downgrade": _("emergency downgrade"), "restore": _("restore")},
    }


# ---------------------------------------------------------------------------- index


class IndexView(PermissionMixin, TableMixin, TemplateView):
    """Federated objects with their phase, placement and readiness; counts by phase; the
    namespace/kind/phase filters narrow the table, which sorts, searches, pages and exports
    like every list (``core.tables``). ``?fragment=live`` renders only the live parts."""

    model = FederatedObject
    template_name = "federation/index.html"
    table_class = FederatedObjectTable

    def get_template_names(self):
        if self.request.GET.get("fragment") == "live":
            return ["federation/_index_live.html"]
        return [self.template_name]

    @cached_property
    def filtered(self) -> dict[str, Any]:
        """The filters (``FederatedObjectFilterSet``), the objects its namespace and kind leave
        (what the phase counts count), and the phase asked for. Invalid filters show nothing
        and say why."""
        everything = FederatedObject.objects.order_by()
        namespaces = sorted(set(everything.values_list("namespace", flat=True)))
        kinds = sorted(set(everything.values_list("kind", flat=True)))
        self.filterset = FederatedObjectFilterSet(self.request.GET, queryset=everything, namespaces=namespaces, kinds=kinds)
        if not self.filterset.is_valid():
            return {"scoped": everything.none(), "phase": ""}
        return {"scoped": self.filterset.without_phase(everything), "phase": self.filterset.form.cleaned_data["phase"]}

    def get_table_queryset(self):
        scoped, phase = self.filtered["scoped"], self.filtered["phase"]
        rows = scoped.filter(phase=phase) if phase else scoped
        return rows.select_related("propagation_policy").defer("template", "schedule", "references", "message")

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        form, scoped, phase = self.filterset.form, self.filtered["scoped"], self.filtered["phase"]
        counts = dict(scoped.values_list("phase").annotate(n=Count("pk")))
        table = context["table"]
        if sum(counts.values()):
            table.empty_text = _("No object matches these filters.")
        else:
            table.empty_text = _("No federated objects yet.")
        query = self.request.GET.copy()
        for key in ("page", "fragment", "export"):
            query.pop(key, None)
        other = query.copy()
        other.pop("phase", None)
        phase_counts = []
        for value, label in FederatedObject.Phase.choices:
            one = other.copy()
            one["phase"] = value
            phase_counts.append({"phase": value, "label": label, "count": counts.get(value, 0), "active": value == phase,
                                 "query": one.urlencode()})
        objects = [row.record for row in table.shown_rows]
        for fed in objects:
            fed.clusters_shown, fed.clusters_more = placement_summary(fed.placement or {})
            fed.ready_count, fed.desired_count = readiness(fed)
        return context | {
            "filter_form": form, "objects": objects, "phase_counts": phase_counts, "total": sum(counts.values()),
            "query": query.urlencode(), "all_query": other.urlencode(), "phase": phase,
            "topics": ["federation"], "federation_labels": script_labels(),
        }


# ---------------------------------------------------------------------------- one object


def placement_rows(schedule: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per cluster the scheduler saw: outcome, replicas, reasons, scores, weight, capacity;
    placed clusters first (by replicas), then feasible, then filtered, each by name."""
    clusters = schedule.get("clusters") or {}
    filtered = schedule.get("filtered") or {}
    not_selected = schedule.get("not_selected") or {}
    selected = set(schedule.get("selected") or ())
    scores, totals = schedule.get("scores") or {}, schedule.get("total_scores") or {}
    weights, capacity = schedule.get("weights") or {}, schedule.get("estimated_capacity") or {}
    overflow = schedule.get("overflow") or {}
    labels = outcome_labels()
    names = dict.fromkeys([*clusters, *(schedule.get("feasible") or ()), *filtered])
    rows = []
    for name in names:
        if name in clusters:
            outcome, order = "placed", 0
        elif name in filtered:
            outcome, order = "filtered", 3
        elif name in not_selected:
            outcome, order = "not-selected", 2
        elif name in selected:
            outcome, order = "zero", 1
        else:
            outcome, order = "feasible", 2
        replicas = clusters.get(name)
        rows.append({
            "cluster": name, "outcome": outcome, "order": order,
            "replicas": (_("copy") if replicas is None else replicas) if name in clusters else 0,
            "reasons": list(filtered.get(name) or ([not_selected[name]] if name in not_selected else [])),
            "label": labels[outcome], "score": totals.get(name),
            "plugin_scores": ", ".join(f"{k} {v}" for k, v in (scores.get(name) or {}).items()),
            "weight": weights.get(name), "capacity": capacity.get(name), "overflow": overflow.get(name),
        })
    rows.sort(key=lambda r: (r["order"], -(r["replicas"] if isinstance(r["replicas"], int) else 0), r["cluster"]))
    return rows


def outcome_labels() -> dict[str, str]:
    return {"placed": _("placed"), "zero": _("0 replicas"), "not-selected": _("not selected"),
            "feasible": _("feasible"), "filtered": _("filtered out")}


def member_rows(fed: FederatedObject) -> list[dict[str, Any]]:
    """One row per cluster it runs in or is placed on: scheduled replicas, state, the error
    with its retry, observed counts, and bars of updated and available toward scheduled."""
    copy_replicas = desired_replicas(fed.template)
    members = {m.cluster.name: m for m in MemberObject.objects.filter(object=fed).select_related("cluster").only(
        "cluster__name", "replicas", "state", "applied_revision", "error", "attempts", "next_retry", "observed")}
    placement = fed.placement or {}
    labels = dict(MemberObject.State.choices)  # (get_state_display builds this dict for every row)
    rows = []
    for name in sorted(set(members) | set(placement)):
        member = members.get(name)
        scheduled = placement.get(name, member.replicas if member else None)
        target = copy_replicas if scheduled is None else scheduled
        observed = (member.observed if member else None) or {}
        current = observed.get("templateHash") == fed.template_hash or fed.kind != "Deployment"
        updated = int(observed.get("updatedReplicas") or 0) if current else 0
        available = int(observed.get("availableReplicas") or 0)
        rows.append({
            "cluster": name, "member": member, "leaving": name not in placement,
            "scheduled": scheduled, "copy": scheduled is None, "target": target,
            "state": member.state if member else MemberObject.State.PENDING,
            "state_label": labels.get(member.state, member.state) if member else MemberObject.State.PENDING.label,
            "ready": observed.get("readyReplicas"), "available": observed.get("availableReplicas"),
            "updated": updated if observed else None, "current": current,
            "updated_pct": pct(updated, target), "available_pct": pct(available, target),
        })
    return rows


def status_summary(fed: FederatedObject) -> dict[str, Any]:
    """The aggregated counts; for a Deployment also the fleet-wide unavailable replicas beside
    the budget the cross-cluster rollout keeps them under (``maxUnavailable`` resolved for the
    desired total, as the planner resolves it), so a rollout or a drain is watched against it."""
    status = fed.status or {}
    ready, desired = readiness(fed)
    summary = {"ready": ready, "desired": desired, "available": status.get("availableReplicas"),
               "updated": status.get("updatedReplicas"), "replicas": status.get("replicas"),
               "succeeded": status.get("succeeded"), "workload": "desiredReplicas" in status, "budget": None}
    if fed.kind == "Deployment" and status.get("desiredReplicas") is not None:
        wanted = int(status["desiredReplicas"])
        surge, unavailable = fenceposts(fed.template, wanted)
        summary |= {"budget": unavailable, "surge_budget": surge,
                    "unavailable": max(wanted - int(status.get("availableReplicas") or 0), 0),
                    "surge": max(int(status.get("replicas") or 0) - wanted, 0)}
        summary["over_budget"] = summary["unavailable"] > unavailable
    return summary


class ObjectDetailView(RevisionDiffMixin, PermissionMixin, TableMixin, DetailView):
    """Status with unavailable vs budget, per-cluster progress and the placement explanation
    (all three live), template, revisions with their diff, and the write forms this user may use.
    Member clusters and placement are tables (``core.tables``, parameters ``members-…`` and
    ``placement-…``); the live fragment keeps the page's query, so they keep their order."""

    model = FederatedObject
    template_name = "federation/object_detail.html"
    context_object_name = "fed"
    queryset = FederatedObject.objects.select_related("propagation_policy", "override_policy")

    def get_template_names(self):
        if self.request.method == "GET" and self.request.GET.get("fragment") == "live":
            return ["federation/_object_live.html"]
        return [self.template_name]

    def get_tables(self):
        """The object's member clusters and the scheduler's placement, rows computed from the
        object itself (its members in one query): the object's page checked the user may view it."""
        fed = self.object
        self.members, self.placement = member_rows(fed), placement_rows(fed.schedule or {})
        members = build_table(self.request, MemberTable, self.members, prefix="members-",
                              export_name=f"meridian-federated-{fed.pk}-members")
        members.empty_text = (_("No cluster was selected; see the placement explanation.")
                              if fed.phase == FederatedObject.Phase.UNSCHEDULABLE else _("Not scheduled yet."))
        placement = build_table(self.request, PlacementTable, self.placement, prefix="placement-",
                                export_name=f"meridian-federated-{fed.pk}-placement")
        return [members, placement]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        fed = self.object
        schedule = fed.schedule or {}
        context.update(members=self.members, summary=status_summary(fed), federation_labels=script_labels(),
                       topics=[f"federation-object-{fed.pk}"], schedule=schedule, placement=self.placement,
                       members_table=self.tables[0], placement_table=self.tables[1])
        if self.request.GET.get("fragment") == "live" and self.request.method == "GET":
            return context
        revisions = list(fed.revisions.all()[:REVISIONS_SHOWN])
        for revision in revisions:
            revision.yaml = to_yaml(revision.template)
        context.update(revisions=revisions, template_yaml=to_yaml(fed.template), **self.diff_context(revisions))
        for key, form in self.write_forms(fed, revisions).items():
            context.setdefault(key, form)  # an action view passes its bound form instead
        context["may_write"] = any(k in context for k in ("edit_form", "pause_form", "rollback_form", "reschedule_form",
                                                          "delete_form"))
        return context

    def write_forms(self, fed: FederatedObject, revisions) -> dict[str, Any]:
        """Only the forms this user may submit for this object, each carrying its version."""
        forms: dict[str, Any] = {}
        if fed.deleting:
            return forms
        version = concurrency.etag(fed)
        if self.can("change", fed):
            forms["edit_form"] = EditTemplateForm(prefix="edit", fed=fed, initial={"template": to_yaml(fed.template),
                                                                                  "version": version})
        if self.can("rollout", fed):
            forms["pause_form"] = ReasonForm(prefix="pause", initial={"version": version})
        if self.can("rollback", fed):
            forms["rollback_form"] = RollbackForm(prefix="rollback", revisions=revisions, initial={"version": version})
        if self.can("reschedule", fed):
            forms["reschedule_form"] = ReasonForm(prefix="reschedule", initial={"version": version})
        if self.can("delete", fed):
            forms["delete_form"] = DeleteForm(prefix="delete", expected=fed.name, initial={"version": version})
        return forms


class ObjectVerbView(VerbViewMixin, ObjectDetailView):
    """A POST-only write on one object (``core.views.VerbViewMixin``); on a refusal the detail
    page comes back with the bound form saying why."""

    form_class = ReasonForm

    def post(self, request, *args, **kwargs):
        fed = self.get_object()
        if fed.deleting:
            self.object = fed
            form = self.make_form(fed)
            form.is_valid()
            form.add_error(None, _("This object is being deleted."))
            return self.render_to_response(self.get_context_data(**{self.form_key: form}))
        return super().post(request, *args, **kwargs)


class ObjectEditView(ObjectVerbView):
    action, form_key, prefix = "change", "edit_form", "edit"

    def make_form(self, fed):
        return EditTemplateForm(self.request.POST, prefix=self.prefix, fed=fed)

    def perform(self, fed, form):
        before = fed.revision
        fed, _created = services.submit(form.cleaned_data["template"], change_cause=form.cleaned_data["change_cause"])
        if fed.revision == before:
            messages.info(self.request, _("The template did not change; no new revision."))
        else:
            messages.success(self.request, _("Saved revision %(revision)s; it rolls out cluster by cluster.")
                             % {"revision": fed.revision})


class ObjectRolloutView(ObjectVerbView):
    """Pause or resume the cross-cluster rollout (the button pressed is ``action``)."""

    action, form_key, prefix = "rollout", "pause_form", "pause"

    def perform(self, fed, form):
        paused = self.request.POST.get("action") == "pause"
        services.set_paused(fed, paused, reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Rollout paused.") if paused else _("Rollout resumed."))


class ObjectRollbackView(ObjectVerbView):
    action, form_key, prefix = "rollback", "rollback_form", "rollback"

    def make_form(self, fed):
        return RollbackForm(self.request.POST, prefix=self.prefix, revisions=list(fed.revisions.all()))

    def perform(self, fed, form):
        old = form.cleaned_data["revision"]
        revision = services.rollback(fed, old, reason=form.cleaned_data["change_cause"])
        messages.success(self.request, _("Rolled back to revision %(old)s as new revision %(new)s.")
                         % {"old": old, "new": revision.number})


class ObjectRescheduleView(ObjectVerbView):
    action, form_key, prefix = "reschedule", "reschedule_form", "reschedule"

    def perform(self, fed, form):
        services.reschedule(fed, reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Rescheduling %(object)s: placement is computed afresh.") % {"object": fed})


class ObjectDeleteView(ObjectVerbView):
    action, form_key, prefix = "delete", "delete_form", "delete"

    def make_form(self, fed):
        return DeleteForm(self.request.POST, prefix=self.prefix, expected=fed.name)

    def perform(self, fed, form):
        services.delete(fed)
        messages.success(self.request, _("Deleting %(object)s: it is removed from every member cluster.") % {"object": fed})
        return reverse("federation:index")


class ObjectCreateView(PermissionMixin, FormView):
    """Submit a native object (or a new template for one that exists) with its policies."""

    model = FederatedObject
    action = "add"
    form_page = True
    template_name = "federation/object_form.html"
    form_class = SubmitForm
    initial = {"object": EXAMPLE_OBJECT}

    def form_valid(self, form):
        data = form.cleaned_data
        meta = data["object"].get("metadata") if isinstance(data["object"].get("metadata"), Mapping) else {}
        existing = FederatedObject.objects.filter(namespace=meta.get("namespace") or "", kind=data["object"].get("kind"),
                                                  name=meta.get("name")).first()
        if existing is not None and not may(self.request.user, "change", existing):
            form.add_error("object", _("This object is already federated, and you may not change it."))
            return self.form_invalid(form)
        try:
            fed, created = services.submit(data["object"], propagation_policy=data["propagation_policy"] or None,
                                           override_policy=data["override_policy"] or None,
                                           change_cause=data["change_cause"])
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        if created:
            messages.success(self.request, _("Submitted %(object)s; it is being scheduled.") % {"object": fed})
        else:
            messages.success(self.request, _("Updated %(object)s (revision %(revision)s).")
                             % {"object": fed, "revision": fed.revision})
        return redirect(object_url(fed))


# ---------------------------------------------------------------------------- policies


def policy_url(kind: str, policy) -> str:
    return reverse("federation:policy-detail", args=[kind, policy.pk])


class KindMixin:
    @cached_property
    def kind(self) -> str:
        kind = self.kwargs["kind"]
        if kind not in POLICY_KINDS:
            raise Http404("no such policy kind")
        return kind

    @property
    def model(self):
        return POLICY_KINDS[self.kind]


class PolicyListView(PermissionMixin, TableMixin, TemplateView):
    """Both kinds of policies, a table each (parameters prefixed ``propagation-``/``override-``)."""

    model = PropagationPolicy
    template_name = "federation/policy_list.html"

    def get_tables(self):
        user = self.request.user
        return [build_table(self.request, PolicyTable, model.objects.annotate(used=Count("federated_objects")),
                            prefix=f"{kind}-", kind=kind, page_request=self.request, may_delete=may(user, "delete", model))
                for kind, model in POLICY_KINDS.items()]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        sections = [{"kind": kind, "title": POLICY_TITLES[kind], "table": table, "may_add": may(user, "add", model)}
                    for (kind, model), table in zip(POLICY_KINDS.items(), context["tables"], strict=True)]
        return context | {"sections": sections}


class PolicyCreateView(KindMixin, PermissionMixin, FormView):
    template_name = "federation/policy_form.html"
    form_class = PolicyForm
    policy = None
    action = "add"
    form_page = True

    def get_form_kwargs(self):
        return super().get_form_kwargs() | {"kind": self.kind, "editing": self.policy is not None}

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"kind": self.kind, "policy": self.policy,
                                                     "kind_label": self.model._meta.verbose_name}

    def form_valid(self, form):
        data = form.cleaned_data
        try:
            # A form without a version (an old tab, a script) expects nothing, as on every verb view.
            version = data.get("version") or None
            with concurrency.expecting(self.policy, version) if self.policy else nullcontext():
                policy = services.save_policy(self.model, namespace=data["namespace"], name=data["name"], spec=data["spec"],
                                              description=data["description"], instance=self.policy)
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        message = _("Saved %(kind)s %(policy)s.") if self.policy else _("Created %(kind)s %(policy)s.")
        messages.success(self.request, message % {"kind": self.model._meta.verbose_name, "policy": policy})
        return redirect(policy_url(self.kind, policy))


class PolicyDetailView(PolicyCreateView):
    """A policy's spec and the objects using it; the edit form for those who may change it."""

    template_name = "federation/policy_detail.html"
    OBJECTS_SHOWN = 100

    action = "change"
    form_page = False  # read by everyone; its edit form is one of its parts

    @cached_property
    def policy(self):
        return get_object_or_404(self.model, pk=self.kwargs["pk"])

    def get_initial(self):
        p = self.policy
        return {"namespace": p.namespace, "name": p.name, "description": p.description, "spec": to_yaml(p.spec or {}),
                "version": concurrency.etag(p)}

    def get_context_data(self, **kwargs):
        user, policy = self.request.user, self.policy
        used = policy.federated_objects.order_by("namespace", "kind", "name")
        context = super().get_context_data(**kwargs) | {
            "spec_yaml": to_yaml(policy.spec or {}), "used_by": list(used[: self.OBJECTS_SHOWN]), "used_count": used.count(),
            "may_change": may(user, "change", policy), "may_delete": may(user, "delete", policy),
        }
        if not context["may_change"]:
            context.pop("form", None)
        return context


class PolicyDeleteView(KindMixin, PermissionMixin, View):
    http_method_names = ("post",)
    action = "delete"

    def post(self, request, *args, **kwargs):
        policy = get_object_or_404(self.model, pk=self.kwargs["pk"])
        try:
            services.delete_policy(policy)
        except Refused as exc:
            messages.error(request, _("%(policy)s was not deleted: %(why)s") % {"policy": policy, "why": exc.detail})
            return redirect(policy_url(self.kind, policy))
        messages.success(request, _("Deleted %(kind)s %(policy)s.") % {"kind": self.model._meta.verbose_name, "policy": policy})
        return redirect("federation:policy-list")


# ---------------------------------------------------------------------------- water levels


def chosen_hours(request) -> int:
    try:
        hours = int(request.GET.get("hours", HOURS[0]))
    except (TypeError, ValueError):
        return HOURS[0]
    return hours if hours in HOURS else HOURS[0]


def chosen_range(request) -> tuple[datetime, datetime] | None:
    """``start`` and ``end`` (epoch milliseconds, as a zoomed chart asks), or None for the
    window; a bad range is a ``Refused`` naming the parameter."""
    if "start" not in request.GET and "end" not in request.GET:
        return None
    bounds = {}
    for key in ("start", "end"):
        try:
            bounds[key] = datetime.fromtimestamp(int(request.GET.get(key, "")) / 1000, tz=UTC)
        except (TypeError, ValueError, OverflowError, OSError):
            raise Refused.from_errors({key: _("Give start and end as epoch milliseconds.")}) from None
    start, end = bounds["start"], bounds["end"]
    if end - start < water.MIN_RANGE:
        raise Refused.from_errors({"end": _("end must be at least a minute after start.")})
    if end - start > water.MAX_RANGE:
        raise Refused.from_errors({"start": _("A range may span at most 400 days.")})
    return start, end


def compact_history(history: Mapping[str, Any], keys: list[str]) -> dict[str, Any]:
    """Series per cluster with times as seconds after ``t0`` (epoch ms): a fraction of the
    size of ISO strings repeated for every point of every cluster. ``t1`` ends the range,
    ``grain`` says what a point is, ``events`` are the drains, cordons and downgrades in it."""
    since = datetime.fromisoformat(history["since"])
    t0 = int(since.timestamp() * 1000)

    def offset(at: str) -> int:
        return round(datetime.fromisoformat(at).timestamp() - t0 / 1000)

    series = {}
    for name, entry in history["series"].items():
        series[name] = {"t": [offset(at) for at in entry["at"]], "weight": entry["weight"], **{k: entry[k] for k in keys}}
    return {"t0": t0, "t1": int(datetime.fromisoformat(history["until"]).timestamp() * 1000), "grain": history["grain"],
            "series": series, "events": [e | {"t": offset(e.pop("at"))} for e in history["events"]]}


def dashboard(hours: int, *, history: bool | None = True, between: tuple[datetime, datetime] | None = None,
              levels: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(levels, payload): water levels as ``water`` computes them, and the charts' columnar JSON.

    ``history=None`` embeds the history only while the window holds at most
    ``HISTORY_EMBED_SAMPLES`` samples (one cheap count): even thinned, a big fleet's history
    costs more than the page's whole budget, so its page leaves ``history`` null and
    federation.js fetches it from the JSON endpoint. ``levels``: ``water.water_levels()``
    when the caller has read them already.
    """
    levels = levels if levels is not None else water.water_levels()
    clusters = levels["clusters"]
    keys = [key for key, *_rest in water.RESOURCES
            if key != "gpu" or any(c["resources"]["gpu"]["allocatable"] for c in clusters)]
    end = timezone.now()
    start, end = between or (end - timedelta(hours=hours), end)
    if history is None:
        grain = water.grain_for(start, end)
        history = (water.samples_of(grain).filter(at__gte=start, at__lte=end).count()
                   <= HISTORY_EMBED_SAMPLES)
    series = None
    if history:
        budget = max(2, min(500, HISTORY_POINT_BUDGET // max(1, len(clusters))))
        series = compact_history(water.history(start=start, end=end, max_points=budget), keys)
    payload = {
        "at": levels["at"], "hours": hours, "keys": keys, "units": levels["units"], "totals": levels["totals"],
        "clusters": [c["name"] for c in clusters], "ready": [c["ready"] for c in clusters],
        "weight": [c["weight"] for c in clusters], "state": [cordon_state(c) for c in clusters],
        "resources": {key: {field: [c["resources"][key][field] for c in clusters]
                            for field in ("allocatable", "requested", "available", "deploy_rate")} for key in keys},
        "history": series, "grains": grain_labels(),
    }
    return levels, payload


def grain_labels() -> dict[str, str]:
    return {"minute": _("one point a minute"), "hour": _("hourly averages"), "day": _("daily averages")}


def cordon_state(cluster: Mapping[str, Any]) -> str:
    return "draining" if cluster["draining"] else "cordoned" if cluster["cordoned"] else ""


def level_class(rate: float) -> str:
    return "hot" if rate >= 90 else "warm" if rate >= 70 else ""


def bar_width(rate: float) -> str:
    return f"{min(max(rate, 0.0), 100.0):.1f}"


class WaterLevelsView(PermissionMixin, TableMixin, TemplateView):
    """Fleet totals, per-cluster levels and weights with cordon controls, and the charts. The
    per-cluster table is ``WaterLevelTable`` (``core.tables``: sorted, searched, paged,
    exported): its rows are the levels ``water`` computed for every cluster (the weights need
    them all), its cells the ones federation.js updates in place; the charts draw every cluster."""

    model = Cluster
    fleet_wide = True  # weights and totals are the fleet's
    template_name = "federation/water_levels.html"

    @cached_property
    def levels(self) -> dict[str, Any]:
        levels = water.water_levels()
        for cluster in levels["clusters"]:
            cluster["state"] = cordon_state(cluster)
        return levels

    @cached_property
    def columns(self) -> list[dict[str, Any]]:
        """The resources shown: GPU only when some cluster has GPUs (as the charts' keys)."""
        clusters = self.levels["clusters"]
        return [{"key": key, "label": label, "unit": unit} for key, label, *_mid, unit in water.RESOURCES
                if key != "gpu" or any(c["resources"]["gpu"]["allocatable"] for c in clusters)]

    def get_tables(self):
        return [build_table(self.request, WaterLevelTable, self.levels["clusters"], columns=self.columns,
                            may_cordon=may(self.request.user, "cordon", Cluster))]

    def get_context_data(self, **kwargs):
        hours = chosen_hours(self.request)
        levels, payload = dashboard(hours, history=None, levels=self.levels)
        keys = payload["keys"]
        cordons = list(Cluster.objects.filter(cordoned=True).order_by("name"))
        totals = []
        for key, label, *_rest in water.RESOURCES:
            if key in keys:
                t = levels["totals"][key]
                totals.append({"key": key, "label": label, "unit": levels["units"][key], "rate": fixed_number(t["deploy_rate"]),
                               "requested": fixed_number(t["requested"]),
                               "allocatable": fixed_number(t["allocatable"]),
                               "available": fixed_number(t["available"]), "width": bar_width(t["deploy_rate"]),
                               "level": level_class(t["deploy_rate"])})
        return super().get_context_data(**kwargs) | {
            "totals": totals, "payload": payload,
            "hours": hours, "windows": WINDOWS.items(), "cluster_count": len(levels["clusters"]), "cordons": cordons,
            "ready_count": sum(1 for c in levels["clusters"] if c["ready"]),
            "may_cordon": may(self.request.user, "cordon", Cluster), "federation_labels": script_labels(),
            "columns": self.columns, "topics": ["water-levels", "fleet"],
        }


class WaterLevelsJSONView(PermissionMixin, View):
    """The dashboard's data for live refreshes and the hour picker (same JSON as embedded)."""

    model = Cluster
    fleet_wide = True

    def get(self, request, *args, **kwargs):
        """``?hours=`` picks a window; ``?start=&end=`` (epoch ms) a zoomed range, whose
        history comes at the finest grain it can afford. A bad range is a 400 naming it."""
        try:
            between = chosen_range(request)
        except Refused as exc:
            return JsonResponse(exc.body(), status=400)
        _levels, payload = dashboard(chosen_hours(request), between=between)
        return JsonResponse(payload)


class ClusterCordonView(PermissionMixin, FormView):
    """Cordon, drain or uncordon one member cluster, with a reason. The dashboard's buttons
    post here from a dialog; without JavaScript they lead to this page's form."""

    model = Cluster
    action = "cordon"
    template_name = "federation/cordon.html"
    form_class = CordonForm

    @cached_property
    def cluster(self) -> Cluster:
        cluster = get_object_or_404(Cluster, name=self.kwargs["name"])
        if not may(self.request.user, "cordon", cluster):
            raise PermissionDenied
        return cluster

    def get_initial(self):
        action = self.request.GET.get("action")
        return {"action": action} if action in dict(CordonForm.ACTIONS) else {}

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {
            "cluster": self.cluster, "cordon": self.cluster if self.cluster.cordoned else None}

    def form_valid(self, form):
        action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
        cluster = self.cluster
        if action == "uncordon":
            if cluster.cordoned:
                fleet_services.uncordon(cluster, reason=reason)
                messages.success(self.request, _("Uncordoned %(cluster)s: it takes new replicas again.") % {"cluster": cluster.name})
            else:
                messages.info(self.request, _("%(cluster)s was not cordoned.") % {"cluster": cluster.name})
        else:
            fleet_services.cordon(cluster, drain=action == "drain", reason=reason)
            text = (_("Draining %(cluster)s: its replicas move to other clusters within each rollout budget.")
                    if action == "drain" else _("Cordoned %(cluster)s: no new replicas go there."))
            messages.success(self.request, text % {"cluster": cluster.name})
        return redirect(reverse("federation:water-levels") + f"#cluster-{cluster.name}")


# ---------------------------------------------------------------------------- what-if


def whatif_chart(result: Mapping[str, Any]) -> dict[str, Any]:
    """Before/after deploy rates of the clusters it would land on (every cluster if none)."""
    levels = result["water_levels"]
    chosen = result["schedule"].get("clusters") or {}
    placed = [row for row in levels if row["cluster"] in chosen]
    rows = placed or levels
    keys = [k for k in ("cpu", "memory", "gpu") if k != "gpu" or any(r["gpu"]["allocatable"] for r in rows)]
    names = {key: str(label) for key, label, *_rest in water.RESOURCES}
    return {"clusters": [r["cluster"] for r in rows], "keys": keys, "options": [[k, names[k]] for k in keys],
            "before": {k: [r[k]["before"] for r in rows] for k in keys},
            "after": {k: [r[k]["after"] for r in rows] for k in keys}}


class WhatIfView(PermissionMixin, FormView):
    """Where would this object land under this policy, and the water levels after? Commits nothing."""

    model = FederatedObject
    action = "add"  # a preview needs the role that could make the change, as every what-if does
    form_page = True
    template_name = "federation/what_if.html"
    form_class = WhatIfForm
    initial = {"object": EXAMPLE_OBJECT}

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"federation_labels": script_labels()}

    def form_valid(self, form):
        try:
            result = whatif.what_if(form.cleaned_data["object"], form.policy_argument())
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        schedule = result["schedule"]
        chosen = schedule.get("clusters") or {}
        placed = [row for row in result["water_levels"] if row["cluster"] in chosen]
        request = {name: format_amount(name, amount) for name, amount in (result["request"] or {}).items()}
        return self.render_to_response(self.get_context_data(
            form=form, result=result, request_text=request, schedule=schedule, placement=placement_rows(schedule),
            placed_levels=placed, chart=whatif_chart(result)))

