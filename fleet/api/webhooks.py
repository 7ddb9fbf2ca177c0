"""The one REST endpoint shape behind ``/api/v1/quotas/webhook-configuration/{cluster}/`` and
``/api/v1/scheduling/webhook-configuration/{cluster}/``: each app names its
``fleet.webhooks.WebhookConfig`` and how its GET body looks; reading, validating, refusing
and applying are the same code (``fleet.webhooks``)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.viewsets import DryRunMixin
from core.errors import error_body
from core.permissions import RolePermission

from .. import webhooks
from ..connectors.base import ConnectorError
from ..models import Cluster


class WebhookConfigurationRequest(serializers.Serializer):
    base_url = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000,
                                     help_text="Meridian's https URL as the cluster's API server reaches it "
                                               "(default: MERIDIAN_PUBLIC_URL).")
    ca_bundle = serializers.CharField(required=False, allow_blank=True, default="", max_length=200_000, trim_whitespace=True,
                                      help_text="PEM certificates (or their base64) of the CA that signed Meridian's "
                                                "serving certificate; required to apply.")


class WebhookConfigurationView(DryRunMixin, APIView):
    """GET: the cluster's webhook configuration with the API server's token files, applied
    nowhere (``Warning`` headers say what applying still needs); POST: apply it through the
    cluster's connector (admins: ``fleet.change_cluster``). A missing or placeholder URL is
    refused (400, ``base_url``), applying without a CA bundle too (400, ``ca_bundle``); a
    cluster that refuses or cannot be reached answers 502."""

    permission_classes = [RolePermission]
    required_permissions = {"GET": ["fleet.view_cluster"], "POST": ["fleet.change_cluster"]}
    #: Applying writes to the member cluster, which no rollback undoes.
    dry_run_refused = frozenset({"POST"})
    webhook: ClassVar[webhooks.WebhookConfig]
    #: Where the configuration object goes in the GET body, beside the API server's files.
    configuration_key: ClassVar[str]

    def body(self, request: Request, shown: webhooks.Preview) -> dict[str, Any]:
        """The GET body: the configuration, the API server's files and what applying lacks."""
        return {self.configuration_key: shown.configuration, **shown.files, "missing": shown.missing}

    @extend_schema(parameters=[OpenApiParameter("base_url", str, description="Meridian's URL as the cluster reaches it"),
                               OpenApiParameter("ca_bundle", str, description="PEM (or base64) CA bundle")],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, cluster: str) -> Response:
        row = get_object_or_404(Cluster, name=cluster)
        params = _valid(request.query_params)
        shown = webhooks.preview(row, self.webhook, base_url=params["base_url"] or None, ca_bundle=params["ca_bundle"])
        warning = ", ".join(f'299 meridian "{field}: {" ".join(why)}"' for field, why in shown.missing.items())
        return Response(self.body(request, shown), headers={"Warning": warning} if warning else None)

    @extend_schema(request=WebhookConfigurationRequest, responses={200: OpenApiTypes.OBJECT, 502: OpenApiTypes.OBJECT})
    def post(self, request: Request, cluster: str) -> Response:
        row = get_object_or_404(Cluster, name=cluster)
        data = _valid(request.data)
        try:
            applied = webhooks.apply(row, self.webhook, base_url=data["base_url"] or None, ca_bundle=data["ca_bundle"])
        except ConnectorError as exc:
            return Response(error_body(exc.reason or "unreachable", str(exc)), status=status.HTTP_502_BAD_GATEWAY)
        return Response(applied)


def _valid(data: Any) -> dict[str, Any]:
    serializer = WebhookConfigurationRequest(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
