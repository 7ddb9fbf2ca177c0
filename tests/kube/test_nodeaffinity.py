"""Conformance tests for kube.nodeaffinity, ported from component-helpers' ``nodeaffinity_test.go``.

Tables: TestNodeSelectorMatch, TestPreferredSchedulingTermsScore and
TestNodeSelectorRequirementsAsSelector, by case name.  Upstream compares errors ignoring the bad
value; the ports compare the whole message (bad value included), which is what callers print.
TestPodMatchesNodeSelectorAndAffinityTerms and TestGetRequiredNodeAffinity go through a pod's
``nodeSelector`` as well; they are ported with the scheduler's NodeAffinity plugin
(``tests/scheduling/test_framework_nodeaffinity.py``).

Then the shapes decoded JSON can take and Go cannot (non-string values, non-list fields), which
must be refused or read one way, never raise.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube.field import FieldError, aggregate
from kube.labels import Selector, parse_selector
from kube.nodeaffinity import (
    NODE_SELECTOR_OPERATORS,
    field_selector_requirement,
    is_empty_term,
    node_selector_requirement,
    parse_node_selector,
    parse_preferred_terms,
    parse_term,
    preferred_score,
    requirements_as_selector,
)

NAME = "metadata.name"
INVALID_KEY_DETAIL = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def term(expressions: list[dict[str, Any]] | None = None, fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if expressions is not None:
        out["matchExpressions"] = expressions
    if fields is not None:
        out["matchFields"] = fields
    return out


LABEL_AND_NAME = term([req("label_1", "In", "label_1_val")], [req(NAME, "In", "host_1")])
INVALID_TERMS = [
    term(fields=[req(NAME, "In", "host_1", "host_2")]),
    LABEL_AND_NAME,
    term([req("invalid key", "In", "label_value")]),
]

# ------------------------------------------------------------------ TestNodeSelectorMatch

# (name, terms, node labels, node name, want error, want match)
NODE_SELECTOR_MATCH = [
    ("nil node", [], {}, "", None, False),
    ("invalid field selector and label selector", INVALID_TERMS, {}, "", aggregate([
        'nodeSelectorTerms[0].matchFields[0].values: Invalid value: []string{"host_1", "host_2"}: must have one element',
        f'nodeSelectorTerms[2].matchExpressions[0].key: Invalid value: "invalid key": {INVALID_KEY_DETAIL}',
    ]), False),
    ("node matches field selector, but not labels", [LABEL_AND_NAME], {}, "host_1", None, False),
    ("node matches field selector and label selector", [LABEL_AND_NAME], {"label_1": "label_1_val"}, "host_1", None, True),
    ("second term matches", [term([req("label_1", "In", "label_1_val")]), term(fields=[req(NAME, "In", "host_1")])],
     {}, "host_1", None, True),
]


@pytest.mark.parametrize(("terms", "labels", "name", "error", "match"),
                         [pytest.param(*case[1:], id=case[0]) for case in NODE_SELECTOR_MATCH])
def test_node_selector_match(terms: list[Any], labels: dict[str, str], name: str, error: str | None, match: bool) -> None:
    selector = parse_node_selector({"nodeSelectorTerms": terms})
    assert (aggregate(selector.errors) or None) == error
    if error is None:
        assert selector.matches(labels, name) is match


def test_lazy_node_selector_keeps_broken_terms_and_matches_with_the_others() -> None:
    """``NewLazyErrorNodeSelector``: a broken term never matches, the valid ones still do."""
    selector = parse_node_selector({"nodeSelectorTerms": INVALID_TERMS})
    assert len(selector.terms) == 3
    assert selector.matches({"label_1": "label_1_val"}, "host_1")
    assert not selector.matches({}, "host_1")


# ------------------------------------------------------- TestPreferredSchedulingTermsScore


def preferred(*terms: tuple[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"weight": weight, "preference": preference} for weight, preference in terms]


# (name, preferred terms, node labels, node name, want error, want score)
PREFERRED_SCORE = [
    ("invalid field selector and label selector", preferred(*((1, t) for t in INVALID_TERMS)), {}, "", aggregate([
        '[0].matchFields[0].values: Invalid value: []string{"host_1", "host_2"}: must have one element',
        f'[2].matchExpressions[0].key: Invalid value: "invalid key": {INVALID_KEY_DETAIL}',
    ]), 0),
    ("invalid field selector but no weight, error not reported", preferred((0, INVALID_TERMS[0])), {}, "host_1", None, 0),
    ("first and third term match", preferred(
        (5, term(fields=[req(NAME, "In", "host_1")])),
        (7, term([req("unknown_label", "In", "unknown_label_val")])),
        (11, term([req("label_1", "In", "label_1_val")])),
    ), {"label_1": "label_1_val"}, "host_1", None, 16),
]


@pytest.mark.parametrize(("terms", "labels", "name", "error", "score"),
                         [pytest.param(*case[1:], id=case[0]) for case in PREFERRED_SCORE])
def test_preferred_scheduling_terms_score(terms: list[Any], labels: dict[str, str], name: str, error: str | None,
                                          score: int) -> None:
    parsed, errors = parse_preferred_terms(terms)
    assert (aggregate(errors) or None) == error
    if error is None:
        assert preferred_score(parsed, labels, name) == score


# -------------------------------------------------- TestNodeSelectorRequirementsAsSelector

# (requirements, selector or the error)
AS_SELECTOR = [
    ([], Selector.nothing()),
    ([req("foo", "In", "bar", "baz")], parse_selector("foo in (baz,bar)")),
    ([req("foo", "Exists", "bar", "baz")],
     'root[0].values: Invalid value: []string{"bar", "baz"}: values set must be empty for exists and does not exist'),
    ([req("foo", "Gt", "1")], parse_selector("foo>1")),
    ([req("bar", "Lt", "7")], parse_selector("bar<7")),
]


@pytest.mark.parametrize(("exprs", "want"), AS_SELECTOR, ids=[str(i) for i in range(len(AS_SELECTOR))])
def test_node_selector_requirements_as_selector(exprs: list[Any], want: Selector | str) -> None:
    selector, errors = requirements_as_selector(exprs, "root")
    if isinstance(want, str):
        assert (selector, aggregate(errors)) == (None, want)
    else:
        assert (selector, errors) == (want, [])


# ------------------------------------------------------------------ requirement details


def test_operators_are_upstreams_in_its_order() -> None:
    assert list(NODE_SELECTOR_OPERATORS) == ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


@pytest.mark.parametrize("operator", ["in", "Equals", "", None, ["In"], {"In": 1}])
def test_unknown_operators_are_not_supported_never_a_crash(operator: Any) -> None:
    requirement, errors = node_selector_requirement({"key": "k", "operator": operator, "values": ["v"]}, "p")
    assert requirement is None
    assert [(e.type, e.field) for e in errors] == [("NotSupported", "p.operator")]
    assert errors[0].detail == 'supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"'


def test_error_indices_follow_the_values_as_given_not_sorted() -> None:
    """``NewRequirement`` validates ``expr.Values`` in order; ``labels.Requirement`` sorts them."""
    _, errors = node_selector_requirement(req("k", "Gt", "zz", "5"))
    assert [str(e) for e in errors] == [
        'values: Invalid value: []string{"zz", "5"}: for \'Gt\', \'Lt\' operators, exactly one value is required',
        "values[0]: Invalid value: \"zz\": for 'Gt', 'Lt' operators, the value must be an integer",
    ]


@pytest.mark.parametrize(("values", "error"), [
    ([4], "values[0]: Invalid value: 4: must be a string"),
    ([True], "values[0]: Invalid value: true: must be a string"),
    (["1", 2.5], "values[1]: Invalid value: 2.5: must be a string"),
])
def test_values_kubernetes_could_not_decode_are_errors(values: list[Any], error: str) -> None:
    requirement, errors = node_selector_requirement({"key": "cores", "operator": "Gt", "values": values})
    assert requirement is None and [str(e) for e in errors] == [error]


def test_null_values_decode_as_empty_strings_and_a_non_list_as_absent() -> None:
    requirement, _ = node_selector_requirement({"key": "k", "operator": "In", "values": [None, "a"]})
    assert requirement is not None and requirement.values == ("", "a")
    requirement, errors = node_selector_requirement({"key": "k", "operator": "In", "values": "abc"})
    assert requirement is None and "values set can't be empty" in str(errors[0])


def test_gt_lt_take_one_64_bit_integer() -> None:
    assert node_selector_requirement(req("k", "Gt", "9223372036854775807"))[0] is not None
    requirement, errors = node_selector_requirement(req("k", "Gt", "9223372036854775808"))
    assert requirement is None and "must be an integer" in str(errors[0])


# ------------------------------------------------------------------ matchFields


@pytest.mark.parametrize(("expr", "error"), [
    (req(NAME, "Exists"), 'operator: Unsupported value: "Exists": supported values: "In", "NotIn"'),
    (req(NAME, "Gt", "1"), 'operator: Unsupported value: "Gt": supported values: "In", "NotIn"'),
    (req(NAME, "In"), "values: Invalid value: []string{}: must have one element"),
    (req(NAME, "NotIn", "a", "b"), 'values: Invalid value: []string{"a", "b"}: must have one element'),
])
def test_match_fields_take_in_or_not_in_with_one_value(expr: dict[str, Any], error: str) -> None:
    requirement, errors = field_selector_requirement(expr)
    assert requirement is None and [str(e) for e in errors] == [error]


@pytest.mark.parametrize(("fields", "name", "match"), [
    ([req(NAME, "In", "n1")], "n1", True),
    ([req(NAME, "NotIn", "n1")], "n1", False),
    ([req(NAME, "NotIn", "n1")], "n2", True),
    ([req("metadata.uid", "In", "x")], "n1", False),  # an unknown field reads ""
    ([req("metadata.uid", "NotIn", "x")], "n1", True),
    ([req(NAME, "In", "n1")], "", True),  # no name: extractNodeFields is empty, matchFields skipped
])
def test_match_fields_compare_the_name(fields: list[Any], name: str, match: bool) -> None:
    assert parse_term(term(fields=fields)).matches({}, name) is match


def test_empty_terms_match_nothing_and_are_dropped() -> None:
    assert is_empty_term({}) and is_empty_term({"matchExpressions": [], "matchFields": None})
    assert is_empty_term({"matchExpressions": 5}) and is_empty_term("not an object")
    assert parse_node_selector({"nodeSelectorTerms": [{}, {"matchExpressions": []}]}).terms == ()
    assert not parse_node_selector({"nodeSelectorTerms": [{}]}).matches({"a": "b"}, "n")


def test_a_term_keeps_label_and_field_errors_apart() -> None:
    parsed = parse_term(term([req("a", "In")], [req(NAME, "In")]), "t")
    assert [e.field for e in parsed.label_errors] == ["t.matchExpressions[0].values"]
    assert [e.field for e in parsed.field_errors] == ["t.matchFields[0].values"]
    assert parsed.errors == parsed.label_errors + parsed.field_errors
    assert all(isinstance(e, FieldError) for e in parsed.errors)


@pytest.mark.parametrize(("weight", "shown"), [("3", '"3"'), (2.0, "2.0"), (True, "true")])
def test_preferred_weights_are_integers(weight: Any, shown: str) -> None:
    _, errors = parse_preferred_terms([{"weight": weight, "preference": term([req("a", "Exists")])}], "p")
    assert [str(e) for e in errors] == [f"p[0].weight: Invalid value: {shown}: must be an integer"]
