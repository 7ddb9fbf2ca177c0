"""``{{ n|number }}`` writes a number as ``floatformat:"0g"`` does, in every language, at a
fraction of its cost (the CPU fleet page prints thousands)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template.defaultfilters import floatformat
from django.utils import translation

from core.templatetags.meridian import number, number_writer

VALUES = [0, 7, 999, 1000, 124_839, -1_234_567, 10**12, True, 2.5, 3.5, Decimal("1234.5"), "1234", "n/a", None, ""]


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_number_writes_what_floatformat_0g_writes(language: str, value: object) -> None:
    with translation.override(language):
        assert number(value) == floatformat(value, "0g")
        assert number_writer()(value) == floatformat(value, "0g"), "a table's writer, read once per page"


def test_a_fleet_sized_number_is_grouped_in_english() -> None:
    with translation.override("en"):
        assert number(124_839) == "124,839"


def test_a_writer_keeps_the_language_it_was_made_in() -> None:
    """A table makes its writer once, in its request's language; another request's language
    later does not change what it writes."""
    with translation.override("en"):
        english = number_writer()
    with translation.override("de"):
        assert english(124_839) == "124,839" and number(124_839) == floatformat(124_839, "0g") == "124.839"
