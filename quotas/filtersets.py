"""Quotas' list filters: a group's workloads on its page (prefixed ``workloads-``, as its table)."""

from __future__ import annotations

import django_filters
from django import forms
from django.utils.translation import gettext_lazy as _

from .models import QuotaCharge


class QuotaChargeFilterSet(django_filters.FilterSet):
    """A group's workloads by cluster, namespace, kind, how they were charged and whether the
    inventory has seen them. A value that is none of the choices is a form error, not a 500."""

    cluster = django_filters.CharFilter(field_name="cluster__name", max_length=63, label=_("Cluster"),
                                        widget=forms.TextInput(attrs={"placeholder": _("Cluster"), "size": 12}))
    namespace = django_filters.CharFilter(max_length=253, label=_("Namespace"),
                                          widget=forms.TextInput(attrs={"placeholder": _("Namespace"), "size": 12}))
    kind = django_filters.CharFilter(max_length=63, label=_("Kind"),
                                     widget=forms.TextInput(attrs={"placeholder": _("Kind"), "size": 12}))
    source = django_filters.ChoiceFilter(choices=QuotaCharge.Source.choices, label=_("Source"), empty_label=_("Any source"))
    observed = django_filters.BooleanFilter(label=_("Observed"), widget=forms.Select(
        choices=[("", _("Observed or not")), ("true", _("Observed")), ("false", _("not yet"))]))

    class Meta:
        model = QuotaCharge
        fields = ["cluster", "namespace", "kind", "source", "observed"]
