from __future__ import annotations

import django_filters
from django import forms
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from kube.labels import SelectorError, parse_selector

from .models import Cluster, Node, Pod, Workload
from .selectors import selector_q


def refusal(message: str, code: str = "invalid") -> forms.ValidationError:
    """A validation error whose message is shown as is.

    Django and DRF %-format a ValidationError's message with its params; a message quoting
    what the user typed (a selector or a name with a ``%`` in it) would crash that
    formatting into a 500, so the text goes in as a parameter, never as the format.
    """
    return forms.ValidationError("%(message)s", code=code, params={"message": message})


class LabelSelectorField(forms.CharField):
    def clean(self, value):
        text = super().clean(value)
        if not text:
            return None
        try:
            return parse_selector(text)
        except SelectorError as exc:
            raise refusal(str(exc)) from exc


@extend_schema_field(OpenApiTypes.STR)
class LabelSelectorFilter(django_filters.Filter):
    """``labelSelector`` with the full Kubernetes syntax; a bad one is a 400 naming the parameter."""

    field_class = LabelSelectorField

    def filter(self, qs, value):
        return qs if value is None else qs.filter(selector_q(value))


class ClusterNameField(forms.CharField):
    def clean(self, value):
        name = super().clean(value)
        if not name:
            return None
        cluster_id = Cluster.objects.filter(name=name).values_list("pk", flat=True).first()
        if cluster_id is None:
            raise refusal(f"unknown cluster {name!r}")
        return cluster_id


@extend_schema_field(OpenApiTypes.STR)
class ClusterNameFilter(django_filters.Filter):
    """``cluster=<name>``; an unknown cluster is a 400, not an empty page that hides a typo."""

    field_class = ClusterNameField

    def filter(self, qs, value):
        return qs if value is None else qs.filter(cluster_id=value)


class ClusterFilterSet(django_filters.FilterSet):
    labelSelector = LabelSelectorFilter(label="labelSelector")  # noqa: N815 - Kubernetes' parameter name
    ready = django_filters.BooleanFilter()
    connector = django_filters.ChoiceFilter(choices=Cluster.ConnectorKind.choices)

    class Meta:
        model = Cluster
        fields = ["ready", "connector"]


class ClusterObjectFilterSet(django_filters.FilterSet):
    """What every in-cluster object (node, workload, pod) is filtered by: its cluster and its labels."""

    cluster = ClusterNameFilter()
    labelSelector = LabelSelectorFilter(label="labelSelector")  # noqa: N815 - Kubernetes' parameter name


class NodeFilterSet(ClusterObjectFilterSet):
    name = django_filters.CharFilter(lookup_expr="startswith")
    ready = django_filters.BooleanFilter()
    unschedulable = django_filters.BooleanFilter()

    class Meta:
        model = Node
        fields = ["ready", "unschedulable"]


class WorkloadFilterSet(ClusterObjectFilterSet):
    namespace = django_filters.CharFilter()
    kind = django_filters.CharFilter()
    name = django_filters.CharFilter(lookup_expr="startswith")

    class Meta:
        model = Workload
        fields = ["namespace", "kind", "status"]


class PodFilterSet(ClusterObjectFilterSet):
    namespace = django_filters.CharFilter()
    node = django_filters.CharFilter(field_name="node_name")
    active = django_filters.BooleanFilter(field_name="finished_at", lookup_expr="isnull", label="active (not finished)")

    class Meta:
        model = Pod
        fields = ["namespace", "phase"]
