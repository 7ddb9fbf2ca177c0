"""Forms of the node config pages.

Forms only parse what a person typed; every rule about targets (names, selectors, conflicts,
schemas) lives in ``services`` so the UI and the API refuse exactly the same things. A
refusal from the services is put back on the form with ``core.forms.add_refusal``, on the
field it is about when there is one. Forms that change a target carry its ``version`` (its
ETag), so a save made after someone else's change is refused instead of overwriting it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from django import forms
from django.forms.models import ModelChoiceIterator
from django.utils.translation import gettext_lazy as _

from core import concurrency
from core.forms import BlockFieldsForm, PastedField, QuickSelect, VersionField, reason_field
from core.forms import RollbackForm as BaseRollbackForm
from fleet.models import Cluster

from .models import ConfigRevision, ConfigTarget, ConfigType
from .services import TargetSpec

#: What confirms a fleet-wide emergency downgrade (a cluster is confirmed by its name, a
#: selector by itself).
CONFIRM_FLEET = "fleet"

def parse_node_names(text: str) -> tuple[str, ...]:
    """Node names separated by newlines, commas or spaces; duplicates dropped, order kept."""
    return tuple(dict.fromkeys(n for n in re.split(r"[\s,]+", text or "") if n))


class _ClusterNames(ModelChoiceIterator):
    """The choices as names read in one query, not 500 whole clusters (their JSON fields decoded)."""

    def __iter__(self) -> Iterator[tuple[str, str]]:
        if self.field.empty_label is not None:
            yield ("", self.field.empty_label)
        for name in self.queryset.values_list("name", flat=True):
            yield (name, name)


class ClusterChoiceField(forms.ModelChoiceField):
    """A member cluster by name; empty means the whole fleet."""

    iterator = _ClusterNames

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("empty_label", _("Whole fleet"))
        super().__init__(queryset=Cluster.objects.order_by("name"), to_field_name="name", required=False,
                         widget=QuickSelect, **kwargs)


class TargetForm(BlockFieldsForm):
    """Create or edit a config target; ``spec()`` turns the chosen mode's fields into a TargetSpec."""

    type = forms.ModelChoiceField(queryset=ConfigType.objects.all(), to_field_name="name", label=_("Config type"))
    name = forms.CharField(max_length=253, label=_("Name"),
                           help_text=_("Lowercase letters, digits, '-' and '.', e.g. hybrid-for-disk-hdd."))
    cluster = ClusterChoiceField(label=_("Scope"), help_text=_("One member cluster, or the whole fleet."))
    mode = forms.ChoiceField(choices=ConfigTarget.Mode.choices, widget=forms.RadioSelect, initial=ConfigTarget.Mode.SELECTOR,
                             label=_("Targeting mode"))
    node_label_selector = forms.CharField(max_length=1000, required=False, label=_("Node label selector"),
                                          help_text=_("Kubernetes selector syntax, e.g. diskMode=hdd,machineModel in (A3,A4)."))
    priority = forms.IntegerField(required=False, initial=0, label=_("Priority"),
                                  help_text=_("The highest matching priority wins."))
    node_names = forms.CharField(required=False, label=_("Node names"), widget=forms.Textarea(attrs={"rows": 4}),
                                 help_text=_("One node name per line (commas work too)."))
    last_duration = forms.CharField(max_length=32, required=False, label=_("Last duration"),
                                    help_text=_("How long the node list lasts before it is removed, e.g. 72h."))
    config = PastedField(what=_("the config"), empty={}, required=False, rows=12, label=_("Config (JSON or YAML)"),
                         initial="{}")
    wave_size = forms.CharField(max_length=16, required=False, label=_("Wave size"),
                                help_text=_("Nodes per wave: a count or N%. Empty: all at once."))
    wave_interval_seconds = forms.IntegerField(min_value=0, max_value=86400, initial=60, label=_("Wave interval (seconds)"))
    failure_threshold_percent = forms.IntegerField(min_value=0, max_value=100, initial=10, label=_("Failure threshold (%)"),
                                                   help_text=_("Pause the rollout when more delivered nodes than this fail."))
    reason = forms.CharField(required=False, max_length=2000, label=_("Reason"), widget=forms.Textarea(attrs={"rows": 2}),
                             help_text=_("Why you make this change; kept in the revision history."))
    version = VersionField()

    def __init__(self, *args: Any, target: ConfigTarget | None = None, **kwargs: Any) -> None:
        if target is not None:
            kwargs["initial"] = initial_for(target) | (kwargs.get("initial") or {})
        super().__init__(*args, **kwargs)
        self.target = target
        if target is not None:  # a target's type and name are its identity
            self.fields["type"].disabled = self.fields["name"].disabled = True

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        mode = data.get("mode")
        if mode == ConfigTarget.Mode.SELECTOR and not (data.get("node_label_selector") or "").strip():
            self.add_error("node_label_selector", _("A label-selector target needs a selector."))
        if mode == ConfigTarget.Mode.NODE_LIST and not parse_node_names(data.get("node_names", "")):
            self.add_error("node_names", _("A node-list target needs at least one node name."))
        return data

    def spec(self) -> TargetSpec:
        """Only the chosen mode's fields count; the others are ignored, not silently combined."""
        data = self.cleaned_data
        mode = data["mode"]
        spec = TargetSpec(name=data["name"], cluster=data["cluster"].name if data.get("cluster") else None,
                          config=data["config"], wave_size=(data.get("wave_size") or "").strip(),
                          wave_interval_seconds=data["wave_interval_seconds"],
                          failure_threshold_percent=data["failure_threshold_percent"])
        if mode == ConfigTarget.Mode.SELECTOR:
            spec.node_label_selector = data["node_label_selector"].strip()
            spec.priority = data.get("priority") or 0
        elif mode == ConfigTarget.Mode.NODE_LIST:
            spec.node_names = parse_node_names(data["node_names"])
            spec.last_duration = (data.get("last_duration") or "").strip()
        return spec


def initial_for(target: ConfigTarget) -> dict[str, Any]:
    return {
        "type": target.config_type.name, "name": target.name, "cluster": target.cluster.name if target.cluster else None,
        "mode": target.mode, "node_label_selector": target.node_label_selector, "priority": target.priority,
        "node_names": "\n".join(target.node_names), "last_duration": target.last_duration,
        "config": json.dumps(target.config, indent=2, ensure_ascii=False, sort_keys=True),
        "wave_size": target.wave_size, "wave_interval_seconds": target.wave_interval_seconds,
        "failure_threshold_percent": target.failure_threshold_percent, "version": concurrency.etag(target),
    }


class RollbackForm(BaseRollbackForm):
    """A node config revision is also named by its config's hash."""

    def revision_label(self, revision: ConfigRevision) -> str:
        return f"{super().revision_label(revision)} · {revision.config_hash}"


class RolloutForm(BlockFieldsForm):
    """Pause, resume, advance or promote a paced rollout (the button pressed is ``action``)."""

    ACTIONS = [("pause", _("Pause")), ("resume", _("Resume")), ("advance", _("Advance one wave")),
               ("promote", _("Promote (release all)"))]

    action = forms.ChoiceField(choices=ACTIONS)
    reason = reason_field()
    version = VersionField()


class EmergencyForm(BlockFieldsForm):
    """The co-location downgrade: a scope, a reason, and the scope's name typed out (journey 1:
    at 03:00 the SRE types the cluster's name, so a slip of the radio button or the list cannot
    downgrade another scope than the one she read)."""

    SCOPES = [("fleet", _("Whole fleet")), ("cluster", _("One cluster")), ("selector", _("Nodes matching a label selector"))]

    scope = forms.ChoiceField(choices=SCOPES, widget=forms.RadioSelect, initial="fleet", label=_("Scope"))
    cluster = ClusterChoiceField(label=_("Cluster"), empty_label=_("— choose a cluster —"),
                                 help_text=_("For a label selector: limit it to this cluster (optional)."))
    selector = forms.CharField(required=False, max_length=1000, label=_("Label selector"),
                               help_text=_("e.g. pool=online"))
    reason = forms.CharField(max_length=2000, label=_("Reason"), widget=forms.TextInput(attrs={"size": 50}))
    confirm = forms.CharField(
        max_length=1000, label=_("Type the scope's name to confirm"),
        help_text=_("The cluster's name, the label selector as written above, or “fleet” for the whole fleet."),
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false", "data-confirm-scope": ""}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", "emergency_%s")
        super().__init__(*args, **kwargs)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        scope = data.get("scope")
        if scope == "cluster" and not data.get("cluster"):
            self.add_error("cluster", _("Choose the cluster to downgrade."))
        if scope == "selector" and not (data.get("selector") or "").strip():
            self.add_error("selector", _("Enter the label selector of the nodes to downgrade."))
        expected = self.confirmation(data)
        if expected and "confirm" in data and data["confirm"].strip() != expected:
            self.add_error("confirm", _("Type %(name)s, the name of the scope you chose, to confirm the downgrade.") % {"name": expected})
        return data

    @staticmethod
    def confirmation(data: dict[str, Any]) -> str:
        """What the user must type for the chosen scope ("" while the scope is incomplete)."""
        scope = data.get("scope")
        if scope == "fleet":
            return CONFIRM_FLEET
        if scope == "cluster":
            return data["cluster"].name if data.get("cluster") else ""
        return (data.get("selector") or "").strip() if scope == "selector" else ""

    def scope_args(self) -> dict[str, Any]:
        """``emergency_downgrade`` keyword arguments for the chosen scope."""
        data = self.cleaned_data
        cluster = data["cluster"].name if data.get("cluster") else None
        if data["scope"] == "fleet":
            return {"cluster": None, "selector": ""}
        if data["scope"] == "cluster":
            return {"cluster": cluster, "selector": ""}
        return {"cluster": cluster, "selector": data["selector"].strip()}


class ImportForm(BlockFieldsForm):
    yaml = forms.CharField(max_length=5_000_000, label=_("Upstream YAML"),
                           widget=forms.Textarea(attrs={"rows": 20, "spellcheck": "false", "class": "code"}),
                           help_text=_("One or more config.katalyst.kubewharf.io objects, separated by ---."))
    reason = reason_field()
