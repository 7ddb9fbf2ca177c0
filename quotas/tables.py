"""Quotas' list tables: every group the user may see, flat, with each resource's used / hard;
and on a group's page its children and its workloads."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import django_tables2 as tables
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

from core.tables import BaseTable, TimeColumn

from . import accounting as acc
from . import services
from .display import bar_html, is_binary, readable


class ResourceColumn(tables.Column):
    """One resource key: used / hard as people read them (``display.readable``); a group
    without a hard on the key shows a dash. The canonical quantities are in the cell's title."""

    def __init__(self, key: str, **kwargs: Any) -> None:
        self.key, self.binary = key, is_binary(key)
        super().__init__(verbose_name=key, accessor="hard", orderable=False, empty_values=(),
                         attrs={"td": {"class": "qt-num", "data-res": key}}, **kwargs)

    def text(self, record) -> str:
        hard = (record.hard or {}).get(self.key)
        if hard is None:
            return ""
        used = (record.used or {}).get(self.key, "0")
        return f"{readable(str(used), self.binary)} / {readable(str(hard), self.binary)}"

    def render(self, record) -> str:
        shown = self.text(record)
        if not shown:
            return "—"
        hard = record.hard[self.key]
        used = (record.used or {}).get(self.key, "0")
        return format_html('<span title="{} / {}">{}</span>', used, hard, shown)

    def value(self, record) -> str:
        return self.text(record)


def resource_columns(keys: Sequence[str], column: type[ResourceColumn] = ResourceColumn) -> list[tuple[str, Any]]:
    """A column per resource key (named so any key makes a valid column name)."""
    return [("res_" + re.sub(r"\W", "_", key), column(key)) for key in keys]


class ResourceBarColumn(ResourceColumn):
    """One resource key as a used / hard bar (``display.bar_html``); the export has used / hard."""

    def render(self, record) -> str:
        hard = (record.hard or {}).get(self.key)
        return mark_safe(bar_html((record.used or {}).get(self.key), None if hard is None else str(hard), self.key))  # escaped there


class QuotaGroupTable(BaseTable):
    """Quota groups with parent, path and owners, and a column per resource key the tree
    has (``keys``): used / hard. Owners come prefetched for the page's rows."""

    name = tables.Column(verbose_name=_("Group"), linkify=True)
    parent = tables.Column(verbose_name=_("Parent"), accessor="parent__name",
                           linkify=lambda record: record.parent.get_absolute_url() if record.parent_id else None)
    path = tables.Column(verbose_name=_("Path"))
    owners = tables.Column(verbose_name=_("Owners"), accessor="pk", orderable=False, empty_values=())
    updated = TimeColumn(verbose_name=_("Updated"), format="Y-m-d H:i")

    search_fields = ("name", "path", "description")
    export_name = "meridian-quota-groups"

    class Meta(BaseTable.Meta):
        order_by = ("path",)
        empty_text = _("No quota groups yet.")
        attrs = {"class": "table qt-groups", "id": "quota-group-table"}
        row_attrs = {"data-group": lambda record: record.name}

    def __init__(self, *args: Any, keys: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, extra_columns=resource_columns(keys), **kwargs)

    def owner_names(self, record) -> list[str]:
        return sorted(user.username for user in record.owners.all())

    def render_owners(self, record) -> str:
        return ", ".join(self.owner_names(record)) or "—"

    def value_owners(self, record) -> str:
        return " ".join(self.owner_names(record))


class ChildGroupTable(BaseTable):
    """A group's children (rows: ``QuotaGroup``), each with a used / hard bar per key of the
    parent's hard (``keys``)."""

    name = tables.Column(verbose_name=_("Group"), linkify=True)
    description = tables.Column(verbose_name=_("Description"), attrs={"td": {"class": "muted small"}})

    search_fields = ("name", "description")
    export_name = "meridian-quota-children"

    class Meta(BaseTable.Meta):
        order_by = ("name",)
        empty_text = _("No child groups: this is a leaf.")
        attrs = {"class": "table qt-children", "id": "quota-children-table"}
        row_attrs = {"data-group": lambda record: record.name}

    def __init__(self, *args: Any, keys: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, extra_columns=resource_columns(keys, ResourceBarColumn), **kwargs)


class QuotaChargeTable(BaseTable):
    """A group's workloads (rows: ``QuotaCharge`` with its cluster), most recent first until the
    user sorts otherwise, each with what it is charged on the group's keys (``keys``)."""

    cluster = tables.Column(verbose_name=_("Cluster"), accessor="cluster__name")
    namespace = tables.Column(verbose_name=_("Namespace"))
    kind = tables.Column(verbose_name=_("Kind"))
    name = tables.Column(verbose_name=_("Name"))
    replicas = tables.Column(verbose_name=_("Replicas"))
    hpa_max_replicas = tables.Column(verbose_name=_("HPA max"))
    source = tables.Column(verbose_name=_("Source"))
    observed = tables.Column(verbose_name=_("Observed"))
    charge = tables.Column(verbose_name=_("Charge"), orderable=False, empty_values=(), attrs={"td": {"class": "small"}})
    admitted_at = TimeColumn(verbose_name=_("Admitted"), format="Y-m-d H:i:s")

    search_fields = ("name", "namespace", "kind", "cluster__name")
    export_name = "meridian-quota-workloads"

    class Meta(BaseTable.Meta):
        empty_text = _("No workloads are charged to this group.")
        attrs = {"class": "table qt-workloads", "id": "quota-workload-table"}
        row_attrs = {"data-workload": lambda record: f"{record.namespace}/{record.name}"}

    def __init__(self, *args: Any, keys: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keys = list(keys)

    def summary(self, record) -> str:
        """The charge on the group's keys, canonical: ``limits.cpu 2, limits.memory 4Gi``."""
        tracked = acc.canonical(acc.tracked(services.parsed(record.charge), self.keys))
        return ", ".join(f"{k} {tracked[k]}" for k in sorted(tracked))

    def render_source(self, record) -> str:
        return record.get_source_display()

    def value_source(self, record) -> str:
        return record.source

    def render_observed(self, value: bool):
        return _("yes") if value else format_html('<span class="muted">{}</span>', _("not yet"))

    def value_observed(self, value: bool) -> str:
        return "yes" if value else "no"

    def render_charge(self, record):
        return format_html("<code>{}</code>", self.summary(record) or "—")

    def value_charge(self, record) -> str:
        return self.summary(record)

    def value_admitted_at(self, value) -> str:
        return value.isoformat()
