"""Every "paste JSON or YAML" box reads text the same way (``core.forms.parse_pasted``): the
same refusal with line and column for a syntax error, the same refusal of a list where a
mapping belongs, dates left as strings as Kubernetes reads them."""

from __future__ import annotations

import pytest
from django import forms

from console.administration.forms import ConfigTypeForm
from federation.forms import PolicyForm as FederationPolicyForm
from federation.forms import SubmitForm
from nodeconfig.forms import TargetForm
from quotas.forms import CheckForm
from scheduling.forms import BindingForm, PreviewForm
from scheduling.forms import PolicyForm as SchedulingPolicyForm

BOXES = {
    "node config": (TargetForm, "config"),
    "scheduling profile": (SchedulingPolicyForm, "config"),
    "scheduling binding": (BindingForm, "spec"),
    "scheduling pod": (PreviewForm, "pod"),
    "federated object": (SubmitForm, "object"),
    "federation policy": (FederationPolicyForm, "spec"),
    "quota workload": (CheckForm, "workload"),
    "config type schema": (ConfigTypeForm, "schema"),
    "config type default": (ConfigTypeForm, "default_config"),
}


def refusal(form_class, name: str, text: str) -> str:
    with pytest.raises(forms.ValidationError) as refused:
        form_class.base_fields[name].clean(text)
    return " ".join(refused.value.messages)


@pytest.mark.parametrize("box", sorted(BOXES))
def test_a_syntax_error_names_its_line_and_column_in_every_box(box):
    form_class, name = BOXES[box]
    assert refusal(form_class, name, "metadata:\n  name: [a, b\nspec: {}").startswith("Invalid YAML at line 3, column 5")


@pytest.mark.parametrize("box", sorted(BOXES))
def test_every_box_refuses_a_list_where_a_mapping_belongs_and_keeps_dates_as_text(box):
    form_class, name = BOXES[box]
    assert "must be a mapping (key: value pairs), not a list" in refusal(form_class, name, "- a\n- b")
    value = form_class.base_fields[name].clean("metadata:\n  created: 2024-01-01\n")
    assert value == {"metadata": {"created": "2024-01-01"}}
