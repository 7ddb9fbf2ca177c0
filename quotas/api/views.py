from __future__ import annotations

from django.db.models import Prefetch
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from core.api.viewsets import MeridianModelViewSet, MeridianReadOnlyViewSet, RevisionsMixin
from core.errors import Refused
from core.permissions import may
from fleet.api import webhooks as fleet_webhooks

from .. import services, webhook
from ..models import QuotaCharge, QuotaGroup
from .serializers import (
    ChargeSerializer,
    CheckSerializer,
    MoveSerializer,
    QuotaGroupRevisionSerializer,
    QuotaGroupSerializer,
    QuotaGroupUpdateSerializer,
    QuotaGroupWriteSerializer,
)


def decision_body(decision: services.Decision) -> dict:
    return {"allowed": decision.allowed, "message": decision.message, "group": decision.group,
            "delta": decision.delta, "warnings": decision.warnings}


class QuotaGroupViewSet(RevisionsMixin, MeridianModelViewSet):
    """Quota groups (bizrq BizGroupResourceQuota). Tree rules are enforced on every write; a
    refused change answers 400 naming the field and changes nothing. Owners manage their
    subtree (object constraints of ``core.permissions``), operators and admins the whole tree."""

    queryset = QuotaGroup.objects.select_related("parent").prefetch_related("owners", Prefetch("children", to_attr="child_rows"))
    serializer_class = QuotaGroupSerializer
    revision_serializer_class = QuotaGroupRevisionSerializer
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

    @extend_schema(request=QuotaGroupWriteSerializer, responses={201: QuotaGroupSerializer})
    def create(self, request, *args, **kwargs):
        data = self.valid(QuotaGroupWriteSerializer)
        parent = QuotaGroup.objects.filter(name=data["parent"]).first() if data["parent"] else None
        if data["parent"] and parent is None:
            raise Refused("unknown_parent", _('The parent quota group "%(name)s" does not exist.') % {"name": data["parent"]},
                          field="parent")
        if not may(request.user, "add", parent if parent is not None else QuotaGroup):
            where = f'under "{parent.name}"' if parent else "at the root"
            raise PermissionDenied(f"You may not add quota groups {where}: it is outside the subtrees you manage.")
        group = services.create_group(name=data["name"], parent=data["parent"] or None, hard=data["hard"],
                                      description=data["description"], owners=data["owners"], reason=data["reason"])
        return self.respond(group, status.HTTP_201_CREATED)

    @extend_schema(request=QuotaGroupUpdateSerializer, responses={200: QuotaGroupSerializer})
    def update(self, request, *args, **kwargs):
        group = self.get_object()
        data = self.valid(QuotaGroupUpdateSerializer, partial=kwargs.get("partial", False))
        parent = data["parent"] if "parent" in data else ...
        group, warnings = services.update_group(group, hard=data.get("hard"), description=data.get("description"),
                                                owners=data.get("owners"), parent=parent, reason=data.get("reason", ""))
        return self.respond(group, extra={"warnings": warnings})

    def perform_destroy(self, obj, *, reason=""):
        services.delete_group(obj, reason=reason)

    def perform_rollback(self, obj, number, reason):
        return services.rollback_group(obj, number, reason=reason)

    @extend_schema(request=MoveSerializer, responses=QuotaGroupSerializer(many=True))
    @action(detail=True, methods=["post"], verb="change")
    def move(self, request, name=None):
        """Move part of this group's hard to a sibling, atomically."""
        source = self.get_object()
        data = self.valid(MoveSerializer)
        target = QuotaGroup.objects.filter(name=data["target"]).first()
        if target is None:
            raise Refused("unknown_target", _('No quota group named "%(name)s".') % {"name": data["target"]}, field="target")
        if not may(request.user, "change", target):
            raise PermissionDenied(f'You may not change "{target.name}": it is outside the subtrees you manage.')
        src, dst = services.move_quota(source, target, data["amount"], reason=data["reason"])
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
    @action(detail=False, methods=["post"], verb="add", preview=True)
    def check(self, request):
        """Would this workload be admitted now, as a new workload? Commits nothing."""
        data = self.valid(CheckSerializer)
        if data["group"] and not QuotaGroup.objects.filter(name=data["group"]).exists():
            raise Refused("unknown_group", _('No quota group named "%(name)s".') % {"name": data["group"]}, field="group")
        return Response(decision_body(services.what_if(data["workload"], group=data["group"] or None)))


class ChargeViewSet(MeridianReadOnlyViewSet):
    """The admission ledger: what each workload is charged, by admission or from the inventory."""

    queryset = QuotaCharge.objects.select_related("group", "cluster")
    serializer_class = ChargeSerializer
    filterset_fields = ["group__name", "cluster__name", "namespace", "kind", "source", "observed"]
    ordering_fields = ["admitted_at", "name"]


@extend_schema_view(get=extend_schema(parameters=[
    OpenApiParameter("include", str, enum=["admission-config"], description="admission-config: also the API server's files")]))
class WebhookConfigurationView(fleet_webhooks.WebhookConfigurationView):
    """The cluster's ``ValidatingWebhookConfiguration``: GET shows it (a preview: ``Warning``
    headers say what applying still needs; ``?include=admission-config`` wraps it with the API
    server's AdmissionConfiguration and kubeconfig for the Bearer token), POST applies it
    through the cluster's connector. A missing or placeholder URL is refused (400,
    ``base_url``); applying without a CA bundle is refused (400, ``ca_bundle``)."""

    webhook = webhook.CONFIGURATION
    configuration_key = "webhook_configuration"

    def body(self, request, shown):
        include = request.query_params.get("include", "")
        if include not in ("", "admission-config"):
            raise Refused("invalid", _("include takes admission-config."), field="include")
        return super().body(request, shown) if include else shown.configuration
