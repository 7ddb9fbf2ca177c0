"""Scheduling API serializers (Part A): read shapes with ETags, write bodies validated by services."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core import concurrency

from .. import models


class ETagMixin(serializers.Serializer):
    etag = serializers.SerializerMethodField()
    revision = serializers.IntegerField(source="revision.number", read_only=True, default=None)

    def get_etag(self, obj) -> str:
        """What to send as ``If-Match`` (the ETag header of a GET says the same)."""
        return concurrency.etag(obj)


class SchedulingPolicySerializer(ETagMixin, serializers.ModelSerializer):
    class Meta:
        model = models.SchedulingPolicy
        fields = ["id", "name", "description", "config", "is_default", "revision", "etag", "created", "updated"]
        read_only_fields = fields


class SchedulingPolicyWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=63)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
    config = serializers.JSONField(required=False, default=dict)
    is_default = serializers.BooleanField(required=False, default=False)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class SchedulingPolicyRevisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = models.SchedulingPolicyRevision
        fields = ["number", "action", "description", "config", "rollback_of", "reason", "created_by", "created"]
        read_only_fields = fields


class TemplateSerializerBase(ETagMixin, serializers.ModelSerializer):
    kind = serializers.CharField(source="KIND", read_only=True)
    placeholders = serializers.SerializerMethodField()

    def get_placeholders(self, obj) -> list[str]:
        from ..services import as_template

        try:
            return sorted(as_template(obj).placeholders)
        except ValueError:
            return []


class NodeSchedulerConfigSerializer(TemplateSerializerBase):
    class Meta:
        model = models.NodeSchedulerConfig
        fields = ["id", "kind", "name", "description", "spec", "placeholders", "revision", "etag", "created", "updated"]
        read_only_fields = fields


class PodSchedulerConfigSerializer(TemplateSerializerBase):
    class Meta:
        model = models.PodSchedulerConfig
        fields = NodeSchedulerConfigSerializer.Meta.fields
        read_only_fields = fields


class SchedulerTemplateWriteSerializer(serializers.Serializer):
    """A template as upstream writes it: ``name`` and ``spec`` (string leaves may hold ``{{.X}}``)."""

    name = serializers.CharField(max_length=253)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
    spec = serializers.JSONField()
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class SpecRevisionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    action = serializers.CharField()
    description = serializers.CharField()
    spec = serializers.JSONField(source="body")
    rollback_of = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
    created_by = serializers.CharField()
    created = serializers.DateTimeField()


class NodeSchedulerConfigRevisionSerializer(SpecRevisionSerializer):
    class Meta:
        model = models.NodeSchedulerConfigRevision


class PodSchedulerConfigRevisionSerializer(SpecRevisionSerializer):
    class Meta:
        model = models.PodSchedulerConfigRevision


class SchedulerConfigBindingRevisionSerializer(SpecRevisionSerializer):
    class Meta:
        model = models.SchedulerConfigBindingRevision


class SchedulerConfigBindingSerializer(ETagMixin, serializers.ModelSerializer):
    class Meta:
        model = models.SchedulerConfigBinding
        fields = ["id", "name", "namespace", "description", "spec", "revision", "etag", "created", "updated"]
        read_only_fields = fields


class SchedulerConfigBindingWriteSerializer(serializers.Serializer):
    """A binding as upstream writes it: ``name``, optional ``namespace`` and the ``spec``."""

    name = serializers.CharField(max_length=253)
    namespace = serializers.CharField(required=False, allow_blank=True, allow_null=True, default="", max_length=63)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
    spec = serializers.JSONField()
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class SchedulingImportSerializer(serializers.Serializer):
    yaml = serializers.CharField(max_length=5_000_000, trim_whitespace=False)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class PodInputSerializer(serializers.Serializer):
    """A pod as JSON (``pod``) or as YAML/JSON text (``yaml``)."""

    pod = serializers.JSONField(required=False)
    yaml = serializers.CharField(required=False, allow_blank=False, max_length=1_000_000, trim_whitespace=False)
    namespace = serializers.CharField(required=False, allow_blank=True, default="", max_length=63)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        from ..forms import parse_pod

        if "pod" not in attrs and "yaml" not in attrs:
            raise serializers.ValidationError({"pod": ["Give the pod as JSON (pod) or as YAML text (yaml)."]})
        if "pod" not in attrs:
            try:
                attrs["pod"] = parse_pod(attrs["yaml"])
            except ValueError as exc:
                raise serializers.ValidationError({"yaml": [str(exc)]}) from exc
        if not isinstance(attrs["pod"], dict):
            raise serializers.ValidationError({"pod": ["The pod must be an object."]})
        return attrs


class SimulateSerializer(PodInputSerializer):
    cluster = serializers.CharField(max_length=63)
    replicas = serializers.IntegerField(min_value=1, max_value=5000, default=10)
    policy = serializers.CharField(required=False, allow_blank=True, default="", max_length=63,
                                   help_text="Empty: the pod's policy annotation, else the default policy.")
    compare_with = serializers.CharField(required=False, allow_blank=True, default="", max_length=63,
                                         help_text="A second policy run on the same snapshot.")
