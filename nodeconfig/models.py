"""Katalyst Custom Config in Meridian's database: config types, targets, revisions, node configs.

Upstream names are kept where users know them: a config type is a KatalystCustomConfig
(KCC), a target is one KCC Target object (e.g. an ``AdminQoSConfiguration``), a node config
row is one entry of a node's ``CustomNodeConfig`` (CNC) status.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models import Revision, revision_meta
from fleet.models import Cluster, Node

#: The ``core.live`` kind of a target's coalesced rollout-progress summary.
TARGET_LIVE = "nodeconfig-target"


class ConfigType(models.Model):
    """A registered config kind (upstream KCC); adding one needs no code change."""

    name = models.CharField(max_length=63, unique=True, help_text=_("The kind, e.g. AdminQoSConfiguration."))
    group = models.CharField(max_length=253, default="config.katalyst.kubewharf.io")
    version = models.CharField(max_length=63, default="v1alpha1")
    resource = models.CharField(max_length=63, help_text=_("Plural resource name, e.g. adminqosconfigurations."))
    description = models.TextField(blank=True)
    allowed_keys = models.JSONField(
        default=list, blank=True, help_text=_("nodeLabelSelectorAllowedKeyList: [{priority, keyList}]")
    )
    schema = models.JSONField(null=True, blank=True, help_text=_("JSON schema of spec.config, or empty."))
    default_config = models.JSONField(default=dict, blank=True, help_text=_("Body an agent gets without a target."))
    default_hash = models.CharField(max_length=12, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def gvr(self) -> str:
        return f"{self.group}/{self.version}/{self.resource}"

    def allowed_keys_by_priority(self) -> dict[int, list[str]]:
        """Allowed selector keys per priority; ``cluster`` is always allowed (fleet-wide targets)."""
        result: dict[int, list[str]] = {}
        for entry in self.allowed_keys or []:
            keys = list(entry.get("keyList") or [])
            if "cluster" not in keys:
                keys.append("cluster")
            result[int(entry.get("priority", 0))] = keys
        return result


class ConfigTarget(models.Model):
    """One config target (upstream KCC Target): a body and exactly one targeting mode.

    The spec fields mirror the current revision; revisions are the history. A deleted target
    keeps its row (``deleted``) so its history stays readable and its name can be revived.
    """

    class Mode(models.TextChoices):
        GLOBAL = "global", _("Global")
        SELECTOR = "selector", _("Label selector")
        NODE_LIST = "node_list", _("Node list")

    class RolloutState(models.TextChoices):
        COMPLETE = "complete", _("Complete")
        PROGRESSING = "progressing", _("Progressing")
        PAUSED = "paused", _("Paused")
        FAILED = "failed", _("Paused on failures")

    config_type = models.ForeignKey(ConfigType, on_delete=models.PROTECT, related_name="targets")
    name = models.CharField(max_length=253)
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="config_targets",
                                help_text=_("Empty: the whole fleet."))
    node_label_selector = models.CharField(max_length=1000, blank=True)
    priority = models.IntegerField(default=0)
    node_names = models.JSONField(default=list, blank=True)
    last_duration = models.CharField(max_length=32, blank=True)
    config = models.JSONField(default=dict, blank=True)
    emergency = models.BooleanField(default=False, help_text=_("Overrides every other target of its type in its scope."))

    revision = models.ForeignKey("ConfigRevision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    config_hash = models.CharField(max_length=12, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    deleted = models.BooleanField(default=False)

    wave_size = models.CharField(max_length=16, blank=True, help_text=_("Nodes per wave: a count or N%; empty = all at once."))
    wave_interval_seconds = models.PositiveIntegerField(default=60)
    failure_threshold_percent = models.PositiveSmallIntegerField(default=10)
    paused = models.BooleanField(default=False)
    rollout_state = models.CharField(max_length=16, choices=RolloutState.choices, default=RolloutState.COMPLETE)
    rollout_message = models.CharField(max_length=500, blank=True)
    released_count = models.IntegerField(null=True, blank=True, help_text=_("Nodes allowed the current revision; empty = all."))
    last_wave_at = models.DateTimeField(null=True, blank=True)

    valid = models.BooleanField(default=True)
    status_reason = models.CharField(max_length=64, blank=True)
    status_message = models.TextField(blank=True)
    matched_node_count = models.IntegerField(default=0)
    observed_revision = models.IntegerField(default=0)
    reconciled_selection = models.CharField(
        max_length=16, blank=True, default="", db_default="",
        help_text=_("Digest of the selection whose reachable nodes were last reconciled (empty: none)."))
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["config_type__name", "-emergency", "name"]
        constraints = [models.UniqueConstraint(fields=["config_type", "name"], name="nodeconfig_target_type_name")]
        indexes = [models.Index(fields=["config_type", "deleted"], name="nodeconfig_target_live_idx")]
        permissions = [
            ("rollback_configtarget", "Can roll a config target back to an earlier revision"),
            ("rollout_configtarget", "Can pause, resume, advance and promote a config target's rollout"),
            ("downgrade_configtarget", "Can trigger and restore the emergency downgrade"),
        ]

    #: What a user writes (``core.concurrency``): the ETag moves with these, not with status.
    etag_fields = ("config_type_id", "name", "cluster_id", "node_label_selector", "priority", "node_names",
                   "last_duration", "config", "wave_size", "wave_interval_seconds", "failure_threshold_percent",
                   "revision_id", "deleted", "paused")

    def __str__(self) -> str:
        return f"{self.config_type.name}/{self.name}"

    def get_absolute_url(self) -> str:
        from django.urls import reverse

        return reverse("nodeconfig:target-detail", args=[self.pk])

    @property
    def mode(self) -> str:
        if self.node_names:
            return self.Mode.NODE_LIST
        if self.node_label_selector:
            return self.Mode.SELECTOR
        return self.Mode.GLOBAL


class ConfigRevision(Revision):
    """An immutable snapshot of a target's spec: who changed it, when and why."""

    target = models.ForeignKey(ConfigTarget, on_delete=models.CASCADE, related_name="revisions")
    cluster_name = models.CharField(max_length=63, blank=True)
    node_label_selector = models.CharField(max_length=1000, blank=True)
    priority = models.IntegerField(default=0)
    node_names = models.JSONField(default=list, blank=True)
    last_duration = models.CharField(max_length=32, blank=True)
    config = models.JSONField(default=dict, blank=True)
    config_hash = models.CharField(max_length=12)

    owner_field = "target"
    Meta = revision_meta("target", "nodeconfig_revision_number")

    def spec(self) -> dict:
        """The fields a diff compares and a rollback restores."""
        return {"cluster": self.cluster_name or None, "node_label_selector": self.node_label_selector,
                "priority": self.priority, "node_names": list(self.node_names), "last_duration": self.last_duration,
                "config": self.config}


class NodeConfig(models.Model):
    """One node's entry for one config type (an entry of upstream's CNC status).

    ``matched_target`` is what matching says; ``target``/``revision``/``config_hash`` are what
    the node has been released (a paced rollout holds back nodes). ``base_revision`` is the
    target an emergency override is layered on. The agent's last report sits alongside.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="node_configs", db_index=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+", db_index=False)
    config_type = models.ForeignKey(ConfigType, on_delete=models.CASCADE, related_name="node_configs")
    matched_target = models.ForeignKey(ConfigTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                       db_index=False)
    target = models.ForeignKey(ConfigTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="node_configs",
                               db_index=False)
    revision = models.ForeignKey(ConfigRevision, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    base_revision = models.ForeignKey(ConfigRevision, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    #: The emergency downgrade whose restore moved this node back to its regular entry (until
    #: the row changes again): what a restore's progress counts, as a downgrade counts its rows.
    restored_from = models.ForeignKey(ConfigTarget, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    config_hash = models.CharField(max_length=12, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    applied_hash = models.CharField(max_length=12, blank=True)
    error = models.TextField(blank=True)
    reported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node_id", "config_type_id"]
        constraints = [models.UniqueConstraint(fields=["node", "config_type"], name="nodeconfig_node_type")]
        indexes = [
            models.Index(fields=["target", "revision"], name="nodeconfig_progress_idx"),
            models.Index(fields=["matched_target"], name="nodeconfig_matched_idx"),
            models.Index(fields=["cluster", "config_type"], name="nodeconfig_cluster_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.node_id}/{self.config_type_id}"

    @property
    def state(self) -> str:
        if not self.config_hash:
            return "none"
        if self.applied_hash == self.config_hash:
            return "applied"
        if self.error:
            return "failed"
        return "pending"


AUTH_USER = settings.AUTH_USER_MODEL
