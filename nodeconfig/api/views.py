"""Node config REST API: thin viewsets over ``nodeconfig.services`` (``core.api.viewsets`` holds
permissions, ETag/If-Match, the error body and the revision actions)."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.pagination import LargeCursorPagination
from core.api.serializers import JobSerializer
from core.api.downloads import YAML_RESPONSE, yaml_download
from core.api.viewsets import DryRunMixin, MeridianModelViewSet, MeridianReadOnlyViewSet, ReasonSerializer, RevisionsMixin
from core.errors import Refused
from core.permissions import RolePermission, may, restrict

from .. import manifests, rollout, services
from ..filtersets import ConfigTargetFilterSet, NodeConfigFilterSet
from ..models import ConfigTarget, ConfigType, NodeConfig
from .serializers import (
    ConfigRevisionSerializer,
    ConfigTargetSerializer,
    ConfigTargetWriteSerializer,
    ConfigTypeSerializer,
    EmergencySerializer,
    ImportSerializer,
    NodeConfigSerializer,
)


class ConfigTypeViewSet(MeridianModelViewSet):
    """Config types (upstream KCC). Registering one needs no code change; admins only."""

    queryset = ConfigType.objects.all()
    serializer_class = ConfigTypeSerializer
    lookup_field = "name"
    lookup_value_regex = "[A-Za-z0-9]+"

    def perform_create(self, data):
        return services.save_config_type(data)

    def perform_update(self, obj, data, *, partial):
        return services.save_config_type(data, instance=obj)

    def perform_destroy(self, obj, *, reason=""):
        services.delete_config_type(obj)


class ConfigTargetViewSet(RevisionsMixin, MeridianModelViewSet):
    """Config targets (upstream KCC Targets). Every change is validated, versioned and audited;
    a refused one answers 400 with the one error body (``code`` = the reason code) and changes nothing."""

    queryset = ConfigTarget.objects.select_related("config_type", "cluster", "revision")
    serializer_class = ConfigTargetSerializer
    write_serializer_class = ConfigTargetWriteSerializer
    revision_serializer_class = ConfigRevisionSerializer
    filterset_class = ConfigTargetFilterSet
    ordering_fields = ["name", "priority", "matched_node_count", "updated"]

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        if self.action in ("list", "export") and "deleted" not in self.request.query_params:
            queryset = queryset.filter(deleted=False)  # deleted targets stay readable by id (history)
        return queryset

    def get_serializer_class(self):
        if self.action in ("create", "update", "partial_update", "preview"):
            return ConfigTargetWriteSerializer
        return super().get_serializer_class()

    def perform_create(self, data):
        target, _ = services.save_target(data["type"], ConfigTargetWriteSerializer.spec_from(data), reason=data["reason"],
                                         expect_new=True)
        return target

    def update(self, request, *args, **kwargs):
        """PUT and PATCH both change what they name; the rest of the spec stays."""
        target = self.get_object()
        if target.deleted:
            raise Refused("deleted", _("This target is deleted; roll back to revive it."))
        current = services.spec_of(target)
        body = request.data
        if not isinstance(body, Mapping):
            raise ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        data = self.valid(ConfigTargetWriteSerializer, {
            "type": target.config_type.name, "name": target.name, "cluster": current.cluster,
            "node_label_selector": current.node_label_selector, "priority": current.priority,
            "node_names": list(current.node_names), "last_duration": current.last_duration, "config": current.config,
            "wave_size": current.wave_size, "wave_interval_seconds": current.wave_interval_seconds,
            "failure_threshold_percent": current.failure_threshold_percent, **body})
        if data["type"] != target.config_type or data["name"] != target.name:
            raise Refused("immutable", _("A target's type and name cannot change; create a new target."), field="name")
        target, _created = services.save_target(target.config_type, ConfigTargetWriteSerializer.spec_from(data),
                                                reason=data["reason"])
        return self.respond(target, serializer_class=ConfigTargetSerializer)

    def create(self, request, *args, **kwargs):
        data = self.valid(ConfigTargetWriteSerializer)
        return self.respond(self.perform_create(data), status.HTTP_201_CREATED, serializer_class=ConfigTargetSerializer)

    def perform_destroy(self, obj, *, reason=""):
        services.delete_target(obj, reason=reason)

    def perform_rollback(self, obj, number, reason):
        return services.rollback_target(obj, number, reason=reason)

    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None):
        """Nodes targeted / delivered / applied / failed / pending / held for the current revision."""
        return Response(rollout.progress(self.get_object()))

    @extend_schema(request=ReasonSerializer, responses={200: ConfigTargetSerializer})
    @action(detail=True, methods=["post"], verb="rollout")
    def pause(self, request, pk=None):
        target = services.set_paused(self.get_object(), True, reason=self.valid(ReasonSerializer)["reason"])
        return self.respond(target, serializer_class=ConfigTargetSerializer)

    @extend_schema(request=ReasonSerializer, responses={200: ConfigTargetSerializer})
    @action(detail=True, methods=["post"], verb="rollout")
    def resume(self, request, pk=None):
        target = services.resume(self.get_object(), reason=self.valid(ReasonSerializer)["reason"])
        return self.respond(target, serializer_class=ConfigTargetSerializer)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"], verb="rollout")
    def advance(self, request, pk=None):
        """Release the next wave now."""
        return Response(rollout.advance_rollout(self.get_object(), force=True))

    @extend_schema(request=ReasonSerializer)
    @action(detail=True, methods=["post"], verb="rollout")
    def promote(self, request, pk=None):
        """Release every held node now."""
        return Response(rollout.promote(self.get_object(), reason=self.valid(ReasonSerializer)["reason"]))

    @action(detail=False, methods=["post"], verb="add")
    def preview(self, request):
        """Which nodes a target would match now and which targets it would conflict with; saves nothing."""
        data = self.valid(ConfigTargetWriteSerializer)
        return Response(services.preview(data["type"], ConfigTargetWriteSerializer.spec_from(data)))

    @extend_schema(request=ImportSerializer)
    @action(detail=False, methods=["post"], url_path="import", verb="add")
    def import_yaml(self, request):
        """Create or update targets from upstream YAML (one or more documents); all or nothing."""
        data = self.valid(ImportSerializer)
        results = services.import_manifests(data["yaml"], reason=data["reason"])
        return Response({"targets": [{"id": t.pk, "type": t.config_type.name, "name": t.name, "created": created}
                                     for t, created in results]})

    @extend_schema(parameters=[OpenApiParameter("type", str)], responses=YAML_RESPONSE)
    @action(detail=False, methods=["get"])
    def export(self, request):
        """Live targets as upstream YAML documents."""
        queryset = self.filter_queryset(self.get_queryset()).filter(deleted=False)
        return yaml_download(manifests.dump_manifests([services.manifest_of(t) for t in queryset]), "config-targets.yaml")

    @extend_schema(responses=YAML_RESPONSE)
    @action(detail=True, methods=["get"])
    def manifest(self, request, pk=None):
        target = self.get_object()
        return yaml_download(manifests.dump_manifests([services.manifest_of(target)]), f"{target.name}.yaml")


class NodeConfigViewSet(MeridianReadOnlyViewSet):
    """What each node runs per config type, and what its agent last reported."""

    queryset = NodeConfig.objects.select_related("node", "cluster", "config_type", "matched_target", "target", "revision")
    serializer_class = NodeConfigSerializer
    filterset_class = NodeConfigFilterSet
    pagination_class = LargeCursorPagination
    ordering_fields: list[str] = []


def downgrade_body(target: ConfigTarget, job, **extra) -> dict:
    """A downgrade as the API shows it: the target, its delivery job and its true progress."""
    return (ConfigTargetSerializer(target).data | {"progress": rollout.progress(target),
                                                    "delivery_job": JobSerializer(job).data if job else None} | extra)


class EmergencyDowngradeView(DryRunMixin, APIView):
    """The emergency downgrade: reclaim off for the fleet, a cluster or a label scope.

    201 when this call started it (200 when that scope was already downgraded); the body says
    the truth: ``progress.delivery`` stays ``pending`` until the reconciler has matched it, and
    ``delivery_job`` is the job doing so (retried until done when Redis or a worker is down).
    """

    permission_classes = [RolePermission]
    required_permissions = {"GET": ["nodeconfig.view_configtarget"], "POST": ["nodeconfig.downgrade_configtarget"]}
    #: A scoped operator downgrades their own clusters (checked on the downgrade itself);
    #: fleet-wide or another cluster's is refused, with nothing written.
    scoped_rules = True

    @extend_schema(responses={200: ConfigTargetSerializer(many=True)})
    def get(self, request):
        active = restrict(ConfigTarget.objects.filter(emergency=True, deleted=False), request.user).select_related(
            "config_type", "cluster", "revision")
        return Response([downgrade_body(t, services.latest_delivery(t)) for t in active])

    @extend_schema(request=EmergencySerializer, responses={201: ConfigTargetSerializer, 200: ConfigTargetSerializer})
    def post(self, request):
        body = EmergencySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():
            target, created, job = services.emergency_downgrade(cluster=body.validated_data.get("cluster") or None,
                                                                selector=body.validated_data["selector"],
                                                                reason=body.validated_data["reason"])
            if not may(request.user, "downgrade", target):
                raise PermissionDenied("You may downgrade only the clusters you operate; the whole fleet needs the "
                                       "role fleet-wide.")
        target.refresh_from_db()
        return Response(downgrade_body(target, job, created=created),
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class EmergencyRestoreView(DryRunMixin, APIView):
    """End a downgrade; like the downgrade, delivered by a job whose progress the body shows."""

    permission_classes = [RolePermission]
    required_permissions = {"POST": ["nodeconfig.downgrade_configtarget"]}
    scoped_rules = True  # the downgrade itself is checked: a scoped operator restores their clusters'

    @extend_schema(request=ReasonSerializer, responses={200: ConfigTargetSerializer})
    def post(self, request, pk: int):
        target = get_object_or_404(restrict(ConfigTarget.objects.filter(emergency=True), request.user), pk=pk)
        if not may(request.user, "downgrade", target):
            raise PermissionDenied("You may not restore this downgrade.")
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = services.restore_downgrade(target, reason=body.validated_data["reason"])
        target.refresh_from_db()
        return Response(downgrade_body(target, job or services.latest_delivery(target)))
