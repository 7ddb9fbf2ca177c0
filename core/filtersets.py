from __future__ import annotations

import django_filters

from .models import Job, ObjectChange


class JobFilterSet(django_filters.FilterSet):
    class Meta:
        model = Job
        fields = ["kind", "status", "triggered_by", "object_id"]


class ObjectChangeFilterSet(django_filters.FilterSet):
    since = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="lt")
    object_type = django_filters.CharFilter(method="filter_object_type", help_text="app_label.model, e.g. core.job")
    q = django_filters.CharFilter(method="filter_q", help_text="Search actor, object and reason.")

    class Meta:
        model = ObjectChange
        fields = ["actor", "action", "verb", "source", "request_id", "object_id"]

    def filter_object_type(self, queryset, name, value):
        app_label, _, model = value.partition(".")
        return queryset.filter(object_type__app_label=app_label, object_type__model=model)

    def filter_q(self, queryset, name, value):
        from django.db.models import Q

        return queryset.filter(Q(actor__icontains=value) | Q(object_repr__icontains=value) | Q(reason__icontains=value))
