"""Forms of the scheduling pages (Part A).

Forms only parse what a person typed (JSON or YAML); every rule about policies, templates and
bindings lives in ``services`` (the pure modules' validation), so the pages and the API refuse
the same things. A refusal is put back on the form with ``core.forms.add_refusal``; forms that
change an object carry its ``version`` (ETag).
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from django import forms
from django.utils.translation import gettext_lazy as _

from core.forms import BlockFieldsForm, PastedField, QuickSelect, VersionField, parse_pasted, reason_field, yaml_error
from fleet.forms import WebhookConfigurationForm

from .manifests import ManifestError, load_manifests, load_spec


def parse_document(text: str, *, what: Any = "value", required: bool = True, kind: type | None = None) -> Any:
    """``core.forms.parse_pasted`` for callers outside a form (the API's YAML bodies, a
    preview's arguments): its refusal as a ``ValueError``."""
    try:
        return parse_pasted(text, what=what, kind=kind, required=required)
    except forms.ValidationError as exc:
        raise ValueError(" ".join(exc.messages)) from exc


def parse_pod(text: str) -> dict[str, Any]:
    return parse_document(text, what=_("the pod"), kind=dict)


def parse_template_spec(text: str) -> Any:
    """A template spec typed as upstream writes it: placeholders such as ``- {{.Pool}}`` may stand
    unquoted (``manifests`` reads the text as Go first), or as JSON."""
    text = (text or "").strip()
    if not text:
        raise ValueError(str(_("Enter the spec (for example nodeAffinity: ...).")))
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return load_spec(text)
    except yaml.YAMLError as exc:
        raise ValueError(yaml_error(exc)) from exc
    except ManifestError as exc:
        if exc.code == "one_document":
            raise ValueError(str(_("Enter one spec (one YAML document)."))) from exc
        raise ValueError(exc.detail) from exc
    except ValueError as exc:  # an action outside the supported Go subset
        raise ValueError(str(exc)) from exc


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def as_yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, default_flow_style=False)


class TemplateSpecField(PastedField):
    """A template's spec: upstream's own YAML, where ``{{.Pool}}`` placeholders may stand unquoted."""

    def clean(self, value: Any) -> Any:
        text = forms.CharField.clean(self, value)
        try:
            return parse_template_spec(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


class ObjectForm(BlockFieldsForm):
    """A scheduling object's create and edit form: its identity is fixed once it exists."""

    identity: tuple[str, ...] = ("name",)

    def __init__(self, *args: Any, instance=None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if instance is not None:
            for name in self.identity:
                self.fields[name].disabled = True


class PolicyForm(ObjectForm):
    name = forms.CharField(max_length=63, label=_("Name"), help_text=_("What pods name in sched.cloud.ctrip.com/policy."))
    description = forms.CharField(required=False, label=_("Description"), widget=forms.Textarea(attrs={"rows": 2}))
    config = PastedField(what=_("the profile"), empty={}, required=False, label=_("Profile (JSON or YAML)"),
                             help_text=_("KubeSchedulerConfiguration profile: plugins (filter/score enabled, disabled, "
                                         "weights), pluginConfig, percentageOfNodesToScore."))
    is_default = forms.BooleanField(required=False, label=_("Default policy"),
                                    help_text=_("Pods that name no policy are scheduled with it."))
    reason = reason_field()
    version = VersionField()
    refusal_fields = {"config": "config"}


class TemplateForm(ObjectForm):
    name = forms.CharField(max_length=253, label=_("Name"), help_text=_("e.g. resource-pool-example"))
    description = forms.CharField(required=False, label=_("Description"), widget=forms.Textarea(attrs={"rows": 2}))
    spec = TemplateSpecField(what=_("the spec"), label=_("Spec (YAML or JSON)"),
                           help_text=_("Upstream spec: nodeAffinity (NodeSchedulerConfig) or podAffinity / podAntiAffinity "
                                       "(PodSchedulerConfig); placeholders are written {{.Name}}."))
    reason = reason_field()
    version = VersionField()
    refusal_fields = {"metadata": "name", "spec.*": "spec"}


class BindingForm(ObjectForm):
    name = forms.CharField(max_length=253, label=_("Name"))
    namespace = forms.CharField(required=False, max_length=63, label=_("Namespace"),
                                help_text=_("Empty: the binding applies in every namespace."))
    description = forms.CharField(required=False, label=_("Description"), widget=forms.Textarea(attrs={"rows": 2}))
    spec = PastedField(what=_("the spec"), label=_("Spec (YAML or JSON)"),
                           help_text=_("selector (a label selector over pods; {} selects every pod), priority, "
                                       "nodeSchedulerConfig / podSchedulerConfig: {name, args}."))
    reason = reason_field()
    version = VersionField()
    refusal_fields = {"metadata": "name", "spec.*": "spec"}
    identity = ("name", "namespace")


class ImportForm(BlockFieldsForm):
    yaml = forms.CharField(max_length=5_000_000, strip=False, label=_("Upstream YAML"),
                           widget=forms.Textarea(attrs={"rows": 20, "spellcheck": "false", "class": "code"}),
                           help_text=_("sched.cloud.ctrip.com/v1 NodeSchedulerConfig, PodSchedulerConfig and "
                                       "SchedulerConfigBinding objects, separated by ---."))
    reason = reason_field()


class PreviewForm(BlockFieldsForm):
    pod = PastedField(what=_("the pod"), label=_("Pod (YAML or JSON)"),
                          help_text=_("A v1 Pod as it would be created, with its labels and annotations."))
    namespace = forms.CharField(required=False, max_length=63, label=_("Namespace"),
                                help_text=_("The namespace it is created in (default: the pod's metadata.namespace)."))


class SimulateForm(BlockFieldsForm):
    cluster = forms.ChoiceField(label=_("Cluster"), widget=QuickSelect)
    pod = PastedField(what=_("the pod"), label=_("Pod (YAML or JSON)"))
    replicas = forms.IntegerField(min_value=1, max_value=5000, initial=10, label=_("Replicas"))
    policy = forms.ChoiceField(required=False, label=_("Policy"), widget=QuickSelect)
    compare_with = forms.ChoiceField(required=False, label=_("Compare with"), widget=QuickSelect)

    def __init__(self, *args: Any, clusters=(), policies=(), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cluster"].choices = [(c, c) for c in clusters]
        self.fields["policy"].choices = [("", _("The pod's annotation, else the default"))] + [(p, p) for p in policies]
        self.fields["compare_with"].choices = [("", _("No comparison"))] + [(p, p) for p in policies]


class WebhookForm(WebhookConfigurationForm):
    """The cluster whose scheduling webhook is shown, then the URL and CA bundle every webhook page asks."""

    cluster = forms.ChoiceField(label=_("Cluster"), widget=QuickSelect)
    field_order = ["cluster", "base_url", "ca_bundle"]

    def __init__(self, *args: Any, clusters=(), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cluster"].choices = [(c, c) for c in clusters]


__all__ = ["load_manifests"]
