"""Configuration as code over REST: ``POST /api/v1/apply/``, ``POST /api/v1/delete/`` and
``GET /api/v1/export/`` for ``meridian.io/v1`` documents (``core.documents``).

``?dry_run=true`` on apply or delete runs everything and keeps nothing (``DryRunMixin``):
the answer's per-document ``action`` and ``changes`` are the server-side diff that
``meridian diff`` prints.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import documents
from ..permissions import RolePermission, may_any_or_role
from .viewsets import DryRunMixin, dry_run_asked


class DocumentsRequestSerializer(serializers.Serializer):
    documents = serializers.ListField(child=serializers.JSONField(), allow_empty=False, max_length=documents.MAX_DOCUMENTS,
                                      help_text="meridian.io/v1 documents: apiVersion, kind, metadata, spec.")
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000,
                                   help_text="Recorded on every revision and audit entry the request makes.")


class DocumentResultSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The document's place in the request.")
    kind = serializers.CharField()
    name = serializers.CharField()
    namespace = serializers.CharField(allow_null=True)
    action = serializers.ChoiceField(choices=["created", "configured", "unchanged", "deleted", "absent"])
    resourceVersion = serializers.CharField(allow_null=True)  # noqa: N815 - the document's own spelling
    changes = serializers.ListField(child=serializers.DictField(), help_text="{path, op, old, new} per changed field.")


class DocumentsResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    results = DocumentResultSerializer(many=True)


class DocumentsPermission(RolePermission):
    """A writing token of a user who may make such a change to some configurable kind (so a
    viewer is refused before the body is read); each document is then checked against the
    caller's permission on its own object."""

    def has_permission(self, request, view) -> bool:
        if not super().has_permission(request, view):
            return False
        return any(may_any_or_role(request.user, action, kind.model)
                   for kind in documents.kinds() for action in view.actions)


class _DocumentsView(DryRunMixin, APIView):
    permission_classes = [DocumentsPermission]
    required_permissions: dict[str, list[str]] = {"POST": []}
    #: What the caller must be allowed on some kind to get past the door.
    actions: tuple[str, ...] = ("add", "change")
    #: core.documents.apply_documents or delete_documents.
    run = staticmethod(documents.apply_documents)

    @extend_schema(request=DocumentsRequestSerializer, responses={200: DocumentsResultSerializer},
                   parameters=[OpenApiParameter("dry_run", str, enum=["true", "false"],
                                                description="Validate and compute the changes; store nothing.")])
    def post(self, request):
        body = DocumentsRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        results = self.run(body.validated_data["documents"], user=request.user, reason=body.validated_data["reason"])
        return Response({"dry_run": dry_run_asked(request.query_params), "results": results})


class ApplyView(_DocumentsView):
    """Create or update what ``meridian.io/v1`` documents describe: all or nothing, in dependency
    order. A document equal to its object is ``unchanged`` (no revision, no audit entry); a
    stale ``metadata.resourceVersion`` is refused (412) and nothing is written."""

    run = staticmethod(documents.apply_documents)


class DeleteView(_DocumentsView):
    """Delete what ``meridian.io/v1`` documents name: all or nothing, children before parents;
    an object that is not there is reported ``absent``."""

    actions = ("delete",)
    run = staticmethod(documents.delete_documents)


class ExportView(APIView):
    """The whole configuration the caller may view, as ``meridian.io/v1`` documents in apply
    order (clusters without their credentials); ``kind`` narrows it."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=[OpenApiParameter("kind", str, many=True, description="Only these kinds.")],
                   responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        only = request.query_params.getlist("kind")
        return Response({"apiVersion": documents.API_VERSION, "kinds": [k.kind for k in documents.kinds()],
                         "documents": documents.export_documents(user=request.user, only=only)})
