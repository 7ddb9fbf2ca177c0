"""Forms of the federation pages.

Forms only parse what a person typed (a native object or a policy spec as YAML or JSON, a
policy choice, a reason); every rule about objects and policies lives in ``services`` (and
``policy``), so the UI and the API refuse exactly the same things. A ``core.errors.Refused``
is put back on the form with ``core.forms.add_refusal``: each error path lands on the field
it is about (``spec.placement[0].preferences.minReplicas`` on the spec,
``object.metadata.name`` on the object, routed by ``refusal_fields``) with its path in front
of the message, so a person reads where to look. Forms that change something carry its
``version`` (ETag), so a save made after someone else's change is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import yaml
from django import forms
from django.utils.translation import gettext_lazy as _

from core.forms import BlockFieldsForm, PastedField, QuickSelect, VersionField, reason_field

from .models import FederatedObject, FederatedRevision, OverridePolicy, PropagationPolicy

POLICY_KINDS = {"propagation": PropagationPolicy, "override": OverridePolicy}
POLICY_TITLES = {"propagation": _("Propagation policies"), "override": _("Override policies")}


# ---------------------------------------------------------------------------- YAML


def to_yaml(value: Any) -> str:
    """The stored JSON as people edit it (keys in the order they were written)."""
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)


# ---------------------------------------------------------------------------- policy choices


def policy_choices(model, blank: Any) -> list[tuple[str, Any]]:
    rows = model.objects.order_by("namespace", "name").values_list("namespace", "name")
    return [("", blank)] + [(f"{ns}/{name}", f"{ns}/{name}" if ns else f"{name} ({_('fleet-wide')})") for ns, name in rows]


# ---------------------------------------------------------------------------- objects


EXAMPLE_OBJECT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels:
    app: web
spec:
  replicas: 6
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        resources:
          requests: {cpu: 500m, memory: 512Mi}
"""


class SubmitForm(BlockFieldsForm):
    """A native object to federate (or a new template for one that exists), with its policies."""

    refusal_fields: ClassVar[dict[str, str]] = {"object": "object", "propagation_policy": "propagation_policy", "override_policy": "override_policy"}

    object = PastedField(what=_("a Kubernetes object"), label=_("Object (YAML or JSON)"),
                       help_text=_("A native object as you would kubectl apply it: Deployment, StatefulSet, Job, "
                                   "ConfigMap, Secret, Service, or any custom resource."))
    propagation_policy = forms.ChoiceField(required=False, label=_("Propagation policy"), widget=QuickSelect,
                                           help_text=_("Empty: the one the object's label kubeadmiral.io/"
                                                       "propagation-policy-name names (ConfigMaps and Secrets without "
                                                       "one follow the workloads that use them)."))
    override_policy = forms.ChoiceField(required=False, label=_("Override policy (optional)"), widget=QuickSelect)
    change_cause = forms.CharField(required=False, max_length=500, label=_("Change cause"),
                                   widget=forms.TextInput(attrs={"size": 60}),
                                   help_text=_("Kept with the revision, like kubectl's change-cause."))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["propagation_policy"].choices = policy_choices(PropagationPolicy, _("— from the object's labels —"))
        self.fields["override_policy"].choices = policy_choices(OverridePolicy, _("— from the object's labels, or none —"))


class EditTemplateForm(BlockFieldsForm):
    """A new template for one federated object: same kind, namespace and name."""

    refusal_fields: ClassVar[dict[str, str]] = {"object": "template"}

    template = PastedField(what=_("the template"), rows=24, label=_("Template (YAML)"),
                         help_text=_("Saving a changed template makes a new revision and rolls it out cluster by cluster."))
    change_cause = forms.CharField(required=False, max_length=500, label=_("Change cause"),
                                   widget=forms.TextInput(attrs={"size": 60}))
    version = VersionField()

    def __init__(self, *args: Any, fed: FederatedObject, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fed = fed

    def clean_template(self) -> dict[str, Any]:
        template = self.cleaned_data["template"]
        meta = template.get("metadata") if isinstance(template.get("metadata"), Mapping) else {}
        identity = (template.get("kind"), meta.get("namespace") or "", meta.get("name"))
        if identity != (self.fed.kind, self.fed.namespace, self.fed.name):
            raise forms.ValidationError(
                _("Kind, namespace and name must stay %(kind)s %(key)s; submit a new object for another one.")
                % {"kind": self.fed.kind, "key": self.fed.key}, code="identity")
        return template


class RollbackForm(BlockFieldsForm):
    revision = forms.TypedChoiceField(coerce=int, label=_("Revision"), widget=QuickSelect)
    change_cause = forms.CharField(max_length=500, label=_("Change cause"),
                                   help_text=_("Why you roll back; kept with the new revision."))
    version = VersionField()

    def __init__(self, *args: Any, revisions: Iterable[FederatedRevision] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["revision"].choices = [(r.number, f"r{r.number}") for r in revisions]


class ReasonForm(BlockFieldsForm):
    """Pause, resume, reschedule: an optional reason for the audit log."""

    reason = reason_field(max_length=500)
    version = VersionField()


class DeleteForm(BlockFieldsForm):
    """Deleting removes the object from every member cluster: type its name to confirm."""

    confirm = forms.CharField(max_length=253, label=_("Type the name to confirm"))
    version = VersionField()

    def __init__(self, *args: Any, expected: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.expected = expected
        self.fields["confirm"].help_text = _("Removes it from every member cluster. Type %(name)s.") % {"name": expected}

    def clean_confirm(self) -> str:
        value = self.cleaned_data["confirm"].strip()
        if value != self.expected:
            raise forms.ValidationError(_("Type %(name)s exactly to delete it.") % {"name": self.expected}, code="confirm")
        return value


# ---------------------------------------------------------------------------- policies


class PolicyForm(BlockFieldsForm):
    """A propagation or override policy; the spec is validated by ``services.save_policy``."""

    refusal_fields: ClassVar[dict[str, str]] = {"spec": "spec", "name": "name", "namespace": "namespace"}

    namespace = forms.CharField(required=False, max_length=63, label=_("Namespace"),
                                help_text=_("Empty: a fleet-wide policy (a cluster policy upstream) any namespace may use."))
    name = forms.CharField(max_length=253, label=_("Name"))
    description = forms.CharField(required=False, max_length=500, label=_("Description"))
    spec = PastedField(what=_("the spec"), empty={}, rows=16, label=_("Spec (YAML)"),
                     help_text=_("{} for an empty spec; an empty field is refused, never saved as one."))
    version = VersionField()

    def __init__(self, *args: Any, kind: str, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.fields["namespace"].disabled = self.fields["name"].disabled = editing
        self.fields["spec"].help_text = (
            _("Upstream field names: schedulingMode (Divide or Duplicate), clusterSelector, clusterAffinity, "
              "tolerations, maxClusters, placement (cluster + preferences minReplicas/maxReplicas/weight), "
              "stickyCluster, disableFollowerScheduling, schedulingProfile, replicaRescheduling.")
            if kind == "propagation" else
            _("overrideRules: a list of {targetClusters: {clusters, clusterSelector, clusterAffinity}, "
              "overriders: {jsonpatch: [{operator, path, value}]}}."))

    def clean_namespace(self) -> str:
        return (self.cleaned_data.get("namespace") or "").strip()

    def clean_name(self) -> str:
        return (self.cleaned_data.get("name") or "").strip()


# ---------------------------------------------------------------------------- clusters


class CordonForm(BlockFieldsForm):
    ACTIONS: ClassVar[list[tuple[str, Any]]] = [("cordon", _("Cordon")), ("drain", _("Drain")), ("uncordon", _("Uncordon"))]

    action = forms.ChoiceField(choices=ACTIONS, label=_("Action"), widget=forms.RadioSelect,
                               help_text=_("Cordon: no new replicas go there. Drain: its replicas also move to other "
                                           "clusters, each workload within its rollout budget. Uncordon: back to normal."))
    reason = reason_field(required=True, max_length=500)


# ---------------------------------------------------------------------------- what-if


class WhatIfForm(BlockFieldsForm):
    """A hypothetical object and a policy (an existing one, or a spec typed here)."""

    refusal_fields: ClassVar[dict[str, str]] = {"object": "object", "policy": "policy", "policy.*": "policy_spec"}

    object = PastedField(what=_("a Kubernetes object"), label=_("Object (YAML or JSON)"))
    policy = forms.ChoiceField(required=False, label=_("Propagation policy"), widget=QuickSelect)
    policy_spec = PastedField(what=_("a policy spec"), empty={}, rows=8, required=False,
                            label=_("…or a policy spec (YAML)"),
                            help_text=_("Used instead of the chosen policy when given, e.g. "
                                        "“schedulingMode: Divide” and “maxClusters: 2”."))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["policy"].choices = policy_choices(PropagationPolicy, _("— choose a policy —"))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.errors and not data.get("policy") and not data.get("policy_spec"):
            self.add_error("policy", _("Choose a propagation policy or type a policy spec."))
        return data

    def policy_argument(self) -> str | dict[str, Any]:
        return self.cleaned_data.get("policy_spec") or self.cleaned_data["policy"]
