"""Forms of the CPU co-location pages: they parse what a person typed; the rules are in
``allocation`` and ``capacity`` (the API refuses exactly the same things). Forms that change a node carry
its version (ETag): an allocation made on a page read before another change is refused."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from core.forms import BlockFieldsForm, VersionField
from kube.quantity import QuantityError, parse_quantity

from .cpuset import SAME_CORE_FIRST, STRATEGIES

STRATEGY_CHOICES = [(s, s) for s in STRATEGIES]


class InstanceForm(BlockFieldsForm):
    namespace = forms.CharField(label=_("Namespace"), max_length=253)
    name = forms.CharField(label=_("Pod name"), max_length=253)
    app = forms.CharField(label=_("App"), max_length=253, required=False,
                          help_text=_("machineMaxList counts instances of one app per node."))
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)
    version = VersionField()


class AllocateForm(InstanceForm):
    request = forms.IntegerField(label=_("Exclusive CPUs"), min_value=1, max_value=100_000)
    strategy = forms.ChoiceField(label=_("Strategy (alloc-spec)"), choices=STRATEGY_CHOICES, initial=SAME_CORE_FIRST)
    exclude_reserved = forms.BooleanField(label=_("Exclude reserved CPUs (exclude-reserve-cpuset)"), required=False,
                                          initial=True)
    field_order = ["namespace", "name", "app", "request", "strategy", "exclude_reserved", "reason"]


def _milli(value: str) -> int:
    try:
        milli = parse_quantity(value).milli_value()
    except QuantityError as exc:
        raise forms.ValidationError(str(exc)) from exc
    if milli < 0:
        raise forms.ValidationError(_("Must not be negative."))
    return milli


class SharedForm(InstanceForm):
    cpu_request = forms.CharField(label=_("CPU request (shares)"), max_length=32, help_text=_('A quantity: "8", "500m".'))
    cpu_limit = forms.CharField(label=_("CPU limit (CFS quota)"), max_length=32, required=False,
                                help_text=_("Empty: no limit."))
    field_order = ["namespace", "name", "app", "cpu_request", "cpu_limit", "reason"]

    def clean_cpu_request(self) -> int:
        return _milli(self.cleaned_data["cpu_request"])

    def clean_cpu_limit(self) -> int:
        value = self.cleaned_data.get("cpu_limit")
        return _milli(value) if value else 0


class InstanceActionForm(forms.Form):
    """Release, or switch release-isolate, of one instance (a row's buttons)."""

    instance = forms.CharField(max_length=507, widget=forms.HiddenInput)
    on = forms.TypedChoiceField(choices=[("1", "on"), ("0", "off")], coerce=lambda v: v == "1", required=False,
                                widget=forms.HiddenInput)
    reason = forms.CharField(label=_("Reason"), max_length=2000, required=False)
    version = VersionField()


class WhatIfForm(forms.Form):
    request = forms.IntegerField(label=_("Exclusive CPUs"), min_value=1, max_value=100_000, initial=32)
    strategy = forms.ChoiceField(label=_("Strategy"), choices=STRATEGY_CHOICES, initial=SAME_CORE_FIRST, required=False)
    app = forms.CharField(label=_("App"), max_length=253, required=False)
