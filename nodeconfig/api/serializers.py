from __future__ import annotations


from rest_framework import serializers

from core import concurrency

from ..models import ConfigRevision, ConfigTarget, ConfigType, NodeConfig
from ..services import TargetSpec


class AllowedKeysSerializer(serializers.Serializer):
    priority = serializers.IntegerField()
    keyList = serializers.ListField(child=serializers.CharField(max_length=317), allow_empty=True)


class ConfigTypeSerializer(serializers.ModelSerializer):
    allowed_keys = AllowedKeysSerializer(many=True, required=False)
    gvr = serializers.CharField(read_only=True)
    warnings = serializers.SerializerMethodField()

    class Meta:
        model = ConfigType
        fields = ["id", "name", "group", "version", "resource", "gvr", "description", "allowed_keys", "schema",
                  "default_config", "default_hash", "warnings", "created", "updated"]
        read_only_fields = ["default_hash", "created", "updated"]

    def get_warnings(self, obj: ConfigType) -> list[str]:
        from ..validation import warnings_for

        return warnings_for({int(e.get("priority", 0)): list(e.get("keyList") or []) for e in obj.allowed_keys or []})

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        if "allowed_keys" in values:
            values["allowed_keys"] = [dict(entry) for entry in values["allowed_keys"]]
        return values


class ConfigTargetSerializer(serializers.ModelSerializer):
    """A target; writes go through ``services.save_target`` (validation, revision, audit)."""

    type = serializers.SlugRelatedField(source="config_type", slug_field="name", queryset=ConfigType.objects.all())
    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    mode = serializers.CharField(read_only=True)
    revision = serializers.IntegerField(source="revision.number", read_only=True, default=None)
    etag = serializers.SerializerMethodField()

    def get_etag(self, obj: ConfigTarget) -> str:
        """What to send as ``If-Match`` (the ETag header of a GET says the same)."""
        return concurrency.etag(obj)

    class Meta:
        model = ConfigTarget
        fields = ["id", "type", "name", "cluster", "mode", "node_label_selector", "priority", "node_names",
                  "last_duration", "config", "config_hash", "revision", "emergency", "expires_at", "deleted",
                  "wave_size", "wave_interval_seconds", "failure_threshold_percent", "paused", "rollout_state",
                  "rollout_message", "valid", "status_reason", "status_message", "matched_node_count",
                  "observed_revision", "etag", "created", "updated"]
        read_only_fields = fields


class ConfigTargetWriteSerializer(serializers.Serializer):
    """The contract fields of ``POST /api/v1/nodeconfig/targets/`` plus the rollout knobs."""

    type = serializers.SlugRelatedField(slug_field="name", queryset=ConfigType.objects.all())
    name = serializers.CharField(max_length=253)
    cluster = serializers.CharField(max_length=63, required=False, allow_null=True, allow_blank=True)
    node_label_selector = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")
    priority = serializers.IntegerField(required=False, default=0, min_value=-(2**31), max_value=2**31 - 1)
    node_names = serializers.ListField(child=serializers.CharField(max_length=253), required=False, default=list,
                                       max_length=100_000)
    last_duration = serializers.CharField(max_length=32, required=False, allow_blank=True, allow_null=True, default="")
    config = serializers.JSONField(required=False, default=dict)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    wave_size = serializers.CharField(max_length=16, required=False, allow_blank=True, default="")
    wave_interval_seconds = serializers.IntegerField(required=False, default=60, min_value=0, max_value=86400)
    failure_threshold_percent = serializers.IntegerField(required=False, default=10, min_value=0, max_value=100)

    @staticmethod
    def spec_from(data: dict) -> TargetSpec:
        return TargetSpec(name=data["name"], cluster=data.get("cluster") or None,
                          node_label_selector=data["node_label_selector"], priority=data["priority"],
                          node_names=tuple(data["node_names"]), last_duration=data.get("last_duration") or "",
                          config=data["config"], wave_size=data["wave_size"],
                          wave_interval_seconds=data["wave_interval_seconds"],
                          failure_threshold_percent=data["failure_threshold_percent"])


class ConfigRevisionSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster_name")

    class Meta:
        model = ConfigRevision
        fields = ["number", "action", "cluster", "node_label_selector", "priority", "node_names", "last_duration",
                  "config", "config_hash", "rollback_of", "reason", "created_by", "created"]
        read_only_fields = fields


class ImportSerializer(serializers.Serializer):
    yaml = serializers.CharField(max_length=5_000_000)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class NodeConfigSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name")
    cluster = serializers.CharField(source="cluster.name")
    type = serializers.CharField(source="config_type.name")
    matched_target = serializers.CharField(source="matched_target.name", default=None)
    target = serializers.CharField(source="target.name", default=None)
    revision = serializers.IntegerField(source="revision.number", default=None)
    state = serializers.CharField()

    class Meta:
        model = NodeConfig
        fields = ["id", "node", "cluster", "type", "matched_target", "target", "revision", "config_hash", "state",
                  "delivered_at", "applied_hash", "error", "reported_at"]
        read_only_fields = fields


class EmergencySerializer(serializers.Serializer):
    cluster = serializers.CharField(max_length=63, required=False, allow_null=True, allow_blank=True)
    selector = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")
    reason = serializers.CharField(max_length=2000)
    confirm = serializers.CharField(max_length=100, help_text="Type DOWNGRADE to confirm.")

    def validate_confirm(self, value: str) -> str:
        if value.strip() != "DOWNGRADE":
            raise serializers.ValidationError("Type DOWNGRADE to confirm the emergency downgrade.")
        return value
