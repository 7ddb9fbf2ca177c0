"""Form pieces every app's pages share."""

from __future__ import annotations

from typing import Any

from django import forms


class BlockFieldsForm(forms.Form):
    """Each field renders in its own block (label, help, errors, widget), as the page layouts expect."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.template_name = "core/field_block.html"
