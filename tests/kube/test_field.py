"""``kube.field.json_type``: the one place a decoded value's JSON type is named for messages."""

import math

import pytest

from kube.field import json_type


@pytest.mark.parametrize(("value", "expected"), [
    (None, "null"),
    (True, "boolean"),  # a bool is an int in Python, not a number in JSON
    (0, "number"),
    (1.5, "number"),
    ("", "string"),
    ({}, "object"),
    ([], "array"),
    ((), "array"),
    (math.nan, None),  # JSON cannot hold NaN or the infinities
    (math.inf, None),
    (b"x", None),
])
def test_json_type(value, expected):
    assert json_type(value) == expected
