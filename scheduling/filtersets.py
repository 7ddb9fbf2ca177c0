"""Filters of the scheduling API lists (Part A) and of the CPU fleet page."""

from __future__ import annotations

import django_filters
from django import forms
from django.utils.translation import gettext_lazy as _

from .models import NodeCPU, NodeSchedulerConfig, PodSchedulerConfig, SchedulerConfigBinding, SchedulingPolicy


class SchedulingPolicyFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = SchedulingPolicy
        fields = ["name", "is_default"]


class NodeSchedulerConfigFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = NodeSchedulerConfig
        fields = ["name"]


class PodSchedulerConfigFilterSet(NodeSchedulerConfigFilterSet):
    class Meta:
        model = PodSchedulerConfig
        fields = ["name"]


class SchedulerConfigBindingFilterSet(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")
    namespace = django_filters.CharFilter()

    class Meta:
        model = SchedulerConfigBinding
        fields = ["name", "namespace"]


class WholeNumberFilter(django_filters.Filter):
    """A whole number (``NumberFilter`` takes decimals: ``1.5`` CPUs is no request)."""

    field_class = forms.IntegerField


class CPUFleetFilterSet(django_filters.FilterSet):
    """The CPU fleet page's filters: one cluster (by name), and the nodes that take an exclusive
    instance of ``request`` CPUs now (the per-cluster table then counts where it fits). An
    unknown cluster matches nothing (a bookmark outliving its cluster); a request that is no
    whole number of CPUs is a form error."""

    cluster = django_filters.CharFilter(field_name="cluster__name", max_length=63, label=_("Cluster"))
    request = WholeNumberFilter(method="filter_request", label=_("Fits an exclusive instance of (CPUs)"),
                                min_value=1, max_value=100_000)

    class Meta:
        model = NodeCPU
        fields = ["cluster", "request"]

    def filter_request(self, queryset, name, value):
        return queryset.filter(largest_exclusive__gte=value)

    def cluster_scope(self, queryset):
        """``queryset`` narrowed to the cluster only (what the totals and the cluster table add up)."""
        return self.filters["cluster"].filter(queryset, self.form.cleaned_data.get("cluster"))
