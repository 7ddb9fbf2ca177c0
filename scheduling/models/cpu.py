"""Exclusive/shared CPU co-location (scheduling.md, Part B): per-node CPU state and allocations.

The database is the truth for allocation decisions: every change to a node's allocations
happens under the ``NodeCPU`` row lock (``select_for_update``) and bumps its ``version``;
``CPUClaim`` rows (unique per node and CPU) make a CPU held twice impossible even if a
writer forgot the lock. Pod and node annotations are how the cluster learns the result
(written by ``scheduling.cpu_deliver``) and the evidence the reconciler rebuilds from
(``scheduling.cpu_reconcile_cluster``; ``scheduling.cpu.state.rebuild_state``).

``NodeCPU`` keeps the eight integers of ``scheduling.cpu.fit.NodeSummary`` as indexed
columns, so the fleet view over 200k nodes is a SQL aggregate and never builds a state.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.utils.translation import gettext_lazy as _

__all__ = ["CPUAllocation", "CPUClaim", "NodeCPU", "SUMMARY_FIELDS"]

#: ``cpu.fit.NodeSummary`` fields, stored as columns of the same names.
SUMMARY_FIELDS = ("sellable", "exclusive_used", "exclusive_left", "largest_exclusive", "largest_numa", "free_whole_cores",
                  "stranded", "shared_sold_milli")


class NodeCPU(models.Model):
    """One node's CPU topology, reserved CPUs, IO-queue distribution and allocation version."""

    class IOQueueState(models.TextChoices):
        NONE = "none", _("None published")
        ACCEPTED = "accepted", _("Accepted")
        REFUSED = "refused", _("Refused")

    node = models.OneToOneField("fleet.Node", on_delete=models.CASCADE, related_name="cpu")
    cluster = models.ForeignKey("fleet.Cluster", on_delete=models.CASCADE, related_name="node_cpus", db_index=False)
    name = models.CharField(max_length=253, help_text=_("The node's name (kept here for the fleet view)."))

    topology = models.JSONField(help_text=_("[[cpu, socket, numa, core], ...]"))
    topology_digest = models.CharField(max_length=32, blank=True)
    cpus = models.IntegerField(default=0)
    sockets = models.SmallIntegerField(default=0)
    numa_nodes = models.SmallIntegerField(default=0)
    cores = models.IntegerField(default=0)
    threads_per_core = models.SmallIntegerField(default=1)
    io_queues = models.JSONField(null=True, blank=True, help_text=_('Accepted IO-queue distribution {"<queue>": [cpu, ...]}.'))
    reserved_cpus = models.CharField(max_length=2000, blank=True, help_text=_("Reserved CPUs, Linux cpuset list."))
    overcommit_ratio = models.DecimalField(max_digits=7, decimal_places=3, default=Decimal(1))

    version = models.BigIntegerField(default=0, help_text=_("Bumped by every change of the node's allocations."))
    delivered_version = models.BigIntegerField(default=0, help_text=_("The version whose annotations were last written."))
    delivered_share_pool = models.CharField(max_length=4000, blank=True)
    touched = models.BigIntegerField(default=0, help_text=_("Counts writes of rows and annotations: a reconcile "
                                                            "whose read predates one leaves the node to its next pass."))

    io_queue_state = models.CharField(max_length=16, choices=IOQueueState.choices, default=IOQueueState.NONE)
    io_queue_message = models.TextField(blank=True)
    refused_io_queues = models.JSONField(null=True, blank=True, help_text=_("The last refused distribution."))
    topology_message = models.TextField(blank=True, help_text=_("Why the node's published topology was not taken."))
    conflicts = models.JSONField(default=list, blank=True, help_text=_("CPUs claimed twice by pod annotations."))
    problems = models.JSONField(default=list, blank=True, help_text=_("What the last reconcile found and repaired."))
    reconciled_at = models.DateTimeField(null=True, blank=True)
    source_digest = models.CharField(max_length=32, blank=True)

    sellable = models.IntegerField(default=0)
    exclusive_used = models.IntegerField(default=0)
    exclusive_left = models.IntegerField(default=0)
    largest_exclusive = models.IntegerField(default=0)
    largest_numa = models.IntegerField(default=0)
    free_whole_cores = models.IntegerField(default=0)
    stranded = models.IntegerField(default=0)
    shared_sold_milli = models.BigIntegerField(default=0)

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    #: What a write expects (``core.concurrency``): the allocation version and the node's inputs.
    etag_fields = ("version", "reserved_cpus", "overcommit_ratio", "topology_digest", "io_queues")

    class Meta:
        ordering = ["cluster_id", "name"]
        verbose_name = _("node CPU state")
        verbose_name_plural = _("node CPU states")
        permissions = [
            ("allocate_nodecpu", "Can allocate and release exclusive and shared CPUs on nodes"),
            ("release_isolate_nodecpu", "Can switch the release-isolate emergency mode of exclusive instances"),
        ]
        indexes = [
            # covering the fleet view's GROUP BY cluster: answered from the index, never the wide rows
            models.Index(fields=["cluster", "sellable", "exclusive_used", "exclusive_left", "largest_exclusive", "largest_numa",
                                 "free_whole_cores", "stranded", "shared_sold_milli", "cpus"], name="sched_nodecpu_summary_idx"),
            models.Index(fields=["cluster", "name"], name="sched_nodecpu_name_idx"),
            # the fleet page's node orders (and "which nodes take N CPUs" as a range)
            models.Index(fields=["largest_exclusive", "id"], name="sched_nodecpu_largest_idx"),
            models.Index(fields=["exclusive_left", "id"], name="sched_nodecpu_left_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("scheduling:cpu-node", args=[self.pk])

    @property
    def fragmentation(self) -> float:
        """Share of the sellable exclusive CPUs left that no single instance can take now."""
        return 0.0 if self.exclusive_left <= 0 else max(0.0, 1 - self.largest_exclusive / self.exclusive_left)


class CPUAllocation(models.Model):
    """One instance (pod) on a node: its exclusive cpuset, or its CPU shares on the share pool."""

    class Mode(models.TextChoices):
        EXCLUSIVE = "exclusive", _("Exclusive")
        SHARED = "shared", _("Shared")

    class Source(models.TextChoices):
        ALLOCATED = "allocated", _("Allocated by Meridian")
        ADOPTED = "adopted", _("Adopted from pod annotations")

    class Delivery(models.TextChoices):
        PENDING = "pending", _("Annotations not written yet")
        DELIVERED = "delivered", _("Annotations written")
        WAITING = "waiting", _("Waiting for the pod")
        RELEASING = "releasing", _("Released; annotations being removed")

    node_cpu = models.ForeignKey(NodeCPU, on_delete=models.CASCADE, related_name="allocations", db_index=False)
    namespace = models.CharField(max_length=253)
    pod_name = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64, blank=True)
    app = models.CharField(max_length=253, blank=True)
    mode = models.CharField(max_length=16, choices=Mode.choices)
    strategy = models.CharField(max_length=32, blank=True)
    request = models.IntegerField(default=0, help_text=_("Exclusive CPUs asked for."))
    cpus = models.JSONField(default=list, blank=True, help_text=_("Exclusive CPUs held (sorted)."))
    cpuset = models.CharField(max_length=2000, blank=True)
    request_milli = models.BigIntegerField(default=0, help_text=_("Shared: CPU request (shares), millicores."))
    limit_milli = models.BigIntegerField(default=0, help_text=_("Shared: CPU limit (CFS quota), millicores."))
    exclude_reserved = models.BooleanField(default=True)
    release_isolate = models.BooleanField(default=False)
    containers = models.JSONField(default=list, blank=True)
    disputed = models.BooleanField(default=False, help_text=_("Its claim overlaps an earlier pod's; held back."))
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.ALLOCATED)
    delivery = models.CharField(max_length=16, choices=Delivery.choices, default=Delivery.PENDING)
    delivered_digest = models.CharField(max_length=32, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    delivery_error = models.TextField(blank=True)
    created_by = models.CharField(max_length=150, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    etag_fields = ("mode", "cpus", "release_isolate", "request_milli", "limit_milli")

    class Meta:
        ordering = ["node_cpu_id", "namespace", "pod_name"]
        constraints = [
            models.UniqueConstraint(fields=["node_cpu", "namespace", "pod_name"], name="sched_cpualloc_instance"),
        ]
        indexes = [models.Index(fields=["namespace", "pod_name"], name="sched_cpualloc_pod_idx")]

    def __str__(self) -> str:
        return self.instance

    @property
    def instance(self) -> str:
        return f"{self.namespace}/{self.pod_name}"

    @property
    def active(self) -> bool:
        return self.delivery != self.Delivery.RELEASING

    @property
    def size_milli(self) -> int:
        return self.limit_milli or self.request_milli


class CPUClaim(models.Model):
    """A CPU held exclusively; unique per node, so no CPU can ever be handed out twice."""

    node_cpu = models.ForeignKey(NodeCPU, on_delete=models.CASCADE, related_name="claims", db_index=False)
    cpu = models.IntegerField()
    allocation = models.ForeignKey(CPUAllocation, on_delete=models.CASCADE, related_name="claims")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node_cpu", "cpu"], name="sched_cpuclaim_once")]

    def __str__(self) -> str:
        return f"CPU {self.cpu} of {self.node_cpu_id} → {self.allocation_id}"
