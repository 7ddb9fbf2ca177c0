"""Part A (Ctrip unified scheduling): policies, templates and bindings, each with immutable revisions.

* ``SchedulingPolicy``: which filter/score plugins run, with weights and args (a
  KubeSchedulerConfiguration profile, validated by ``scheduling.engine.Policy.from_config``);
  a pod picks one with the annotation ``sched.cloud.ctrip.com/policy`` (or
  ``scheduling.meridian.io/policy``), else the default one.
* ``NodeSchedulerConfig`` (nsc) / ``PodSchedulerConfig`` (psc): affinity templates, the
  upstream ``spec`` stored as a tree whose string leaves keep their ``{{.X}}`` placeholders.
* ``SchedulerConfigBinding`` (scb): a class of pods (label selector, optional namespace) bound
  to a template and the arguments to render it with; ``spec`` is the upstream spec.

"Current" is a pointer to a revision (as node config targets have); every change writes the
row, its revision and the audit entry in one transaction (``scheduling.services``). Every
change to templates and bindings also bumps ``SchedulingConfigVersion``: the mutating
webhook caches them in-process keyed by that number.
"""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from core.models import Revision, revision_meta


class SchedulingPolicy(models.Model):
    """One algorithm set of the one scheduler: plugins, weights, args."""

    name = models.CharField(max_length=63, unique=True, help_text=_("What pods name in the policy annotation."))
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True,
                              help_text=_("A KubeSchedulerConfiguration profile: plugins, pluginConfig, percentageOfNodesToScore."))
    is_default = models.BooleanField(default=False, help_text=_("Pods that name no policy get this one."))
    revision = models.ForeignKey("SchedulingPolicyRevision", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    etag_fields = ("name", "description", "config", "is_default", "revision_id")

    class Meta:
        ordering = ["-is_default", "name"]
        constraints = [models.UniqueConstraint(fields=["is_default"], condition=models.Q(is_default=True),
                                               name="scheduling_one_default_policy")]
        permissions = [("rollback_schedulingpolicy", "Can roll a scheduling policy back to an earlier revision")]
        verbose_name = _("scheduling policy")
        verbose_name_plural = _("scheduling policies")

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("scheduling:policy-detail", args=[self.name])


class SchedulingPolicyRevision(Revision):
    policy = models.ForeignKey(SchedulingPolicy, on_delete=models.CASCADE, related_name="revisions")
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)

    owner_field = "policy"
    Meta = revision_meta("policy", "scheduling_policy_revision_number")

    def spec(self) -> dict:
        return {"description": self.description, "config": self.config}


class SchedulerTemplateBase(models.Model):
    """An affinity template (upstream nsc/psc): the ``spec`` tree with its placeholders."""

    #: ``scheduling.schedconfig`` kind name.
    KIND = ""
    #: URL slug of the pages.
    SLUG = ""

    name = models.CharField(max_length=253, unique=True)
    description = models.TextField(blank=True)
    spec = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    etag_fields = ("name", "description", "spec", "revision_id")

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("scheduling:template-detail", args=[self.SLUG, self.name])


class NodeSchedulerConfig(SchedulerTemplateBase):
    """A node-affinity template (``spec.nodeAffinity``), e.g. the seed's resource-pool-example."""

    KIND = "NodeSchedulerConfig"
    SLUG = "nsc"

    revision = models.ForeignKey("NodeSchedulerConfigRevision", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")

    class Meta(SchedulerTemplateBase.Meta):
        verbose_name = _("node scheduler config")
        verbose_name_plural = _("node scheduler configs")
        permissions = [("rollback_nodeschedulerconfig", "Can roll a node scheduler config back to an earlier revision")]


class PodSchedulerConfig(SchedulerTemplateBase):
    """A pod (anti-)affinity template (``spec.podAffinity`` / ``spec.podAntiAffinity``)."""

    KIND = "PodSchedulerConfig"
    SLUG = "psc"

    revision = models.ForeignKey("PodSchedulerConfigRevision", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")

    class Meta(SchedulerTemplateBase.Meta):
        verbose_name = _("pod scheduler config")
        verbose_name_plural = _("pod scheduler configs")
        permissions = [("rollback_podschedulerconfig", "Can roll a pod scheduler config back to an earlier revision")]


class SchedulerConfigBinding(models.Model):
    """A class of pods bound to templates and their arguments (upstream scb).

    ``namespace`` empty: the binding applies in every namespace. ``spec`` is the upstream
    spec: ``selector``, ``priority``, ``nodeSchedulerConfig``/``podSchedulerConfig`` ``{name, args}``.
    """

    KIND = "SchedulerConfigBinding"

    name = models.CharField(max_length=253)
    namespace = models.CharField(max_length=63, blank=True, help_text=_("Empty: every namespace."))
    description = models.TextField(blank=True)
    spec = models.JSONField(default=dict)
    revision = models.ForeignKey("SchedulerConfigBindingRevision", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    etag_fields = ("name", "namespace", "description", "spec", "revision_id")

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="scheduling_binding_identity")]
        permissions = [("rollback_schedulerconfigbinding", "Can roll a scheduler config binding back to an earlier revision")]
        verbose_name = _("scheduler config binding")
        verbose_name_plural = _("scheduler config bindings")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def get_absolute_url(self) -> str:
        return reverse("scheduling:binding-detail", args=[self.pk])


class SpecRevision(Revision):
    """A template's or binding's spec as it was (``body``: the upstream ``spec``)."""

    description = models.TextField(blank=True)
    body = models.JSONField(default=dict)

    class Meta:
        abstract = True

    def spec(self) -> dict:
        return {"description": self.description, "spec": self.body}


class NodeSchedulerConfigRevision(SpecRevision):
    template = models.ForeignKey(NodeSchedulerConfig, on_delete=models.CASCADE, related_name="revisions")

    owner_field = "template"
    Meta = revision_meta("template", "scheduling_nsc_revision_number")


class PodSchedulerConfigRevision(SpecRevision):
    template = models.ForeignKey(PodSchedulerConfig, on_delete=models.CASCADE, related_name="revisions")

    owner_field = "template"
    Meta = revision_meta("template", "scheduling_psc_revision_number")


class SchedulerConfigBindingRevision(SpecRevision):
    binding = models.ForeignKey(SchedulerConfigBinding, on_delete=models.CASCADE, related_name="revisions")

    owner_field = "binding"
    Meta = revision_meta("binding", "scheduling_scb_revision_number")


class SchedulingConfigVersion(models.Model):
    """One row: a number bumped (in the change's transaction) on every change to templates,
    bindings and policy names, so webhook processes know when their cache is stale."""

    number = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"scheduling config v{self.number}"
