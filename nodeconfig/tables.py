"""Node config's list tables: the registered config types."""

from __future__ import annotations

import json

import django_tables2 as tables
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.tables import BaseTable

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
        return format_html('<strong>{}</strong><div class="muted small">{}</div>', record.name, record.description)

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
        link = format_html('<a href="{}#type-{}">{}</a>', reverse("nodeconfig:index"), record.pk, record.target_count)
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
