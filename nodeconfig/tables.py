"""Node config's list tables: the registered config types and the live targets."""

from __future__ import annotations

import json

import django_tables2 as tables
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.tables import BaseTable, TimeColumn

from .validation import warnings_for


class ConfigTypeTable(BaseTable):
    """Config types with their selector keys per priority (and the advice about them), schema,
    live targets (``target_count``/``emergency_count`` annotations) and default body."""

    name = tables.Column(verbose_name=_("Type"))
    gvr = tables.Column(verbose_name=_("GVR"), accessor="resource", orderable=False)
    allowed_keys = tables.Column(verbose_name=_("Allowed selector keys"), orderable=False, empty_values=())
    schema = tables.Column(verbose_name=_("Schema"), orderable=False, empty_values=())
    target_count = tables.Column(verbose_name=_("Targets"))
    default_config = tables.Column(verbose_name=_("Default config"), orderable=False, empty_values=())

    search_fields = ("name", "description", "resource", "group")
    export_name = "meridian-config-types"

    class Meta(BaseTable.Meta):
        order_by = ("name",)
        empty_text = _("No config types are registered yet.")
        attrs = {"class": "table", "id": "type-table"}
        row_attrs = {"id": lambda record: f"type-{record.name}"}

    def render_name(self, record):
        if not record.description:
            return format_html("<strong>{}</strong>", record.name)
        return format_html('<strong>{}</strong><div class="muted small" translate="no">{}</div>', record.name, record.description)

    def value_name(self, record) -> str:
        return record.name

    def render_gvr(self, record):
        return format_html("<code>{}</code>", record.gvr)

    def value_gvr(self, record) -> str:
        return record.gvr

    def render_allowed_keys(self, record):
        raw = {int(e.get("priority", 0)): list(e.get("keyList") or []) for e in record.allowed_keys or []}
        return render_to_string("nodeconfig/_type_keys.html", {
            "priorities": sorted(record.allowed_keys_by_priority().items()), "warnings": warnings_for(raw)})

    def value_allowed_keys(self, record) -> str:
        return "; ".join(f"{p}: {','.join(keys)}" for p, keys in sorted(record.allowed_keys_by_priority().items()))

    def render_schema(self, record):
        return _("yes") if record.schema else format_html('<span class="muted">{}</span>', _("none"))

    def value_schema(self, record) -> str:
        return "yes" if record.schema else ""

    def render_target_count(self, record):
        link = format_html('<a href="{}?{}">{}</a>', reverse("nodeconfig:index"), urlencode({"type": record.name}),
                           record.target_count)
        if not record.emergency_count:
            return link
        n = record.emergency_count
        label = ngettext("%(n)s emergency", "%(n)s emergency", n) % {"n": n}
        return format_html('{} <span class="badge danger">{}</span>', link, label)

    def value_target_count(self, record) -> int:
        return record.target_count

    def render_default_config(self, record):
        body = json.dumps(record.default_config or {}, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<details><summary><code>{}</code></summary><pre class="nc-json">{}</pre></details>',
                           record.default_hash or "—", body)

    def value_default_config(self, record) -> str:
        return json.dumps(record.default_config or {}, ensure_ascii=False, sort_keys=True)


class ConfigTargetTable(BaseTable):
    """Live targets of every config type, a row each with its rollout progress bar: rows are
    targets with ``progress`` (``rollout.progress_many``) and ``expired`` set by the view.
    The bar, the revision, hash and state cells keep their ``data-target-id`` hooks, so
    nodeconfig.js updates them from ``target.progress`` events in place."""

    config_type = tables.Column(verbose_name=_("Type"), accessor="config_type__name")
    name = tables.Column(verbose_name=_("Target"))
    mode = tables.Column(verbose_name=_("Mode"), accessor="mode", orderable=False)
    scope = tables.Column(verbose_name=_("Scope"), accessor="cluster__name", empty_values=())
    selector = tables.Column(verbose_name=_("Selector / priority / nodes"), accessor="node_label_selector",
                             orderable=False, empty_values=())
    revision = tables.Column(verbose_name=_("Revision"), accessor="progress__revision", orderable=False)
    config_hash = tables.Column(verbose_name=_("Hash"), orderable=False)
    matched_node_count = tables.Column(verbose_name=_("Matched"))
    progress = tables.Column(verbose_name=_("Progress"), order_by=("applied_share",), empty_values=())
    rollout_state = tables.Column(verbose_name=_("Rollout"))

    search_fields = ("name", "config_type__name", "cluster__name", "node_label_selector")
    export_name = "meridian-config-targets"

    class Meta(BaseTable.Meta):
        order_by = ("config_type", "name")
        empty_text = _("No targets: every node runs its type's default config.")
        attrs = {"class": "table nc-targets", "id": "target-table"}
        row_attrs = {"data-target-id": lambda record: record.pk,
                     "class": lambda record: "nc-emergency-row" if record.emergency else ""}

    def render_config_type(self, record):
        return format_html('{} <code class="muted small">{}</code>', record.config_type.name, record.config_type.gvr)

    def value_config_type(self, record) -> str:
        return record.config_type.name

    def render_name(self, record):
        return render_to_string("nodeconfig/_target_name.html", {"t": record})

    def value_name(self, record) -> str:
        return record.name

    def render_mode(self, record) -> str:
        return record.Mode(record.mode).label

    def value_mode(self, record) -> str:
        return record.mode

    def render_scope(self, record) -> str:
        return record.cluster.name if record.cluster else _("Fleet")

    def value_scope(self, record) -> str:
        return record.cluster.name if record.cluster else ""

    def render_selector(self, record):
        if record.node_label_selector:
            return format_html("<code>{}</code> · {} {}", record.node_label_selector, _("priority"), record.priority)
        if record.node_names:
            n = len(record.node_names)
            names = ", ".join(record.node_names[:3]) + (", …" if n > 3 else "")
            text = ngettext("%(n)s node", "%(n)s nodes", n) % {"n": n}
            return f"{text}: {names}" + (f" · {record.last_duration}" if record.last_duration else "")
        return format_html('<span class="muted">{}</span>', _("all nodes"))

    def value_selector(self, record) -> str:
        if record.node_label_selector:
            return f"{record.node_label_selector} (priority {record.priority})"
        return ",".join(record.node_names)

    def render_revision(self, record):
        return format_html('r<span data-nc-field="revision" data-target-id="{}">{}</span>', record.pk,
                           record.progress["revision"])

    def render_config_hash(self, record):
        return format_html('<code data-nc-field="hash" data-target-id="{}">{}</code>', record.pk, record.config_hash)

    def render_progress(self, record):
        return render_to_string("nodeconfig/_progress.html", {"p": record.progress})

    def value_progress(self, record) -> str:
        p = record.progress
        return f"{p['applied']} applied, {p['failed']} failed, {p['pending']} pending, {p['held']} held of {p['targeted']}"

    def render_rollout_state(self, record):
        return render_to_string("nodeconfig/_state.html", {"t": record})

    def value_rollout_state(self, record) -> str:
        return record.rollout_state + (" (paused)" if record.paused else "")


#: A node's acknowledgement state as its badge says it (the export keeps the plain value).
NODE_STATE_LABELS = {"applied": _("applied"), "failed": _("failed"), "pending": _("pending"), "held": _("held")}


def node_state(row, target) -> str:
    """A node's acknowledgement of ``target``: its row's state while it runs the target's current
    revision (directly, or under an emergency override), else held back (``filtersets.STATE_Q``)."""
    on_current = row.revision_id == target.revision_id or (
        not target.emergency and row.base_revision_id == target.revision_id)
    return row.state if on_current and row.state != "none" else "held"


class TargetNodeTable(BaseTable):
    """One target's nodes and what their agents acknowledged (rows: ``NodeConfig`` with node,
    cluster, revision and target selected). The state is relative to the target (``target``):
    a row still on an older revision is held back. Rows keep ``data-state`` for the page."""

    node = tables.Column(verbose_name=_("Node"), accessor="node__name", order_by=("node__name", "node_id"),
                         linkify=lambda record: reverse("nodeconfig:node-config", args=[record.cluster.name, record.node.name]))
    cluster = tables.Column(verbose_name=_("Cluster"), accessor="cluster__name")
    revision = tables.Column(verbose_name=_("Revision"), accessor="revision__number", empty_values=())
    config_hash = tables.Column(verbose_name=_("Hash"))
    state = tables.Column(verbose_name=_("State"), accessor="pk", orderable=False)
    applied_hash = tables.Column(verbose_name=_("Applied hash"))
    error = tables.Column(verbose_name=_("Error"), attrs={"td": {"class": "error small"}})
    reported_at = TimeColumn(verbose_name=_("Reported"), format="Y-m-d H:i:s")

    search_fields = ("node__name",)
    export_name = "meridian-target-nodes"

    class Meta(BaseTable.Meta):
        order_by = ("node",)
        empty_text = _("No nodes.")
        attrs = {"class": "table", "id": "node-table"}
        row_attrs = {"data-state": lambda table, record: node_state(record, table.target)}

    def __init__(self, *args, target, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.target = target

    def render_revision(self, record):
        if record.revision is None:
            return "—"
        if record.target_id == self.target.pk or record.target is None:
            return f"r{record.revision.number}"
        return format_html('r{} <span class="muted small">({})</span>', record.revision.number, record.target.name)

    def value_revision(self, record):
        return record.revision.number if record.revision is not None else ""

    def render_config_hash(self, value: str):
        return format_html("<code>{}</code>", value)

    def render_state(self, record):
        state = node_state(record, self.target)
        return format_html('<span class="badge nc-node-state {}">{}</span>', state, NODE_STATE_LABELS[state])

    def value_state(self, record) -> str:
        return node_state(record, self.target)

    def render_applied_hash(self, value: str):
        return format_html("<code>{}</code>", value)

    def render_error(self, value: str) -> str:
        return Truncator(value).chars(200)

    def value_error(self, value: str) -> str:
        return value

    def value_reported_at(self, value) -> str:
        return value.isoformat() if value else ""
