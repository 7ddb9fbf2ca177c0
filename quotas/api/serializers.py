from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core import concurrency

from ..models import QuotaCharge, QuotaGroup, QuotaGroupRevision


class QuotaGroupSerializer(serializers.ModelSerializer):
    """A group as Kubernetes would render it, status at top level in snake_case."""

    parent = serializers.SlugRelatedField(slug_field="name", read_only=True)
    owners = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    children = serializers.SerializerMethodField()
    etag = serializers.SerializerMethodField()

    class Meta:
        model = QuotaGroup
        fields = ["id", "name", "parent", "description", "owners", "hard", "used", "self_used", "last_reconcile_time",
                  "cash_exhausted", "version", "depth", "children", "etag", "created", "updated"]
        read_only_fields = fields

    def get_etag(self, obj: QuotaGroup) -> str:
        return concurrency.etag(obj)

    def get_children(self, obj: QuotaGroup) -> list[str]:
        rows = getattr(obj, "child_rows", None)
        return sorted(c.name for c in rows) if rows is not None else sorted(obj.children.values_list("name", flat=True))


class QuotaGroupWriteSerializer(serializers.Serializer):
    """Input only: the tree rules themselves live in ``services`` (same for API and UI)."""

    name = serializers.CharField(max_length=253)
    parent = serializers.CharField(max_length=253, allow_null=True, allow_blank=True, required=False, default=None)
    hard = serializers.DictField(child=serializers.JSONField(), allow_empty=False,
                                 help_text="Resource → quantity, e.g. {\"limits.cpu\": \"10\"}; at least one key.")
    description = serializers.CharField(max_length=500, allow_blank=True, required=False, default="")
    owners = serializers.ListField(child=serializers.CharField(max_length=150), required=False, default=list)
    reason = serializers.CharField(max_length=2000, allow_blank=True, required=False, default="")


class QuotaGroupUpdateSerializer(serializers.Serializer):
    parent = serializers.CharField(max_length=253, allow_null=True, allow_blank=True, required=False)
    hard = serializers.DictField(child=serializers.JSONField(), required=False)
    description = serializers.CharField(max_length=500, allow_blank=True, required=False)
    owners = serializers.ListField(child=serializers.CharField(max_length=150), required=False)
    reason = serializers.CharField(max_length=2000, allow_blank=True, required=False, default="")


class MoveSerializer(serializers.Serializer):
    target = serializers.CharField(max_length=253)
    amount = serializers.DictField(child=serializers.JSONField())
    reason = serializers.CharField(max_length=2000, allow_blank=True, required=False, default="")


class CheckSerializer(serializers.Serializer):
    """A workload manifest (JSON object) and optionally the group to check it against."""

    workload = serializers.JSONField()
    group = serializers.CharField(max_length=253, required=False, allow_blank=True, default="")

    def validate_workload(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be a workload object (Deployment, StatefulSet, Job, …).")
        return value


class QuotaGroupRevisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = QuotaGroupRevision
        fields = ["number", "action", "parent_name", "description", "hard", "owners", "rollback_of", "reason", "created_by",
                  "created"]
        read_only_fields = fields


class ChargeSerializer(serializers.ModelSerializer):
    group = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = QuotaCharge
        fields = ["id", "group", "cluster", "namespace", "kind", "api_version", "name", "replicas", "spec_replicas",
                  "hpa_max_replicas", "per_replica", "charge", "source", "observed", "admitted_at", "updated"]
        read_only_fields = fields
