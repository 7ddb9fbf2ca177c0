"""Federation's list filters: the federated objects' index (namespace, kind, phase)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import django_filters
from django import forms
from django.utils.translation import gettext_lazy as _

from .models import FederatedObject

#: The namespace filter's value for objects without a namespace (no namespace may be named "-").
NO_NAMESPACE = "-"


class FederatedObjectFilterSet(django_filters.FilterSet):
    """The index's filters. A namespace or kind no object has simply matches nothing (a
    bookmark outliving its objects); a phase that is none of the phases is a form error."""

    namespace = django_filters.CharFilter(method="filter_namespace", max_length=253, label=_("Namespace"))
    kind = django_filters.CharFilter(max_length=63, label=_("Kind"))
    phase = django_filters.ChoiceFilter(choices=FederatedObject.Phase.choices, label=_("Phase"), empty_label=_("All phases"))

    class Meta:
        model = FederatedObject
        fields = ["namespace", "kind", "phase"]

    def __init__(self, *args: Any, namespaces: Iterable[str] = (), kinds: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        fields = self.form.fields
        fields["namespace"].widget = forms.Select(
            choices=[("", _("All namespaces"))] + [(n or NO_NAMESPACE, n or _("(none)")) for n in namespaces])
        fields["kind"].widget = forms.Select(choices=[("", _("All kinds"))] + [(k, k) for k in kinds])

    def filter_namespace(self, queryset, name, value):
        return queryset.filter(namespace="" if value == NO_NAMESPACE else value)

    def without_phase(self, queryset):
        """``queryset`` narrowed by every filter but the phase (what the phase counts count)."""
        data = self.form.cleaned_data
        for name in ("namespace", "kind"):
            queryset = self.filters[name].filter(queryset, data.get(name))
        return queryset
