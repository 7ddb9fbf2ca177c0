"""Quotas' list table: every group the user may see, flat, with each resource's used / hard."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import django_tables2 as tables
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from core.tables import BaseTable

from .display import is_binary, readable


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


class QuotaGroupTable(BaseTable):
    """Quota groups with parent, path and owners, and a column per resource key the tree
    has (``keys``): used / hard. Owners come prefetched for the page's rows."""

    name = tables.Column(verbose_name=_("Group"), linkify=True)
    parent = tables.Column(verbose_name=_("Parent"), accessor="parent__name",
                           linkify=lambda record: record.parent.get_absolute_url() if record.parent_id else None)
    path = tables.Column(verbose_name=_("Path"))
    owners = tables.Column(verbose_name=_("Owners"), accessor="pk", orderable=False, empty_values=())
    updated = tables.DateTimeColumn(verbose_name=_("Updated"), format="Y-m-d H:i")

    search_fields = ("name", "path", "description")
    export_name = "meridian-quota-groups"

    class Meta(BaseTable.Meta):
        order_by = ("path",)
        empty_text = _("No quota groups yet.")
        attrs = {"class": "table qt-groups", "id": "quota-group-table"}
        row_attrs = {"data-group": lambda record: record.name}

    def __init__(self, *args: Any, keys: Sequence[str] = (), **kwargs: Any) -> None:
        extra = [("res_" + re.sub(r"\W", "_", key), ResourceColumn(key)) for key in keys]
        super().__init__(*args, extra_columns=extra, **kwargs)

    def owner_names(self, record) -> list[str]:
        return sorted(user.username for user in record.owners.all())

    def render_owners(self, record) -> str:
        return ", ".join(self.owner_names(record)) or "—"

    def value_owners(self, record) -> str:
        return " ".join(self.owner_names(record))
