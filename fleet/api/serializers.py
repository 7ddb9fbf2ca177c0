from __future__ import annotations

from rest_framework import serializers

from core import concurrency

from ..models import Cluster, ClusterToken, Node, Pod, Workload


class ClusterSerializer(serializers.ModelSerializer):
    """A member cluster: what it is (writable), how its syncs go, and its cordon state.

    Writes go through ``fleet.services`` (``register_cluster`` tries the connection first),
    which also checks labels, taints and connector settings.
    """

    labels = serializers.JSONField(required=False)
    taints = serializers.JSONField(required=False)
    connector_config = serializers.JSONField(required=False)
    kubeconfig = serializers.CharField(write_only=True, required=False, allow_blank=True, style={"base_template": "textarea.html"},
                                       help_text="Kubeconfig content; never returned by the API or written to the audit log.")
    etag = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = [
            "name", "display_name", "labels", "taints", "connector", "connector_config", "kubeconfig",
            "ready", "status_reason", "status_message", "sync_errors", "last_sync", "kubernetes_version", "api_resources",
            "node_count", "ready_node_count", "workload_count", "pod_count", "allocatable", "requested", "available",
            "cpu_usage_milli", "memory_usage_bytes", "cordoned", "drain", "cordon_reason", "cordoned_by", "cordoned_at",
            "etag", "created", "updated",
        ]
        read_only_fields = [
            "ready", "status_reason", "status_message", "sync_errors", "last_sync", "kubernetes_version", "api_resources",
            "node_count", "ready_node_count", "workload_count", "pod_count", "allocatable", "requested", "available",
            "cpu_usage_milli", "memory_usage_bytes", "cordoned", "drain", "cordon_reason", "cordoned_by", "cordoned_at",
            "created", "updated",
        ]
        extra_kwargs = {"name": {"validators": []}}

    def get_etag(self, obj: Cluster) -> str:
        return concurrency.etag(obj)


# An object the fleet sync reads from a member cluster (node, workload, pod), named with its cluster.
# No docstring: drf-spectacular would show it as the subclasses' description in the OpenAPI document.
class ClusterObjectSerializer(serializers.ModelSerializer):
    cluster = serializers.CharField(source="cluster_name", read_only=True)


class NodeSerializer(ClusterObjectSerializer):
    class Meta:
        model = Node
        fields = [
            "id", "cluster", "name", "uid", "labels", "taints", "unschedulable", "ready", "conditions", "capacity", "allocatable",
            "requested", "cpu_capacity_milli", "cpu_allocatable_milli", "cpu_requested_milli", "memory_allocatable_bytes",
            "memory_requested_bytes", "gpu_allocatable", "gpu_requested", "pods_allocatable", "pod_count", "cpu_usage_milli",
            "memory_usage_bytes", "cpu_topology", "kubelet_version", "updated",
        ]
        read_only_fields = fields


class WorkloadSerializer(ClusterObjectSerializer):
    class Meta:
        model = Workload
        fields = [
            "id", "cluster", "namespace", "api_version", "kind", "name", "uid", "labels", "replicas", "ready_replicas",
            "pod_requests", "pod_limits", "cpu_request_milli", "memory_request_bytes", "gpu_request", "status", "updated",
        ]
        read_only_fields = fields


class PodSerializer(ClusterObjectSerializer):
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


