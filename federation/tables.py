"""Federation's list tables: federated objects, propagation and override policies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_tables2 as tables
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from core.tables import BaseTable


def spec_summary(kind: str, spec: Mapping[str, Any]) -> str:
    """One line about a policy: its mode and constraints, or its rule count."""
    if kind == "override":
        rules = spec.get("overrideRules") or []
        return _("%(count)s override rules") % {"count": len(rules)}
    parts = [str(spec.get("schedulingMode") or "Divide")]
    if spec.get("clusterSelector"):
        parts.append("selector " + ", ".join(f"{k}={v}" for k, v in spec["clusterSelector"].items()))
    if spec.get("placement"):
        parts.append(_("%(count)s placements") % {"count": len(spec["placement"])})
    if spec.get("maxClusters") is not None:
        parts.append(f"maxClusters {spec['maxClusters']}")
    if spec.get("stickyCluster"):
        parts.append("sticky")
    return " · ".join(parts)


class PolicyTable(BaseTable):
    """One kind of policy (``kind``: propagation or override), with how many objects use each
    (the ``used`` annotation) and, for those who may, the delete button."""

    namespace = tables.Column(verbose_name=gettext_lazy("Namespace"), empty_values=())
    name = tables.Column(verbose_name=gettext_lazy("Name"))
    summary = tables.Column(verbose_name=gettext_lazy("Summary"), accessor="spec", orderable=False, empty_values=(),
                            attrs={"td": {"class": "small"}})
    description = tables.Column(verbose_name=gettext_lazy("Description"), orderable=False)
    used = tables.Column(verbose_name=gettext_lazy("Objects using it"),
                         attrs={"td": {"class": "fed-num", "data-used": lambda record: record.used}})
    updated = tables.DateTimeColumn(verbose_name=gettext_lazy("Updated"), format="Y-m-d H:i")
    delete = tables.Column(verbose_name=gettext_lazy("Actions"), accessor="pk", orderable=False, exclude_from_export=True)

    search_fields = ("namespace", "name", "description")

    class Meta(BaseTable.Meta):
        order_by = ("namespace", "name")
        empty_text = gettext_lazy("None yet.")
        row_attrs = {"data-policy": lambda record: str(record)}

    def __init__(self, *args: Any, kind: str, page_request, may_delete: bool, **kwargs: Any) -> None:
        super().__init__(*args, attrs={"class": "table", "id": f"{kind}-policy-table"},
                         exclude=() if may_delete else ("delete",), **kwargs)
        self.kind, self.page_request = kind, page_request
        self.export_name = f"meridian-{kind}-policies"

    def render_namespace(self, value: str) -> str:
        return value or _("fleet-wide")

    def value_namespace(self, value: str) -> str:
        return value

    def render_name(self, record, value: str):
        return format_html('<a href="{}">{}</a>', reverse("federation:policy-detail", args=[self.kind, record.pk]), value)

    def value_name(self, value: str) -> str:
        return value

    def render_summary(self, record) -> str:
        return spec_summary(self.kind, record.spec or {})

    def render_delete(self, record):
        title = format_html(' title="{}"', _("Objects still use it: deleting is refused")) if record.used else ""
        return format_html(
            '<form method="post" action="{}" class="inline"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
            '<button type="submit" class="ghost"{}>{}</button></form>',
            reverse("federation:policy-delete", args=[self.kind, record.pk]), get_token(self.page_request), title, _("Delete"))


CLUSTERS_SHOWN = 6


def placement_summary(placement: Mapping[str, int | None]) -> tuple[list[tuple[str, str]], int]:
    """The first clusters of a placement as (name, replicas or "copy"), and how many more."""
    items = sorted(placement.items())
    shown = [(name, _("copy") if replicas is None else str(replicas)) for name, replicas in items[:CLUSTERS_SHOWN]]
    return shown, max(0, len(items) - CLUSTERS_SHOWN)


def readiness(fed) -> tuple[int, int | None]:
    """(ready, desired): replicas for workloads, applied copies for everything else."""
    status = fed.status or {}
    if "desiredReplicas" in status:
        return int(status.get("readyReplicas") or 0), int(status["desiredReplicas"])
    clusters = status.get("clusters") or {}
    return sum(1 for c in clusters.values() if c.get("state") == "applied"), len(fed.placement or {})


class FederatedObjectTable(BaseTable):
    """Federated objects with their phase, placement and readiness. The table is the index's
    live fragment (``?fragment=live`` re-renders it): federation.js relabels the phase badges
    of ``tr[data-object-id]`` from events at once."""

    kind = tables.Column(verbose_name=gettext_lazy("Kind"))
    name = tables.Column(verbose_name=gettext_lazy("Namespace/name"), accessor="key", order_by=("namespace", "name"))
    phase = tables.Column(verbose_name=gettext_lazy("Phase"))
    clusters = tables.Column(verbose_name=gettext_lazy("Clusters (replicas)"), accessor="placement", orderable=False,
                             empty_values=(), attrs={"td": {"class": "small"}})
    ready = tables.Column(verbose_name=gettext_lazy("Ready / desired"), accessor="pk", orderable=False,
                          attrs={"td": {"class": "fed-num"}})
    policy = tables.Column(verbose_name=gettext_lazy("Propagation policy"), accessor="propagation_policy",
                           order_by=("propagation_policy__namespace", "propagation_policy__name"))
    revision = tables.Column(verbose_name=gettext_lazy("Revision"))
    updated = tables.DateTimeColumn(verbose_name=gettext_lazy("Updated"), format="Y-m-d H:i:s")

    search_fields = ("namespace", "name", "kind")
    default_columns = ("kind", "name", "phase", "clusters", "ready", "revision", "updated")
    export_name = "meridian-federated-objects"

    class Meta(BaseTable.Meta):
        order_by = ("namespace", "kind", "name")
        attrs = {"class": "table fed-objects", "id": "fed-objects-table", "data-live-fragment": "live",
                 "data-refresh-on": "object.status object.changed object.deleted"}
        row_attrs = {"data-object-id": lambda record: record.pk}

    def render_name(self, record):
        link = format_html('<a href="{}">{}</a>', reverse("federation:object-detail", args=[record.pk]), record.key)
        if not record.rollout_paused:
            return link
        return format_html('{} <span class="badge paused">{}</span>', link, _("paused"))

    def value_name(self, record) -> str:
        return record.key

    def render_phase(self, record):
        return render_to_string("federation/_phase.html", {"phase": record.phase, "label": record.get_phase_display()})

    def value_phase(self, record) -> str:
        return record.phase

    def render_clusters(self, record):
        shown, more = placement_summary(record.placement or {})
        if not shown:
            return mark_safe('<span class="muted">—</span>')
        chips = format_html_join(" ", '<span class="fed-chip">{} <b>{}</b></span>', shown)
        if not more:
            return chips
        label = ngettext("+%(n)s more", "+%(n)s more", more) % {"n": more}
        return format_html('{} <span class="muted">{}</span>', chips, label)

    def value_clusters(self, record) -> str:
        return " ".join(f"{name}={'copy' if replicas is None else replicas}"
                        for name, replicas in sorted((record.placement or {}).items()))

    def render_ready(self, record) -> str:
        ready, desired = readiness(record)
        return f"{ready} / {'—' if desired is None else desired}"

    def value_ready(self, record) -> str:
        ready, desired = readiness(record)
        return f"{ready}/{'' if desired is None else desired}"

    def render_policy(self, value) -> str:
        return str(value)

    def render_revision(self, value: int) -> str:
        return f"r{value}"

    def value_revision(self, value: int) -> int:
        return value
