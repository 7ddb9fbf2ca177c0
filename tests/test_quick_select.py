"""``core.forms.QuickSelect`` writes the same ``<select>`` as Django's template-rendered one, and
the cluster choice reads names only: the emergency downgrade page lists every cluster."""

from __future__ import annotations

import pytest
from django import forms
from django.db import connection
from django.test.html import parse_html
from django.test.utils import CaptureQueriesContext

from core.forms import QuickSelect
from fleet.models import Cluster
from nodeconfig.forms import EmergencyForm

CHOICES = [("", "— choose —"), ("a", "Alpha & <b>"), ("b\"q", "Beta"), ("c", "Gamma")]


@pytest.mark.parametrize("value", [None, "a", "b\"q", ["c"]])
@pytest.mark.parametrize("attrs", [{}, {"id": "x", "required": True, "data-x": "1 < 2", "disabled": False}])
def test_the_markup_is_djangos(value, attrs):
    quick = QuickSelect(choices=CHOICES).render("scope", value, attrs=attrs)
    django = forms.Select(choices=CHOICES).render("scope", value, attrs=attrs)
    assert parse_html(quick) == parse_html(django)


def test_grouped_choices_are_rendered_the_template_way():
    grouped = [("Group", [("a", "A"), ("b", "B")]), ("c", "C")]
    assert parse_html(QuickSelect(choices=grouped).render("g", "b")) == parse_html(forms.Select(choices=grouped).render("g", "b"))


@pytest.mark.django_db
def test_the_emergency_forms_cluster_choice_reads_names_and_still_validates():
    Cluster.objects.bulk_create([Cluster(name=f"c-{i:03d}", labels={"team": "x"}) for i in range(50)])
    form = EmergencyForm()
    with CaptureQueriesContext(connection) as queries:
        html = str(form["cluster"])
    assert html.count("<option") == 51 and 'value="c-049"' in html
    assert len(queries) == 1 and "labels" not in queries[0]["sql"], "names only, not whole clusters"
    bound = EmergencyForm({"scope": "cluster", "cluster": "c-007", "reason": "r", "confirm": "c-007"})
    assert bound.is_valid(), bound.errors
    assert bound.cleaned_data["cluster"].labels == {"team": "x"}, "the chosen cluster is a whole one"
    assert not EmergencyForm({"scope": "cluster", "cluster": "nope", "reason": "r", "confirm": "nope"}).is_valid()
