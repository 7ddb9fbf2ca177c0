"""Form pieces every app's pages share."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.utils.translation import gettext_lazy as _

from .errors import NON_FIELD, Refused
from .permissions import restrict
from .roles import MERIDIAN_APPS


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


class DiffForm(BlockFieldsForm):
    """Two revision numbers to compare (GET ``a`` and ``b``), newest pair preselected."""

    a = forms.TypedChoiceField(coerce=int, label=_("From"))
    b = forms.TypedChoiceField(coerce=int, label=_("To"))

    def __init__(self, *args: Any, revisions: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        revisions = list(revisions)
        choices = [(r.number, f"r{r.number} · {r.get_action_display()}") for r in revisions]
        self.fields["a"].choices = self.fields["b"].choices = choices
        if len(revisions) >= 2:
            self.initial.setdefault("a", revisions[1].number)
            self.initial.setdefault("b", revisions[0].number)
