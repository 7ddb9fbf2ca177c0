"""Scheduling REST API (Part A): thin viewsets over ``scheduling.services`` on the core base
(permissions, ETag/If-Match, the one error body, revisions/diff/rollback), plus the import,
export, render preview, placement simulator and webhook configuration endpoints."""

from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.downloads import YAML_RESPONSE, yaml_download
from core.api.viewsets import DryRunMixin, MeridianModelViewSet, RevisionsMixin
from core.errors import Refused
from core.permissions import RolePermission
from fleet.api import webhooks as fleet_webhooks

from .. import schedconfig, services, webhook, whatif_inventory
from ..filtersets import (
    NodeSchedulerConfigFilterSet,
    PodSchedulerConfigFilterSet,
    SchedulerConfigBindingFilterSet,
    SchedulingPolicyFilterSet,
)
from ..models import NodeSchedulerConfig, PodSchedulerConfig, SchedulerConfigBinding, SchedulingPolicy
from .serializers import (
    SchedulingImportSerializer,
    NodeSchedulerConfigRevisionSerializer,
    NodeSchedulerConfigSerializer,
    PodInputSerializer,
    PodSchedulerConfigRevisionSerializer,
    PodSchedulerConfigSerializer,
    SchedulerConfigBindingRevisionSerializer,
    SchedulerConfigBindingSerializer,
    SchedulerConfigBindingWriteSerializer,
    SchedulerTemplateWriteSerializer,
    SchedulingPolicyRevisionSerializer,
    SchedulingPolicySerializer,
    SchedulingPolicyWriteSerializer,
    SimulateSerializer,
)

NAME_REGEX = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"


def _merged(current: dict, body) -> dict:
    """PUT and PATCH both change what they name; the rest stays as it is."""
    return current | (dict(body) if isinstance(body, dict) else {})


class SchedulingPolicyViewSet(RevisionsMixin, MeridianModelViewSet):
    """Scheduling policies: plugins, weights and args of the one scheduler, versioned; a pod picks
    one with ``sched.cloud.ctrip.com/policy`` (or ``scheduling.meridian.io/policy``)."""

    queryset = SchedulingPolicy.objects.select_related("revision")
    serializer_class = SchedulingPolicySerializer
    write_serializer_class = SchedulingPolicyWriteSerializer
    revision_serializer_class = SchedulingPolicyRevisionSerializer
    filterset_class = SchedulingPolicyFilterSet
    lookup_field = "name"
    lookup_value_regex = NAME_REGEX
    ordering_fields = ["name", "updated"]

    def perform_create(self, data):
        spec = services.PolicySpec(data["name"], data["description"], data["config"], data["is_default"])
        return services.save_policy(spec, reason=data["reason"])[0]

    def update(self, request, *args, **kwargs):
        policy = self.get_object()
        data = self.valid(SchedulingPolicyWriteSerializer, _merged(
            {"name": policy.name, "description": policy.description, "config": policy.config,
             "is_default": policy.is_default}, request.data))
        spec = services.PolicySpec(data["name"], data["description"], data["config"], data["is_default"])
        return self.respond(services.save_policy(spec, reason=data["reason"], instance=policy)[0])

    def perform_destroy(self, obj, *, reason=""):
        services.delete_policy(obj, reason=reason)

    def perform_rollback(self, obj, number, reason):
        return services.rollback_policy(obj, number, reason=reason)


class TemplateViewSetBase(RevisionsMixin, MeridianModelViewSet):
    """Affinity templates (upstream kinds) with their ``{{.X}}`` placeholders; every change is
    validated by ``schedconfig.validate_template``, versioned and audited."""

    write_serializer_class = SchedulerTemplateWriteSerializer
    lookup_field = "name"
    lookup_value_regex = NAME_REGEX
    ordering_fields = ["name", "updated"]

    def perform_create(self, data):
        return services.save_template(self.queryset.model.KIND, data["name"], data["spec"], description=data["description"],
                                      reason=data["reason"], expect_new=True)[0]

    def update(self, request, *args, **kwargs):
        row = self.get_object()
        data = self.valid(SchedulerTemplateWriteSerializer, _merged(
            {"name": row.name, "description": row.description, "spec": row.spec}, request.data))
        return self.respond(services.save_template(row.KIND, data["name"], data["spec"], description=data["description"],
                                                   reason=data["reason"], instance=row)[0])

    def perform_destroy(self, obj, *, reason=""):
        services.delete_spec(obj, reason=reason)

    def perform_rollback(self, obj, number, reason):
        return services.rollback_spec(obj, number, reason=reason)


class NodeSchedulerConfigViewSet(TemplateViewSetBase):
    queryset = NodeSchedulerConfig.objects.select_related("revision")
    serializer_class = NodeSchedulerConfigSerializer
    filterset_class = NodeSchedulerConfigFilterSet
    revision_serializer_class = NodeSchedulerConfigRevisionSerializer


class PodSchedulerConfigViewSet(TemplateViewSetBase):
    queryset = PodSchedulerConfig.objects.select_related("revision")
    serializer_class = PodSchedulerConfigSerializer
    filterset_class = PodSchedulerConfigFilterSet
    revision_serializer_class = PodSchedulerConfigRevisionSerializer


class SchedulerConfigBindingViewSet(RevisionsMixin, MeridianModelViewSet):
    """Bindings of pod classes to templates and arguments; a binding whose template does not
    exist or does not render with its args is refused when saved, not at admission."""

    queryset = SchedulerConfigBinding.objects.select_related("revision")
    serializer_class = SchedulerConfigBindingSerializer
    write_serializer_class = SchedulerConfigBindingWriteSerializer
    revision_serializer_class = SchedulerConfigBindingRevisionSerializer
    filterset_class = SchedulerConfigBindingFilterSet
    ordering_fields = ["name", "namespace", "updated"]

    def perform_create(self, data):
        return services.save_binding(data["name"], data["namespace"] or "", data["spec"], description=data["description"],
                                     reason=data["reason"], expect_new=True)[0]

    def update(self, request, *args, **kwargs):
        row = self.get_object()
        data = self.valid(SchedulerConfigBindingWriteSerializer, _merged(
            {"name": row.name, "namespace": row.namespace, "description": row.description, "spec": row.spec}, request.data))
        return self.respond(services.save_binding(data["name"], data["namespace"] or "", data["spec"],
                                                  description=data["description"], reason=data["reason"], instance=row)[0])

    def perform_destroy(self, obj, *, reason=""):
        services.delete_spec(obj, reason=reason)

    def perform_rollback(self, obj, number, reason):
        return services.rollback_spec(obj, number, reason=reason)


class ImportView(DryRunMixin, APIView):
    """Create or update NodeSchedulerConfigs, PodSchedulerConfigs and SchedulerConfigBindings from
    upstream YAML (``sched.cloud.ctrip.com/v1``, one or more documents): all or nothing; a
    refusal is 400 with the one error body, each problem under ``document N: <field>``."""

    permission_classes = [RolePermission]
    required_permissions = {"POST": ["scheduling.add_nodeschedulerconfig", "scheduling.change_nodeschedulerconfig",
                                     "scheduling.add_podschedulerconfig", "scheduling.change_podschedulerconfig",
                                     "scheduling.add_schedulerconfigbinding", "scheduling.change_schedulerconfigbinding"]}

    @extend_schema(request=SchedulingImportSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request):
        body = SchedulingImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        results, warnings = services.import_manifests(body.validated_data["yaml"], reason=body.validated_data["reason"])
        return Response({"objects": [{"kind": r.kind, "name": r.name, "namespace": r.namespace or None, "id": r.id,
                                      "changed": r.changed} for r in results], "warnings": warnings})


class ExportView(APIView):
    """Every template and binding as upstream YAML documents (a file download); ``kind`` filters."""

    permission_classes = [RolePermission]
    required_permissions = {"GET": ["scheduling.view_nodeschedulerconfig", "scheduling.view_podschedulerconfig",
                                    "scheduling.view_schedulerconfigbinding"]}

    @extend_schema(parameters=[OpenApiParameter("kind", str, many=True)], responses=YAML_RESPONSE)
    def get(self, request):
        kinds = request.query_params.getlist("kind") or None
        known = (*services.TEMPLATE_MODELS, schedconfig.SCHEDULER_CONFIG_BINDING)
        for kind in kinds or ():
            if kind not in known:
                raise Refused("invalid", _("Unknown kind %(kind)s; one of %(kinds)s.") % {"kind": repr(kind), "kinds": ", ".join(known)},
                              field="kind")
        return yaml_download(services.export_yaml(kinds=kinds), "scheduling-configs.yaml")


class _PreviewAPIView(DryRunMixin, APIView):
    """A POST that answers what would happen and commits nothing, so read-only tokens may call it
    (``core.permissions.is_preview``)."""

    permission_classes = [RolePermission]
    preview = True


class PreviewView(_PreviewAPIView):
    """What the mutating webhook would do to this pod now: the resolution explanation, the merged
    affinity, the JSONPatch, or the denial. Commits nothing."""

    required_permissions = {"POST": ["scheduling.add_schedulerconfigbinding"]}

    @extend_schema(request=PodInputSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request):
        body = PodInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(services.preview_pod(body.validated_data["pod"], namespace=body.validated_data["namespace"] or None))


class SimulateView(_PreviewAPIView):
    """N replicas of a pod placed under a policy (and a second one to compare) on a snapshot of a
    cluster's inventory: node per replica, per-node usage, unschedulable count with
    kube-scheduler's reasons, fragmentation and allocation rate. Commits nothing."""

    required_permissions = {"POST": ["scheduling.add_schedulingpolicy"]}

    @extend_schema(request=SimulateSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request):
        body = SimulateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        pod = data["pod"]
        if data["namespace"]:
            pod = {**pod, "metadata": {**(pod.get("metadata") or {}), "namespace": data["namespace"]}}
        return Response(whatif_inventory.run(data["cluster"], pod, data["replicas"], policy=data["policy"],
                                      compare_with=data["compare_with"]))


class WebhookConfigurationView(fleet_webhooks.WebhookConfigurationView):
    """The cluster's MutatingWebhookConfiguration with the AdmissionConfiguration and kubeconfig
    its API servers need (GET), or apply the webhook configuration through its connector (POST)."""

    webhook = webhook.CONFIGURATION
    configuration_key = "mutating_webhook_configuration"
