"""Federation REST API: policies, federated objects (submit, roll out, explain), what-if,
the Spread planner and water levels. Member clusters are the fleet's one cluster resource
(``/api/v1/fleet/clusters/``, where cordon and drain live).

Every write goes through ``federation.services`` (validation, audit, reconcile after commit);
a refusal answers 400 with the one error body, its ``errors`` naming each field path, e.g.
``{"spec.placement[0].preferences.minReplicas": ["must be a non-negative integer"]}``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from django.db.models import Count, Prefetch
from django.utils.translation import gettext as _
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter, SearchFilter
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.viewsets import DryRunMixin, MeridianModelViewSet, ReasonSerializer, RevisionsMixin
from core.errors import Refused
from core.permissions import RolePermission
from fleet.models import Cluster
from kube.jsonpatch import merge_patch
from kube.limits import deeper_than, too_deep_message

from .. import planner, services, water, whatif


def _valid(serializer_class, data: Any, *, partial: bool = False) -> dict[str, Any]:
    """A plain API view's body (viewsets use ``self.valid``), refused with field errors."""
    if not isinstance(data, Mapping):
        raise ValidationError({"non_field_errors": ["the body must be a JSON object"]})
    serializer = serializer_class(data=data, partial=partial)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
from ..models import FederatedObject, MemberObject, OverridePolicy, PropagationPolicy
from .serializers import (
    ExplainSerializer,
    FederatedObjectDetailSerializer,
    FederatedObjectSerializer,
    FederatedRevisionSerializer,
    PlannerSerializer,
    PlanResultSerializer,
    PolicySerializer,
    PolicyUpdateSerializer,
    PolicyWriteSerializer,
    SubmitSerializer,
    WhatIfSerializer,
)

REFUSED = OpenApiResponse(description="Refused: the one error body, field path → messages.")


# --------------------------------------------------------------------------- policies


class _PolicyViewSet(MeridianModelViewSet):
    """Shared by propagation and override policies; ``model`` picks which."""

    model: type[PropagationPolicy | OverridePolicy]
    filterset_fields = ["namespace", "name"]
    ordering_fields = ["namespace", "name", "updated", "object_count"]

    def get_queryset(self):
        queryset = super().get_queryset().annotate(object_count=Count("federated_objects", distinct=True))
        namespace = self.request.query_params.get("namespace") if self.request else None
        if namespace == "":
            queryset = queryset.filter(namespace="")  # ?namespace= lists the fleet-wide policies
        return queryset.order_by("namespace", "name")

    @extend_schema(request=PolicyWriteSerializer, responses={201: PolicySerializer, 400: REFUSED})
    def create(self, request, *args, **kwargs):
        data = self.valid(PolicyWriteSerializer)
        policy = services.save_policy(self.model, namespace=data["namespace"], name=data["name"], spec=data["spec"],
                                      description=data["description"])
        return self.respond(policy, status.HTTP_201_CREATED)

    @extend_schema(request=PolicyUpdateSerializer, responses={200: PolicySerializer, 400: REFUSED})
    def update(self, request, *args, **kwargs):
        """PUT replaces description and spec; PATCH changes what it names."""
        policy = self.get_object()
        partial = kwargs.get("partial", False)
        data = self.valid(PolicyUpdateSerializer, partial=partial)
        errors = {field: ["cannot change; create a new policy instead"]
                  for field in ("namespace", "name") if field in data and data[field] != getattr(policy, field)}
        if not partial and "spec" not in data:
            errors["spec"] = ["This field is required."]
        if errors:
            raise Refused.from_errors(errors)
        policy = services.save_policy(self.model, namespace=policy.namespace, name=policy.name,
                                      spec=data.get("spec", policy.spec),
                                      description=data.get("description", "" if not partial else policy.description),
                                      instance=policy)
        return self.respond(policy)

    @extend_schema(request=PolicyUpdateSerializer, responses={200: PolicySerializer, 400: REFUSED})
    def partial_update(self, request, *args, **kwargs):
        kwargs["partial"] = True
        return self.update(request, *args, **kwargs)

    def perform_destroy(self, obj, *, reason=""):
        services.delete_policy(obj)


class PropagationPolicyViewSet(_PolicyViewSet):
    """Propagation policies: where and how objects are scheduled. A change reschedules the
    objects using it; a policy still in use cannot be deleted."""

    model = PropagationPolicy
    queryset = PropagationPolicy.objects.all()
    serializer_class = PolicySerializer


class OverridePolicyViewSet(_PolicyViewSet):
    """Override policies: per-cluster JSON patches applied on top of the template."""

    model = OverridePolicy
    queryset = OverridePolicy.objects.all()
    serializer_class = PolicySerializer


# --------------------------------------------------------------------------- objects


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    return str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or "")


@extend_schema(parameters=[OpenApiParameter("search", str, description="Substring of the object's name.")])
class FederatedObjectViewSet(RevisionsMixin, MeridianModelViewSet):
    """Federated objects: native objects (Deployment, ConfigMap, any CRD) propagated to member
    clusters. Writes are accepted here and carried out by the reconciler: a create or update
    answers at once with the new revision, placement and status follow."""

    queryset = FederatedObject.objects.select_related("propagation_policy", "override_policy")
    serializer_class = FederatedObjectSerializer
    revision_serializer_class = FederatedRevisionSerializer
    filter_backends = [DjangoFilterBackend, SearchFilter, OrderingFilter]
    filterset_fields = ["namespace", "kind", "phase"]
    search_fields = ["name"]
    ordering_fields = ["namespace", "kind", "name", "updated", "phase"]

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action != "list":
            queryset = queryset.prefetch_related(
                Prefetch("members", queryset=MemberObject.objects.select_related("cluster").order_by("cluster__name")))
        elif self.request.query_params.get("namespace") == "":
            queryset = queryset.filter(namespace="")
        return queryset

    def get_serializer_class(self):
        return FederatedObjectSerializer if self.action == "list" else FederatedObjectDetailSerializer

    def _detail(self, fed: FederatedObject, status_code: int = status.HTTP_200_OK) -> Response:
        return self.respond(self.get_queryset().get(pk=fed.pk), status_code, serializer_class=FederatedObjectDetailSerializer)

    def _submit(self, obj: Any, data: Mapping[str, Any]) -> tuple[FederatedObject, bool]:
        return services.submit(obj, propagation_policy=data.get("propagation_policy") or None,
                               override_policy=data.get("override_policy") or None,
                               change_cause=data.get("change_cause") or "")

    @extend_schema(request=SubmitSerializer,
                   responses={201: FederatedObjectDetailSerializer, 200: FederatedObjectDetailSerializer, 400: REFUSED})
    def create(self, request, *args, **kwargs):
        """Submit a native object (JSON ``object`` or YAML ``manifest``): 201 when new, 200
        when it updated an existing one (a new revision if the template changed)."""
        data = self.valid(SubmitSerializer)
        fed, created = self._submit(data["object"], data)
        return self._detail(fed, status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(request=SubmitSerializer, responses={200: FederatedObjectDetailSerializer, 400: REFUSED})
    def update(self, request, *args, **kwargs):
        """PUT replaces the template; PATCH merges ``object`` into it (JSON merge patch). Kind,
        namespace and name cannot change."""
        fed = self.get_object()
        partial = kwargs.get("partial", False)
        data = self.valid(SubmitSerializer, partial=partial)
        if fed.deleting:
            raise Refused("deleting", _("%(object)s is being deleted") % {"object": fed}, field="object")
        if "object" in data:
            if not isinstance(data["object"], Mapping):
                raise ValidationError({"object": [_("must be a Kubernetes object (a JSON/YAML mapping)")]})
            if deeper_than(data["object"]):
                raise Refused.from_errors({"object": too_deep_message()})
            obj = merge_patch(fed.template, data["object"]) if partial else copy.deepcopy(dict(data["object"]))
        else:
            obj = copy.deepcopy(fed.template)
        self._fill_identity(obj, fed)
        kind, namespace, name = _identity(obj)
        errors = {}
        if kind != fed.kind:
            errors["object.kind"] = [_("cannot change (%(old)s → %(new)s); delete and create instead") % {
                "old": fed.kind, "new": kind}]
        if namespace != fed.namespace:
            errors["object.metadata.namespace"] = [_("cannot change (%(old)s → %(new)s)") % {
                "old": fed.namespace or _("(none)"), "new": namespace or _("(none)")}]
        if name != fed.name:
            errors["object.metadata.name"] = [_("cannot change (%(old)s → %(new)s)") % {"old": fed.name, "new": name}]
        if errors:
            raise Refused.from_errors(errors)
        fed, _created = self._submit(obj, data)
        return self._detail(fed)

    @extend_schema(request=SubmitSerializer, responses={200: FederatedObjectDetailSerializer, 400: REFUSED})
    def partial_update(self, request, *args, **kwargs):
        kwargs["partial"] = True
        return self.update(request, *args, **kwargs)

    @staticmethod
    def _fill_identity(obj: dict[str, Any], fed: FederatedObject) -> None:
        """A replacement may leave out what identifies it; what it states must match."""
        obj.setdefault("apiVersion", fed.api_version)
        obj.setdefault("kind", fed.kind)
        meta = obj.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta.setdefault("name", fed.name)
            if fed.namespace:
                meta.setdefault("namespace", fed.namespace)

    @extend_schema(request=None, responses={202: FederatedObjectDetailSerializer})
    def destroy(self, request, *args, **kwargs):
        """Remove it from every member cluster; the reconciler deletes it once they are clean."""
        fed = self.get_object()
        services.delete(fed)
        return self._detail(fed, status.HTTP_202_ACCEPTED)

    def perform_rollback(self, obj, number, reason):
        return services.rollback(obj, number, reason=reason)

    @extend_schema(request=ReasonSerializer, responses={200: FederatedObjectDetailSerializer})
    @action(detail=True, methods=["post"], verb="rollout")
    def pause(self, request, pk=None):
        """Hold the cross-cluster rollout where it is (scaling still applies)."""
        data = self.valid(ReasonSerializer)
        return self._detail(services.set_paused(self.get_object(), True, reason=data["reason"]))

    @extend_schema(request=ReasonSerializer, responses={200: FederatedObjectDetailSerializer})
    @action(detail=True, methods=["post"], verb="rollout")
    def resume(self, request, pk=None):
        data = self.valid(ReasonSerializer)
        return self._detail(services.set_paused(self.get_object(), False, reason=data["reason"]))

    @extend_schema(request=ReasonSerializer, responses={202: FederatedObjectDetailSerializer})
    @action(detail=True, methods=["post"], verb="reschedule")
    def reschedule(self, request, pk=None):
        """Schedule afresh on the next reconcile, even if no scheduling input changed."""
        data = self.valid(ReasonSerializer)
        fed = self.get_object()
        services.reschedule(fed, reason=data["reason"])
        return self._detail(fed, status.HTTP_202_ACCEPTED)

    @extend_schema(responses={200: ExplainSerializer})
    @action(detail=True, methods=["get"])
    def explain(self, request, pk=None):
        """Why each cluster was filtered or how it scored, and how replicas were split."""
        fed = self.get_object()
        schedule = fed.schedule or {}
        return Response({"placement": fed.placement, "schedule": schedule,
                         "explanation": schedule.get("explanation") or [], "scheduled_at": fed.scheduled_at})


# --------------------------------------------------------------------------- what-if, planner


class WhatIfView(DryRunMixin, APIView):
    """Where would this workload land under this policy, and the water levels after? Commits
    nothing, so reading federated objects is enough."""

    required_permissions = {"POST": ["federation.add_federatedobject"]}
    preview = True  # commits nothing: read-only API tokens may call it (with the role that could make the change)

    @extend_schema(request=WhatIfSerializer, responses={200: OpenApiTypes.OBJECT, 400: REFUSED})
    def post(self, request):
        data = _valid(WhatIfSerializer, request.data)
        return Response(whatif.what_if(data["object"], data["policy"]))


class PlannerView(DryRunMixin, APIView):
    """KubeAdmiral's Spread replica planner over plain input: weights, min/max replicas,
    capacities, and scaling without migration. Commits nothing."""

    required_permissions = {"POST": ["federation.add_federatedobject"]}
    preview = True  # commits nothing: read-only API tokens may call it (with the role that could make the change)

    @extend_schema(request=PlannerSerializer, responses={200: PlanResultSerializer, 400: REFUSED})
    def post(self, request):
        data = _valid(PlannerSerializer, request.data)
        preferences = {name: planner.ClusterPreference(weight=p["weight"], min_replicas=p["minReplicas"],
                                                       max_replicas=p["maxReplicas"])
                       for name, p in data["preferences"].items()}
        try:
            placed, overflow = planner.plan(preferences, data["total"], data["clusters"], data["current"],
                                            data["capacity"], data["limited_capacity"], key=data["key"],
                                            avoid_migration=data["avoid_migration"])
        except ValueError as exc:  # the serializer refuses negatives first; this is a backstop
            raise Refused("invalid", str(exc)) from None
        return Response({"plan": placed, "overflow": overflow})


# --------------------------------------------------------------------------- water levels


class WaterLevelsView(APIView):
    """Per cluster and resource: allocatable, requested, available, deploy rate, dynamic
    weight; fleet totals. ``hours`` and/or ``cluster`` add the history."""

    permission_classes = [RolePermission]
    required_permissions = {"GET": ["fleet.view_cluster"]}

    @extend_schema(parameters=[OpenApiParameter("hours", float, description="History window (adds `history`)."),
                               OpenApiParameter("cluster", str, description="History of this cluster only.")],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        from .serializers import WaterLevelQuerySerializer

        query = _valid(WaterLevelQuerySerializer, request.query_params.dict())
        body = water.water_levels()
        if query:
            cluster = None
            if query.get("cluster"):
                cluster = Cluster.objects.filter(name=query["cluster"]).first()
                if cluster is None:
                    raise ValidationError({"cluster": [f"no cluster named {query['cluster']!r}"]})
            body["history"] = water.history(cluster, hours=query.get("hours", 24))
        return Response(body)


