from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.viewsets import MeridianModelViewSet, MeridianReadOnlyViewSet
from core.permissions import RolePermission, _token_may_write
from fleet.models import Cluster

from .. import services, webhook
from ..delegation import manages_anything, may_manage
from ..models import QuotaCharge, QuotaGroup
from ..services import QuotaRefused
from .serializers import (
    ChargeSerializer,
    CheckSerializer,
    MoveSerializer,
    QuotaGroupSerializer,
    QuotaGroupUpdateSerializer,
    QuotaGroupWriteSerializer,
    ReasonSerializer,
)


def refused(exc: QuotaRefused) -> Response:
    return Response(exc.as_dict(), status=status.HTTP_400_BAD_REQUEST)


def decision_body(decision: services.Decision) -> dict:
    return {"allowed": decision.allowed, "message": decision.message, "group": decision.group,
            "delta": decision.delta, "warnings": decision.warnings}


class QuotaTreePermission(RolePermission):
    """Reads need ``view_quotagroup``. Writes (and the what-if, like other previews) need a
    part of the tree to manage: the model permissions, or owning a group; which groups
    exactly is decided per request by ``delegation``."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return user.has_perm("quotas.view_quotagroup")
        is_check = getattr(view, "action", None) == "check"
        return (is_check or _token_may_write(request)) and manages_anything(user)


class QuotaGroupViewSet(MeridianModelViewSet):
    """Quota groups (bizrq BizGroupResourceQuota). Tree rules are enforced on every write; a
    refused change answers 400 naming the field and changes nothing."""

    queryset = QuotaGroup.objects.select_related("parent").prefetch_related("owners", Prefetch("children", to_attr="child_rows"))
    serializer_class = QuotaGroupSerializer
    permission_classes = [QuotaTreePermission]
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9.-]+"
    filterset_fields = ["parent__name", "depth"]
    search_fields = ["name", "description"]
    ordering_fields = ["name", "depth", "updated"]

    def get_queryset(self):
        queryset = super().get_queryset()
        parent = self.request.query_params.get("parent")
        if parent is not None:
            queryset = queryset.filter(parent__isnull=True) if parent in ("", "null") else queryset.filter(parent__name=parent)
        return queryset

    def _require(self, verb: str, group: QuotaGroup | None) -> None:
        if not may_manage(self.request.user, verb, group):
            where = f'under "{group.name}"' if verb == "add" and group else (f'"{group.name}"' if group else "at the root")
            raise PermissionDenied(f"You may not {verb} quota groups {where}: it is outside the subtrees you manage.")

    @extend_schema(request=QuotaGroupWriteSerializer, responses=QuotaGroupSerializer)
    def create(self, request, *args, **kwargs):
        data = self._valid(QuotaGroupWriteSerializer, request.data)
        parent = QuotaGroup.objects.filter(name=data["parent"]).first() if data["parent"] else None
        if data["parent"] and parent is None:
            return refused(QuotaRefused("unknown_parent", f'The parent quota group "{data["parent"]}" does not exist.', field="parent"))
        self._require("add", parent)
        try:
            group = services.create_group(name=data["name"], parent=data["parent"] or None, hard=data["hard"],
                                          description=data["description"], owners=data["owners"], reason=data["reason"])
        except QuotaRefused as exc:
            return refused(exc)
        return Response(QuotaGroupSerializer(group).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=QuotaGroupUpdateSerializer, responses=QuotaGroupSerializer)
    def update(self, request, *args, **kwargs):
        group = self.get_object()
        self._require("change", group)
        data = self._valid(QuotaGroupUpdateSerializer, request.data, partial=kwargs.get("partial", False))
        parent = data["parent"] if "parent" in data else ...
        try:
            group, warnings = services.update_group(group, hard=data.get("hard"), description=data.get("description"),
                                                    owners=data.get("owners"), parent=parent, reason=data.get("reason", ""))
        except QuotaRefused as exc:
            return refused(exc)
        return Response(QuotaGroupSerializer(group).data | {"warnings": warnings})

    def destroy(self, request, *args, **kwargs):
        group = self.get_object()
        self._require("delete", group)
        reason = self._valid(ReasonSerializer, request.data or {})["reason"]
        try:
            services.delete_group(group, reason=reason)
        except QuotaRefused as exc:
            return refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=MoveSerializer, responses=QuotaGroupSerializer(many=True))
    @action(detail=True, methods=["post"])
    def move(self, request, name=None):
        """Move part of this group's hard to a sibling, atomically."""
        source = self.get_object()
        data = self._valid(MoveSerializer, request.data)
        target = QuotaGroup.objects.filter(name=data["target"]).first()
        if target is None:
            return refused(QuotaRefused("unknown_target", f'No quota group named "{data["target"]}".', field="target"))
        self._require("change", source)
        self._require("change", target)
        try:
            src, dst = services.move_quota(source, target, data["amount"], reason=data["reason"])
        except QuotaRefused as exc:
            return refused(exc)
        return Response([QuotaGroupSerializer(src).data, QuotaGroupSerializer(dst).data])

    @extend_schema(responses=ChargeSerializer(many=True))
    @action(detail=True, methods=["get"])
    def workloads(self, request, name=None):
        """The workloads charged to this group (the admission ledger)."""
        group = self.get_object()
        charges = QuotaCharge.objects.filter(group=group).select_related("group", "cluster").order_by("-admitted_at")
        page = self.paginate_queryset(charges)
        return self.get_paginated_response(ChargeSerializer(page, many=True).data)

    @extend_schema(request=CheckSerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def check(self, request):
        """Would this workload be admitted now, as a new workload? Commits nothing."""
        data = self._valid(CheckSerializer, request.data)
        if data["group"] and not QuotaGroup.objects.filter(name=data["group"]).exists():
            return Response({"group": [f'No quota group named "{data["group"]}".']}, status=status.HTTP_400_BAD_REQUEST)
        return Response(decision_body(services.what_if(data["workload"], group=data["group"] or None)))

    def _valid(self, serializer_class, data, partial: bool = False) -> dict:
        serializer = serializer_class(data=data, partial=partial)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class ChargeViewSet(MeridianReadOnlyViewSet):
    """The admission ledger: what each workload is charged, by admission or from the inventory."""

    queryset = QuotaCharge.objects.select_related("group", "cluster")
    serializer_class = ChargeSerializer
    filterset_fields = ["group__name", "cluster__name", "namespace", "kind", "source", "observed"]
    ordering_fields = ["admitted_at", "name"]


class WebhookConfigurationView(APIView):
    """The cluster's ``ValidatingWebhookConfiguration`` (GET), or apply it through its connector (POST)."""

    permission_classes = [RolePermission]
    required_permissions = {"GET": ["fleet.view_cluster"], "POST": ["fleet.change_cluster"]}

    @extend_schema(parameters=[OpenApiParameter("base_url", str, description="Meridian's URL as the cluster reaches it")],
                   responses={200: dict})
    def get(self, request, cluster: str):
        row = get_object_or_404(Cluster, name=cluster)
        return Response(webhook.webhook_configuration(row, base_url=request.query_params.get("base_url") or None))

    @extend_schema(request={"application/json": {"type": "object", "properties": {"base_url": {"type": "string"}}}},
                   responses={200: dict, 502: dict})
    def post(self, request, cluster: str):
        from fleet.connectors.base import ConnectorError

        row = get_object_or_404(Cluster, name=cluster)
        base_url = (request.data or {}).get("base_url") if isinstance(request.data, dict) else None
        try:
            applied = webhook.apply_configuration(row, base_url=base_url or None)
        except ConnectorError as exc:
            return Response({"detail": str(exc), "reason": exc.reason}, status=status.HTTP_502_BAD_GATEWAY)
        from core.audit import record_change

        record_change(row, "update", verb="apply_quota_webhook", after={"name": webhook.CONFIGURATION_NAME})
        return Response(applied)
