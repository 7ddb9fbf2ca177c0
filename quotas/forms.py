"""Forms of the quota pages.

Forms only parse what a person typed (resource lines, usernames, a workload manifest);
every rule of the tree (parent keys, remaining, siblings, leaves) lives in ``services`` so
the UI and the API refuse exactly the same things. A ``core.errors.Refused`` is put back on the
form with ``add_refusal``, on the field it names (``hard.limits.cpu`` lands on ``hard``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from core.forms import BlockFieldsForm, PastedField, VersionField, reason_field

#: ``key: quantity`` or ``key=quantity``; the value may be quoted as YAML would allow.
RESOURCE_LINE = re.compile(r"""^(?P<key>[^\s:=]+)\s*[:=]\s*(?P<q>["']?)(?P<value>[^\s"']+)(?P=q)\s*$""")
MAX_MANIFEST = 1_000_000


def parse_resource_lines(text: str) -> dict[str, str]:
    """``key: quantity`` lines into a dict; blank lines and ``#`` comments are skipped.

    Quantities are checked by the services (they name the key at fault); here only the
    shape of each line, so a typo is reported with its line number.
    """
    resources: dict[str, str] = {}
    for number, raw in enumerate((text or "").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = RESOURCE_LINE.match(line)
        if match is None:
            raise forms.ValidationError(
                _("Line %(number)s: “%(line)s” is not “key: quantity” (for example “limits.cpu: 10”)."),
                code="malformed_line", params={"number": number, "line": raw.strip()})
        key = match["key"]
        if key in resources:
            raise forms.ValidationError(_("Line %(number)s: %(key)s is given twice."), code="duplicate_key",
                                        params={"number": number, "key": key})
        resources[key] = match["value"]
    return resources


def resource_lines(resources: Mapping[str, Any] | None) -> str:
    """The inverse of ``parse_resource_lines``, for prefilled editors."""
    return "\n".join(f"{key}: {value}" for key, value in sorted((resources or {}).items()))


def parse_usernames(text: str) -> list[str]:
    """Usernames separated by commas, spaces or newlines; duplicates dropped, order kept."""
    return list(dict.fromkeys(n for n in re.split(r"[\s,]+", text or "") if n))


class ResourceLinesField(forms.CharField):
    """A textarea of ``key: quantity`` lines, cleaned to a dict."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "code"}))
        super().__init__(**kwargs)

    def clean(self, value: Any) -> dict[str, str]:
        return parse_resource_lines(super().clean(value))


class GroupCreateForm(BlockFieldsForm):
    """A new root or child group. With a fixed parent (a detail page's "create child") that field is read-only."""

    parent = forms.CharField(required=False, max_length=253, label=_("Parent group"),
                             help_text=_("Empty: a new root. A child's quota is carved out of its parent's remaining."))
    name = forms.CharField(max_length=253, label=_("Name"),
                           help_text=_("Unique in the fleet: lower-case letters, digits, '-' and '.' (the business-group id)."))
    description = forms.CharField(required=False, max_length=500, label=_("Description"))
    hard = ResourceLinesField(label=_("Hard limits"),
                              help_text=_("One “key: quantity” per line, e.g. limits.cpu: 10, limits.cpu.A4: 4, "
                                          "cash/limits.cpu: 100 (core-hours). A child needs every key of its parent."))
    owners = forms.CharField(required=False, max_length=2000, label=_("Owners"),
                             help_text=_("Usernames, comma separated: they may manage this group's subtree."))
    reason = reason_field()

    def __init__(self, *args: Any, parent: str | None = None, fixed_parent: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if parent:
            self.fields["parent"].initial = parent
        self.fields["parent"].disabled = fixed_parent

    def clean_name(self) -> str:
        return self.cleaned_data["name"].strip()

    def clean_parent(self) -> str | None:
        return (self.cleaned_data.get("parent") or "").strip() or None

    def clean_owners(self) -> list[str]:
        return parse_usernames(self.cleaned_data.get("owners", ""))


class ResizeForm(BlockFieldsForm):
    """The group's whole ``hard``, prefilled: keys left out are removed (the services check what that implies)."""

    hard = ResourceLinesField(label=_("Hard limits"),
                              help_text=_("One “key: quantity” per line. Growing takes from the parent's remaining; "
                                          "shrinking below usage is allowed, but admissions then fail until usage drops."))
    reason = reason_field()
    version = VersionField()


class OwnersForm(BlockFieldsForm):
    owners = forms.CharField(required=False, max_length=2000, label=_("Owners"),
                             help_text=_("Usernames, comma separated; empty removes every owner."))
    reason = reason_field()
    version = VersionField()

    def clean_owners(self) -> list[str]:
        return parse_usernames(self.cleaned_data.get("owners", ""))


class DeleteForm(BlockFieldsForm):
    reason = reason_field()
    version = VersionField()


class MoveForm(BlockFieldsForm):
    """Part of this group's hard to a sibling. The target is checked by the services (siblings only)."""

    target = forms.CharField(max_length=253, label=_("Target sibling"))
    amount = ResourceLinesField(label=_("Amount to move"),
                                widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "class": "code"}),
                                help_text=_("“key: quantity” lines, e.g. limits.cpu: 5."))
    reason = reason_field()
    version = VersionField()

    def __init__(self, *args: Any, siblings: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = list(siblings)
        submitted = self.data.get(self.add_prefix("target")) if self.is_bound else None
        if submitted and submitted not in names:  # keep what was sent visible, the services refuse it
            names.append(submitted)
        self.fields["target"].widget = forms.Select(choices=[("", _("— choose a sibling —"))] + [(n, n) for n in names])

    def clean_target(self) -> str:
        return self.cleaned_data["target"].strip()


class CheckForm(BlockFieldsForm):
    """The what-if: a workload manifest and an optional group that overrides its label."""

    workload = PastedField(what=_("a workload manifest"), max_length=MAX_MANIFEST, rows=18, label=_("Workload (YAML or JSON)"),
                           help_text=_("A Deployment, StatefulSet, Rollout, TFJob, … whose label "
                                           "biz.group.resource.quota names its quota group."))
    group = forms.CharField(required=False, max_length=253, label=_("Quota group (optional)"),
                            help_text=_("Check against this group instead of the one named by the workload's label."))

    def clean_group(self) -> str | None:
        return (self.cleaned_data.get("group") or "").strip() or None
