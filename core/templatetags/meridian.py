from urllib.parse import urlencode

from django import template
from django.urls import reverse
from django.utils.html import escape

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


@register.inclusion_tag("includes/history_link.html")
def history_link(obj):
    """The link to ``obj``'s entries in the audit log (NetBox's changelog tab): every change
    made to it, filtered to it."""
    if obj is None or getattr(obj, "pk", None) is None:
        return {"url": ""}
    meta = obj._meta
    query = urlencode({"object_type": f"{meta.app_label}.{meta.model_name}", "object_id": obj.pk})
    return {"url": f"{reverse('console:audit-list')}?{query}"}
