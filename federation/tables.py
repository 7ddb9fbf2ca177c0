"""Federation's list tables: federated objects, propagation and override policies, one object's
member clusters and placement, and the water levels."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape as quote
from typing import Any

import django_tables2 as tables
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from core.tables import PER_PAGE_CHOICES, BaseTable, TimeColumn, WrittenRowsTable


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
    description = tables.Column(verbose_name=gettext_lazy("Description"), orderable=False, attrs={"td": {"translate": "no"}})
    used = tables.Column(verbose_name=gettext_lazy("Objects using it"),
                         attrs={"td": {"class": "fed-num", "data-used": lambda record: record.used}})
    updated = TimeColumn(verbose_name=gettext_lazy("Updated"), format="Y-m-d H:i")
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
    updated = TimeColumn(verbose_name=gettext_lazy("Updated"), format="Y-m-d H:i:s")

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


# ---------------------------------------------------------------------------- one object's clusters


class MemberTable(BaseTable):
    """A federated object's member clusters: rows are ``views.member_rows``' dicts (each cluster
    it runs in or is placed on). The cells keep their ``data-fed-field`` hooks and the rows
    their ``data-cluster``/``data-state``, which the page's live fragment and tests read."""

    cluster = tables.Column(verbose_name=gettext_lazy("Cluster"))
    scheduled = tables.Column(verbose_name=gettext_lazy("Scheduled"), empty_values=(),
                              attrs={"td": {"class": "fed-num", "data-fed-field": "scheduled"}})
    state = tables.Column(verbose_name=gettext_lazy("State"))
    ready = tables.Column(verbose_name=gettext_lazy("Ready"), attrs={"td": {"class": "fed-num", "data-fed-field": "ready"}})
    available = tables.Column(verbose_name=gettext_lazy("Available"),
                              attrs={"td": {"class": "fed-num", "data-fed-field": "available"}})
    updated = tables.Column(verbose_name=gettext_lazy("Updated"), empty_values=(),
                            attrs={"td": {"class": "fed-num", "data-fed-field": "updated"}})
    progress = tables.Column(verbose_name=gettext_lazy("Progress toward scheduled"), accessor="updated_pct",
                             orderable=False, empty_values=(), exclude_from_export=True,
                             attrs={"th": {"class": "fed-progress-col"}})
    error = tables.Column(verbose_name=gettext_lazy("Error"), accessor="member__error", empty_values=(),
                          attrs={"td": {"class": "small"}})

    search_fields = ("cluster", "state", "member__error")
    export_name = "meridian-federated-members"

    class Meta(BaseTable.Meta):
        attrs = {"class": "table fed-members", "id": "fed-members-table"}
        row_attrs = {"data-cluster": lambda record: record["cluster"], "data-state": lambda record: record["state"],
                     "class": lambda record: "fed-leaving" if record["leaving"] else ""}

    def render_cluster(self, record):
        link = format_html('<a href="{}">{}</a>', reverse("fleet:cluster-detail", args=[record["cluster"]]), record["cluster"])
        if not record["leaving"]:
            return link
        return format_html('{} <span class="badge">{}</span>', link, _("leaving"))

    def value_cluster(self, record) -> str:
        return record["cluster"]

    def render_scheduled(self, record) -> str:
        if record["leaving"]:
            return "0"
        if record["copy"]:
            return _("copy") if record["target"] is None else f"{_('copy')} ({record['target']})"
        return str(record["scheduled"])

    def value_scheduled(self, record):
        return 0 if record["leaving"] else "copy" if record["copy"] else record["scheduled"]

    def render_state(self, record):
        member = record["member"]
        badge = format_html('<span class="badge fed-state {}" data-fed-field="state">{}</span>', record["state"],
                            record["state_label"])
        if member is None or not member.applied_revision:
            return badge
        return format_html('{} <span class="muted small">r{}</span>', badge, member.applied_revision)

    def value_state(self, record) -> str:
        return record["state"]

    def render_updated(self, record):
        shown = "—" if record["updated"] is None else record["updated"]
        if record["member"] is None or record["current"]:
            return shown
        return format_html('{} <span class="muted small" title="{}">↻</span>', shown, _("still on an earlier template"))

    def value_updated(self, record):
        return record["updated"]

    def render_progress(self, record):
        return render_to_string("federation/_member_progress.html", {"m": record})

    def render_error(self, record):
        member = record["member"]
        if member is None or not member.error:
            return mark_safe('<span class="muted">—</span>')
        return render_to_string("federation/_member_error.html", {"member": member})

    def value_error(self, record) -> str:
        member = record["member"]
        return member.error if member is not None else ""


class PlacementTable(BaseTable):
    """Why the object is placed where it is: rows are ``views.placement_rows``' dicts, one per
    cluster the scheduler saw (placed first, then by outcome, until the user sorts). The first
    ``td.fed-num`` of a row is its replicas, as the journeys read it."""

    cluster = tables.Column(verbose_name=gettext_lazy("Cluster"))
    outcome = tables.Column(verbose_name=gettext_lazy("Outcome"), order_by=("order",))
    replicas = tables.Column(verbose_name=gettext_lazy("Replicas"), attrs={"td": {"class": "fed-num"}})
    score = tables.Column(verbose_name=gettext_lazy("Score"),
                          attrs={"td": {"class": "fed-num", "title": lambda record: record["plugin_scores"] or None}})
    weight = tables.Column(verbose_name=gettext_lazy("Weight"), attrs={"td": {"class": "fed-num"}})
    capacity = tables.Column(verbose_name=gettext_lazy("Estimated capacity"), attrs={"td": {"class": "fed-num"}})
    why = tables.Column(verbose_name=gettext_lazy("Why"), accessor="reasons", orderable=False, empty_values=(),
                        attrs={"td": {"class": "small"}})

    search_fields = ("cluster", "label", "reasons")
    export_name = "meridian-federated-placement"

    class Meta(BaseTable.Meta):
        attrs = {"class": "table fed-placement", "id": "fed-placement-table"}
        row_attrs = {"data-cluster": lambda record: record["cluster"], "class": lambda record: f"fed-outcome-{record['outcome']}"}

    def render_outcome(self, record):
        return format_html('<span class="badge fed-outcome {}">{}</span>', record["outcome"], record["label"])

    def value_outcome(self, record) -> str:
        return record["outcome"]

    def render_replicas(self, record):
        if not record["overflow"]:
            return str(record["replicas"])
        return format_html('{} <span class="muted small">(+{} {})</span>', record["replicas"], record["overflow"], _("overflow"))

    def value_replicas(self, record):
        return "copy" if isinstance(record["replicas"], str) else record["replicas"]

    def render_why(self, record):
        if record["reasons"]:
            return format_html_join("", "<div>{}</div>", ((r,) for r in record["reasons"]))
        if record["plugin_scores"]:
            return format_html('<span class="muted">{}</span>', record["plugin_scores"])
        return ""

    def value_why(self, record) -> str:
        return "; ".join(map(str, record["reasons"]))


# ---------------------------------------------------------------------------- water levels


def fixed_number(value: float) -> str:
    """1234.5 → "1,234.5", 12.0 → "12" (as federation.js writes the live cells)."""
    return f"{value:,.1f}".removesuffix(".0")


def level_class(resource: Mapping[str, Any]) -> str | None:
    """hot at 90 % and above, warm at 70 %: the cell's class (federation.js sets the same)."""
    rate = resource["deploy_rate"]
    return "hot" if rate >= 90 else "warm" if rate >= 70 else None


def level_html(resource: Mapping[str, Any]) -> str:
    """A level cell's content, as federation.js rewrites it: the bar (``b``), the deploy rate
    (``span``), requested / allocatable · free (``small``). Numbers only: nothing to escape."""
    rate = resource["deploy_rate"]
    return (f'<b style="--r:{min(max(rate, 0.0), 100.0):.1f}%"></b><span>{fixed_number(rate)}%</span>'
            f'<small>{fixed_number(resource["requested"])} / {fixed_number(resource["allocatable"])} · '
            f'{fixed_number(resource["available"])}</small>')


class LevelColumn(tables.Column):
    """One resource's level of a cluster (``water.water_levels``' ``resources[key]``),
    ``level_html`` in a ``td[data-res=<key>]`` whose class is the level; sorted and exported by
    the deploy rate."""

    def __init__(self, key: str, label: Any, unit: Any, **kwargs: Any) -> None:
        self.key = key
        header = format_html('{} <span class="muted small">({}: {})</span>', label, unit,
                             _("requested / allocatable · free"))
        self.export_header = _("%(resource)s deploy rate (%%)") % {"resource": label}
        super().__init__(verbose_name=header, accessor=f"resources__{key}", order_by=(f"resources__{key}__deploy_rate",),
                         attrs={"td": {"data-res": key, "class": lambda record: level_class(record["resources"][key])}},
                         **kwargs)

    def render(self, value):
        return mark_safe(level_html(value))  # numbers only

    def value(self, value):
        return value["deploy_rate"]


class AmountColumn(tables.Column):
    """One figure of one resource (requested, allocatable or available), for the export and the
    column chooser; hidden until chosen."""

    def __init__(self, key: str, field: str, **kwargs: Any) -> None:
        super().__init__(accessor=f"resources__{key}__{field}", attrs={"td": {"class": "fed-num"}}, **kwargs)

    def render(self, value) -> str:
        return fixed_number(value)

    def value(self, value):
        return value


class WaterLevelTable(WrittenRowsTable):
    """Per member cluster: its levels per resource (``columns``: key, label, unit), dynamic
    weight and cordon state, and — for those who may cordon (``may_cordon``) — the cordon,
    drain and uncordon links the dashboard's dialog opens. Rows are ``water.water_levels``'
    clusters with ``state`` set. The columns sort, search, export and are chosen like every
    table's; the page's rows are built in Python (``rows_html``: a template loop over 500
    clusters costs twenty times the page's budget), each keeping ``id="cluster-<name>"``,
    ``data-cluster`` and ``data-state``, its level cells ``td[data-res]`` and its weight and
    state cells ``data-f``, which federation.js updates from the "water-levels" and "fleet"
    topics. Every value goes through ``escape``."""

    name = tables.Column(verbose_name=gettext_lazy("Cluster"))
    weight = tables.Column(verbose_name=gettext_lazy("Weight ‰"), attrs={"td": {"data-f": "weight"}})
    state = tables.Column(verbose_name=gettext_lazy("State"), default="", attrs={"td": {"data-f": "state"}})
    actions = tables.Column(verbose_name=gettext_lazy("Actions"), accessor="name", orderable=False,
                            exclude_from_export=True, attrs={"td": {"class": "fed-cordon-actions"}})

    search_fields = ("name",)
    export_name = "meridian-water-levels"
    default_per_page = PER_PAGE_CHOICES[-1]  # the dashboard shows the fleet, as its charts do

    class Meta(BaseTable.Meta):  # no order_by: the rows come by name, a sort is asked for
        empty_text = gettext_lazy("No member clusters registered yet.")
        attrs = {"class": "table fed-water", "id": "fed-water-table"}
        row_attrs = {"id": lambda record: f"cluster-{record['name']}", "data-cluster": lambda record: record["name"],
                     "data-state": lambda record: record["state"]}

    def __init__(self, *args: Any, columns: list[dict[str, Any]], may_cordon: bool, **kwargs: Any) -> None:
        extra: list[tuple[str, Any]] = [(c["key"], LevelColumn(c["key"], c["label"], c["unit"])) for c in columns]
        amounts = (("requested", _("%(resource)s requested")), ("allocatable", _("%(resource)s allocatable")),
                   ("available", _("%(resource)s free")))
        for c in columns:
            extra += [(f"{c['key']}_{field}", AmountColumn(c["key"], field, verbose_name=label % {"resource": c["label"]}))
                      for field, label in amounts]
        levels = [c["key"] for c in columns]
        each = [name for key in levels for name in (key, *(f"{key}_{field}" for field, _label in amounts))]
        super().__init__(*args, extra_columns=extra, exclude=() if may_cordon else ("actions",),
                         sequence=("name", *each, "weight", "state", "actions"), **kwargs)
        self.default_columns = ("name", *levels, "weight", "state", "actions")
        self.cordon_url = reverse("federation:cluster-cordon", args=["__name__"])
        self.detail_url = reverse("fleet:cluster-detail", args=["__name__"])
        self.labels = {"not_ready": quote(_("not ready")), "cordoned": quote(_("cordoned")),
                       "draining": quote(_("draining")), "cordon": quote(_("Cordon")), "drain": quote(_("Drain")),
                       "uncordon": quote(_("Uncordon"))}

    # The page's cells (``rows_html``); the export reads the columns' values. ``html.escape``
    # (the standard library's, as Django's without its lazy-string wrapper: 500 rows' worth).

    def name_html(self, c: Mapping[str, Any]) -> str:
        ready = "" if c["ready"] else f' <span class="badge failed">{self.labels["not_ready"]}</span>'
        return f'<a href="{quote(self.detail_url.replace("__name__", c["name"]))}">{quote(c["name"])}</a>{ready}'

    def state_html(self, state: str) -> str:
        return f'<span class="badge fed-cordon {state}">{self.labels[state]}</span>' if state else ""

    def actions_html(self, name: str) -> str:
        url, labels = quote(self.cordon_url.replace("__name__", name)), self.labels
        return (f'<a data-cordon="cordon" href="{url}?action=cordon">{labels["cordon"]}</a> '
                f'<a data-cordon="drain" href="{url}?action=drain">{labels["drain"]}</a> '
                f'<a data-cordon="uncordon" href="{url}?action=uncordon">{labels["uncordon"]}</a>')

    def cell_html(self, column: str, c: Mapping[str, Any]) -> str:
        if column == "name":
            return f"<td>{self.name_html(c)}</td>"
        if column == "weight":
            return f'<td data-f="weight">{c["weight"]}</td>'
        if column == "state":
            return f'<td data-f="state">{self.state_html(c["state"])}</td>'
        if column == "actions":
            return f'<td class="fed-cordon-actions">{self.actions_html(c["name"])}</td>'
        resources = c["resources"]
        if column in resources:
            level = level_class(resources[column])
            shown = f' class="{level}"' if level else ""
            return f'<td data-res="{column}"{shown}>{level_html(resources[column])}</td>'
        key, _sep, field = column.rpartition("_")
        return f'<td class="fed-num">{fixed_number(resources[key][field])}</td>'

    def row_attrs_html(self, c: Mapping[str, Any]) -> str:
        name = quote(c["name"])
        return f' id="cluster-{name}" data-cluster="{name}" data-state="{c["state"]}"'

    # The same cells through django-tables2 (another template, a test), the value for the export.

    def render_name(self, record):
        return mark_safe(self.name_html(record))

    def value_name(self, record) -> str:
        return record["name"]

    def render_state(self, value: str):
        return mark_safe(self.state_html(value))

    def render_actions(self, value: str):
        return mark_safe(self.actions_html(value))
