"""Form pieces every app's pages share."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django import forms
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from kube.limits import MAX_DEPTH, deeper_than

from .errors import NON_FIELD, Refused
from .models import Revision
from .permissions import restrict
from .roles import MERIDIAN_APPS


class QuickSelect(forms.Select):
    """A ``<select>`` written in one pass. Django renders every ``<option>`` through a template of
    its own: for the 500 clusters of a fleet that was 130 ms of the emergency downgrade page,
    the page opened in an incident. Same markup; grouped choices go the template way."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        widget = self.get_context(name, value, attrs)["widget"]
        if any(group for group, _options, _index in widget["optgroups"]):
            return super().render(name, value, attrs, renderer)
        options = format_html_join("", "<option value=\"{}\"{}>{}</option>", (
            (str(option["value"]), " selected" if option["selected"] else "", option["label"])
            for _group, group_options, _index in widget["optgroups"] for option in group_options))
        return format_html("<select name=\"{}\"{}>{}</select>", widget["name"], flatatt(widget["attrs"]), options)


class BlockFieldsForm(forms.Form):
    """Each field renders in its own block (label, help, errors, widget), as the page layouts expect."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.template_name = "core/field_block.html"


def limit_choices(form: forms.Form, user: Any) -> forms.Form:
    """Every model choice of ``form`` over Meridian's models limited to the objects ``user`` may
    view (``core.permissions.restrict``): a fleet-wide role sees every cluster, a scoped one its
    own. Choices of other apps' models (users) are the page's business."""
    for field in form.fields.values():
        if isinstance(field, forms.ModelChoiceField) and field.queryset.model._meta.app_label in MERIDIAN_APPS:
            field.queryset = restrict(field.queryset, user, "view")
    return form


def yaml_error(exc: yaml.YAMLError, unmarked: Any = None) -> str:
    """PyYAML's message with the (1-based) line and column it points at; ``unmarked`` (with
    ``%(error)s``) words a problem that has no position."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return str((unmarked or _("Invalid YAML: %(error)s")) % {"error": problem})
    return str(_("Invalid YAML at line %(line)s, column %(column)s: %(error)s")
               % {"line": mark.line + 1, "column": mark.column + 1, "error": problem})


#: The most a person may paste into one text box.
MAX_PASTE = 1_000_000


class KubeYAMLLoader(yaml.SafeLoader):
    """YAML as Kubernetes reads it into JSON: an unquoted ``2024-01-01`` stays a string."""


KubeYAMLLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_KIND_NAMES = {dict: _("a mapping (key: value pairs)"), list: _("a list")}


def parse_pasted(text: str | None, *, what: Any, kind: type | None = dict, required: bool = True, empty: Any = None) -> Any:
    """What a person pasted into a text box, as YAML or JSON (JSON is YAML): the one reader of
    every "paste JSON or YAML" field.

    Nothing typed: refused when ``required``, else ``empty`` (also what a typed ``null``
    gives, unless ``empty`` is None); a syntax error names its line and column; only JSON
    values come out (a YAML tag making bytes or sets is refused), nested at most
    ``MAX_DEPTH`` levels, of ``kind`` (None: any value).
    """
    text = (text or "").strip()
    if not text:
        if not required:
            return empty
        raise forms.ValidationError(_("Paste %(what)s as YAML or JSON.") % {"what": what}, code="required")
    try:
        value = yaml.load(text, Loader=KubeYAMLLoader)
    except yaml.YAMLError as exc:
        raise forms.ValidationError(yaml_error(exc), code="invalid_yaml") from exc
    except RecursionError:
        value, too_deep = None, True
    else:
        too_deep = deeper_than(value)
    what = str(what)
    if too_deep:
        raise forms.ValidationError(_("%(what)s may nest at most %(limit)s levels deep.")
                                    % {"what": what[:1].upper() + what[1:], "limit": MAX_DEPTH}, code="too_deep")
    if value is None and empty is not None:
        return empty
    if kind is not None and not isinstance(value, kind):
        raise forms.ValidationError(_("%(what)s must be %(kind)s, not %(other)s.")
                                    % {"what": what[:1].upper() + what[1:], "kind": _KIND_NAMES[kind],
                                       "other": _("a list") if isinstance(value, list) else _("a scalar")},
                                    code="not_mapping" if kind is dict else "not_list")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise forms.ValidationError(_("Only JSON values are allowed (strings, numbers, booleans, lists, maps): %(error)s")
                                    % {"error": exc}, code="not_json") from exc
    return value


class PastedField(forms.CharField):
    """A text box of YAML or JSON, cleaned by ``parse_pasted`` (``required`` as any field's)."""

    def __init__(self, *, what: Any, empty: Any = None, kind: type | None = dict, rows: int = 14, **kwargs: Any) -> None:
        self.what, self.empty, self.kind = what, empty, kind
        kwargs.setdefault("max_length", MAX_PASTE)
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": rows, "spellcheck": "false", "class": "code"}))
        super().__init__(**kwargs)

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        return parse_pasted(text, what=self.what, kind=self.kind, required=self.required, empty=self.empty)


def add_refusal(form: forms.Form, exc: Refused) -> None:
    """Put a service's refusal on the form, so nothing typed is lost and nothing is a 500.

    Each message goes on the editable field its path names — by the path's first segment
    (``hard.limits.cpu`` lands on ``hard``), or through the form's ``refusal_fields`` routes
    (``{"spec": "policy"}``; ``"policy.*"`` routes only paths below ``policy``) — with the
    path in front when it says more than the field; the rest go above the form.
    """
    routes: dict[str, str] = getattr(form, "refusal_fields", {})
    placed = False
    for path, messages in exc.errors.items():
        field = _form_field(form, path, routes)
        for message in messages:
            plain = path in (field, NON_FIELD) or path in message
            form.add_error(field, message if plain else f"{path}: {message}")
            placed = True
    if not placed:
        form.add_error(None, exc.detail)


def _form_field(form: forms.Form, path: str, routes: dict[str, str]) -> str | None:
    """The editable form field a refusal's field path is about, or None (a non-field error)."""
    head = path.split(".", 1)[0].split("[", 1)[0]
    name = routes.get(f"{head}.*", routes.get(head, head)) if path != head else routes.get(head, head)
    field = form.fields.get(name)
    return name if field is not None and not field.disabled else None


class VersionField(forms.CharField):
    """The ETag of the object a form edits, carried through the page so a save made after
    someone else's change is refused instead of silently overwriting it."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.HiddenInput)
        kwargs.setdefault("max_length", 64)
        super().__init__(**kwargs)


def reason_field(required: bool = False, *, label: Any = None, max_length: int = 2000) -> forms.CharField:
    """The "why" of a change: kept in the audit log (and in the revision, where there is one)."""
    return forms.CharField(required=required, max_length=max_length, label=label or _("Reason"),
                           widget=forms.TextInput(attrs={"size": 40}),
                           help_text=_("Why you make this change; kept in the audit log."))


class ReasonForm(BlockFieldsForm):
    """A write that must say why (delete, restore): the reason lands in the revision and the audit log."""

    reason = reason_field(required=True)
    version = VersionField()


class RollbackForm(ReasonForm):
    """Roll back to an earlier revision: any but a delete's or a restore's (nothing to return to)."""

    revision = forms.TypedChoiceField(coerce=int, label=_("Revision"), widget=QuickSelect)
    field_order = ("revision", "reason", "version")

    def __init__(self, *args: Any, revisions: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        ended = (Revision.Action.DELETE, Revision.Action.RESTORE)
        self.fields["revision"].choices = [(r.number, self.revision_label(r)) for r in revisions if r.action not in ended]

    def revision_label(self, revision: Any) -> str:
        return f"r{revision.number} · {revision.get_action_display()}"


class DiffForm(BlockFieldsForm):
    """Two revision numbers to compare (GET ``a`` and ``b``), newest pair preselected."""

    a = forms.TypedChoiceField(coerce=int, label=_("From"), widget=QuickSelect)
    b = forms.TypedChoiceField(coerce=int, label=_("To"), widget=QuickSelect)

    def __init__(self, *args: Any, revisions: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        revisions = list(revisions)
        choices = [(r.number, f"r{r.number} · {r.get_action_display()}") for r in revisions]
        self.fields["a"].choices = self.fields["b"].choices = choices
        if len(revisions) >= 2:
            self.initial.setdefault("a", revisions[1].number)
            self.initial.setdefault("b", revisions[0].number)
