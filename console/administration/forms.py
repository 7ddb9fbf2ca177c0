"""The Administration section's forms: they only parse what an admin typed; the services
(``core.users``, ``core.tokens``, ``fleet.services``, ``fleet.tokens``) decide."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.translation import gettext_lazy as _

from core.bindings import Grant
from core.forms import BlockFieldsForm, PastedField, VersionField
from core.models import RoleBinding
from core.roles import ROLES, SCOPED_ROLES
from fleet.models import ClusterToken

ROLE_CHOICES = [("", _("none (signed in, reads nothing)"))] + [(role, role) for role in ROLES]
MAX_KUBECONFIG = 1_000_000


class UserCreateForm(BlockFieldsForm):
    username = forms.CharField(max_length=150, label=_("User name"))
    first_name = forms.CharField(max_length=150, required=False, label=_("First name"))
    last_name = forms.CharField(max_length=150, required=False, label=_("Last name"))
    email = forms.EmailField(required=False, label=_("Email"))
    password = forms.CharField(label=_("Password"), strip=False, widget=forms.PasswordInput(render_value=False),
                               help_text=_("They can change it after signing in."))
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False, label=_("Role"),
                             help_text=_("viewer: reads everything; operator: also rolls out, rolls back and downgrades; "
                                         "admin: everything, users and clusters included."))


class UserRoleForm(BlockFieldsForm):
    role = forms.ChoiceField(choices=ROLE_CHOICES, required=False, label=_("Role"))
    reason = forms.CharField(max_length=500, required=False, label=_("Reason"), help_text=_("Kept in the audit log."))


class UserActiveForm(BlockFieldsForm):
    active = forms.TypedChoiceField(choices=[("1", "1"), ("0", "0")], coerce=lambda v: v == "1", widget=forms.HiddenInput)
    reason = forms.CharField(max_length=500, required=False, label=_("Reason"), help_text=_("Kept in the audit log."))


class RoleBindingForm(BlockFieldsForm):
    """A role on part of the fleet (``core.bindings`` decides what is valid)."""

    role = forms.ChoiceField(choices=[(role, role) for role in SCOPED_ROLES], label=_("Role"),
                             help_text=_("viewer reads, operator also rolls out, rolls back, cordons and downgrades — "
                                         "only within the scope."))
    scope = forms.ChoiceField(choices=RoleBinding.Scope.choices, label=_("Scope"))
    names = forms.CharField(required=False, max_length=10_000, label=_("Names"),
                            help_text=_("Comma-separated: clusters, quota groups (each with its subtree) or namespaces."))
    selector = forms.CharField(required=False, max_length=500, label=_("Cluster label selector"),
                               help_text=_("Clusters only, as well as the names, e.g. team=a,env in (prod)."))
    reason = forms.CharField(max_length=500, required=False, label=_("Reason"), help_text=_("Kept in the audit log."))

    def grant(self) -> Grant:
        data = self.cleaned_data
        names = tuple(name.strip() for name in data["names"].split(",") if name.strip())
        return Grant(data["role"], data["scope"], names, data["selector"])


class RoleBindingRevokeForm(BlockFieldsForm):
    reason = forms.CharField(max_length=500, required=False, label=_("Reason"))


class APITokenIssueForm(BlockFieldsForm):
    """Whose token (its scope is that user's role), read-only or not, and how long it lives."""

    user = forms.ModelChoiceField(queryset=get_user_model().objects.none(), label=_("Owner"),
                                  help_text=_("The token acts as this user, with their role."))
    name = forms.CharField(max_length=100, required=False, label=_("Name"), help_text=_("What it is for, e.g. ci-pipeline."))
    read_only = forms.BooleanField(required=False, label=_("Read-only"),
                                   help_text=_("A read-only token may only read (GET), whatever its owner's role."))
    days = forms.IntegerField(min_value=1, max_value=3650, label=_("Valid for (days)"))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = get_user_model().objects.filter(is_active=True).order_by("username")
        self.fields["user"].label_from_instance = lambda user: user.get_username()
        self.fields["days"].initial = settings.MERIDIAN_TOKEN_TTL_DAYS


class ClusterRegisterForm(BlockFieldsForm):
    """A member cluster from a kubeconfig pasted or uploaded (the upload wins when both are given)."""

    name = forms.CharField(max_length=63, label=_("Name"), help_text=_("A DNS label, e.g. bj-3; it cannot change later."))
    display_name = forms.CharField(max_length=200, required=False, label=_("Display name"))
    kubeconfig = forms.CharField(required=False, max_length=MAX_KUBECONFIG, label=_("Kubeconfig"), strip=False,
                                 widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "class": "code"}),
                                 help_text=_("Encrypted at rest, never shown again and never in the audit log."))
    kubeconfig_file = forms.FileField(required=False, label=_("…or upload it"))
    context = forms.CharField(max_length=253, required=False, label=_("Context"),
                              help_text=_("Empty: the kubeconfig's current context."))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        upload = data.get("kubeconfig_file")
        if upload is not None:
            if upload.size > MAX_KUBECONFIG:
                self.add_error("kubeconfig_file", _("A kubeconfig is at most 1 MB."))
                return data
            try:
                data["kubeconfig"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("kubeconfig_file", _("This file is not text (UTF-8): upload the kubeconfig itself."))
                return data
        if not (data.get("kubeconfig") or "").strip():
            self.add_error("kubeconfig", _("Paste the kubeconfig or upload it."))
        return data

    def values(self) -> dict[str, Any]:
        """What ``fleet.services.register_cluster`` takes."""
        data = self.cleaned_data
        config = {"context": data["context"]} if data.get("context") else {}
        return {"name": data["name"], "display_name": data.get("display_name", ""), "connector": "kubernetes",
                "kubeconfig": data["kubeconfig"], "connector_config": config}


class ClusterTokenIssueForm(BlockFieldsForm):
    kind = forms.ChoiceField(choices=ClusterToken.Kind.choices, label=_("Kind"))
    name = forms.CharField(max_length=100, required=False, label=_("Name"))
    rotate = forms.BooleanField(required=False, label=_("Revoke this kind's other tokens"),
                                help_text=_("Rotate: the new token replaces every active one of its kind."))


class WebhookURLForm(BlockFieldsForm):
    base_url = forms.CharField(required=False, max_length=2000, label=_("Meridian's URL"),
                               widget=forms.URLInput(attrs={"size": 50, "placeholder": "https://meridian.your-company.net"}),
                               help_text=_("As the cluster's API server reaches it (https). Empty: MERIDIAN_PUBLIC_URL."))


def json_text(value: Any) -> str:
    return "" if value in (None, {}, []) else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


class ConfigTypeForm(BlockFieldsForm):
    """A node config type (upstream KCC's KatalystCustomConfig) as data: its GVR, the selector
    keys allowed per priority, the JSON schema of a target's config and the default body;
    ``nodeconfig.services.save_config_type`` checks the schema and that the default satisfies it."""

    name = forms.CharField(max_length=63, label=_("Kind"), help_text=_("e.g. AdminQoSConfiguration; it cannot change later."))
    group = forms.CharField(max_length=253, initial="config.katalyst.kubewharf.io", label=_("API group"))
    version = forms.CharField(max_length=63, initial="v1alpha1", label=_("API version"))
    resource = forms.CharField(max_length=63, label=_("Resource"), help_text=_("The plural resource name, e.g. adminqosconfigurations."))
    description = forms.CharField(required=False, max_length=2000, label=_("Description"),
                                  widget=forms.Textarea(attrs={"rows": 2}))
    allowed_keys = PastedField(what=_("the allowed selector keys"), kind=list, empty=[], required=False, max_length=100_000,
                               rows=4, label=_("Allowed selector keys"),
                               help_text=_('JSON: [{"priority": 0, "keyList": ["pool"]}, …]; the cluster key is always allowed.'))
    schema = PastedField(what=_("the JSON schema"), required=False, max_length=500_000, rows=10,
                         label=_("JSON schema of the config"), help_text=_("Draft 2020-12; empty: any object."))
    default_config = PastedField(what=_("the default config"), empty={}, required=False, max_length=500_000, rows=6,
                                 label=_("Default config"), help_text=_("What an agent gets without a target; it must satisfy the schema."))
    etag = VersionField()

    def __init__(self, *args: Any, instance: Any = None, **kwargs: Any) -> None:
        if instance is not None:
            kwargs["initial"] = {"name": instance.name, "group": instance.group, "version": instance.version,
                                 "resource": instance.resource, "description": instance.description,
                                 "allowed_keys": json_text(instance.allowed_keys), "schema": json_text(instance.schema),
                                 "default_config": json_text(instance.default_config)} | (kwargs.get("initial") or {})
        super().__init__(*args, **kwargs)
        if instance is not None:
            self.fields["name"].disabled = True  # a type's kind is its identity

    def values(self) -> dict[str, Any]:
        """What ``nodeconfig.services.save_config_type`` takes."""
        fields = ("name", "group", "version", "resource", "description", "allowed_keys", "schema", "default_config")
        return {field: self.cleaned_data[field] for field in fields if not self.fields[field].disabled}
