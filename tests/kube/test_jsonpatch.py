"""RFC 6902 behaviour (the RFC's appendix A examples) and clear errors that change nothing."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube.jsonpatch import JsonPatchError, apply_patch, merge_patch, parse_pointer, validate_patch


@pytest.mark.parametrize(("doc", "patch", "expected"), [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"foo": "bar", "baz": "qux"}),        # A.1
    ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}], {"foo": ["bar", "qux", "baz"]}),  # A.2
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),                      # A.3
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),         # A.4
    ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}], {"baz": "boo", "foo": "bar"}),  # A.5
    ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),                                   # A.6
    ({"foo": ["all", "grass", "cows", "eat"]}, [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),                                                             # A.7
    ({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}], {"foo": "bar", "child": {"grandchild": {}}}),  # A.10
    ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}], {"foo": ["bar", ["abc", "def"]]}),  # A.16
    ({"a/b": 1, "m~n": 2}, [{"op": "replace", "path": "/a~1b", "value": 3}, {"op": "remove", "path": "/m~0n"}], {"a/b": 3}),
    ({"a": 1}, [{"op": "copy", "from": "/a", "path": "/b"}], {"a": 1, "b": 1}),
    ({"a": [1, 2]}, [{"op": "test", "path": "/a/1", "value": 2}], {"a": [1, 2]}),
])
def test_rfc_examples(doc, patch, expected):
    original = copy.deepcopy(doc)
    assert apply_patch(doc, patch) == expected
    assert doc == original, "the input is never modified"


@pytest.mark.parametrize(("doc", "patch", "message"), [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], "does not exist"),              # A.12
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], "test failed"),                    # A.9
    ({"a": [1]}, [{"op": "replace", "path": "/a/5", "value": 1}], "out of range"),
    ({"a": [1]}, [{"op": "remove", "path": "/a/01"}], "not an array index"),
    ({"a": {}}, [{"op": "replace", "path": "/a/b", "value": 1}], "does not exist"),
    ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/c"}], "into itself"),
    ({}, [{"op": "remove", "path": ""}], "whole document"),
])
def test_failures_name_the_operation_and_change_nothing(doc, patch, message):
    original = copy.deepcopy(doc)
    with pytest.raises(JsonPatchError, match=message) as caught:
        apply_patch(doc, patch)
    assert "operation 0" in str(caught.value)
    assert doc == original


def test_a_later_failure_leaves_the_document_untouched():
    doc = {"a": 1}
    with pytest.raises(JsonPatchError, match="operation 1"):
        apply_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zzz"}])
    assert doc == {"a": 1}


def test_validation_reports_each_malformed_operation():
    problems = validate_patch([{"op": "add", "path": "/a"}, {"op": "nope", "path": "/a"}, {"op": "remove", "path": "a"}, "x"])
    assert problems == {0: "add needs a value", 1: "op must be one of add, remove, replace, move, copy, test",
                        2: "path 'a' must start with '/'", 3: "an operation must be an object"}
    assert validate_patch("not a list") == {None: "a JSON patch is a list of operations"}
    assert parse_pointer("/a~1b/~0c") == ["a/b", "~c"]


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                           max_leaves=10)
operations = st.lists(st.fixed_dictionaries({
    "op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]),
    "path": st.sampled_from(["", "/a", "/a/0", "/a/-", "/b/c", "/x~1y"]),
    "from": st.sampled_from(["/a", "/b", "/a/0"]),
    "value": json_values,
}), max_size=4)


@given(json_values, operations)
def test_only_jsonpatch_errors_escape(doc, patch):
    original = copy.deepcopy(doc)
    try:
        apply_patch(doc, patch)
    except JsonPatchError:
        pass
    assert doc == original


@pytest.mark.parametrize(("target", "patch", "expected"), [   # RFC 7386 appendix A
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_rfc_examples(target, patch, expected):
    original = copy.deepcopy(target)
    assert merge_patch(target, patch) == expected
    assert target == original
