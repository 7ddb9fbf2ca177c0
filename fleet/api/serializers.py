from __future__ import annotations

from rest_framework import serializers

from kube.labels import validate_label_key, validate_label_value

from ..connectors.base import ConnectorError
from ..models import Cluster, ClusterToken, Node, Pod, Workload
from ..services import check_connection
from ..simstore import spec_problems

TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}


def validate_labels(value):
    if not isinstance(value, dict):
        raise serializers.ValidationError("labels must be an object of key → value")
    problems = []
    for key, label_value in value.items():
        problems += [f"key {key!r}: {m}" for m in validate_label_key(key)]
        if not isinstance(label_value, str):
            problems.append(f"value of {key!r} must be a string")
        else:
            problems += [f"value of {key!r}: {m}" for m in validate_label_value(label_value)]
    if problems:
        raise serializers.ValidationError(problems)
    return value


def validate_taints(value):
    if not isinstance(value, list):
        raise serializers.ValidationError("taints must be a list of {key, value, effect}")
    problems = []
    for i, taint in enumerate(value):
        if not isinstance(taint, dict) or not isinstance(taint.get("key"), str):
            problems.append(f"[{i}]: a taint needs a string key")
            continue
        problems += [f"[{i}].key: {m}" for m in validate_label_key(taint["key"])]
        if taint.get("effect") not in TAINT_EFFECTS:
            problems.append(f"[{i}].effect must be one of {', '.join(sorted(TAINT_EFFECTS))}")
    if problems:
        raise serializers.ValidationError(problems)
    return value


class ClusterSerializer(serializers.ModelSerializer):
    labels = serializers.JSONField(required=False, validators=[validate_labels])
    taints = serializers.JSONField(required=False, validators=[validate_taints])
    kubeconfig = serializers.CharField(write_only=True, required=False, allow_blank=True, style={"base_template": "textarea.html"},
                                       help_text="Kubeconfig content; never returned by the API or written to the audit log.")

    class Meta:
        model = Cluster
        fields = [
            "name", "display_name", "labels", "taints", "connector", "connector_config", "kubeconfig",
            "ready", "status_reason", "status_message", "sync_errors", "last_sync", "kubernetes_version", "api_resources",
            "node_count", "ready_node_count", "workload_count", "pod_count", "allocatable", "requested", "available",
            "cpu_usage_milli", "memory_usage_bytes", "created", "updated",
        ]
        read_only_fields = [
            "ready", "status_reason", "status_message", "sync_errors", "last_sync", "kubernetes_version", "api_resources",
            "node_count", "ready_node_count", "workload_count", "pod_count", "allocatable", "requested", "available",
            "cpu_usage_milli", "memory_usage_bytes", "created", "updated",
        ]

    def validate_connector_config(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("connector_config must be an object")
        return value

    def validate(self, attrs):
        if self.instance is not None and "name" in attrs and attrs["name"] != self.instance.name:
            raise serializers.ValidationError({"name": "a cluster cannot be renamed"})
        if self.instance is not None and "connector" in attrs and attrs["connector"] != self.instance.connector:
            raise serializers.ValidationError({"connector": "the connector kind cannot change; register a new cluster"})
        return attrs


class ClusterRegistrationSerializer(ClusterSerializer):
    """Registration: the connection is tried before anything is saved."""

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if attrs.get("connector") == Cluster.ConnectorKind.SIMULATED:
            problems = spec_problems(attrs.get("connector_config") or {})
            if problems:
                raise serializers.ValidationError({"connector_config": problems})
        kubeconfig = attrs.pop("kubeconfig", "")
        probe = Cluster(**attrs, credentials=kubeconfig)
        try:
            check_connection(probe)
        except ConnectorError as exc:
            raise serializers.ValidationError({"connection": [str(exc)], "reason": exc.reason}) from exc
        attrs["credentials"] = kubeconfig
        return attrs


class NodeSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster_name", read_only=True)

    class Meta:
        model = Node
        fields = [
            "id", "cluster", "name", "uid", "labels", "taints", "unschedulable", "ready", "conditions", "capacity", "allocatable",
            "requested", "cpu_capacity_milli", "cpu_allocatable_milli", "cpu_requested_milli", "memory_allocatable_bytes",
            "memory_requested_bytes", "gpu_allocatable", "gpu_requested", "pods_allocatable", "pod_count", "cpu_usage_milli",
            "memory_usage_bytes", "cpu_topology", "kubelet_version", "updated",
        ]
        read_only_fields = fields


class WorkloadSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster_name", read_only=True)

    class Meta:
        model = Workload
        fields = [
            "id", "cluster", "namespace", "api_version", "kind", "name", "uid", "labels", "replicas", "ready_replicas",
            "pod_requests", "pod_limits", "cpu_request_milli", "memory_request_bytes", "gpu_request", "status", "updated",
        ]
        read_only_fields = fields


class PodSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster_name", read_only=True)

    class Meta:
        model = Pod
        fields = [
            "id", "cluster", "namespace", "name", "uid", "node_name", "owner_kind", "owner_name", "workload", "labels", "phase",
            "requests", "limits", "cpu_request_milli", "memory_request_bytes", "gpu_request", "started_at", "finished_at",
        ]
        read_only_fields = fields


class ClusterTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ClusterToken
        fields = ["id", "kind", "name", "key_prefix", "created", "created_by", "expires", "revoked", "last_used"]
        read_only_fields = fields


class ClusterTokenRequestSerializer(serializers.Serializer):
    name = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")
    rotate = serializers.BooleanField(required=False, default=False, help_text="Revoke this cluster's other tokens of this kind.")


class IssuedTokenSerializer(ClusterTokenSerializer):
    token = serializers.CharField(read_only=True, help_text="Shown once.")

    class Meta(ClusterTokenSerializer.Meta):
        fields = ["token", *ClusterTokenSerializer.Meta.fields]
        read_only_fields = fields


