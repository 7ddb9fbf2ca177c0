"""Every list page's table, the NetBox way: a django-tables2 ``Table`` per model in each app's
``tables.py`` over ``BaseTable``, and one view helper (``TableMixin``) giving every list the same
URL parameters, so a link, a bookmark or a script works the same on every page:

- ``sort=<column>`` / ``sort=-<column>``: an unknown or unsortable column is ignored;
- ``q=<text>``: case-insensitive substring search over the table's ``search_fields``;
- ``page=<n>``, ``per_page=<25|50|100|500>``: out-of-range or non-numeric values are clamped;
- ``columns=<name>`` (repeated): the visible columns, remembered in the session per table;
- ``export=csv``: the filtered, sorted rows of every page as streamed CSV, through the same
  view, so the same permission check guards it.

A page with several tables gives each a ``prefix`` (``policy-sort=…``). Rows a view computes
in Python (the fleet's water levels) come from ``rows(queryset)`` after the search narrowed
the queryset, so computing stays bounded by what the search left; rows that are no queryset at
all (an object's placement explanation, the federation's water levels) are a list, searched
over the same ``search_fields`` in Python and sorted by the columns' accessors.

An object's page (a ``DetailView``) reads its object first, so the permission check on the
object (``PermissionMixin.get_object``) refuses its tables' exports too. A page's filters are
a FilterSet passed along (``build_table(..., filterset=)``): invalid values show as its form's
errors on the page, and refuse the export with a 400 naming the parameter (an empty CSV would
read as an answer).
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cached_property
from html import escape as html_escape
from types import FunctionType
from typing import Any, ClassVar

import django_tables2 as tables
import django_tables2.utils as tables_utils
from asgiref.sync import sync_to_async
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.handlers.asgi import ASGIRequest
from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.template import Context
from django.template.base import render_value_in_context
from django.utils.encoding import force_str
from django.utils.formats import date_format
from django.utils.html import format_html, strip_tags
from django.utils.safestring import SafeData, SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.timezone import template_localtime
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.generic.detail import SingleObjectMixin
from django_tables2.rows import BoundRow
from django_tables2.utils import Accessor

from .permissions import restrict

PER_PAGE_CHOICES = (25, 50, 100, 500)
DEFAULT_PER_PAGE = 50
#: Rows a table counts before it says "more than" (``ClampedPaginator``).
COUNT_LIMIT = 10_000
EXPORT_CHUNK = 2000
#: Parameters a table's own controls set; everything else (a page's filters) is carried along.
TABLE_PARAMS = ("sort", "q", "page", "per_page", "columns", "export")

Rows = Callable[[QuerySet], list[Any]]

#: django-tables2's own signature reader (``inspect.signature``), and what it said per function.
_read_signature = tables_utils.signature
_SIGNATURES: dict[tuple[FunctionType, bool], tuple[tuple[str, ...], str | None]] = {}
_SIGNATURES_LIMIT = 4096


def _signature(fn: Callable[..., Any]) -> tuple[tuple[str, ...], str | None]:
    """django-tables2's ``signature``, read once per function instead of once per cell.

    Every cell calls its column's ``render`` through ``call_with_appropriate``, which asks
    ``inspect`` for the function's parameters each time: a fifth of a 50-row table's
    rendering (profiled on a quota group's page). A function's parameters do not change; a
    bound method is keyed by its function (the answer leaves ``self`` out either way). Other
    callables are read as before; the cache is cleared when full, so per-request lambdas
    cannot grow it without bound.
    """
    func = getattr(fn, "__func__", fn)
    if type(func) is not FunctionType:
        return _read_signature(fn)
    key = (func, func is not fn)
    found = _SIGNATURES.get(key)
    if found is None:
        if len(_SIGNATURES) >= _SIGNATURES_LIMIT:
            _SIGNATURES.clear()
        found = _SIGNATURES[key] = _read_signature(fn)
    return found


tables_utils.signature = _signature  # call_with_appropriate reads the module's global


class BaseTable(tables.Table):
    """The base of every table: the console's table markup, sortable headers, and what the
    search, the column chooser and the export need to know about the table."""

    #: Fields ``?q=`` searches (``icontains``, joined with OR); none: the page has no search box.
    search_fields: ClassVar[tuple[str, ...]] = ()
    #: Columns shown until the user picks (None: all of them).
    default_columns: ClassVar[tuple[str, ...] | None] = None
    #: The CSV's file name, without ``.csv``.
    export_name: ClassVar[str] = "meridian"
    #: Rows per page until the user picks (a dashboard shows the whole fleet: the largest size).
    default_per_page: ClassVar[int] = DEFAULT_PER_PAGE

    class Meta:
        attrs = {"class": "table"}
        orderable = True

    # Set by ``build_table`` for the template (``templates/includes/table.html``) and the export.
    search_text = ""
    query: QueryDict
    #: The FilterSet that narrowed the rows, if any (its errors refuse the export).
    filterset: Any = None

    def __init__(self, *args: Any, export_name: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if export_name:  # an object's table names its CSV after the object
            self.export_name = export_name  # type: ignore[misc]

    def param(self, name: str) -> str:
        """The URL parameter ``name`` of this table (its prefix applied)."""
        return f"{self.prefix}{name}"

    def url(self, **changes: Any) -> str:
        """``?query`` with this table's parameters changed (None removes one); the page resets."""
        query = self.query.copy()
        query.pop(self.param("page"), None)
        query.pop("fragment", None)
        for name, value in changes.items():
            key = self.param(name)
            query.pop(key, None)
            if value is not None:
                query[key] = value
        return "?" + query.urlencode()

    def kept_inputs(self, *own: str) -> list[tuple[str, str]]:
        """Hidden inputs for a GET form that sets ``own``: every other parameter stays as it is."""
        skip = {self.param(name) for name in own} | {self.param("page"), self.param("export"), "fragment"}
        return [(key, value) for key, values in self.query.lists() if key not in skip for value in values]

    @property
    def kept_search_inputs(self) -> list[tuple[str, str]]:
        return self.kept_inputs("q", "per_page")

    @property
    def kept_column_inputs(self) -> list[tuple[str, str]]:
        return self.kept_inputs("columns")

    @property
    def state_inputs(self) -> list[tuple[str, str]]:
        """Hidden inputs for a page's own filter form: the table keeps its sort, search and size."""
        return [(self.param(n), v) for n in ("sort", "q", "per_page") for v in self.query.getlist(self.param(n))]

    @property
    def filter_inputs(self) -> list[tuple[str, str]]:
        """Hidden inputs for the form of the table's FilterSet: every other parameter of the
        page stays (this table's sort, search and size, other tables'), the page resets."""
        form = self.filterset.form if self.filterset is not None else None
        own = {form.add_prefix(name) for name in form.fields} if form is not None else set()
        skip = own | {self.param("page"), self.param("export"), "fragment"}
        return [(key, value) for key, values in self.query.lists() if key not in skip for value in values]

    def page_url(self, number: int) -> str:
        return self.url() + f"&{self.param('page')}={number}"

    @property
    def previous_url(self) -> str:
        return self.page_url(self.page.previous_page_number())

    @property
    def next_url(self) -> str:
        return self.page_url(self.page.next_page_number())

    @property
    def headers(self) -> list[dict[str, Any]]:
        """Visible columns with their label, and for sortable ones the URL that sorts by them
        (ascending first, then descending) and the current direction."""
        current = self.order_by[0] if self.order_by else None
        out = []
        for column in self.columns:
            entry: dict[str, Any] = {"name": column.name, "label": column.header, "url": None, "sorted": None,
                                     "attrs": column.attrs.get("th", {})}
            if column.orderable:
                ascending = current is not None and current.bare == column.name and not current.is_descending
                descending = current is not None and current.bare == column.name and current.is_descending
                entry["sorted"] = "ascending" if ascending else "descending" if descending else None
                entry["url"] = self.url(sort=f"-{column.name}" if ascending else column.name)
            out.append(entry)
        return out

    @property
    def column_choices(self) -> list[dict[str, Any]]:
        """Every column the user may show or hide, for the column chooser."""
        return [{"name": c.name, "label": c.header, "visible": c.visible}
                for c in self.columns.iterall() if c.name not in self.exclude]

    @property
    def per_page_choices(self) -> tuple[int, ...]:
        return PER_PAGE_CHOICES

    @property
    def export_url(self) -> str:
        return self.url(export="csv")

    @property
    def rows_html(self) -> SafeString:
        """The page's rows as HTML, what the template's loop over django-tables2's rows wrote
        (``<tr {{ row.attrs.as_html }}>`` and ``<td {{ column.attrs.td.as_html }}>{{ cell }}</td>``).

        django-tables2 computes a column's cell attributes anew for every cell (the table's and
        the column's dicts merged, classes sorted): a third of a 50-row table's time. A column
        whose ``td`` attributes hold no callable (most) gets them once per page; a callable
        one (a record's value) per cell, as before. A table showing hundreds of rows at once
        writes its own cells (``WrittenRowsTable``)."""
        context = Context(autoescape=True)
        fixed = {column.name: column.attrs["td"].as_html() for column in self.columns if not _computed_td(column)}
        rows = []
        for row in self.shown_rows:
            cells = "".join([
                f"<td {fixed[column.name] if column.name in fixed else column.attrs['td'].as_html()}>"
                f"{render_value_in_context(cell, context)}</td>" for column, cell in row.items()])
            rows.append(f"\n    <tr {row.attrs.as_html()}>{cells}</tr>\n  ")
        return mark_safe("".join(rows))  # attributes and cells escaped as the template does

    @property
    def shown_rows(self):
        """The rows of the current page (all rows when the table is not paginated)."""
        return self.page.object_list if hasattr(self, "page") else self.rows


class WrittenRowsTable(BaseTable):
    """A table showing hundreds of rows at once (one per cluster of the fleet) writes its rows
    itself. Through django-tables2 a cell costs ~20-50 µs of attribute merging, accessor
    resolving and rendering: 500 rows × 10 columns are a page's budget.

    Each cell is the column's fixed ``td`` attributes (computed once) around
    ``cell_<column>(record)`` when the table has one, else the function the column's
    ``writer()`` returns (made once per page: a number's language) applied to the value, else
    the escaped value. A table whose cells' attributes depend on the row (the water levels)
    overrides ``cell_html(column, record)``, which writes a whole ``<td>``.
    ``row_attrs_html(record)``: the ``<tr>``'s attributes, a leading space each. Everything
    written must be escaped (``html.escape``). The columns' ``render_``/``value_`` still serve
    another template and the export; a test per table checks both writers agree."""

    def row_attrs_html(self, record: Any) -> str:
        return ""

    def cell_html(self, column: str, record: Any) -> str:
        td, write = self._writers[column]
        return f"{td}{write(record)}</td>"

    @cached_property
    def _writers(self) -> dict[str, tuple[str, Callable[[Any], str]]]:
        """Per shown column: its opening ``<td>`` and what writes a record's cell content."""
        out = {}
        for column in self.columns:
            own = getattr(self, f"cell_{column.name}", None)
            if own is None:
                own = _cell_writer(column)
            attrs = column.attrs["td"].as_html()
            out[column.name] = (f"<td {attrs}>" if attrs else "<td>", own)
        return out

    @property
    def rows_html(self) -> SafeString:
        shown = [column.name for column in self.columns]
        cell, attrs = self.cell_html, self.row_attrs_html
        rows = [f"<tr{attrs(row.record)}>" + "".join([cell(name, row.record) for name in shown]) + "</tr>"
                for row in self.shown_rows]
        return mark_safe("\n".join(rows))  # every value escaped above or by the table's own cells


def _cell_writer(column: tables.columns.BoundColumn) -> Callable[[Any], str]:
    """A column's cell content from a record: what its ``writer()`` returns for the value, or
    the value escaped; the column's default (escaped) for an empty value, as django-tables2
    writes it."""
    accessor, empty = Accessor(column.accessor), column.column.empty_values
    writer = getattr(column.column, "writer", None)
    html = writer() if writer is not None else (lambda value: html_escape(str(value)))
    default = html_escape(str(column.default))

    def write(record: Any) -> str:
        value = accessor.resolve(record, quiet=True)
        return default if value in empty else html(value)

    return write


class TimeColumn(tables.Column):
    """A date and time in the user's time zone as ``format`` (the ``date`` filter's letters);
    the export has ISO 8601 (``2026-11-30 16:05:17+00:00``).

    What django-tables2's ``DateTimeColumn`` writes, without its template: it parses
    ``{{ value|date:format }}`` anew for every cell (~0.2 ms a cell, a fifth of a 50-row
    table with one time column)."""

    def __init__(self, *args: Any, format: str, **kwargs: Any) -> None:
        self.format = format
        super().__init__(*args, **kwargs)

    def render(self, value: Any) -> str:
        return date_format(template_localtime(value), self.format)

    def value(self, value: Any) -> Any:
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value


def _computed_td(column: tables.columns.BoundColumn) -> bool:
    """Whether a column's cell attributes depend on the row (a callable among them)."""
    own = column.column.attrs
    attrs = [column._table.attrs.get("td", column._table.attrs.get("cell", {})), own.get("td", own.get("cell", {}))]
    return any(callable(value) for values in attrs for value in values.values())


def query_param(request: HttpRequest, name: str) -> str:
    """A free-text query parameter as a filter may use it: trimmed, without NUL characters
    (PostgreSQL refuses them in text: ``?q=%00`` would be a 500 there, and is no search)."""
    return request.GET.get(name, "").replace("\x00", "").strip()


def search_q(fields: Iterable[str], text: str) -> Q:
    """Rows whose ``fields`` contain ``text`` (case-insensitive), any of them."""
    q = Q()
    for field in fields:
        q |= Q(**{f"{field}__icontains": text})
    return q


def search_rows(rows: Iterable[Any], fields: Iterable[str], text: str) -> list[Any]:
    """``search_q`` for rows computed in Python: those whose ``fields`` (accessors: ``name``,
    ``member__error``) contain ``text``, case-insensitive; a list value matches by any item."""
    needle = text.casefold()
    accessors = [Accessor(field) for field in fields]

    def matches(row: Any) -> bool:
        for accessor in accessors:
            value = accessor.resolve(row, quiet=True)
            values = value if isinstance(value, list | tuple) else [value]
            if any(v is not None and needle in str(v).casefold() for v in values):
                return True
        return False

    return [row for row in rows if matches(row)]


class ClampedPaginator(Paginator):
    """A page number that is not a number, or past either end, shows the nearest page (as
    NetBox does) instead of a 404 or a 500.

    A queryset's rows are counted up to ``COUNT_LIMIT`` or one page past the page asked for,
    whichever is more (``more`` then says there are more): counting a million audit entries
    took longer than the rest of the page, on every view of it. Any page can still be reached:
    the count goes as deep as the page asked for.
    """

    def __init__(self, object_list: Any, per_page: int, *args: Any, up_to_page: int = 1, **kwargs: Any) -> None:
        super().__init__(object_list, per_page, *args, **kwargs)
        self.count_limit = max(COUNT_LIMIT, (max(up_to_page, 1) + 1) * int(per_page))
        self.more = False

    @cached_property
    def count(self) -> int:
        data = getattr(getattr(self.object_list, "data", None), "data", None)  # a table's rows: their queryset
        if not isinstance(data, QuerySet):
            return super().count
        counted = data.order_by().values("pk")[: self.count_limit + 1].count()
        self.more = counted > self.count_limit
        return min(counted, self.count_limit)

    def validate_number(self, number: Any) -> int:
        try:
            return super().validate_number(number)
        except PageNotAnInteger:
            return 1
        except EmptyPage:
            return 1 if _as_int(number, 1) < 1 else max(self.num_pages, 1)


def _as_int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def per_page(request: HttpRequest, prefix: str = "", default: int = DEFAULT_PER_PAGE) -> int:
    """``per_page`` clamped to the offered sizes (the nearest one not below what was asked)."""
    asked = _as_int(request.GET.get(f"{prefix}per_page"), default)
    return next((size for size in PER_PAGE_CHOICES if size >= asked), PER_PAGE_CHOICES[-1])


def _choose_columns(request: HttpRequest, table: BaseTable) -> None:
    """Show the columns ``?columns=`` names (an empty choice resets to the default) and remember
    the choice in the session; without the parameter, the session's choice or the default."""
    key = f"tables:{type(table).__name__}:columns"
    session = getattr(request, "session", None)
    names = {c.name for c in table.columns.iterall()}
    if table.param("columns") in request.GET:
        chosen = [n for n in request.GET.getlist(table.param("columns")) if n in names]
        if session is not None:
            if chosen:
                session[key] = chosen
            else:
                session.pop(key, None)
    else:
        chosen = [n for n in (session.get(key) or []) if n in names] if session is not None else []
    shown = set(chosen or table.default_columns or names)
    for name in names:
        (table.columns.show if name in shown else table.columns.hide)(name)


def build_table(request: HttpRequest, table_class: type[BaseTable], queryset: QuerySet | Sequence[Any], *,
                prefix: str = "", rows: Rows | None = None, restricted: bool = False, filterset: Any = None,
                **kwargs: Any) -> BaseTable:
    """The table for this request: the rows the user may view (``core.permissions.restrict``:
    a scoped role's page and its CSV export show its scope), searched, sorted, with the chosen
    columns (not yet paginated; the export wants every row, the page one page).

    ``queryset`` may be a list of rows computed in Python from what the page already checked
    (an object's placement, the water levels): searched in Python, nothing restricted.
    ``restricted``: the view passes only rows the user may see — the parts of the object whose
    page checked it (a quota group's workloads, which the group's owners see without any role
    on charges) — so they are not restricted again. ``filterset``: what narrowed the rows.
    """
    text = query_param(request, f"{prefix}q")
    data: QuerySet | list[Any]
    if isinstance(queryset, QuerySet):
        if not restricted:
            queryset = restrict(queryset, request.user, "view")
        if text and table_class.search_fields:
            queryset = queryset.filter(search_q(table_class.search_fields, text))
        data = rows(queryset) if rows is not None else queryset
    else:
        data = list(queryset)
        if text and table_class.search_fields:
            data = search_rows(data, table_class.search_fields, text)
    table = table_class(data, prefix=prefix, **kwargs)
    table.search_text = text
    table.query = request.GET.copy()
    table.filterset = filterset
    sort = query_param(request, f"{prefix}sort")
    if sort:
        table.order_by = sort  # django-tables2 drops unknown and unsortable columns
    _choose_columns(request, table)
    return table


def paginate(request: HttpRequest, table: BaseTable) -> BaseTable:
    page = request.GET.get(table.param("page"), 1)
    table.paginate(paginator_class=ClampedPaginator, page=page, per_page=per_page(request, table.prefix, table.default_per_page),
                   up_to_page=_as_int(page, 1))
    return table


class _Echo:
    """A file-like object ``csv.writer`` writes a line to and gets the line back from."""

    def write(self, value: str) -> str:
        return value


def _records(table: BaseTable) -> Iterator[Any]:
    """Every record in the table's order; a queryset is read in chunks, never all at once."""
    data = table.data.data
    if isinstance(data, QuerySet):
        return data.iterator(chunk_size=EXPORT_CHUNK)
    return iter(data)


def _plain(value: Any) -> Any:
    if value is None:
        return ""
    return strip_tags(value) if isinstance(value, SafeData) else force_str(value, strings_only=True)


def export_csv(table: BaseTable, request: HttpRequest) -> HttpResponse:
    """Every row of the (searched, sorted) table as CSV, streamed: each column, hidden ones too,
    unless the column says ``exclude_from_export``; the cell values without markup, under the
    column's ``export_header`` when its header on the page is more than a name."""
    columns = [c for c in table.columns.iterall() if not c.column.exclude_from_export]
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow([_plain(getattr(c.column, "export_header", None) or c.header) for c in columns])
        for record in _records(table):
            row = BoundRow(record, table=table)
            yield writer.writerow([_plain(row.get_cell_value(c.name)) for c in columns])

    response = StreamingHttpResponse(_streamed(lines(), request), content_type="text/csv; charset=utf-8")
    name = re.sub(r"[^\w.-]+", "-", str(table.export_name), flags=re.ASCII)  # object names go in, quoted safely
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


def filter_errors(table: BaseTable) -> str:
    """What is wrong with the table's filters ("" when nothing is), naming each URL parameter."""
    filterset = table.filterset
    if filterset is None or filterset.is_valid():
        return ""
    form = filterset.form
    problems = [" ".join(errors) if name == NON_FIELD_ERRORS else f"{form.add_prefix(name)}: {' '.join(errors)}"
                for name, errors in form.errors.items()]
    return f"{gettext('Invalid filter:')} {'; '.join(problems)}"


def _streamed(lines: Iterator[str], request: HttpRequest) -> Iterator[str] | AsyncIterator[str]:
    """The lines as the server streams them: under ASGI (how Meridian serves) an async iterator,
    since Django reads a sync one whole into memory before sending a byte; each chunk is made
    in the one sync thread, where the queryset's cursor lives."""
    if not isinstance(request, ASGIRequest):
        return lines
    pull = sync_to_async(lambda: "".join(itertools.islice(lines, EXPORT_CHUNK)), thread_sensitive=True)

    async def chunks() -> AsyncIterator[str]:
        while chunk := await pull():
            yield chunk

    return chunks()


class TableMixin:
    """A list page's tables (one per ``table_class``; ``get_tables`` for several, each with its
    own prefix): ``?export=csv`` answers the CSV instead of the page, after the view's
    permission check (put ``PermissionMixin`` first), and the page paginates each table.

    On an object's page (a ``DetailView``) the object is read first, so ``PermissionMixin``
    refuses the page and its exports alike to whoever may not view it; the tables then read
    ``self.object``. A view that filters its rows sets ``self.filterset`` (or passes
    ``filterset=`` to ``build_table``): an invalid one refuses the export with a 400.
    """

    request: HttpRequest
    table_class: type[BaseTable]

    def get_table_queryset(self) -> QuerySet:
        """The rows before search and sorting (restricted to what the user may see)."""
        return self.model._default_manager.all()  # type: ignore[attr-defined]

    def table_rows(self, queryset: QuerySet) -> list[Any] | QuerySet:
        """What the table shows for the searched queryset; override for rows computed in Python."""
        return queryset

    def table_kwargs(self) -> dict[str, Any]:
        """What the table's constructor takes besides its rows (the page, what the user may do)."""
        return {}

    def get_tables(self) -> list[BaseTable]:
        queryset = self.get_table_queryset()
        return [build_table(self.request, self.table_class, queryset, rows=self.table_rows,
                            filterset=getattr(self, "filterset", None), **self.table_kwargs())]

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        detail = isinstance(self, SingleObjectMixin)
        if detail:
            self.object = self.get_object()
        self.tables = self.get_tables()
        for table in self.tables:
            if request.GET.get(table.param("export")) == "csv":
                problem = filter_errors(table)
                if problem:
                    return HttpResponse(problem, status=400, content_type="text/plain; charset=utf-8")
                return export_csv(table, self.request)
        if detail:  # as DetailView.get, without reading the object again
            return self.render_to_response(self.get_context_data(object=self.object))  # type: ignore[attr-defined]
        return super().get(request, *args, **kwargs)  # type: ignore[misc]

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)  # type: ignore[misc]
        if not hasattr(self, "tables"):  # a form view re-rendering its page after a refused POST
            self.tables = self.get_tables()
        for table in self.tables:
            paginate(self.request, table)
        return context | {"table": self.tables[0], "tables": self.tables}


# ---------------------------------------------------------------------------- core's own lists

def _json(value: Any) -> str:
    import json

    return "" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


class ObjectChangeTable(BaseTable):
    """The audit log: the change's time links to its entry; the snapshots are in the export."""

    time = TimeColumn(verbose_name=_("Time"), format="Y-m-d H:i:s",
                                 linkify=("console:audit-detail", {"pk": tables.A("pk")}))
    actor = tables.Column(verbose_name=_("Actor"))
    source = tables.Column(verbose_name=_("Source"))
    action = tables.Column(verbose_name=_("Action"))
    object_repr = tables.Column(verbose_name=_("Object"), attrs={"td": {"translate": "no"}})
    reason = tables.Column(verbose_name=_("Reason"), orderable=False, attrs={"td": {"translate": "no"}})
    request_id = tables.Column(verbose_name=_("Request ID"), orderable=False)
    object_type = tables.Column(verbose_name=_("Object type"), orderable=False)
    object_id = tables.Column(verbose_name=_("Object ID"), orderable=False)
    before = tables.Column(verbose_name=_("Before"), orderable=False, empty_values=())
    after = tables.Column(verbose_name=_("After"), orderable=False, empty_values=())

    search_fields = ("actor", "object_repr", "reason")
    default_columns = ("time", "actor", "source", "action", "object_repr", "reason")
    export_name = "meridian-audit-log"

    class Meta(BaseTable.Meta):
        empty_text = _("No entries match.")
        attrs = {"class": "table", "id": "audit-table"}

    def render_action(self, record) -> str:
        shown = record.get_action_display()
        return f"{shown} · {record.verb}" if record.verb else shown

    def render_object_repr(self, record):
        if not record.object_type:
            return record.object_repr
        return format_html('<span class="muted">{}</span> {}', record.object_type.model, record.object_repr)

    def value_object_repr(self, record) -> str:
        return record.object_repr

    def render_reason(self, value: str) -> str:
        return Truncator(value).chars(80)

    def value_reason(self, value: str) -> str:
        return value

    def render_object_type(self, record) -> str:
        return f"{record.object_type.app_label}.{record.object_type.model}"

    def render_before(self, value) -> str:
        return _json(value)

    def render_after(self, value) -> str:
        return _json(value)

    def value_time(self, value) -> str:
        return value.isoformat()


class JobTable(BaseTable):
    """Background jobs, newest first, with their state badge."""

    id = tables.Column(verbose_name=_("Job"))
    status = tables.Column(verbose_name=_("Status"))
    triggered_by = tables.Column(verbose_name=_("Triggered by"))
    created = TimeColumn(verbose_name=_("Created"), format="Y-m-d H:i:s")
    finished = TimeColumn(verbose_name=_("Finished"), format="Y-m-d H:i:s")
    error = tables.Column(verbose_name=_("Error or wait"), orderable=False, empty_values=())

    search_fields = ("kind", "triggered_by", "error", "waiting_for")
    default_columns = ("id", "status", "triggered_by", "created", "error")
    export_name = "meridian-jobs"

    class Meta(BaseTable.Meta):
        empty_text = _("No jobs yet.")
        attrs = {"class": "table", "id": "job-table"}

    def render_id(self, record) -> str:
        return format_html('<a href="{}">{} #{}</a>', record.get_absolute_url(), record.kind, record.pk)

    def value_id(self, record) -> str:
        return f"{record.kind} #{record.pk}"

    def render_status(self, record):
        return format_html('<span class="badge {}">{}</span>', record.status, record.get_status_display())

    def value_status(self, record) -> str:
        return record.status

    def render_error(self, record) -> str:
        return Truncator(self.value_error(record)).chars(80)

    def value_error(self, record) -> str:
        """A waiting job says what it waits for; the others their last error."""
        return record.waiting_for if record.status == record.Status.WAITING else record.error
