from __future__ import annotations

from django.db.models import F
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api.pagination import LargeCursorPagination
from core.api.serializers import JobSerializer
from core.api.viewsets import MeridianModelViewSet, MeridianReadOnlyViewSet

from .. import services, tokens
from ..filtersets import ClusterFilterSet, NodeFilterSet, PodFilterSet, WorkloadFilterSet
from ..models import Cluster, ClusterToken, Node, Pod, Workload
from .serializers import (
    ClusterRegistrationSerializer,
    ClusterSerializer,
    ClusterTokenSerializer,
    IssuedTokenSerializer,
    NodeSerializer,
    PodSerializer,
    ClusterTokenRequestSerializer,
    WorkloadSerializer,
)

LABEL_SELECTOR_PARAM = OpenApiParameter(
    "labelSelector", str, description="Kubernetes label selector, e.g. `machineModel in (A3,A4),diskMode=hdd,!drained`"
)
MANAGE_TOKENS = ["fleet.manage_tokens"]


class ClusterViewSet(MeridianModelViewSet):
    """Member clusters. Registering one tries its connection first; a cluster is addressed by name."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    ordering_fields = ["name", "node_count", "cpu_requested_milli", "last_sync"]

    def get_serializer_class(self):
        return ClusterRegistrationSerializer if self.action == "create" else super().get_serializer_class()

    @extend_schema(parameters=[LABEL_SELECTOR_PARAM])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def perform_create(self, serializer):
        serializer.instance = services.register_cluster(Cluster(**serializer.validated_data))

    def perform_update(self, serializer):
        changes = dict(serializer.validated_data)
        if "kubeconfig" in changes:
            changes["credentials"] = changes.pop("kubeconfig")
        serializer.instance = services.update_cluster(serializer.instance, changes)

    def perform_destroy(self, instance):
        services.delete_cluster(instance)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"], action_permissions=["fleet.sync_cluster"])
    def sync(self, request, name=None):
        """Queue an inventory sync of this cluster now; returns the job."""
        job = services.request_sync(self.get_object())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(methods=["get"], responses={200: ClusterTokenSerializer(many=True)})
    @extend_schema(methods=["post"], request=ClusterTokenRequestSerializer, responses={201: IssuedTokenSerializer})
    @action(detail=True, methods=["get", "post"], url_path="agent-tokens", action_permissions=MANAGE_TOKENS)
    def agent_tokens(self, request, name=None):
        """Node-agent tokens of this cluster: list them, or issue one (``rotate`` revokes the others)."""
        return self._tokens(request, ClusterToken.Kind.AGENT)

    @extend_schema(methods=["get"], responses={200: ClusterTokenSerializer(many=True)})
    @extend_schema(methods=["post"], request=ClusterTokenRequestSerializer, responses={201: IssuedTokenSerializer})
    @action(detail=True, methods=["get", "post"], url_path="webhook-tokens", action_permissions=MANAGE_TOKENS)
    def webhook_tokens(self, request, name=None):
        """Admission-webhook tokens of this cluster: list them, or issue one."""
        return self._tokens(request, ClusterToken.Kind.WEBHOOK)

    @extend_schema(request=None, responses={204: None, 404: None})
    @action(detail=True, methods=["delete"], url_path=r"(?P<kind>agent|webhook)-tokens/(?P<token_id>[0-9]+)",
            action_permissions=MANAGE_TOKENS)
    def revoke_token(self, request, name=None, kind=None, token_id=None):
        """Revoke one token."""
        token = get_object_or_404(ClusterToken, pk=token_id, cluster=self.get_object(), kind=kind)
        tokens.revoke_token(token)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _tokens(self, request, kind: str):
        cluster = self.get_object()
        if request.method == "GET":
            listed = ClusterToken.objects.filter(cluster=cluster, kind=kind)
            return Response(ClusterTokenSerializer(listed, many=True).data)
        body = ClusterTokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, raw = tokens.issue_token(cluster, kind, name=body.validated_data["name"], rotate=body.validated_data["rotate"])
        token.token = raw
        return Response(IssuedTokenSerializer(token).data, status=status.HTTP_201_CREATED)


class InventoryViewSet(MeridianReadOnlyViewSet):
    """Base of the node/workload/pod lists: cursor pages, the cluster's name without a join per row."""

    pagination_class = LargeCursorPagination
    ordering_fields: list[str] = []

    def get_queryset(self):
        return super().get_queryset().annotate(cluster_name=F("cluster__name"))


@extend_schema(parameters=[LABEL_SELECTOR_PARAM])
class NodeViewSet(InventoryViewSet):
    """Nodes of every cluster; filter by ``cluster`` and ``labelSelector``."""

    queryset = Node.objects.all()
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet


@extend_schema(parameters=[LABEL_SELECTOR_PARAM])
class WorkloadViewSet(InventoryViewSet):
    queryset = Workload.objects.all()
    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilterSet


@extend_schema(parameters=[LABEL_SELECTOR_PARAM])
class PodViewSet(InventoryViewSet):
    queryset = Pod.objects.all()
    serializer_class = PodSerializer
    filterset_class = PodFilterSet
