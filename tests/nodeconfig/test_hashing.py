"""nodeconfig.hashing must produce the bytes Go's encoding/json produces, and Katalyst's hash of them.

Vectors are derived from Go's documented encoder behaviour (sorted map keys, HTML-safe
escapes, U+2028/U+2029, strconv shortest formatting with the 1e-6 / 1e21 switch to
exponent form, ``e-07`` trimmed to ``e-7``) and from katalyst-core's
``GenerateConfigHash`` (``spec.config``, ``nil`` -> ``{}``, ``status/<field>`` keys,
SHA-256 hex cut to 12).
"""

from __future__ import annotations

import hashlib
import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeconfig.hashing import (
    CONFIG_HASH_LENGTH,
    config_hash,
    go_float_repr,
    go_json_dumps,
    kind_specific_status,
)

# ------------------------------------------------------------------------ encoding/json


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"b": 1, "a": "<x>"}, b'{"a":"\\u003cx\\u003e","b":1}'),
        ({}, b"{}"),
        ([], b"[]"),
        (None, b"null"),
        (True, b"true"),
        (False, b"false"),
        ({"z": {"y": 1, "x": [3, 2, {"b": None, "a": False}]}}, b'{"z":{"x":[3,2,{"a":false,"b":null}],"y":1}}'),
        ((1, "two"), b'[1,"two"]'),
        ("a&b", b'"a\\u0026b"'),
        ("line\u2028sep\u2029", b'"line\\u2028sep\\u2029"'),
        ('quote" back\\slash /', b'"quote\\" back\\\\slash /"'),
        ("\n\r\t", b'"\\n\\r\\t"'),
        # Go before 1.22 (katalyst-core builds with its go.mod's 1.18) has no \b / \f shorthands.
        ("\b\f\x00\x1f", b'"\\u0008\\u000c\\u0000\\u001f"'),
        ("\x7f", b'"\x7f"'),
        ("caf\u00e9 \u4e2d\u6587 \U0001f600", '"caf\u00e9 \u4e2d\u6587 \U0001f600"'.encode()),
        # A lone surrogate can only come from Python; Go's decoder would have made it U+FFFD.
        ("x\ud800y", '"x\ufffdy"'.encode()),
        ({"\u00e9": 1, "z": 2, "A": 3, "a": 4}, '{"A":3,"a":4,"z":2,"\u00e9":1}'.encode()),
        ({"<k>": "v"}, b'{"\\u003ck\\u003e":"v"}'),
        (-5, b"-5"),
        (0, b"0"),
        (2**63 - 1, b"9223372036854775807"),
        (-(2**63), b"-9223372036854775808"),
        # Kubernetes' decoder turns integers beyond int64 into float64.
        (2**63, b"9223372036854776000"),
        (10**21, b"1e+21"),
    ],
)
def test_go_json_vectors(value, expected):
    assert go_json_dumps(value) == expected


def test_brief_vector_exact_bytes():
    assert go_json_dumps({"b": 1, "a": "<x>"}) == b'{"a":"\\u003cx\\u003e","b":1}'


def test_output_is_compact_and_utf8():
    out = go_json_dumps({"k": ["\u00e9", 1.5], "j": {"x": None}})
    assert b" " not in out and b"\n" not in out
    assert out.decode("utf-8") == '{"j":{"x":null},"k":["\u00e9",1.5]}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (1e21, "1e+21"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (20.5, "20.5"),
        (0.0, "0"),
        (-0.0, "-0"),
        (-1.0, "-1"),
        (100.0, "100"),
        (1e20, "100000000000000000000"),
        (123456789.0, "123456789"),
        (123456789.125, "123456789.125"),
        (0.1, "0.1"),
        (1 / 3, "0.3333333333333333"),
        (2.5e-6, "0.0000025"),
        (9.99e-7, "9.99e-7"),
        (math.nextafter(1e-6, 0), "9.999999999999997e-7"),
        (1.5e-10, "1.5e-10"),
        (-1e-7, "-1e-7"),
        (1.23e-7, "1.23e-7"),
        (1e-100, "1e-100"),
        (1e100, "1e+100"),
        (1.5e21, "1.5e+21"),
        (-2.5e22, "-2.5e+22"),
        (999999999999999900000.0, "999999999999999900000"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (float(2**63), "9223372036854776000"),
        (5.0, "5"),
        (0.5, "0.5"),
        (1e-6, "0.000001"),
        (12.34e-5, "0.0001234"),
    ],
)
def test_go_float_formatting(value, expected):
    assert go_float_repr(value) == expected
    assert go_json_dumps(value) == expected.encode()


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_rejected_like_go(value):
    with pytest.raises(ValueError):
        go_json_dumps({"x": value})


def test_int_too_large_for_float_is_rejected():
    with pytest.raises(ValueError):
        go_json_dumps(10**400)


@pytest.mark.parametrize("value", [{1: "a"}, {("t",): 1}, {"s": {1, 2}}, object(), b"bytes"])
def test_values_json_cannot_hold_are_rejected(value):
    with pytest.raises(TypeError):
        go_json_dumps(value)


_finite = st.floats(allow_nan=False, allow_infinity=False)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _finite | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_round_trips_through_a_json_parser(value):
    """Whatever we emit is valid JSON meaning the same value (floats compare by value: 1.0 prints as 1)."""
    decoded = json.loads(go_json_dumps(value).decode("utf-8"))
    assert _same(decoded, value)


def _same(a, b) -> bool:
    """Equal as JSON values; a float printed without a fraction reads back as a (big) int."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str):
        return a == b and type(a) is type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return False


@settings(max_examples=300, deadline=None)
@given(_finite)
def test_float_text_parses_back_exactly(value):
    text = go_float_repr(value)
    assert float(text) == value
    assert math.copysign(1.0, float(text)) == math.copysign(1.0, value)
    magnitude = abs(value)
    uses_exponent = "e" in text
    assert uses_exponent == (magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21))
    assert not text.endswith(".0") and "e-0" not in text and "E" not in text


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.integers(-1000, 1000) | st.text(max_size=8), max_size=6))
def test_matches_python_canonical_json_up_to_go_escapes(value):
    """For ints and strings Go differs from Python's compact sorted JSON only in its escapes."""
    ours = go_json_dumps(value).decode("utf-8")
    theirs = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    go_spelling = {"\\b": "\\u0008", "\\f": "\\u000c", "<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                   "\u2028": "\\u2028", "\u2029": "\\u2029"}
    theirs = _PY_TOKENS.sub(lambda m: go_spelling.get(m.group(), m.group()), theirs)
    assert ours == theirs


_PY_TOKENS = re.compile(r"\\u[0-9a-f]{4}|\\.|[<>&\u2028\u2029]")


def test_key_order_is_by_code_point_like_go_bytes():
    keys = ["b", "B", "\u00e9", "\U0001f600", "\uffff", "a1", "a", "_", "~"]
    out = go_json_dumps({k: 0 for k in keys}).decode("utf-8")
    positions = [out.index(json.dumps(k, ensure_ascii=False)) for k in sorted(keys, key=lambda k: k.encode("utf-8"))]
    assert positions == sorted(positions)


# --------------------------------------------------------------------------- the hash


def _sha12(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def test_hash_is_first_12_hex_of_sha256_of_go_json():
    config = {"reclaimedResourceConfig": {"enableReclaim": False}}
    assert config_hash(config) == _sha12(b'{"reclaimedResourceConfig":{"enableReclaim":false}}')
    assert len(config_hash(config)) == CONFIG_HASH_LENGTH == 12


def test_missing_config_hashes_as_empty_object():
    """Current upstream replaces a nil spec.config with an empty map before marshalling."""
    assert config_hash(None) == "44136fa355b3" == _sha12(b"{}")
    assert config_hash({}) == config_hash(None)


def test_hash_ignores_key_order_and_integral_float_spelling():
    a = {"b": {"y": 1, "x": 2.0}, "a": [1, 2]}
    b = {"a": [1, 2], "b": {"x": 2, "y": 1}}
    assert config_hash(a) == config_hash(b)
    assert config_hash({"a": [1, 2]}) != config_hash({"a": [2, 1]})


def test_seed_examples_hash_deterministically():
    grey = {"evictionConfig": {"memoryPressureEvictionConfig": {"enableNumaLevelEviction": True}}}
    hdd = {"evictionConfig": {"memoryPressureEvictionConfig": {"systemFreeMemoryThresholdMinimum": "20Gi"}}}
    assert config_hash(grey) == _sha12(
        b'{"evictionConfig":{"memoryPressureEvictionConfig":{"enableNumaLevelEviction":true}}}'
    )
    assert config_hash(hdd) == _sha12(
        b'{"evictionConfig":{"memoryPressureEvictionConfig":{"systemFreeMemoryThresholdMinimum":"20Gi"}}}'
    )
    assert config_hash(grey) != config_hash(hdd)


def test_status_fields_join_at_top_level_with_prefix():
    config = {"z": 1, "a": 2}
    got = config_hash(config, {"foo": {"k": "v"}, "bar": 3})
    assert got == _sha12(b'{"a":2,"status/bar":3,"status/foo":{"k":"v"},"z":1}')
    assert config == {"z": 1, "a": 2}, "the caller's config must not be modified"


def test_status_field_replaces_a_config_key_of_the_same_name():
    assert config_hash({"status/x": 1}, {"x": 2}) == _sha12(b'{"status/x":2}')


def test_status_fields_on_missing_config():
    assert config_hash(None, {"x": True}) == _sha12(b'{"status/x":true}')


def test_empty_status_extra_changes_nothing():
    assert config_hash({"a": 1}, {}) == config_hash({"a": 1}, None) == config_hash({"a": 1})


def test_status_needs_an_object_config():
    with pytest.raises(TypeError):
        config_hash([1, 2], {"x": 1})  # type: ignore[arg-type]


def test_kind_specific_status_drops_what_the_generic_struct_reemits():
    status = {
        "targetNodes": 0,
        "canaryNodes": 3,
        "updatedTargetNodes": 1,
        "updatedNodes": 2,
        "currentHash": "abc",
        "collisionCount": 0,
        "observedGeneration": 4,
        "conditions": [{"type": "Valid", "status": "True"}],
        "lastSyncTime": "2024-01-01T00:00:00Z",
    }
    assert kind_specific_status(status) == {"lastSyncTime": "2024-01-01T00:00:00Z"}


def test_kind_specific_status_keeps_zero_valued_omitempty_fields_as_upstream_does():
    status = {"observedGeneration": 0, "currentHash": "", "conditions": [], "collisionCount": None, "x": 1}
    assert kind_specific_status(status) == status


def test_kind_specific_status_of_nothing():
    assert kind_specific_status(None) == {}
    assert kind_specific_status({}) == {}
