"""Scheduling's list tables: policies, node/pod scheduler configs (templates) and bindings."""

from __future__ import annotations

import django_tables2 as tables
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from core.tables import BaseTable, TimeColumn


class VersionedTable(BaseTable):
    """Name (linking to the object), description, current revision and last change: what every
    versioned scheduling object shows in its list."""

    name = tables.Column(verbose_name=_("Name"), linkify=True)
    description = tables.Column(verbose_name=_("Description"), orderable=False, attrs={"td": {"translate": "no"}})
    revision = tables.Column(verbose_name=_("Revision"), accessor="revision__number", orderable=False)
    updated = TimeColumn(verbose_name=_("Updated"), format="Y-m-d H:i")

    search_fields = ("name", "description")

    class Meta(BaseTable.Meta):
        order_by = ("name",)
        empty_text = _("None yet: create one or import upstream YAML.")

    def render_description(self, value: str) -> str:
        return Truncator(value).chars(120)

    def value_description(self, value: str) -> str:
        return value

    def render_revision(self, value: int) -> str:
        return f"r{value}"


class SchedulingPolicyTable(VersionedTable):
    export_name = "meridian-scheduling-policies"

    class Meta(VersionedTable.Meta):
        order_by = ("-is_default", "name")
        empty_text = _("No policies.")
        attrs = {"class": "table", "id": "policy-table"}

    def render_name(self, record, value: str):
        if not record.is_default:
            return value
        return format_html('{} <span class="badge">{}</span>', value, _("default"))

    def value_name(self, value: str) -> str:
        return value


class NodeSchedulerConfigTable(VersionedTable):
    export_name = "meridian-node-scheduler-configs"

    class Meta(VersionedTable.Meta):
        attrs = {"class": "table", "id": "nsc-table"}


class PodSchedulerConfigTable(VersionedTable):
    export_name = "meridian-pod-scheduler-configs"

    class Meta(VersionedTable.Meta):
        attrs = {"class": "table", "id": "psc-table"}


class SchedulerConfigBindingTable(BaseTable):
    """Bindings: which pods (selector) get which templates, at which priority."""

    name = tables.Column(verbose_name=_("Name"), linkify=True)
    namespace = tables.Column(verbose_name=_("Namespace"), empty_values=())
    selector = tables.Column(verbose_name=_("Selector"), accessor="spec__selector", orderable=False)
    templates = tables.Column(verbose_name=_("Templates"), accessor="spec", orderable=False)
    priority = tables.Column(verbose_name=_("Priority"), accessor="spec__priority", orderable=False, default=0)
    revision = tables.Column(verbose_name=_("Revision"), accessor="revision__number", orderable=False)

    search_fields = ("name", "namespace", "description")
    export_name = "meridian-scheduler-config-bindings"

    class Meta(BaseTable.Meta):
        order_by = ("namespace", "name")
        empty_text = _("No bindings.")
        attrs = {"class": "table", "id": "scb-table"}

    def render_namespace(self, value: str) -> str:
        return value or _("every namespace")

    def value_namespace(self, value: str) -> str:
        return value

    def render_selector(self, value) -> str:
        return format_html("<code>{}</code>", value)

    def value_selector(self, value) -> str:
        return str(value)

    def render_templates(self, value: dict):
        parts = [format_html("{} <code>{}</code>", kind, value[key]["name"])
                 for kind, key in (("nsc", "nodeSchedulerConfig"), ("psc", "podSchedulerConfig"))
                 if (value.get(key) or {}).get("name")]
        return format_html(" ".join(["{}"] * len(parts)), *parts) if parts else "—"

    def value_templates(self, value: dict) -> str:
        return " ".join(f"{kind}={value[key]['name']}" for kind, key in (("nsc", "nodeSchedulerConfig"),
                        ("psc", "podSchedulerConfig")) if (value.get(key) or {}).get("name"))

    def render_revision(self, value: int) -> str:
        return f"r{value}"
