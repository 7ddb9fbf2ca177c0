from django import template

register = template.Library()


@register.filter
def get_item(mapping, key):
    """``{{ dict|get_item:key }}`` for keys that are not identifiers (``nvidia.com/gpu``)."""
    return mapping.get(key, "") if hasattr(mapping, "get") else ""
