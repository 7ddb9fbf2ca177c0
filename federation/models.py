"""KubeAdmiral's objects: policies, federated objects with revisions, their member objects in
each cluster, and the water-level history (a cluster's cordon is the fleet's: ``Cluster.cordoned``).

Policies and templates are stored as the JSON users wrote (upstream's field names), so what
the API returns round-trips to YAML unchanged; the pure modules (``policy``, ``render``,
``aggregate``) interpret them. Columns exist only where SQL needs them: names for lookups,
the shard key, scheduling-input digests for incremental rescheduling, and per-member state for
retries and progress.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models import Revision, revision_meta
from fleet.models import Cluster, ResourceTotals

#: Labels binding an object to its policies (upstream's names).
PROPAGATION_POLICY_LABEL = "kubeadmiral.io/propagation-policy-name"
CLUSTER_PROPAGATION_POLICY_LABEL = "kubeadmiral.io/cluster-propagation-policy-name"
OVERRIDE_POLICY_LABEL = "kubeadmiral.io/override-policy-name"
#: The ``core.live`` kind of an object's coalesced status summary.
OBJECT_LIVE = "federation-object"
CLUSTER_OVERRIDE_POLICY_LABEL = "kubeadmiral.io/cluster-override-policy-name"


class PolicyBase(models.Model):
    """A policy is namespaced, or fleet-wide ("cluster" policy upstream) when ``namespace`` is
    empty; objects name the policy they use through a label."""

    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253)
    description = models.CharField(max_length=500, blank=True)
    spec = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["namespace", "name"]

    @property
    def is_cluster_scoped(self) -> bool:
        return not self.namespace

    #: What a user writes (``core.concurrency``).
    etag_fields = ("namespace", "name", "description", "spec")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class PropagationPolicy(PolicyBase):
    """Where and how objects are scheduled: profile, Divide/Duplicate, cluster selector and
    affinity, tolerations, maxClusters, placements, sticky cluster, follower scheduling."""

    class Meta(PolicyBase.Meta):
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="federation_pp_identity")]
        verbose_name, verbose_name_plural = _("propagation policy"), _("propagation policies")


class OverridePolicy(PolicyBase):
    """Per-cluster edits: rules of target clusters → JSON patches."""

    class Meta(PolicyBase.Meta):
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="federation_op_identity")]
        verbose_name, verbose_name_plural = _("override policy"), _("override policies")


class FederatedObject(models.Model):
    """A native object (the *template*) propagated to member clusters.

    ``placement`` is the scheduler's answer (cluster → replicas, ``null`` for a full copy),
    ``schedule`` its explanation; ``schedule_digest`` hashes every scheduling input so a
    resync reschedules only objects whose inputs changed. ``status`` aggregates the members.
    """

    class Phase(models.TextChoices):
        PENDING = "Pending", _("Pending")
        PROPAGATING = "Propagating", _("Propagating")
        ROLLING = "Rolling", _("Rolling out")
        READY = "Ready", _("Ready")
        DEGRADED = "Degraded", _("Degraded")
        UNSCHEDULABLE = "Unschedulable", _("Unschedulable")
        DELETING = "Deleting", _("Deleting")

    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253)
    api_version = models.CharField(max_length=100)
    kind = models.CharField(max_length=63)
    template = models.JSONField()
    revision = models.PositiveIntegerField(default=1, help_text=_("Current template revision."))
    template_hash = models.CharField(max_length=64)
    propagation_policy = models.ForeignKey(PropagationPolicy, null=True, blank=True, on_delete=models.PROTECT, related_name="federated_objects")
    override_policy = models.ForeignKey(OverridePolicy, null=True, blank=True, on_delete=models.PROTECT, related_name="federated_objects")
    references = models.JSONField(
        default=list, blank=True,
        help_text=_("ConfigMaps/Secrets its pods reference, as 'Kind/name': its followers."),
    )
    placement = models.JSONField(default=dict, blank=True)
    schedule = models.JSONField(default=dict, blank=True)
    schedule_digest = models.CharField(max_length=64, blank=True)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    status = models.JSONField(default=dict, blank=True)
    # db_index's plain index only: its PostgreSQL LIKE twin is dropped (migration 0006)
    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.PENDING, db_index=True)
    message = models.TextField(blank=True)
    rollout_paused = models.BooleanField(default=False)
    deleting = models.BooleanField(default=False)
    quiet_passes = models.PositiveSmallIntegerField(
        default=0, help_text=_("Periodic passes in a row that found nothing to do (the resync backs off)."))
    next_resync = models.DateTimeField(
        null=True, blank=True, db_index=True,
        help_text=_("An unsettled object that keeps finding nothing to do is looked at again from here."))
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["namespace", "kind", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "kind", "name"], name="federation_object_identity")]
        permissions = [
            ("rollback_federatedobject", "Can roll a federated object back to an earlier template"),
            ("rollout_federatedobject", "Can pause and resume a federated object's rollout"),
            ("reschedule_federatedobject", "Can force a reschedule"),
        ]

    #: What a user writes (``core.concurrency``): not the reconciler's placement and status.
    etag_fields = ("namespace", "name", "kind", "template", "revision", "propagation_policy_id", "override_policy_id",
                   "rollout_paused", "deleting")

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("federation:object-detail", args=[self.pk])

    @property
    def key(self) -> str:
        """Shard and planner tie-break key (upstream uses namespace/name)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class FederatedRevision(Revision):
    """An immutable template snapshot; rollback re-applies one as a new revision."""

    object = models.ForeignKey(FederatedObject, on_delete=models.CASCADE, related_name="revisions", db_index=False)
    template = models.JSONField()
    template_hash = models.CharField(max_length=64)

    Meta = revision_meta("object", "federation_revision_identity", ordering="object_id")

    def __str__(self) -> str:
        return f"{self.object} revision {self.number}"

    def spec(self) -> dict:
        return {"template": self.template}


class MemberObject(models.Model):
    """The object as rendered for, applied to and observed in one member cluster."""

    class State(models.TextChoices):
        PENDING = "pending", _("Pending")
        APPLIED = "applied", _("Applied")
        ERROR = "error", _("Error")
        DELETING = "deleting", _("Deleting")

    object = models.ForeignKey(FederatedObject, on_delete=models.CASCADE, related_name="members", db_index=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="federated_members")
    replicas = models.IntegerField(null=True, blank=True, help_text=_("Scheduled replicas; empty for a full copy."))
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    applied_hash = models.CharField(max_length=64, blank=True, help_text=_("Digest of the body last applied."))
    applied_revision = models.PositiveIntegerField(null=True, blank=True, help_text=_("Template revision it runs."))
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text=_("Failed attempts in a row."))
    next_retry = models.DateTimeField(null=True, blank=True)
    observed = models.JSONField(default=dict, blank=True, help_text=_("The member's status as last read."))
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["object_id", "cluster__name"]
        constraints = [models.UniqueConstraint(fields=["object", "cluster"], name="federation_member_identity")]
        indexes = [models.Index(fields=["state", "next_retry"], name="federation_member_retry_idx")]

    def __str__(self) -> str:
        return f"{self.object} in {self.cluster_id}"


class WaterLevelSample(ResourceTotals):
    """One cluster's water level at a time, for the dashboard's history charts."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="water_levels", db_index=False)
    at = models.DateTimeField()
    weight = models.IntegerField(default=0, help_text=_("Dynamic weight (per mille) from CPU water level."))

    class Meta:
        ordering = ["cluster_id", "at"]
        indexes = [models.Index(fields=["cluster", "at"], name="federation_wl_cluster_at"),
                   models.Index(fields=["at"], name="federation_wl_at")]

    def __str__(self) -> str:
        return f"{self.cluster_id} at {self.at:%Y-%m-%d %H:%M}"


class WaterLevelRollup(ResourceTotals):  # a rollup's totals are averages
    """Averages of one cluster's samples over an hour or a day: four weeks at 500 clusters is
    336k hourly rows (28 days × 24 × 500) and 14k daily ones, where raw minute samples would be
    20M. Raw samples are kept for a day; the charts read the coarsest grain their range needs."""

    class Grain(models.TextChoices):
        HOUR = "hour", _("hourly")
        DAY = "day", _("daily")

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="water_level_rollups", db_index=False)
    grain = models.CharField(max_length=4, choices=Grain.choices)
    at = models.DateTimeField(help_text=_("Start of the hour or day (UTC)."))
    samples = models.PositiveIntegerField(default=0, help_text=_("Samples averaged."))
    weight = models.IntegerField(default=0)

    class Meta:
        ordering = ["cluster_id", "grain", "at"]
        constraints = [models.UniqueConstraint(fields=["cluster", "grain", "at"], name="federation_wl_rollup_identity")]
        indexes = [models.Index(fields=["grain", "at"], name="federation_wl_rollup_grain_at")]

    def __str__(self) -> str:
        return f"{self.cluster_id} {self.grain} {self.at:%Y-%m-%d %H:%M}"
