"""The CPU fleet page's tables (``core.tables``: sorted, searched, paged, exported):

- per cluster, the summary sums ``capacity.fleet_view`` added up (a list: every cluster of the
  fleet can be shown at once, so its rows are written in Python, ``WrittenRowsTable``);
- per node, the stored summary columns. Only the orders an index answers are sortable (200,000
  rows sorted by anything else is a full sort per page view).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape as quote
from typing import Any
from urllib.parse import urlencode

import django_tables2 as tables
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _

from core.tables import BaseTable, WrittenRowsTable
from core.templatetags.meridian import number_writer


class CountColumn(tables.Column):
    """A whole number, written grouped as every page writes numbers; the export has the number."""

    def __init__(self, verbose_name: Any, **kwargs: Any) -> None:
        super().__init__(verbose_name=verbose_name, attrs={"td": {"class": "num"}}, **kwargs)

    def writer(self) -> Callable[[Any], str]:
        """What writes a cell's value on this page (``WrittenRowsTable``)."""
        return number_writer()

    def render(self, value: Any) -> str:
        return self.writer()(value)

    def value(self, value: Any) -> Any:
        return value


class PercentColumn(CountColumn):
    """A percentage (one decimal, as the totals); the export has the number."""

    def writer(self) -> Callable[[Any], str]:
        return lambda value: f"{value}%"


class FractionColumn(CountColumn):
    """A fraction as a whole percentage (what ``{% widthratio value 1 100 %}%`` wrote); the
    export has the fraction."""

    def writer(self) -> Callable[[Any], str]:
        return lambda value: f"{round(value * 100)}%"


class ClusterCPUTable(WrittenRowsTable):
    """Per cluster: nodes, sellable exclusive CPUs sold and left, the largest instance anywhere
    in it, fragmentation and stranded threads; with a request size, where such an instance
    fits. Most exclusive CPUs left first; a cluster's name opens the page on its nodes."""

    cluster = tables.Column(verbose_name=_("Cluster"))
    nodes = CountColumn(_("Nodes"))
    cpus = CountColumn(_("Logical CPUs"))
    sellable = CountColumn(_("Sellable"))
    exclusive_used = CountColumn(_("Exclusive sold"))
    exclusive_used_pct = PercentColumn(_("Exclusive sold %"))
    exclusive_left = CountColumn(_("Exclusive left"))
    largest = CountColumn(_("Largest instance"))
    fragmentation_pct = PercentColumn(_("Fragmented"))
    stranded = CountColumn(_("Stranded"))
    stranded_pct = PercentColumn(_("Stranded %"))
    fit_nodes = CountColumn(_("Nodes that take it"))
    fit_numa_nodes = CountColumn(_("Within one NUMA node"))
    fit_instances = CountColumn(_("Instances sellable"))

    search_fields = ("cluster",)
    default_columns = ("cluster", "nodes", "sellable", "exclusive_used", "exclusive_left", "largest",
                       "fragmentation_pct", "stranded", "fit_nodes")
    export_name = "meridian-cpu-clusters"

    class Meta(BaseTable.Meta):
        order_by = ("-exclusive_left",)  # the rows come by name: ties stay by name
        empty_text = _("No node has published a CPU topology yet.")
        attrs = {"class": "table", "id": "cpu-cluster-table"}

    def __init__(self, *args: Any, request_size: int | None, **kwargs: Any) -> None:
        fits = ("fit_nodes", "fit_numa_nodes", "fit_instances")
        super().__init__(*args, exclude=() if request_size else fits, **kwargs)
        self.request_size = request_size
        if request_size:
            self.columns["fit_nodes"].column.verbose_name = _("Take %(n)s") % {"n": request_size}
        self.page_url_base = reverse("scheduling:cpu-fleet")
        self.number = number_writer()

    def cluster_url(self, name: str) -> str:
        """The fleet page narrowed to the cluster (the request size kept)."""
        query = {"cluster": name} | ({"request": self.request_size} if self.request_size else {})
        return f"{self.page_url_base}?{urlencode(query)}"

    def cell_cluster(self, c: dict[str, Any]) -> str:
        return f'<a href="{quote(self.cluster_url(c["cluster"]))}">{quote(c["cluster"])}</a>'

    def cell_exclusive_used(self, c: dict[str, Any]) -> str:
        """Exclusive CPUs sold, and their share of the sellable ones (numbers only)."""
        return f'{self.number(c["exclusive_used"])} <span class="muted small">({c["exclusive_used_pct"]}%)</span>'

    # The same cells through django-tables2 (another template); the export has the plain values.

    def render_cluster(self, record: dict[str, Any]):
        return mark_safe(self.cell_cluster(record))

    def render_exclusive_used(self, record: dict[str, Any]):
        return mark_safe(self.cell_exclusive_used(record))

    def value_exclusive_used(self, value: int) -> int:
        return value


class NodeCPUTable(WrittenRowsTable):
    """Per node: its CPUs, what it sells, has sold and has left, its largest exclusive instance
    (and within one NUMA node), fragmentation and stranded threads; badges for conflicting
    allocations and refused IO queues. Sorted by the largest instance, the CPUs left, or the
    cluster and name (each an index); searched by name. Its rows are written in Python too:
    through django-tables2 its 500 cells took a third of the page."""

    name = tables.Column(verbose_name=_("Node"), orderable=False)
    cluster = tables.Column(verbose_name=_("Cluster"), accessor="cluster__name", order_by=("cluster", "name"))
    cpus = CountColumn(_("CPUs"), orderable=False)
    sellable = CountColumn(_("Sellable"), orderable=False)
    exclusive_used = CountColumn(_("Exclusive sold"), orderable=False)
    exclusive_left = CountColumn(_("Exclusive left"), order_by=("exclusive_left", "id"))
    largest_exclusive = CountColumn(_("Largest instance"), order_by=("largest_exclusive", "id"))
    largest_numa = CountColumn(_("In one NUMA"), orderable=False)
    fragmentation = FractionColumn(_("Fragmented"), orderable=False)
    stranded = CountColumn(_("Stranded"), orderable=False)

    search_fields = ("name",)
    export_name = "meridian-cpu-nodes"

    class Meta(BaseTable.Meta):
        order_by = ("-largest_exclusive",)
        empty_text = _("No node matches.")
        attrs = {"class": "table", "id": "cpu-node-table"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.badges = {"conflicts": quote(_("conflicts")), "refused": quote(_("IO queues refused"))}

    def cell_name(self, node) -> str:
        """The node's name linking to its CPU map, and its problems as badges."""
        html = f'<a href="{quote(node.get_absolute_url())}">{quote(node.name)}</a>'
        if node.conflicts:
            html += f' <span class="badge failed">{self.badges["conflicts"]}</span>'
        if node.io_queue_state == "refused":
            html += f' <span class="badge failed">{self.badges["refused"]}</span>'
        return html

    # The same cells through django-tables2 (another template); the export has the plain values.

    def render_name(self, record):
        return mark_safe(self.cell_name(record))

    def value_name(self, value: str) -> str:
        return value
