"""Forms of the fleet pages: they only parse what a person typed; ``fleet.services`` decides."""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.utils.translation import gettext_lazy as _

from core.forms import BlockFieldsForm, VersionField


class CordonForm(BlockFieldsForm):
    """Cordon, drain or uncordon one cluster (the button pressed is ``action``), with a reason
    kept in the audit log; ``version`` is the cluster's ETag, so a change made after someone
    else's is refused instead of undoing it."""

    ACTIONS: ClassVar[list[tuple[str, Any]]] = [("cordon", _("Cordon")), ("drain", _("Drain")), ("uncordon", _("Uncordon"))]

    action = forms.ChoiceField(choices=ACTIONS, label=_("Action"), widget=forms.HiddenInput,
                               help_text=_("Cordon: no new replicas go there. Drain: its replicas also move to other "
                                           "clusters, each workload within its rollout budget. Uncordon: back to normal."))
    reason = forms.CharField(max_length=500, label=_("Reason"), widget=forms.TextInput(attrs={"size": 40}),
                             help_text=_("Why; kept in the audit log."))
    version = VersionField()


class WebhookConfigurationForm(BlockFieldsForm):
    """Where a member cluster's API server reaches Meridian, and the CA it must trust (applying
    one of Meridian's webhook configurations needs both; ``fleet.webhooks`` checks them)."""

    base_url = forms.CharField(required=False, max_length=2000, label=_("Meridian's URL"),
                               widget=forms.URLInput(attrs={"size": 50, "placeholder": "https://meridian.your-company.net"}),
                               help_text=_("As the cluster's API server reaches it (https). Empty: MERIDIAN_PUBLIC_URL."))
    ca_bundle = forms.CharField(required=False, max_length=200_000, label=_("CA bundle (PEM)"),
                                widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "code"}),
                                help_text=_("The CA that signed Meridian's serving certificate. Applying needs it: "
                                            "with failurePolicy Fail, a certificate the API server does not trust "
                                            "refuses every request the webhook is sent."))
