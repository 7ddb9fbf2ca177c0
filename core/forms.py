"""Form pieces every app's pages share."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.utils.translation import gettext_lazy as _


class BlockFieldsForm(forms.Form):
    """Each field renders in its own block (label, help, errors, widget), as the page layouts expect."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.template_name = "core/field_block.html"


def yaml_error(exc: yaml.YAMLError, unmarked: Any = None) -> str:
    """PyYAML's message with the (1-based) line and column it points at; ``unmarked`` (with
    ``%(error)s``) words a problem that has no position."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return str((unmarked or _("Invalid YAML: %(error)s")) % {"error": problem})
    return str(_("Invalid YAML at line %(line)s, column %(column)s: %(error)s")
               % {"line": mark.line + 1, "column": mark.column + 1, "error": problem})
