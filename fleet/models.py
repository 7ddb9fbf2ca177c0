"""The fleet inventory every app reads: member clusters, nodes, workloads, pods, tokens.

Resource amounts are stored twice on purpose: canonical quantity strings in JSON (what
Kubernetes said, for display and exact math) and integer columns for the resources people
aggregate and sort by (CPU in millicores, memory in bytes, GPUs), so water levels over
500 clusters and 200k nodes are single SQL aggregates, never Python loops.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.fields import EncryptedTextField

dns_label = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
    _("Use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit."),
)


class ResourceTotals(models.Model):
    """Integer totals of the resources people compare: a cluster's, a node's, a water-level point's."""

    cpu_allocatable_milli = models.BigIntegerField(default=0)
    cpu_requested_milli = models.BigIntegerField(default=0)
    memory_allocatable_bytes = models.BigIntegerField(default=0)
    memory_requested_bytes = models.BigIntegerField(default=0)
    gpu_allocatable = models.BigIntegerField(default=0)
    gpu_requested = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class WaterLevelFields(ResourceTotals):
    """The resource totals and pod counts shared by clusters and nodes."""

    pods_allocatable = models.BigIntegerField(default=0)
    pod_count = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class Cluster(WaterLevelFields):
    class ConnectorKind(models.TextChoices):
        KUBERNETES = "kubernetes", _("Kubernetes API")
        SIMULATED = "simulated", _("Simulated")

    name = models.CharField(max_length=63, unique=True, validators=[dns_label])
    display_name = models.CharField(max_length=200, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    taints = models.JSONField(default=list, blank=True)
    connector = models.CharField(max_length=16, choices=ConnectorKind.choices)
    connector_config = models.JSONField(default=dict, blank=True, help_text=_("Non-secret connector settings."))
    credentials = EncryptedTextField(blank=True, help_text=_("Kubeconfig content; encrypted at rest, never shown or audited."))

    ready = models.BooleanField(default=False)
    status_reason = models.CharField(max_length=32, blank=True)
    status_message = models.TextField(blank=True)
    sync_errors = models.JSONField(default=list, blank=True, help_text=_("Objects the last sync could not read."))
    last_sync = models.DateTimeField(null=True, blank=True)
    kubernetes_version = models.CharField(max_length=64, blank=True)
    api_resources = models.JSONField(default=list, blank=True)
    node_count = models.IntegerField(default=0)
    ready_node_count = models.IntegerField(default=0)
    workload_count = models.IntegerField(default=0)
    allocatable = models.JSONField(default=dict, blank=True)
    requested = models.JSONField(default=dict, blank=True)
    available = models.JSONField(default=dict, blank=True)
    cpu_usage_milli = models.BigIntegerField(null=True, blank=True)
    memory_usage_bytes = models.BigIntegerField(null=True, blank=True)

    cordoned = models.BooleanField(default=False, help_text=_("No new replicas are scheduled here."))
    drain = models.BooleanField(default=False, help_text=_("Cordoned, and its replicas move to other clusters."))
    cordon_reason = models.CharField(max_length=500, blank=True)
    cordoned_by = models.CharField(max_length=150, blank=True)
    cordoned_at = models.DateTimeField(null=True, blank=True)

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    audit_exclude = ("credentials",)
    #: What a user writes (``core.concurrency``): not the sync's status.
    etag_fields = ("name", "display_name", "labels", "taints", "connector", "connector_config", "cordoned", "drain")

    class Meta:
        ordering = ["name"]
        permissions = [
            ("sync_cluster", "Can trigger an inventory sync"),
            ("cordon_cluster", "Can cordon, drain and uncordon member clusters"),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("fleet:cluster-detail", args=[self.name])


class Node(WaterLevelFields):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes", db_index=False)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict)
    taints = models.JSONField(default=list, blank=True)
    unschedulable = models.BooleanField(default=False)
    ready = models.BooleanField(default=False, db_index=True)
    conditions = models.JSONField(default=list, blank=True)
    capacity = models.JSONField(default=dict, blank=True)
    allocatable = models.JSONField(default=dict, blank=True)
    requested = models.JSONField(default=dict, blank=True)
    cpu_capacity_milli = models.BigIntegerField(default=0)
    cpu_usage_milli = models.BigIntegerField(null=True, blank=True)
    memory_usage_bytes = models.BigIntegerField(null=True, blank=True)
    usage_time = models.DateTimeField(null=True, blank=True, help_text=_("When the usage was measured (NodeMetrics' timestamp)."))
    cpu_topology = models.JSONField(null=True, blank=True, help_text=_("[[cpu, socket, numa, core], ...]"))
    kubelet_version = models.CharField(max_length=64, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="fleet_node_cluster_name")]

    def __str__(self) -> str:
        return self.name


class Workload(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="workloads", db_index=False)
    namespace = models.CharField(max_length=253)
    api_version = models.CharField(max_length=100)
    kind = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    replicas = models.IntegerField(default=0)
    ready_replicas = models.IntegerField(default=0)
    pod_requests = models.JSONField(default=dict, blank=True, help_text=_("Per replica, canonical quantities."))
    pod_limits = models.JSONField(default=dict, blank=True)
    cpu_request_milli = models.BigIntegerField(default=0, help_text=_("Per replica."))
    memory_request_bytes = models.BigIntegerField(default=0, help_text=_("Per replica."))
    gpu_request = models.BigIntegerField(default=0, help_text=_("Per replica."))
    status = models.CharField(max_length=32, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster_id", "namespace", "kind", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace", "kind", "name"], name="fleet_workload_identity")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class Pod(models.Model):
    """A pod's resource use over time; kept after the pod is gone, for core-hour accounting."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pods", db_index=False)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)
    node_name = models.CharField(max_length=253, blank=True)
    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="pods")
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    phase = models.CharField(max_length=16, blank=True)
    requests = models.JSONField(default=dict, blank=True)
    limits = models.JSONField(default=dict, blank=True)
    cpu_request_milli = models.BigIntegerField(default=0)
    memory_request_bytes = models.BigIntegerField(default=0)
    gpu_request = models.BigIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True, help_text=_("When the pod began holding resources."))
    finished_at = models.DateTimeField(null=True, blank=True, help_text=_("When it stopped: terminal phase or gone."))
    content_hash = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster_id", "namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "uid"], name="fleet_pod_cluster_uid")]
        indexes = [
            models.Index(fields=["cluster", "namespace", "name"], name="fleet_pod_name_idx"),
            models.Index(fields=["cluster", "finished_at"], name="fleet_pod_active_idx"),
            # db_index's index under its name, without the PostgreSQL LIKE twin db_index adds
            models.Index(fields=["node_name"], name="fleet_pod_node_name_80f161b9"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class ClusterToken(models.Model):
    """A credential scoped to one cluster: its node agents, or its API server's webhooks."""

    class Kind(models.TextChoices):
        AGENT = "agent", _("Node agent")
        WEBHOOK = "webhook", _("Admission webhook")

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="tokens")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=100, blank=True)
    key_prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)
    expires = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["cluster", "kind", "revoked"], name="fleet_token_active_idx")]

    def __str__(self) -> str:
        return f"{self.kind} token {self.key_prefix}… for {self.cluster}"


class SimulatedObject(models.Model):
    """Objects applied to a simulated cluster (its etcd): Deployments, custom resources, ..."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="simulated_objects",
                                db_index=False)
    api_version = models.CharField(max_length=100)
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253)
    body = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "api_version", "kind", "namespace", "name"], name="fleet_simobject_identity")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


