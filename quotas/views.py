"""Quota tree pages: the whole tree (treemap + navigable list), one group, create, and the what-if.

Reads need ``view`` on quota groups (every role; owners see their subtree). Writes go
through ``services`` exactly like the API, and who may write is ``core.permissions.may``: a
group's owners manage its subtree through object constraints (``delegation``). A
``Refused`` comes back as an error on the field it names, with everything typed kept;
never a 500.

The index must stay fast at fleet scale (5,000 groups): one ``values_list`` query for the
whole tree, the nested list built in Python (a recursive template would cost seconds), the
treemap drawn client-side from the same rows embedded with ``json_script``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from html import escape
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.views.generic import DetailView, FormView, TemplateView

from core import concurrency
from core.diff import diff
from core.errors import Refused
from core.forms import add_refusal
from core.permissions import may, may_any, restrict
from core.tables import TableMixin, build_table
from core.views import PermissionMixin, VerbViewMixin
from fleet.forms import WebhookConfigurationForm
from fleet.models import Cluster
from fleet.views import WebhookPageMixin
from kube.quantity import Quantity, sum_quantities

from . import accounting as acc
from . import services, webhook
from .display import bar_html, is_binary, number, percent, readable
from .filtersets import QuotaChargeFilterSet
from .forms import (
    CheckForm,
    DeleteForm,
    GroupCreateForm,
    MoveForm,
    OwnersForm,
    ResizeForm,
    resource_lines,
)
from .models import CashSample, QuotaCharge, QuotaGroup, QuotaGroupRevision
from .tables import ChildGroupTable, QuotaChargeTable, QuotaGroupTable

DEFAULT_KEY = "limits.cpu"
HISTORY_ROWS = 50
#: Tree levels open by default in the nested list (deeper levels are one click away).
OPEN_DEPTH = 1


# ---------------------------------------------------------------------------- quantities

def script_labels() -> dict[str, str]:
    """What quotas.js prints, in the user's language."""
    return {"used": _("used"), "hard": _("hard"), "cashExhausted": _("cash exhausted"),
            "cashReplenished": _("cash replenished"), "projected": _("projected exhaustion"), "fleet": _("Fleet"),
            "noKey": _("no hard on this resource")}


def quantity_sum(values: Iterable[str]) -> str:
    return str(sum_quantities(Quantity.parse(str(v)) for v in values))


def quantity_diff(a: str, b: str) -> str:
    return str(Quantity.parse(str(a)) - Quantity.parse(str(b)))


# ---------------------------------------------------------------------------- the whole tree

TREE_COLUMNS = ("pk", "name", "parent_id", "depth", "hard", "used", "cash_exhausted")


@dataclass
class TreeNode:
    """One group as the index needs it (from a single values_list row)."""

    index: int
    pk: int
    name: str
    parent_id: int | None
    depth: int
    hard: dict[str, str]
    used: dict[str, str]
    cash_exhausted: list[str]
    children: list[TreeNode] = field(default_factory=list)

    @property
    def over(self) -> bool:
        """Used above hard on any key (a shrink below usage, or cash spent)."""
        return any((number(self.used.get(k)) or 0) > (number(h) or 0) for k, h in self.hard.items() if k in self.used)

    @property
    def cash_spent(self) -> bool:
        if self.cash_exhausted:
            return True
        return any(acc.cash_base(k) is not None and k in self.used and (number(self.used[k]) or 0) >= (number(h) or 0)
                   for k, h in self.hard.items())


def load_tree(user: Any) -> list[TreeNode]:
    """Every group the user may see in ONE query, linked into a forest in Python, roots and children by name."""
    rows = restrict(QuotaGroup.objects.order_by(), user, "view").values_list(*TREE_COLUMNS)
    nodes = [TreeNode(0, pk, name, parent, depth, hard or {}, used or {}, cash or [])
             for pk, name, parent, depth, hard, used, cash in rows.iterator(chunk_size=2000)]
    by_pk = {node.pk: node for node in nodes}
    for node in nodes:
        parent = by_pk.get(node.parent_id)
        if parent is not None:
            parent.children.append(node)
    ordered = list(walk(sorted((n for n in nodes if n.parent_id not in by_pk), key=lambda n: n.name)))
    for index, node in enumerate(ordered):
        node.index = index
    return ordered


def walk(roots: Sequence[TreeNode]) -> Iterable[TreeNode]:
    """Pre-order (a parent before its subtree, siblings by name), without recursion."""
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        node.children.sort(key=lambda n: n.name)
        yield node
        stack.extend(reversed(node.children))


def resource_keys(nodes: Iterable[TreeNode]) -> list[str]:
    keys: set[str] = set()
    for node in nodes:
        keys.update(node.hard)
    return sorted(keys)


def choose_key(keys: Sequence[str], requested: str | None) -> str | None:
    if requested in keys:
        return requested
    if DEFAULT_KEY in keys:
        return DEFAULT_KEY
    return keys[0] if keys else None


def tree_stats(nodes: Sequence[TreeNode]) -> dict[str, int]:
    return {"groups": len(nodes), "roots": sum(1 for n in nodes if n.parent_id is None),
            "over": sum(1 for n in nodes if n.over), "cash_exhausted": sum(1 for n in nodes if n.cash_spent)}


def tree_payload(nodes: Sequence[TreeNode], keys: Sequence[str], key: str | None) -> dict[str, Any]:
    """Columnar rows for quotas.js: per group [name, parent index, [hard per key], [used per key]]."""
    parent_index = {n.pk: n.index for n in nodes}
    groups = [[n.name, parent_index.get(n.parent_id), [number(n.hard.get(k)) for k in keys],
               [number(n.used.get(k)) if k in n.hard else None for k in keys]] for n in nodes]
    return {"keys": list(keys), "key": key, "groups": groups,
            "exhausted": [n.name for n in nodes if n.cash_spent],
            "detailUrl": reverse("quotas:group-detail", args=["__name__"])}


def tree_html(roots: Sequence[TreeNode], key: str | None) -> SafeString:
    """The nested list, server-side so it works without JS; built in Python because a template
    loop over 5,000 groups would eat the page's time budget. Every value is escaped."""
    url = reverse("quotas:group-detail", args=["__name__"])
    out: list[str] = ['<ul class="qt-tree">']
    stack: list[Any] = [("close-root", None)] + [("node", n) for n in reversed(roots)]
    while stack:
        kind, node = stack.pop()
        if kind == "close":
            out.append("</ul></details></li>")
            continue
        if kind == "close-root":
            out.append("</ul>")
            continue
        link = f'<a href="{escape(url.replace("__name__", node.name))}">{escape(node.name)}</a>'
        bar = bar_html(node.used.get(key), node.hard.get(key), key) if key else ""
        row = f'{link} <span class="qt-row-bar">{bar}</span>'
        if not node.children:
            out.append(f'<li data-i="{node.index}" class="qt-leaf">{row}</li>')
            continue
        open_attr = " open" if node.depth < OPEN_DEPTH else ""
        out.append(f'<li data-i="{node.index}"><details{open_attr}><summary>{row} '
                   f'<span class="muted small">({len(node.children)})</span></summary><ul>')
        stack.append(("close", None))
        stack.extend(("node", child) for child in reversed(node.children))
    return mark_safe("".join(out))  # noqa: S308 — every value above went through escape()


class IndexView(PermissionMixin, TableMixin, TemplateView):
    """The whole tree: treemap (size = hard, colour = used/hard of one key), nested list, stats,
    live feed; and every group flat in a table that sorts, searches, pages and exports."""

    model = QuotaGroup
    template_name = "quotas/index.html"

    @cached_property
    def nodes(self) -> list[TreeNode]:
        return load_tree(self.request.user)

    def get_tables(self):
        groups = restrict(QuotaGroup.objects.all(), self.request.user, "view")
        groups = groups.select_related("parent").prefetch_related("owners").defer("self_used", "cash_exhausted")
        return [build_table(self.request, QuotaGroupTable, groups, keys=resource_keys(self.nodes))]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        nodes = self.nodes
        keys = resource_keys(nodes)
        key = choose_key(keys, self.request.GET.get("key"))
        roots = [n for n in nodes if n.parent_id is None]
        return context | {
            "keys": keys, "key": key, "stats": tree_stats(nodes),
            "tree_data": tree_payload(nodes, keys, key), "tree_html": tree_html(roots, key),
            "may_create": may_any(self.request.user, "add", QuotaGroup), "topics": ["quotas"], "quota_labels": script_labels(),
            "may_view_clusters": may(self.request.user, "view", Cluster),
        }


# ---------------------------------------------------------------------------- one group

def group_url(name: str) -> str:
    return reverse("quotas:group-detail", args=[name])


def ancestors(group: QuotaGroup) -> list[str]:
    """Names from the root down to the parent, read off the materialised path (no query)."""
    return [name for name in group.path.strip("/").split("/") if name][:-1]


def resource_rows(group: QuotaGroup, children_hard: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """Per key of hard: hard, used, selfUsed, Σ children's hard, remaining, and bar widths.

    ``over`` flags what admission refuses on: used above hard (a shrink below usage), or a
    cash budget spent (used at or above hard).
    """
    rows = []
    for key in sorted(group.hard):
        hard, used = str(group.hard[key]), str(group.used.get(key, "0"))
        own = str(group.self_used.get(key, "0"))
        kids = quantity_sum(h[key] for h in children_hard if key in h)
        scale = max(number(hard) or 0.0, number(used) or 0.0)
        cash = acc.cash_base(key) is not None
        over = (number(used) or 0) >= (number(hard) or 0) if cash else (number(used) or 0) > (number(hard) or 0)
        binary = is_binary(key)
        rows.append({
            "key": key, "hard": readable(hard, binary), "used": readable(used, binary), "self_used": readable(own, binary),
            "children_hard": readable(kids, binary), "remaining": readable(quantity_diff(hard, used), binary),
            "canonical": {"hard": hard, "used": used, "self_used": own, "children_hard": kids}, "over": over, "cash": cash,
            "self_pct": percent((number(own) or 0) / scale) if scale else "0.0",
            "children_pct": percent((number(kids) or 0) / scale) if scale else "0.0",
            "hard_pct": percent((number(hard) or 0) / scale) if scale else "100.0",
        })
    return rows


def children_rows(group: QuotaGroup) -> list[dict[str, Any]]:
    """Every child's name and hard (what the resource rows add up; the children's table pages)."""
    rows = QuotaGroup.objects.filter(parent=group).order_by("name").values_list("name", "hard")
    return [{"name": name, "hard": hard} for name, hard in rows]


def history(group: QuotaGroup) -> list[QuotaGroupRevision]:
    """The group's revisions, newest first, each with what changed since the one before."""
    rows = list(group.revisions.order_by("-number")[: HISTORY_ROWS + 1])
    for newer, older in zip(rows, [*rows[1:], None][: len(rows)], strict=True):  # none yet: a group made outside the services
        newer.changes = [{"field": c["path"], "before": _shown(c["old"]), "after": _shown(c["new"])}
                         for c in diff(older.spec() if older else {}, newer.spec())]
    return rows[:HISTORY_ROWS]


def _shown(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "—"
    return str(value)


def cash_chart(group: QuotaGroup, now: datetime | None = None) -> dict[str, Any] | None:
    """Burn-down series per cash key, with hard and the projected exhaustion (None: no cash keys).

    The projection runs from the latest sample at the group's own burn rate (its pods' time,
    ``burn_points``) between the first and the latest sample (``accounting.burn_rate``/
    ``projected_exhaustion``), so the chart's dotted line and the date printed next to it are
    the same number, and a budget handed to a child is a step down, not a burn.
    """
    keys = sorted(k for k in group.hard if acc.cash_base(k))
    if not keys:
        return None
    samples = list(CashSample.objects.filter(group=group).order_by("time").values_list("time", "used", "burned"))
    hard, used = services.parsed(group.hard), services.parsed(group.used)
    series = []
    for key in keys:
        points = [(time, Quantity.parse(str(values[key]))) for time, values, _ in samples if key in values]
        rate = acc.burn_rate(burn_points(samples, key))
        last_time, last_used = points[-1] if points else (now or timezone.now(), used.get(key, Quantity.from_int(0)))
        exhaustion = acc.projected_exhaustion(hard[key], last_used, rate, last_time)
        series.append({
            "key": key, "hard": number(group.hard[key]), "hard_text": readable(str(group.hard[key])),
            "used_text": readable(str(group.used.get(key, "0"))), "exhausted": key in (group.cash_exhausted or []),
            "times": [t for t, _ in points], "used": [float(q.as_decimal()) for _, q in points],
            "rate": float(rate) if rate is not None else None,
            "exhaustion": exhaustion,
            "days_left": (exhaustion - (now or timezone.now())).days if exhaustion else None,
        })
    return {"series": series}


def burn_points(samples: Sequence[tuple[datetime, dict, dict]], key: str) -> list[tuple[datetime, Quantity]]:
    """The group's own pod time on ``key`` over the samples: the burn, not the budget handed to
    children (a new child moves ``used`` at once without any pod running). Samples written
    before ``burned`` was recorded fall back to ``used``."""
    return [(time, Quantity.parse(str(burned[key] if key in burned else used[key])))
            for time, used, burned in samples if key in burned or key in used]


class GroupDetailView(PermissionMixin, TableMixin, DetailView):
    """A group: breadcrumbs, per-resource bars, children, owners, workloads, cash burn-down,
    history, and only the write forms this user may use. Children and workloads are tables
    (``core.tables``, parameters ``children-…`` and ``workloads-…``); the workloads' filters are
    ``QuotaChargeFilterSet``. Whoever may view the group sees all its workloads (its owners
    hold no role on charges), so they are not restricted again."""

    model = QuotaGroup
    template_name = "quotas/group_detail.html"
    context_object_name = "group"
    slug_field = slug_url_kwarg = "name"
    queryset = QuotaGroup.objects.select_related("parent")

    def get_tables(self):
        group = self.object
        keys = sorted(group.hard)
        children = QuotaGroup.objects.filter(parent=group).only("name", "description", "hard", "used")
        charges = (QuotaCharge.objects.filter(group=group).select_related("cluster")
                   .only("cluster__name", "namespace", "kind", "name", "replicas", "hpa_max_replicas", "charge", "source",
                         "observed", "admitted_at")
                   .order_by("-admitted_at", "-pk"))
        self.filterset = QuotaChargeFilterSet(self.request.GET, queryset=charges, prefix="workloads")
        shown = self.filterset.qs if self.filterset.is_valid() else charges.none()
        return [
            build_table(self.request, QuotaChargeTable, shown, prefix="workloads-", restricted=True, filterset=self.filterset,
                        keys=keys, export_name=f"meridian-quota-workloads-{group.name}"),
            build_table(self.request, ChildGroupTable, children, prefix="children-", restricted=True, keys=keys,
                        export_name=f"meridian-quota-children-{group.name}"),
        ]

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        group = self.object
        children = children_rows(group)
        context.update(
            ancestors=ancestors(group), children=children,
            resources=resource_rows(group, [c["hard"] for c in children]),
            owners=list(group.owners.order_by("username").values_list("username", flat=True)),
            workloads_table=self.tables[0], children_table=self.tables[1], workload_filter=self.filterset.form,
            cash=cash_chart(group), history=history(group), topics=["quotas"], quota_labels=script_labels(),
        )
        context["over_hard"] = any(r["over"] and not r["cash"] for r in context["resources"])
        for key, value in self.write_forms(group, children, context["owners"]).items():
            context.setdefault(key, value)  # an action view passes its bound form instead
        return context

    def write_forms(self, group: QuotaGroup, children: list[dict[str, Any]], owners: list[str]) -> dict[str, Any]:
        """Only the forms this user may submit for this group, each carrying its version."""
        forms: dict[str, Any] = {}
        version = concurrency.etag(group)
        if self.can("add", group):
            forms["child_form"] = GroupCreateForm(parent=group.name, fixed_parent=True, auto_id="child_%s",
                                                  initial={"hard": resource_lines({k: "0" for k in group.hard})})
        if self.can("change", group):
            forms["resize_form"] = ResizeForm(prefix="resize", initial={"hard": resource_lines(group.hard), "version": version})
            forms["owners_form"] = OwnersForm(prefix="owners", initial={"owners": ", ".join(owners), "version": version})
            siblings = self.siblings(group)
            if siblings:
                forms["move_form"] = MoveForm(prefix="move", siblings=siblings, initial={"version": version})
        if self.can("delete", group):
            forms["delete_form"] = DeleteForm(prefix="delete", initial={"version": version})
            forms["delete_blocked"] = bool(children)
        return forms

    @staticmethod
    def siblings(group: QuotaGroup) -> list[str]:
        """Groups under the same parent (for roots: the other roots)."""
        rows = QuotaGroup.objects.filter(parent_id=group.parent_id).exclude(pk=group.pk).order_by("name")
        return list(rows.values_list("name", flat=True))


class GroupVerbView(VerbViewMixin, GroupDetailView):
    """A POST-only write on one group (``core.views.VerbViewMixin``); on a refusal the detail
    page comes back with the bound form saying why."""

    action = "change"

    def perform(self, group: QuotaGroup, form) -> HttpResponse | str | None:
        raise NotImplementedError


class GroupResizeView(GroupVerbView):
    form_key, prefix, form_class = "resize_form", "resize", ResizeForm

    def perform(self, group, form):
        _row, warnings = services.update_group(group, hard=form.cleaned_data["hard"], reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Resized %(group)s.") % {"group": group.name})
        for warning in warnings:
            messages.warning(self.request, warning)
        return None


class GroupOwnersView(GroupVerbView):
    form_key, prefix, form_class = "owners_form", "owners", OwnersForm

    def perform(self, group, form):
        services.update_group(group, owners=form.cleaned_data["owners"], reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Saved the owners of %(group)s.") % {"group": group.name})
        return None


class GroupMoveView(GroupVerbView):
    form_key = "move_form"

    def make_form(self, group):
        return MoveForm(self.request.POST, prefix="move", siblings=self.siblings(group))

    def perform(self, group, form):
        name = form.cleaned_data["target"]
        target = QuotaGroup.objects.filter(name=name).first()
        if target is None:
            raise Refused("unknown_target", _('No quota group named "%(name)s".') % {"name": name}, field="target")
        if not may(self.request.user, "change", target):
            raise Refused("forbidden_target", _('You may not change "%(name)s".') % {"name": name}, field="target")
        services.move_quota(group, target, form.cleaned_data["amount"], reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Moved %(amount)s from %(source)s to %(target)s.")
                         % {"amount": resource_lines(form.cleaned_data["amount"]).replace("\n", ", "),
                            "source": group.name, "target": target.name})
        return None


class GroupDeleteView(GroupVerbView):
    action, form_key, prefix, form_class = "delete", "delete_form", "delete", DeleteForm

    def perform(self, group, form):
        parent = group.parent.name if group.parent_id else None
        services.delete_group(group, reason=form.cleaned_data["reason"])
        messages.success(self.request, _("Deleted %(group)s; its quota returned to its parent.") % {"group": group.name})
        return group_url(parent) if parent else reverse("quotas:index")


# ---------------------------------------------------------------------------- create

class GroupCreateView(PermissionMixin, FormView):
    """A new root, or a child of ``?parent=`` (then fixed: the detail page's "create child" posts here).

    Without ``?parent=`` the parent is typed; owners may then name a group inside their
    subtree, and only holders of the add permission may leave it empty (a new root).
    """

    model = QuotaGroup
    action = "add"
    template_name = "quotas/group_form.html"
    form_class = GroupCreateForm
    scoped_create = True  # owners and subtree operators create below what they manage (checked here, and on self.object)

    @cached_property
    def parent_name(self) -> str | None:
        return (self.request.GET.get("parent") or "").strip() or None

    @cached_property
    def parent_row(self) -> QuotaGroup | None:
        if self.parent_name is None:
            return None
        return get_object_or_404(QuotaGroup, name=self.parent_name)

    def get(self, request, *args, **kwargs):
        self.check_may_create()
        return super().get(request, *args, **kwargs)

    def post(self, request, *args, **kwargs):
        self.check_may_create()
        return super().post(request, *args, **kwargs)

    def check_may_create(self) -> None:
        """With a fixed parent: may this user add under it? Otherwise: may they add anywhere?"""
        if self.parent_name is not None:
            if not may(self.request.user, "add", self.parent_row):
                raise PermissionDenied(_("You may not change this part of the quota tree."))
        elif not may_any(self.request.user, "add", QuotaGroup):
            raise PermissionDenied(_("You may not create quota groups."))

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs() | {"parent": self.parent_name, "fixed_parent": self.parent_name is not None}
        if self.parent_row is not None and self.request.method == "GET":
            kwargs["initial"] = {"hard": resource_lines({k: "0" for k in self.parent_row.hard})}
        return kwargs

    def get_context_data(self, **kwargs):
        crumbs = ancestors(self.parent_row) + [self.parent_row.name] if self.parent_row else []
        return super().get_context_data(**kwargs) | {"parent": self.parent_name, "ancestors": crumbs}

    def typed_parent_refused(self, parent: str | None) -> str | None:
        """Why this user may not create under a typed parent (None: they may, or the services will say it is unknown)."""
        user = self.request.user
        if parent is None:
            return None if may(user, "add", QuotaGroup) else _("Only operators create root groups; name a parent you manage.")
        row = QuotaGroup.objects.filter(name=parent).first()
        if row is None or may(user, "add", row):
            return None
        return _('You may not create groups under "%(parent)s": it is outside the subtrees you manage.') % {"parent": parent}

    def form_valid(self, form):
        data = form.cleaned_data
        refused = None if self.parent_name else self.typed_parent_refused(data["parent"])
        if refused:
            form.add_error("parent", refused)
            return self.form_invalid(form)
        try:
            group = services.create_group(name=data["name"], parent=data["parent"], hard=data["hard"],
                                          description=data["description"], owners=data["owners"], reason=data["reason"])
        except Refused as exc:
            add_refusal(form, exc)
            return self.form_invalid(form)
        self.object = group
        messages.success(self.request, _("Created %(group)s.") % {"group": group.name})
        return redirect(group_url(group.name))


# ---------------------------------------------------------------------------- what-if

EXAMPLE_WORKLOAD = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels:
    biz.group.resource.quota: my-group
    biz.group.resource.quota/cpu-type: A4
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: app
        image: app:1
        resources:
          limits: {cpu: "2", memory: 4Gi}
"""


class CheckView(PermissionMixin, FormView):
    """"Would this workload be admitted now?" — the admission decision, committing nothing."""

    model = QuotaGroup
    action = "add"  # a preview needs the role that could make the change, as every what-if does
    form_page = True
    template_name = "quotas/check.html"
    form_class = CheckForm

    def get_initial(self):
        return {"workload": EXAMPLE_WORKLOAD, "group": self.request.GET.get("group", "")}

    def form_valid(self, form):
        group = form.cleaned_data["group"]
        if group and not QuotaGroup.objects.filter(name=group).exists():
            form.add_error("group", _('No quota group named "%(name)s".') % {"name": group})
            return self.form_invalid(form)
        decision = services.what_if(form.cleaned_data["workload"], group=group)
        delta = [{"key": k, "value": v} for k, v in sorted(decision.delta.items())]
        return self.render_to_response(self.get_context_data(form=form, decision=decision, delta=delta))


# ---------------------------------------------------------------------------- the admission webhook of a cluster

class WebhookClustersView(PermissionMixin, TemplateView):
    """The clusters whose quota webhook configuration can be previewed (and, by admins, applied)."""

    model = Cluster
    template_name = "quotas/webhook_clusters.html"

    def get_context_data(self, **kwargs):
        clusters = restrict(Cluster.objects.order_by("name"), self.request.user, "view").values_list("name", flat=True)
        return super().get_context_data(**kwargs) | {"clusters": list(clusters)}


class WebhookConfigurationPageView(WebhookPageMixin, FormView):
    """One cluster's ``ValidatingWebhookConfiguration`` and the API server's token files, shown
    before anything is applied (``fleet.views.WebhookPageMixin``); the URL names the cluster."""

    webhook = webhook.CONFIGURATION
    template_name = "quotas/webhook.html"
    form_class = WebhookConfigurationForm

    def dispatch(self, request, *args, **kwargs):
        self.cluster = get_object_or_404(Cluster, name=kwargs["cluster"])
        return super().dispatch(request, *args, **kwargs)

    def get_form_kwargs(self):
        kwargs = super().get_form_kwargs()
        if self.request.method == "GET" and self.request.GET:
            kwargs["data"] = self.request.GET  # the preview of a typed URL, bound so its errors show
        return kwargs

    def get_initial(self):
        return {"base_url": str(getattr(settings, "MERIDIAN_PUBLIC_URL", "") or "")}

    def webhook_cluster(self, form) -> Cluster:
        return self.cluster

    def applied_url(self, cluster: Cluster) -> str:
        return reverse("quotas:webhook-configuration", args=[cluster.name])

    def get_context_data(self, **kwargs):
        return super().get_context_data(**kwargs) | {"cluster": self.cluster}
