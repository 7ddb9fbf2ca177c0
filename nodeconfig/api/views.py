from __future__ import annotations

from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.pagination import LargeCursorPagination
from core.api.viewsets import MeridianModelViewSet, MeridianReadOnlyViewSet
from core.permissions import RolePermission

from .. import manifests, rollout, services
from ..filtersets import NodeConfigFilterSet, TargetFilterSet
from ..models import ConfigTarget, ConfigType, NodeConfig
from ..services import TargetRefused
from .serializers import (
    ConfigTypeSerializer,
    EmergencySerializer,
    ImportSerializer,
    NodeConfigSerializer,
    ReasonSerializer,
    RevisionSerializer,
    RollbackSerializer,
    TargetSerializer,
    TargetWriteSerializer,
)

MANAGE_ROLLOUT = ["nodeconfig.manage_rollout"]
CHANGE_TARGET = ["nodeconfig.change_configtarget"]


def refused(exc: TargetRefused) -> Response:
    body = exc.as_dict()
    if exc.field:
        body["field"] = exc.field
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class ConfigTypeViewSet(MeridianModelViewSet):
    """Config types (upstream KCC). Registering one needs no code change; admins only."""

    queryset = ConfigType.objects.all()
    serializer_class = ConfigTypeSerializer
    lookup_field = "name"
    lookup_value_regex = "[A-Za-z0-9]+"

    def perform_create(self, serializer):
        serializer.instance = services.save_config_type(serializer.validated_data)

    def perform_update(self, serializer):
        serializer.instance = services.save_config_type(serializer.validated_data, instance=serializer.instance)

    def destroy(self, request, *args, **kwargs):
        config_type = self.get_object()
        if config_type.targets.filter(deleted=False).exists():
            return Response({"code": "in_use", "detail": f"{config_type} still has targets; delete them first."},
                            status=status.HTTP_400_BAD_REQUEST)
        from core.audit import record_change, snapshot

        with transaction.atomic():
            record_change(config_type, "delete", before=snapshot(config_type))
            config_type.targets.all().delete()
            config_type.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class TargetViewSet(MeridianModelViewSet):
    """Config targets (upstream KCC Targets). Every change is validated, versioned and audited;
    a refused one answers 400 with ``{"code", "detail"}`` and changes nothing."""

    queryset = ConfigTarget.objects.select_related("config_type", "cluster", "revision")
    serializer_class = TargetSerializer
    filterset_class = TargetFilterSet
    ordering_fields = ["name", "priority", "matched_node_count", "updated"]

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        if self.action in ("list", "export") and "deleted" not in self.request.query_params:
            queryset = queryset.filter(deleted=False)  # deleted targets stay readable by id (history)
        return queryset

    def get_serializer_class(self):
        if self.action in ("create", "update", "partial_update", "preview"):
            return TargetWriteSerializer
        return super().get_serializer_class()

    def create(self, request, *args, **kwargs):
        body = TargetWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            target, created = services.save_target(body.validated_data["type"], body.spec(),
                                                   reason=body.validated_data["reason"], expect_new=True)
        except TargetRefused as exc:
            return refused(exc)
        return Response(TargetSerializer(target).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        target = self.get_object()
        if target.deleted:
            return Response({"code": "deleted", "detail": "This target is deleted; roll back to revive it."},
                            status=status.HTTP_400_BAD_REQUEST)
        current = services.spec_of(target)
        data = {"type": target.config_type.name, "name": target.name, "cluster": current.cluster,
                "node_label_selector": current.node_label_selector, "priority": current.priority,
                "node_names": list(current.node_names), "last_duration": current.last_duration, "config": current.config,
                "wave_size": current.wave_size, "wave_interval_seconds": current.wave_interval_seconds,
                "failure_threshold_percent": current.failure_threshold_percent}
        data.update({k: v for k, v in request.data.items()})
        body = TargetWriteSerializer(data=data)
        body.is_valid(raise_exception=True)
        if body.validated_data["type"] != target.config_type or body.validated_data["name"] != target.name:
            raise ValidationError({"name": "A target's type and name cannot change; create a new target."})
        try:
            target, _ = services.save_target(target.config_type, body.spec(), reason=body.validated_data["reason"],
                                             emergency=target.emergency)
        except TargetRefused as exc:
            return refused(exc)
        return Response(TargetSerializer(target).data)

    def destroy(self, request, *args, **kwargs):
        target = self.get_object()
        reason = request.data.get("reason", "") if hasattr(request.data, "get") else ""
        services.delete_target(target, reason=str(reason or request.query_params.get("reason", "")))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={200: RevisionSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def revisions(self, request, pk=None):
        """Every revision of this target, newest first."""
        return Response(RevisionSerializer(self.get_object().revisions.all(), many=True).data)

    @extend_schema(parameters=[OpenApiParameter("a", int, required=True), OpenApiParameter("b", int, required=True)])
    @action(detail=True, methods=["get"])
    def diff(self, request, pk=None):
        """What changed from revision ``a`` to revision ``b``."""
        target = self.get_object()
        numbers = {}
        for name in ("a", "b"):
            try:
                numbers[name] = int(request.query_params.get(name, ""))
            except ValueError:
                raise ValidationError({name: "A revision number is required."}) from None
        revisions = {r.number: r for r in target.revisions.filter(number__in=numbers.values())}
        for name, number in numbers.items():
            if number not in revisions:
                raise ValidationError({name: f"{target} has no revision {number}."})
        a, b = revisions[numbers["a"]], revisions[numbers["b"]]
        return Response({"a": numbers["a"], "b": numbers["b"], "changes": services.diff_revisions(a, b)})

    @extend_schema(request=RollbackSerializer, responses={201: RevisionSerializer})
    @action(detail=True, methods=["post"], action_permissions=CHANGE_TARGET)
    def rollback(self, request, pk=None):
        """A new revision equal to an old one; the reason is recorded."""
        body = RollbackSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            revision = services.rollback_target(self.get_object(), body.validated_data["revision"],
                                                reason=body.validated_data["reason"])
        except TargetRefused as exc:
            return refused(exc)
        return Response(RevisionSerializer(revision).data, status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["get"])
    def progress(self, request, pk=None):
        """Nodes targeted / delivered / applied / failed / pending / held for the current revision."""
        return Response(rollout.progress(self.get_object()))

    @extend_schema(request=ReasonSerializer)
    @action(detail=True, methods=["post"], action_permissions=MANAGE_ROLLOUT)
    def pause(self, request, pk=None):
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        target = services.set_paused(self.get_object(), True, reason=body.validated_data["reason"])
        return Response(TargetSerializer(target).data)

    @extend_schema(request=ReasonSerializer)
    @action(detail=True, methods=["post"], action_permissions=MANAGE_ROLLOUT)
    def resume(self, request, pk=None):
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        target = rollout.resume(self.get_object(), reason=body.validated_data["reason"])
        target.refresh_from_db()
        return Response(TargetSerializer(target).data)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"], action_permissions=MANAGE_ROLLOUT)
    def advance(self, request, pk=None):
        """Release the next wave now."""
        return Response(rollout.advance_rollout(self.get_object(), force=True))

    @extend_schema(request=ReasonSerializer)
    @action(detail=True, methods=["post"], action_permissions=MANAGE_ROLLOUT)
    def promote(self, request, pk=None):
        """Release every held node now."""
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(rollout.promote(self.get_object(), reason=body.validated_data["reason"]))

    @action(detail=False, methods=["post"])
    def preview(self, request):
        """Which nodes a target would match now and which targets it would conflict with; saves nothing."""
        body = TargetWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(services.preview(body.validated_data["type"], body.spec()))

    @extend_schema(request=ImportSerializer)
    @action(detail=False, methods=["post"], url_path="import", action_permissions=["nodeconfig.add_configtarget",
                                                                                 "nodeconfig.change_configtarget"])
    def import_yaml(self, request):
        """Create or update targets from upstream YAML (one or more documents); all or nothing."""
        body = ImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            results = services.import_manifests(body.validated_data["yaml"], reason=body.validated_data["reason"])
        except manifests.ManifestError as exc:
            return Response({"code": "manifest_invalid", "detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        except TargetRefused as exc:
            return refused(exc)
        return Response({"targets": [{"id": t.pk, "type": t.config_type.name, "name": t.name, "created": created}
                                     for t, created in results]})

    @extend_schema(parameters=[OpenApiParameter("type", str)], responses={200: str})
    @action(detail=False, methods=["get"])
    def export(self, request):
        """Live targets as upstream YAML documents."""
        queryset = self.filter_queryset(self.get_queryset()).filter(deleted=False)
        text = manifests.dump_manifests([services.manifest_of(t) for t in queryset])
        return HttpResponse(text, content_type="application/yaml")

    @action(detail=True, methods=["get"])
    def manifest(self, request, pk=None):
        return HttpResponse(manifests.dump_manifests([services.manifest_of(self.get_object())]),
                            content_type="application/yaml")


class NodeConfigViewSet(MeridianReadOnlyViewSet):
    """What each node runs per config type, and what its agent last reported."""

    queryset = NodeConfig.objects.select_related("node", "cluster", "config_type", "matched_target", "target", "revision")
    serializer_class = NodeConfigSerializer
    filterset_class = NodeConfigFilterSet
    pagination_class = LargeCursorPagination
    ordering_fields: list[str] = []


class EmergencyDowngradeView(APIView):
    """The emergency downgrade: reclaim off now for the fleet, a cluster or a label scope."""

    permission_classes = [RolePermission]
    required_permissions = {"GET": ["nodeconfig.view_configtarget"], "POST": ["nodeconfig.emergency_downgrade"]}

    @extend_schema(responses={200: TargetSerializer(many=True)})
    def get(self, request):
        active = ConfigTarget.objects.filter(emergency=True, deleted=False).select_related("config_type", "cluster", "revision")
        return Response([TargetSerializer(t).data | {"progress": rollout.progress(t)} for t in active])

    @extend_schema(request=EmergencySerializer, responses={201: TargetSerializer, 200: TargetSerializer})
    def post(self, request):
        body = EmergencySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            target, created = services.emergency_downgrade(cluster=body.validated_data.get("cluster") or None,
                                                           selector=body.validated_data["selector"],
                                                           reason=body.validated_data["reason"])
        except TargetRefused as exc:
            return refused(exc)
        return Response(TargetSerializer(target).data | {"created": created},
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class EmergencyRestoreView(APIView):
    permission_classes = [RolePermission]
    required_permissions = {"POST": ["nodeconfig.emergency_downgrade"]}

    @extend_schema(request=ReasonSerializer, responses={204: None})
    def post(self, request, pk: int):
        target = get_object_or_404(ConfigTarget, pk=pk, emergency=True)
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if not body.validated_data["reason"].strip():
            raise ValidationError({"reason": "Say why the downgrade ends."})
        services.restore_downgrade(target, reason=body.validated_data["reason"])
        return Response(status=status.HTTP_204_NO_CONTENT)
