"""Quota groups (bizrq's BizGroupResourceQuota) and the charges admission committed to them.

A group's ``hard``, ``used`` and ``self_used`` are stored as canonical quantity strings, as
the Kubernetes object would carry them; ``quotas.accounting`` does the arithmetic.
``version`` plays resourceVersion: every status write bumps it, so readers can tell a
fresh status from a stale one. Concurrent writers are serialised by a lock on the group's
row (``SELECT ... FOR UPDATE``; SQLite's immediate transactions), never by retry storms.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models import Revision, revision_meta
from fleet.models import Cluster

#: A Kubernetes object name (DNS subdomain), as the upstream cluster-scoped object has.
group_name = RegexValidator(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    _("Use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (at most 253)."),
)


class QuotaGroup(models.Model):
    """One business group's quota: a node of the quota tree."""

    name = models.CharField(max_length=253, unique=True, validators=[group_name])
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    path = models.CharField(max_length=2000, db_index=True, editable=False,
                            help_text=_("'/root/child/…/': ancestors first, for subtree queries."))
    depth = models.PositiveSmallIntegerField(default=0, editable=False)
    description = models.CharField(max_length=500, blank=True)
    owners = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="owned_quota_groups",
                                    help_text=_("May manage this group's subtree (children, their sizes), nothing above it."))
    hard = models.JSONField(default=dict, blank=True)
    used = models.JSONField(default=dict, blank=True, help_text=_("self_used + Σ children's hard, per key of hard."))
    self_used = models.JSONField(default=dict, blank=True, help_text=_("What the group's own workloads use."))
    version = models.PositiveBigIntegerField(default=0, help_text=_("Bumped on every status write."))
    last_reconcile_time = models.DateTimeField(null=True, blank=True)
    cash_exhausted = models.JSONField(default=list, blank=True, help_text=_("cash/… keys whose budget is spent."))
    level = models.FloatField(default=0.0, db_index=True,
                              help_text=_("used/hard of the fullest resource, written with every status."))
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["path"]
        permissions = [("rollback_quotagroup", "Can restore a quota group's earlier hard, description and owners")]

    #: What a user writes (``core.concurrency``): the ETag ignores the usage that admission moves.
    etag_fields = ("name", "parent_id", "description", "hard")

    def __str__(self) -> str:
        return self.name

    def etag_extra(self) -> list[str]:
        return sorted(self.owners.values_list("username", flat=True)) if self.pk else []

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("quotas:group-detail", args=[self.name])

class QuotaGroupRevision(Revision):
    """A group's history: what its hard, description and owners were after each change."""

    group = models.ForeignKey(QuotaGroup, on_delete=models.CASCADE, related_name="revisions")
    parent_name = models.CharField(max_length=253, blank=True)
    description = models.CharField(max_length=500, blank=True)
    hard = models.JSONField(default=dict, blank=True)
    owners = models.JSONField(default=list, blank=True)

    owner_field = "group"
    Meta = revision_meta("group", "quotas_revision_number")

    def spec(self) -> dict:
        return {"parent": self.parent_name or None, "description": self.description, "hard": dict(self.hard),
                "owners": list(self.owners)}


class QuotaCharge(models.Model):
    """What one workload is charged to its group: the ledger behind ``self_used``.

    Admission writes it in the same transaction as the group's status; the resync
    reconciles it with the fleet inventory (a charge whose workload never appeared is
    dropped once its cluster has synced since; a workload that bypassed the webhook is
    added). ``per_replica`` lets a ``scale`` request or an HPA be charged without the pod
    template, which those requests do not carry.
    """

    class Source(models.TextChoices):
        ADMISSION = "admission", _("Admission")
        INVENTORY = "inventory", _("Inventory")

    group = models.ForeignKey(QuotaGroup, on_delete=models.CASCADE, related_name="charges", db_index=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="quota_charges", db_index=False)
    namespace = models.CharField(max_length=253)
    kind = models.CharField(max_length=63)
    api_version = models.CharField(max_length=100)
    name = models.CharField(max_length=253)
    replicas = models.IntegerField(default=0, help_text=_("Replicas charged: the spec's, or the HPA's maxReplicas if higher."))
    spec_replicas = models.IntegerField(default=0)
    hpa_max_replicas = models.IntegerField(null=True, blank=True)
    per_replica = models.JSONField(default=dict, blank=True)
    charge = models.JSONField(default=dict, blank=True, help_text=_("Total, every resource (not only the group's keys)."))
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.ADMISSION)
    admitted_at = models.DateTimeField()
    observed = models.BooleanField(default=False, help_text=_("Seen in the fleet inventory."))
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster_id", "namespace", "kind", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "kind", "name"], name="quotas_charge_workload")]
        indexes = [
            models.Index(fields=["group", "cluster"], name="quotas_charge_group_idx"),
            # A group's page lists its most recent admissions first: 50 rows from the index
            # instead of sorting all of a large group's (6,600 at 200k nodes: 16 ms).
            models.Index(fields=["group", "-admitted_at", "-id"], name="quotas_charge_group_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace}/{self.kind}/{self.name}"


class CashSample(models.Model):
    """A point of a group's cash burn-down after a reconcile: ``used`` of each cash key (what is
    left is hard − used) and ``burned``, the group's own pod time so far (its ``self_used``).

    They differ by the children's budgets: creating or resizing a child moves ``used`` at once
    without any pod running, so the burn rate and the projected exhaustion read ``burned``.
    """

    group = models.ForeignKey(QuotaGroup, on_delete=models.CASCADE, related_name="cash_samples", db_index=False)
    time = models.DateTimeField()
    used = models.JSONField(default=dict)
    burned = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["group_id", "time"]
        indexes = [models.Index(fields=["group", "time"], name="quotas_cash_sample_idx")]
