"""Federation's list tables: propagation and override policies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_tables2 as tables
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

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
