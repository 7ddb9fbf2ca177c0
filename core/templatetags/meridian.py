import functools
from collections.abc import Callable
from urllib.parse import urlencode

from django import template
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.formats import get_format
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language

register = template.Library()


@register.filter
def get_item(mapping, key):
    """``{{ dict|get_item:key }}`` for keys that are not identifiers (``nvidia.com/gpu``)."""
    return mapping.get(key, "") if hasattr(mapping, "get") else ""


@register.filter
def lines(values) -> str:
    """``{{ list|lines }}``: the items one per line, escaped, for a ``<pre>``. A template loop
    over a 500-cluster scheduler explanation (1,500 lines) took most of its page's time."""
    return escape("\n".join(map(str, values or ())))


@register.filter(is_safe=True)
def number(value) -> SafeString:
    """``{{ n|number }}``: a whole number written as every page writes numbers, with the
    language's thousands separator (what ``floatformat:"0g"`` writes). Django's filter costs
    ~20 µs a number through its Decimal path; the CPU fleet page prints 3,000 of them. Integers
    take a direct path; anything else goes Django's way."""
    return mark_safe(_written(value, *_grouping(get_language())))


def number_writer() -> Callable[[object], str]:
    """``number`` for the language of this request, read once: ``get_language`` costs ~5 µs a
    call (a context-local read), as much as the number itself; a table of every cluster writes
    4,000 of them."""
    separator, grouping = _grouping(get_language())
    return lambda value: _written(value, separator, grouping)


def _written(value, separator: str, grouping: object) -> str:
    if type(value) is not int or (separator and grouping != 3):
        return floatformat(value, "0g")
    return f"{value:,}".replace(",", separator) if separator else str(value)


@functools.cache
def _grouping(language: str | None) -> tuple[str, object]:
    """The thousands separator and grouping of ``language`` (its formats are fixed)."""
    return get_format("THOUSAND_SEPARATOR", language), get_format("NUMBER_GROUPING", language)


@register.inclusion_tag("includes/history_link.html")
def history_link(obj):
    """The link to ``obj``'s entries in the audit log (NetBox's changelog tab): every change
    made to it, filtered to it."""
    if obj is None or getattr(obj, "pk", None) is None:
        return {"url": ""}
    meta = obj._meta
    query = urlencode({"object_type": f"{meta.app_label}.{meta.model_name}", "object_id": obj.pk})
    return {"url": f"{reverse('console:audit-list')}?{query}"}
