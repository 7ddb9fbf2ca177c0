"""Filters of the scheduling API lists (Part A)."""

from __future__ import annotations

import django_filters

from .models import NodeSchedulerConfig, PodSchedulerConfig, SchedulerConfigBinding, SchedulingPolicy


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
