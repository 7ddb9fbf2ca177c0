from __future__ import annotations

from django.db.models import F
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api.pagination import LargeCursorPagination
from core.api.serializers import JobSerializer
from core.api.viewsets import MeridianModelViewSet, MeridianReadOnlyViewSet, ReasonSerializer
from core.permissions import RolePermission, may, token_may_write

from .. import services, tokens
from ..filtersets import ClusterFilterSet, NodeFilterSet, PodFilterSet, WorkloadFilterSet
from ..models import Cluster, ClusterToken, Node, Pod, Workload
from .serializers import (
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
#: What each method does to a cluster's tokens (``ClusterToken`` permissions).
TOKEN_ACTIONS = {"GET": "view", "POST": "add", "DELETE": "change"}


class ClusterViewSet(MeridianModelViewSet):
    """Member clusters, addressed by name: registration (the connection is tried first), sync,
    cordon / drain / uncordon, and the cluster's agent and webhook tokens."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    ordering_fields = ["name", "node_count", "cpu_requested_milli", "last_sync"]

    @extend_schema(parameters=[LABEL_SELECTOR_PARAM])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def perform_create(self, data):
        return services.register_cluster(data)

    def perform_update(self, obj, data, *, partial):
        return services.update_cluster(obj, data)

    def perform_destroy(self, obj, *, reason=""):
        services.delete_cluster(obj)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"], verb="sync")
    def sync(self, request, name=None):
        """Queue an inventory sync of this cluster now; returns the job."""
        job = services.request_sync(self.get_object())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ReasonSerializer, responses={200: ClusterSerializer})
    @action(detail=True, methods=["post"], verb="cordon")
    def cordon(self, request, name=None):
        """No new replicas go to this cluster; what runs there stays."""
        return self.respond(services.cordon(self.get_object(), reason=self.valid(ReasonSerializer)["reason"]))

    @extend_schema(request=ReasonSerializer, responses={200: ClusterSerializer})
    @action(detail=True, methods=["post"], verb="cordon")
    def drain(self, request, name=None):
        """Cordon and move this cluster's replicas to others, each workload within its rollout budget."""
        return self.respond(services.cordon(self.get_object(), drain=True, reason=self.valid(ReasonSerializer)["reason"]))

    @extend_schema(request=ReasonSerializer, responses={200: ClusterSerializer})
    @action(detail=True, methods=["post"], verb="cordon")
    def uncordon(self, request, name=None):
        """Take new replicas again (replicas drained away do not move back by themselves)."""
        return self.respond(services.uncordon(self.get_object(), reason=self.valid(ReasonSerializer)["reason"]))

    @extend_schema(methods=["get"], responses={200: ClusterTokenSerializer(many=True)})
    @extend_schema(methods=["post"], request=ClusterTokenRequestSerializer, responses={201: IssuedTokenSerializer})
    @action(detail=True, methods=["get", "post"], url_path="agent-tokens", pagination_class=None, filter_backends=[])
    def agent_tokens(self, request, name=None):
        """Node-agent tokens of this cluster: list them, or issue one (``rotate`` revokes the others)."""
        return self._tokens(request, ClusterToken.Kind.AGENT)

    @extend_schema(methods=["get"], responses={200: ClusterTokenSerializer(many=True)})
    @extend_schema(methods=["post"], request=ClusterTokenRequestSerializer, responses={201: IssuedTokenSerializer})
    @action(detail=True, methods=["get", "post"], url_path="webhook-tokens", pagination_class=None, filter_backends=[])
    def webhook_tokens(self, request, name=None):
        """Admission-webhook tokens of this cluster: list them, or issue one."""
        return self._tokens(request, ClusterToken.Kind.WEBHOOK)

    @extend_schema(request=None, responses={204: None, 404: None})
    @action(detail=True, methods=["delete"], url_path=r"(?P<kind>agent|webhook)-tokens/(?P<token_id>[0-9]+)")
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
        body = self.valid(ClusterTokenRequestSerializer)
        token, raw = tokens.issue_token(cluster, kind, name=body["name"], rotate=body["rotate"])
        token.token = raw
        return Response(IssuedTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    def get_permissions(self):
        if self.action in ("agent_tokens", "webhook_tokens", "revoke_token"):
            return [ClusterTokenPermission()]
        return super().get_permissions()


class ClusterTokenPermission(RolePermission):
    """Tokens are their own model: listing needs ``view_clustertoken``, issuing ``add``, revoking ``change``."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_active):
            return False
        action = TOKEN_ACTIONS.get(request.method)
        return bool(action) and may(user, action, ClusterToken) and (request.method == "GET" or token_may_write(request))

    def has_object_permission(self, request, view, obj) -> bool:
        return may(request.user, "view", obj)


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
