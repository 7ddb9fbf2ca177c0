"""Conformance tests for kube.labels, ported from apimachinery's pkg/labels tables plus fuzzing.

Case tables follow upstream ``selector_test.go`` (TestSelectorParse, TestLexer,
TestLexerSequence, TestParserLookahead, TestParseOperator, TestRequirementConstructor,
TestToString, TestRequirementSelectorMatching, TestSetSelectorParser, TestAdd,
TestRequiresExactMatch) and ``validation_test.go`` (label keys and values).
"""

from __future__ import annotations

import pickle
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube.labels import (
    Operator,
    Requirement,
    Selector,
    SelectorError,
    TokenKind,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    is_valid_label_key,
    is_valid_label_value,
    parse_selector,
    selector_from_label_selector,
    selector_from_set,
    tokenize,
    validate_label_key,
    validate_label_value,
)

T = TokenKind
O = Operator


def req(key: str, op: str, *values: str) -> Requirement:
    return Requirement(key, Operator(op), values)


# ----------------------------------------------------------------- TestSelectorParse

GOOD_SELECTORS = ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"]
BAD_SELECTORS = ["x=a||y=b", "x==a==b", "!x=a", "x<a"]


@pytest.mark.parametrize("text", GOOD_SELECTORS)
def test_selector_parse_restrings_without_spaces(text: str) -> None:
    assert str(parse_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize("text", BAD_SELECTORS)
def test_selector_parse_rejects(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_deterministic_parse() -> None:
    assert str(parse_selector("x=a,a=x")) == str(parse_selector("a=x,x=a")) == "a=x,x=a"
    assert parse_selector("x=a,a=x") == parse_selector("a=x,x=a")


# ------------------------------------------------------- TestEverything / Empty / Nothing


def test_everything() -> None:
    everything = Selector.everything()
    assert everything.matches({"x": "y"})
    assert everything.matches({})
    assert everything.empty()
    assert str(everything) == ""
    assert everything.requirements == ()
    assert everything.selectable


def test_empty_on_class_builds_everything_and_on_instance_is_upstream_empty() -> None:
    assert Selector.empty() == Selector.everything() == parse_selector("") == Selector()
    assert Selector.empty().empty() is True
    assert parse_selector("x").empty() is False
    assert Selector.nothing().empty() is False


def test_nothing() -> None:
    nothing = Selector.nothing()
    assert not nothing.matches({})
    assert not nothing.matches({"x": "y"})
    assert str(nothing) == ""
    assert not nothing.selectable
    assert nothing != Selector.everything()
    assert hash(nothing) != hash(Selector.everything())
    assert nothing.add(req("x", "exists")) is nothing


# ------------------------------------------------------------- TestSelectorMatches

MATCHES = [
    ("", {"x": "y"}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
    ("baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
    ("baz=bar", {"foo": "bar", "baz": "blah"}, False),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    ("x==y", {"x": "y"}, True),
    ("x in (a,b)", {"x": "b"}, True),
    ("x in (a,b)", {"x": "c"}, False),
    ("x in (a,b)", {}, False),
    ("x notin (a,b)", {}, True),
    ("x notin (a,b)", {"x": "a"}, False),
    ("x notin (a,b)", {"x": "c"}, True),
    ("x in ()", {"x": ""}, True),
    ("x in ()", {"x": "a"}, False),
    ("x=", {"x": ""}, True),
    ("x=", {}, False),
    ("x!=", {}, True),
    ("x!=", {"x": ""}, False),
    ("region=bj,machineModel in (A3,A4),!drained", {"region": "bj", "machineModel": "A3"}, True),
    ("region=bj,machineModel in (A3,A4),!drained", {"region": "bj", "machineModel": "A3", "drained": ""}, False),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_selector_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


GT_LT = [
    ("x>1", {"x": "+5"}, True),
    ("x>1", {"x": " 5"}, False),
    ("x>1", {"x": "5 "}, False),
    ("x>1", {"x": "1_0"}, False),
    ("x>1", {"x": "\u0663"}, False),
    ("x>1", {"x": "0x10"}, False),
    ("x>1", {"x": ""}, False),
    ("x>1", {}, False),
    ("x>1", {"x": "9223372036854775807"}, True),
    ("x>1", {"x": "9223372036854775808"}, False),
    ("x<0", {"x": "-9223372036854775808"}, True),
    ("x<0", {"x": "-9223372036854775809"}, False),
    ("x>007", {"x": "8"}, True),
    ("x>7", {"x": "7"}, False),
    ("x<7", {"x": "7"}, False),
    ("x>1,x<3", {"x": "2"}, True),
]


@pytest.mark.parametrize(("text", "labels", "expected"), GT_LT)
def test_gt_lt_only_match_int64_label_values(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("x=a", None, False),
        ("!x", None, True),
        ("x=a", {"x": ["a"]}, False),
        ("x notin (a,b)", {"x": ["a"]}, True),
        ("x in (a,b)", {"x": {"a": 1}}, False),
        ("x", {"x": None}, True),
        ("x>1", {"x": 5}, False),
        ("x!=a", {"x": 1}, True),
        ("x=a", {1: "a", "x": "a"}, True),
    ],
)
def test_matches_tolerates_non_string_labels(text: str, labels: object, expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected  # type: ignore[arg-type]


def test_matches_rejects_non_mappings_with_type_error() -> None:
    with pytest.raises(TypeError):
        parse_selector("x=a").matches(42)  # type: ignore[arg-type]


# ------------------------------------------------------------------ TestSetMatches


@pytest.mark.parametrize(
    "labels",
    [{}, {"foo": "bar"}, {"baz": "blah"}, {"foo": "bar", "baz": "blah"}],
)
def test_set_matches(labels: dict[str, str]) -> None:
    assert selector_from_set(labels).matches({"foo": "bar", "baz": "blah"})


def test_set_selector_string_and_validation() -> None:
    assert str(selector_from_set({"b": "2", "a": "1"})) == "a=1,b=2"
    assert selector_from_set(None) == selector_from_set({}) == Selector.everything()
    assert selector_from_set({}).empty()
    with pytest.raises(SelectorError, match="values"):
        selector_from_set({"a": "=bad"})


# ------------------------------------------------------------ TestLexer & friends

LEXER_SINGLE = [
    ("", T.END_OF_STRING),
    (",", T.COMMA),
    ("notin", T.NOT_IN),
    ("in", T.IN),
    ("=", T.EQUALS),
    ("==", T.DOUBLE_EQUALS),
    (">", T.GREATER_THAN),
    ("<", T.LESS_THAN),
    ("!", T.DOES_NOT_EXIST),
    ("!=", T.NOT_EQUALS),
    ("(", T.OPEN_PAR),
    (")", T.CLOSED_PAR),
    ("~", T.IDENTIFIER),
    ("||", T.IDENTIFIER),
]


@pytest.mark.parametrize(("text", "kind"), LEXER_SINGLE)
def test_lexer_single_token(text: str, kind: TokenKind) -> None:
    token = tokenize(text)[0]
    assert token.kind is kind
    assert token.literal == text
    assert token.position == 0


LEXER_SEQUENCES = [
    ("key in ( value )", [T.IDENTIFIER, T.IN, T.OPEN_PAR, T.IDENTIFIER, T.CLOSED_PAR]),
    ("key notin ( value )", [T.IDENTIFIER, T.NOT_IN, T.OPEN_PAR, T.IDENTIFIER, T.CLOSED_PAR]),
    (
        "key in ( value1, value2 )",
        [T.IDENTIFIER, T.IN, T.OPEN_PAR, T.IDENTIFIER, T.COMMA, T.IDENTIFIER, T.CLOSED_PAR],
    ),
    ("key", [T.IDENTIFIER]),
    ("!key", [T.DOES_NOT_EXIST, T.IDENTIFIER]),
    ("()", [T.OPEN_PAR, T.CLOSED_PAR]),
    ("", []),
    ("x in (),y", [T.IDENTIFIER, T.IN, T.OPEN_PAR, T.CLOSED_PAR, T.COMMA, T.IDENTIFIER]),
    (
        "== != (), = notin",
        [T.DOUBLE_EQUALS, T.NOT_EQUALS, T.OPEN_PAR, T.CLOSED_PAR, T.COMMA, T.EQUALS, T.NOT_IN],
    ),
    ("key>2", [T.IDENTIFIER, T.GREATER_THAN, T.IDENTIFIER]),
    ("key<1", [T.IDENTIFIER, T.LESS_THAN, T.IDENTIFIER]),
    ("!==", [T.NOT_EQUALS, T.EQUALS]),
    ("===", [T.DOUBLE_EQUALS, T.EQUALS]),
    ("!(", [T.DOES_NOT_EXIST, T.OPEN_PAR]),
    ("<=", [T.LESS_THAN, T.EQUALS]),
    ("a\x00b", [T.IDENTIFIER, T.IDENTIFIER]),
    ("\x00b", []),
    ("a \x00 b", [T.IDENTIFIER]),
    ("IN NotIn", [T.IDENTIFIER, T.IDENTIFIER]),
    ("a\vb", [T.IDENTIFIER]),
]


@pytest.mark.parametrize(("text", "kinds"), LEXER_SEQUENCES)
def test_lexer_sequence_ends_with_end_of_string(text: str, kinds: list[TokenKind]) -> None:
    tokens = tokenize(text)
    assert [t.kind for t in tokens] == kinds + [T.END_OF_STRING]


def test_lexer_literals_and_positions() -> None:
    tokens = tokenize("  key in ( v1, v2 )")
    assert [(t.literal, t.position) for t in tokens] == [
        ("key", 2),
        ("in", 6),
        ("(", 9),
        ("v1", 11),
        (",", 13),
        ("v2", 15),
        (")", 18),
        ("", 19),
    ]


# --------------------------------------------------------------- TestParseOperator


@pytest.mark.parametrize("operator", ["in (a)", "= a", "== a", "> 1", "< 1", "notin (a)", "!= a"])
def test_parse_operator_accepts_binary_operators(operator: str) -> None:
    parse_selector(f"x {operator}")


@pytest.mark.parametrize("found", ["!", "exists", "("])
def test_parse_operator_rejects_others_with_upstream_message(found: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(f"x {found}")
    assert info.value.reason == (f"unable to parse requirement: found '{found}', expected: in, notin, =, ==, !=, gt, lt")
    assert info.value.position == 2
    assert info.value.token == found


# ------------------------------------------------------- TestRequirementConstructor

REQUIREMENT_CONSTRUCTOR = [
    ("x1", "in", (), "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"),
    ("x2", "notin", (), "values: Invalid value: []string{}"),
    ("x3", "in", ("foo",), None),
    ("x4", "notin", ("foo",), None),
    ("x5", "=", ("foo", "bar"), 'values: Invalid value: []string{"bar", "foo"}: exact-match compatibility'),
    ("x6", "exists", (), None),
    ("x7", "!", (), None),
    ("x8", "exists", ("foo",), 'values: Invalid value: []string{"foo"}: values set must be empty'),
    ("x9", "in", ("bar",), None),
    ("x10", "in", ("bar",), None),
    ("x11", "gt", ("1",), None),
    ("x12", "lt", ("6",), None),
    ("x13", "gt", (), "values: Invalid value: []string{}: for 'Gt', 'Lt' operators, exactly one value is required"),
    ("x14", "gt", ("bar",), "values[0]: Invalid value: \"bar\": for 'Gt', 'Lt' operators, the value must be an integer"),
    ("x15", "lt", ("bar",), 'values[0]: Invalid value: "bar"'),
    ("a" * 254, "exists", (), 'key: Invalid value: "' + "a" * 254 + '": name part must be no more than 63 bytes'),
    ("x16", "=", ("a" * 254,), 'values[0][x16]: Invalid value: "' + "a" * 254 + '": must be no more than 63 bytes'),
    ("x17", "=", ("a b",), 'values[0][x17]: Invalid value: "a b": a valid label must be an empty string'),
    ("x18", "unsupportedOp", (), 'operator: Unsupported value: "unsupportedOp": supported values: "in", "notin"'),
    ("1foo", "in", ("bar",), None),
    ("1234", "in", ("bar",), None),
    ("y", "gt", ("1",), None),
    ("z", "lt", ("6",), None),
    ("foo", "gt", ("bar",), "must be an integer"),
    ("barz", "lt", ("blah",), "must be an integer"),
]


@pytest.mark.parametrize(("key", "op", "values", "error"), REQUIREMENT_CONSTRUCTOR)
def test_requirement_constructor(key: str, op: str, values: tuple[str, ...], error: str | None) -> None:
    if error is None:
        r = Requirement(key, op, values)  # type: ignore[arg-type]
        assert r.operator == op
        assert r.values == tuple(sorted(values))
    else:
        with pytest.raises(SelectorError) as info:
            Requirement(key, op, values)  # type: ignore[arg-type]
        assert error in str(info.value)


def test_requirement_aggregates_several_errors_like_upstream() -> None:
    with pytest.raises(SelectorError) as info:
        Requirement("x", Operator.GREATER_THAN, ("a" * 64,))
    message = str(info.value)
    assert message.startswith("[values[0]: Invalid value: ")
    assert "the value must be an integer, values[0][x]: Invalid value: " in message
    assert message.endswith("]")


@pytest.mark.parametrize(
    ("values", "problem"),
    [("ab", "must be a list of strings"), ([1], "must be a string"), (None, "must be a list of strings")],
)
def test_requirement_rejects_wrong_value_types(values: object, problem: str) -> None:
    with pytest.raises(SelectorError, match=problem):
        Requirement("x", Operator.IN, values)  # type: ignore[arg-type]


def test_requirement_is_frozen_hashable_and_picklable() -> None:
    r = Requirement("x", Operator.IN, ("b", "a"))
    assert r.values == ("a", "b")
    assert r == Requirement("x", "in", ["a", "b"])  # type: ignore[arg-type]
    assert hash(r) == hash(Requirement("x", Operator.IN, ("a", "b")))
    with pytest.raises(AttributeError):
        r.key = "y"  # type: ignore[misc]
    clone = pickle.loads(pickle.dumps(r))
    assert clone == r and clone.matches({"x": "a"})


# ------------------------------------------------------------------- TestToString

TO_STRING = [
    ([req("x", "in", "abc", "def"), req("y", "notin", "jkl"), req("z", "exists")], "x in (abc,def),y notin (jkl),z"),
    ([req("x", "notin", "abc", "def"), req("y", "!=", "jkl"), req("z", "!")], "x notin (abc,def),y!=jkl,!z"),
    (
        [req("x", "notin", "abc"), req("y", "in", "jkl", "mno"), req("z", "notin", "")],
        "x notin (abc),y in (jkl,mno),z notin ()",
    ),
    ([req("x", "=", "abc"), req("y", "==", "jkl"), req("z", "!=", "a"), req("z", "exists")], "x=abc,y==jkl,z!=a,z"),
    ([req("x", "gt", "2"), req("y", "lt", "8"), req("z", "exists")], "x>2,y<8,z"),
    ([req("x", "in", "def", "abc")], "x in (abc,def)"),
    ([req("x", "in", "b", "a", "b")], "x in (a,b,b)"),
    ([req("z", "exists"), req("a", "exists"), req("m", "=", "")], "a,m=,z"),
]


@pytest.mark.parametrize(("requirements", "expected"), TO_STRING)
def test_to_string(requirements: list[Requirement], expected: str) -> None:
    assert str(Selector(requirements)) == expected


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (req("x", "in", "a"), "x in (a)"),
        (req("x", "notin", "a"), "x notin (a)"),
        (req("x", "=", "a"), "x=a"),
        (req("x", "==", "a"), "x==a"),
        (req("x", "!=", "a"), "x!=a"),
        (req("x", "gt", "1"), "x>1"),
        (req("x", "lt", "1"), "x<1"),
        (req("x", "exists"), "x"),
        (req("x", "!"), "!x"),
        (req("x", "in", ""), "x in ()"),
    ],
)
def test_requirement_to_string(requirement: Requirement, expected: str) -> None:
    assert str(requirement) == expected


# -------------------------------------------------- TestRequirementSelectorMatching

REQUIREMENT_MATCHING = [
    ({"x": "foo", "y": "baz"}, [req("x", "in", "foo"), req("y", "notin", "alpha")], True),
    ({"x": "foo", "y": "baz"}, [req("x", "in", "foo"), req("y", "in", "alpha")], False),
    ({"y": ""}, [req("x", "notin", ""), req("y", "exists")], True),
    ({"y": ""}, [req("x", "!"), req("y", "exists")], True),
    ({"y": ""}, [req("x", "notin", ""), req("y", "!")], False),
    ({"y": "baz"}, [req("x", "in", "")], False),
    ({"z": "2"}, [req("z", "gt", "1")], True),
    ({"z": "v2"}, [req("z", "gt", "1")], False),
]


@pytest.mark.parametrize(("labels", "requirements", "expected"), REQUIREMENT_MATCHING)
def test_requirement_selector_matching(labels: dict[str, str], requirements: list[Requirement], expected: bool) -> None:
    assert Selector(requirements).matches(labels) is expected
    assert all(r.matches(labels) for r in requirements) is expected


# ------------------------------------------------------------ TestSetSelectorParser

SET_SELECTOR_PARSER = [
    ("", []),
    ("\rx", [req("x", "exists")]),
    ("this-is-a-dns.domain.com/key-with-dash", [req("this-is-a-dns.domain.com/key-with-dash", "exists")]),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        [req("this-is-another-dns.domain.com/key-with-dash", "in", "so", "what")],
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        [req("0.1.2.domain/99", "notin", "10.10.100.1", "tick.tack.clock")],
    ),
    ("foo  in\t (abc)", [req("foo", "in", "abc")]),
    ("x notin\n (abc)", [req("x", "notin", "abc")]),
    ("x  notin\t\t\t(abc,def)", [req("x", "notin", "abc", "def")]),
    ("x in (abc,def)", [req("x", "in", "abc", "def")]),
    ("x in (abc,)", [req("x", "in", "abc", "")]),
    ("x in ()", [req("x", "in", "")]),
    (
        "x notin (abc,def),bar,z in (),w",
        [req("bar", "exists"), req("w", "exists"), req("x", "notin", "abc", "def"), req("z", "in", "")],
    ),
    (
        "x notin (abc,,def),bar,z in (),w",
        [req("bar", "exists"), req("w", "exists"), req("x", "notin", "abc", "", "def"), req("z", "in", "")],
    ),
    ("x=a", [req("x", "=", "a")]),
    ("x>1", [req("x", "gt", "1")]),
    ("x<7", [req("x", "lt", "7")]),
    ("x=a,y!=b", [req("x", "=", "a"), req("y", "!=", "b")]),
    ("x=a,y!=b,z in (h,i,j)", [req("x", "=", "a"), req("y", "!=", "b"), req("z", "in", "h", "i", "j")]),
    ("x notin ( )", [req("x", "notin", "")]),
    ("x notin (, a)", [req("x", "notin", "", "a")]),
    ("a ", [req("a", "exists")]),
    ("a in (x,y,notin, z,in)", [req("a", "in", "in", "notin", "x", "y", "z")]),
    ("in in (in)", [req("in", "in", "in")]),
    ("notin notin (notin)", [req("notin", "notin", "notin")]),
    ("x=in,y==notin", [req("x", "=", "in"), req("y", "==", "notin")]),
    ("x in (a,a,b)", [req("x", "in", "a", "b")]),
    ("x in (,)", [req("x", "in", "")]),
    ("x in (,,a)", [req("x", "in", "", "a")]),
    ("x in (,,,)", [req("x", "in", "")]),
    ("x in (,,)", [req("x", "in", "")]),
    ("x in (a,,)", [req("x", "in", "", "a")]),
    ("x in (a,,,)", [req("x", "in", "", "a")]),
    ("x in (a,,,,,,)", [req("x", "in", "", "a")]),
    ("x in (a,,a,,a,,a,,)", [req("x", "in", "", "a")]),
    ("x in (abc,abc)", [req("x", "in", "abc")]),
    ("b=1,a=2,b=0", [req("a", "=", "2"), req("b", "=", "1"), req("b", "=", "0")]),
    ("!x,!y", [req("x", "!"), req("y", "!")]),
    ("x\x00", [req("x", "exists")]),
    ("x=a\x00,y", [req("x", "=", "a"), req("y", "exists")]),
    ("!\x00x", [req("x", "!")]),
    ("\x00this is ignored", []),
    ("x=a,\x00", None),
    ("x,y in (a)", [req("x", "exists"), req("y", "in", "a")]),
]


@pytest.mark.parametrize(("text", "expected"), SET_SELECTOR_PARSER)
def test_set_selector_parser_valid(text: str, expected: list[Requirement] | None) -> None:
    if expected is None:
        with pytest.raises(SelectorError):
            parse_selector(text)
        return
    assert list(parse_selector(text).requirements) == expected


SET_SELECTOR_PARSER_INVALID = [
    "x=a||y=b",
    "x,y,",
    ",x,y",
    "x nott in (y)",
    "a in (xyz),",
    "a in (xyz)b notin ()",
    "a in (xyz abc)",
    "a notin(",
    "a (",
    "(",
    "x in (a,=)",
    "x in (a,!)",
    "x in (a",
    "x in (a,",
    "x in",
    "x in a",
    "x=(a)",
    "x=a b",
    "!",
    "!!x",
    "x!",
    "=x",
    ",",
    "x,,y",
    "x>",
    "x>a",
    "x<1.5",
    "x>-1",
    "x>+1",
    "x>99999999999999999999",
    "x in (a),)",
    "X/y=a",
    "/x",
    "a/",
    "a/b/c",
    "-x",
    "x=-a",
    "x=" + "a" * 64,
    "a" * 64,
    "x=a√",
    "é",
]


@pytest.mark.parametrize("text", SET_SELECTOR_PARSER_INVALID)
def test_set_selector_parser_invalid(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


@pytest.mark.parametrize(
    ("text", "reason", "position", "token"),
    [
        ("x,", "found '', expected: identifier after ','", 2, ""),
        (",x", "found ',', expected: !, identifier, or 'end of string'", 0, ","),
        ("x==a==b", "found '==', expected: ',' or 'end of string'", 4, "=="),
        ("!x=a", "found '=', expected: ',' or 'end of string'", 2, "="),
        ("a in (xyz abc)", "unable to parse requirement: found 'abc', expected: ',' or ')'", 10, "abc"),
        ("a notin(", "unable to parse requirement: found '', expected: ',', ')' or identifier", 8, ""),
        ("x in a", "unable to parse requirement: found 'a' expected: '('", 5, "a"),
        ("x=(a)", "unable to parse requirement: found '(', expected: identifier", 2, "("),
        ("x in (a,=)", "unable to parse requirement: found '=', expected: ',', or identifier", 8, "="),
        ("!", "unable to parse requirement: found '', expected: identifier", 1, ""),
        (
            "x<a",
            (
                'unable to parse requirement: values[0]: Invalid value: "a": '
                "for 'Gt', 'Lt' operators, the value must be an integer"
            ),
            2,
            "a",
        ),
        (
            "x>",
            (
                'unable to parse requirement: values[0]: Invalid value: "": '
                "for 'Gt', 'Lt' operators, the value must be an integer"
            ),
            2,
            "",
        ),
    ],
)
def test_error_reason_position_and_token(text: str, reason: str, position: int, token: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    assert info.value.reason == reason
    assert info.value.position == position
    assert info.value.token == token
    assert str(info.value) == f"{reason} (at position {position})"


def test_invalid_key_error_names_the_key() -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector("ok=1, bad_=2")
    assert info.value.reason.startswith('unable to parse requirement: key: Invalid value: "bad_": name part must consist')
    assert info.value.position == 6


def test_invalid_value_error_points_at_the_value() -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector("x in (a, b, -c)")
    assert info.value.token == "-c"
    assert info.value.position == 12
    assert 'values[0][x]: Invalid value: "-c"' in info.value.reason


@pytest.mark.parametrize("bad_input", [None, 1, b"x=a", ["x=a"]])
def test_non_string_input_is_a_selector_error(bad_input: object) -> None:
    with pytest.raises(SelectorError, match="selector must be a string"):
        parse_selector(bad_input)  # type: ignore[arg-type]


def test_selector_error_is_a_value_error() -> None:
    assert issubclass(SelectorError, ValueError)


# --------------------------------------------------------------------------- TestAdd


def test_add_keeps_requirements_sorted_and_returns_new_selector() -> None:
    base = Selector([req("key", "in", "value")])
    added = base.add(req("key2", "=", "value2"))
    assert added.requirements == (req("key", "in", "value"), req("key2", "=", "value2"))
    assert base.requirements == (req("key", "in", "value"),)
    assert str(Selector().add(req("b", "exists"), req("a", "exists"))) == "a,b"


# ------------------------------------------------------------ TestRequiresExactMatch


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("", "foo", None),
        ("foo=bar", "foo", "bar"),
        ("foo==bar", "foo", "bar"),
        ("foo in (bar)", "foo", "bar"),
        ("foo in (bar,baz)", "foo", None),
        ("foo!=bar", "foo", None),
        ("foo", "foo", None),
        ("foo=bar", "baz", None),
        ("baz=qux,foo=bar", "foo", "bar"),
    ],
)
def test_requires_exact_match(text: str, key: str, expected: str | None) -> None:
    assert parse_selector(text).requires_exact_match(key) == expected


# ------------------------------------------------------------------- key/value rules

GOOD_KEYS = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
]
BAD_KEYS = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",
    "example_com/abc",
    "example.com/",
    "/simple",
    "a" * 64,
    "a" * 254 + "/abc",
    "",
    "é",
]


@pytest.mark.parametrize("key", GOOD_KEYS)
def test_good_label_keys(key: str) -> None:
    assert validate_label_key(key) == []
    assert is_valid_label_key(key)
    assert parse_selector(key).requirements == (Requirement(key, Operator.EXISTS),)


@pytest.mark.parametrize("key", BAD_KEYS)
def test_bad_label_keys(key: str) -> None:
    assert validate_label_key(key)
    assert not is_valid_label_key(key)


GOOD_VALUES = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, ""]
BAD_VALUES = [
    "nospecialchars%^=@",
    "Tama-nui-te-r\u0101.Tama-nui-te-r\u0101",
    "-starts-with-dash",
    "ends-with-dash-",
    ".starts.with.dot",
    "ends.with.dot.",
    "a" * 64,
]


@pytest.mark.parametrize("value", GOOD_VALUES)
def test_good_label_values(value: str) -> None:
    assert validate_label_value(value) == []
    assert is_valid_label_value(value)


@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_label_values(value: str) -> None:
    assert validate_label_value(value)
    assert not is_valid_label_value(value)


NAME_PART_REGEX_ERROR = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
PREFIX_PART_REGEX_ERROR = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
VALUE_REGEX_ERROR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            "-x",
            [NAME_PART_REGEX_ERROR],
        ),
        ("/x", ["prefix part must be non-empty"]),
        ("a" * 64, ["name part must be no more than 63 bytes"]),
        (
            "x/",
            [
                "name part must be non-empty",
                NAME_PART_REGEX_ERROR,
            ],
        ),
        (
            "Ex.com/x",
            [PREFIX_PART_REGEX_ERROR],
        ),
        (7, ["must be a string, not int"]),
    ],
)
def test_label_key_messages(key: object, expected: list[str]) -> None:
    assert validate_label_key(key) == expected


def test_label_value_messages() -> None:
    assert validate_label_value("a" * 64) == ["must be no more than 63 bytes"]
    assert validate_label_value("-") == [VALUE_REGEX_ERROR]
    assert len(validate_label_value("\u0101" * 32)) == 2


# ------------------------------------------------------ IsDNS1123Label / IsDNS1123Subdomain
# upstream's TestIsDNS1123Label and TestIsDNS1123Subdomain (apimachinery validation_test.go)

GOOD_DNS_LABELS = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a" * 63]
BAD_DNS_LABELS = ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_",
                  "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a", "a b", "1 ", " 1", "1 2",
                  "a" * 64]
GOOD_SUBDOMAINS = ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a.a",
                   "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1", "ab.1", "abc.1", "a1.1", "a-1.1",
                   "a--1--2--b.1", "0.a", "01.a", "012.a", "1a.a", "1-a.a", "1--a--b--2", "0.1", "01.1", "012.1",
                   "1a.1", "1-a.1", "1--a--b--2.1", "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55",
                   "a" * 253]
BAD_SUBDOMAINS = ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_",
                  "_1", "1_2", ".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a", "a b", "1 ", " 1", "1 2",
                  "A.a", "aB.a", "ab.A", "A1.a", "a1.A", "A.1", "aB.1", "A1.1", "1A.1", "0.A", "01.A", "012.A", "1A.a",
                  "1a.A", "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee", "a@b", "a,b", "a_b", "a;b",
                  "a:b", "a%b", "a?b", "a$b", "a" * 254]
DNS_LABEL_REGEX_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


DNS1123_CASES = ([(dns1123_label_errors, v, True) for v in GOOD_DNS_LABELS]
                 + [(dns1123_label_errors, v, False) for v in BAD_DNS_LABELS]
                 + [(dns1123_subdomain_errors, v, True) for v in GOOD_SUBDOMAINS]
                 + [(dns1123_subdomain_errors, v, False) for v in BAD_SUBDOMAINS])


@pytest.mark.parametrize(("check", "value", "valid"), DNS1123_CASES)
def test_dns1123_names(check, value: str, valid: bool) -> None:
    assert (check(value) == []) is valid


def test_dns1123_messages_are_upstreams() -> None:
    assert dns1123_label_errors("Web") == [DNS_LABEL_REGEX_ERROR]
    assert dns1123_label_errors("a.b") == ["must not contain dots"]  # a subdomain, not a label
    assert dns1123_label_errors("a" * 64) == ["must be no more than 63 bytes"]
    assert dns1123_subdomain_errors("a" * 254) == ["must be no more than 253 bytes"]
    assert dns1123_subdomain_errors("Ex.com") == [PREFIX_PART_REGEX_ERROR.removeprefix("prefix part ")]


# ------------------------------------------------------ metav1.LabelSelectorAsSelector


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({}, ""),
        ({"matchLabels": {}}, ""),
        ({"matchLabels": None, "matchExpressions": None}, ""),
        ({"matchExpressions": []}, ""),
        ({"matchLabels": {"foo": "bar", "baz": "blah"}}, "baz=blah,foo=bar"),
        (
            {
                "matchLabels": {"foo": "bar", "baz": "blah"},
                "matchExpressions": [
                    {"key": "baz", "operator": "In", "values": ["qux", "norf"]},
                    {"key": "foo", "operator": "NotIn", "values": ["qux"]},
                    {"key": "zot", "operator": "Exists"},
                    {"key": "abc", "operator": "DoesNotExist", "values": None},
                ],
            },
            "!abc,baz=blah,baz in (norf,qux),foo=bar,foo notin (qux),zot",
        ),
        ({"matchExpressions": [{"key": "x", "operator": "In", "values": ["b", "a", "b"]}]}, "x in (a,b,b)"),
        ({"matchLabels": {"x": ""}}, "x="),
        ({"matchLabels": {"x": "a"}, "unknownField": 1}, "x=a"),
    ],
)
def test_selector_from_label_selector(obj: dict[str, object], expected: str) -> None:
    selector = selector_from_label_selector(obj)
    assert selector.selectable
    assert str(selector) == expected


def test_label_selector_none_matches_nothing_and_empty_matches_everything() -> None:
    assert selector_from_label_selector(None) == Selector.nothing()
    assert not selector_from_label_selector(None).matches({})
    assert selector_from_label_selector({}).matches({"anything": "goes"})
    assert selector_from_label_selector({}).empty()


def test_label_selector_matching() -> None:
    selector = selector_from_label_selector(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["frontend", "edge"]},
                {"key": "canary", "operator": "DoesNotExist"},
            ],
        }
    )
    assert selector.matches({"app": "web", "tier": "edge"})
    assert not selector.matches({"app": "web", "tier": "edge", "canary": "true"})
    assert not selector.matches({"app": "web", "tier": "backend"})
    assert not selector.matches({"tier": "edge"})


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"matchExpressions": [{"key": "x", "operator": "In", "values": []}]}, "values set can't be empty"),
        ({"matchExpressions": [{"key": "x", "operator": "NotIn"}]}, "matchExpressions[0].values: Invalid value"),
        ({"matchExpressions": [{"key": "x", "operator": "Exists", "values": ["a"]}]}, "values set must be empty"),
        ({"matchExpressions": [{"key": "x", "operator": "DoesNotExist", "values": ["a"]}]}, "must be empty"),
        ({"matchExpressions": [{"key": "x", "operator": "Gt", "values": ["1"]}]}, '"Gt" is not a valid label selector operator'),
        ({"matchExpressions": [{"key": "x", "operator": "in", "values": ["a"]}]}, '"in" is not a valid label selector operator'),
        ({"matchExpressions": [{"key": "x", "values": ["a"]}]}, "None is not a valid label selector operator"),
        ({"matchExpressions": [{"key": "-x", "operator": "Exists"}]}, 'matchExpressions[0].key: Invalid value: "-x"'),
        ({"matchExpressions": [{"operator": "Exists"}]}, "matchExpressions[0].key: must be a string"),
        ({"matchExpressions": [{"key": "x", "operator": "In", "values": "ab"}]}, "must be a list of strings"),
        ({"matchExpressions": [{"key": "x", "operator": "In", "values": [1]}]}, "must be a string"),
        ({"matchExpressions": {"key": "x"}}, "matchExpressions: must be a list"),
        ({"matchExpressions": ["x"]}, "matchExpressions[0]: must be an object"),
        ({"matchLabels": {"x": 1}}, "matchLabels: must map strings to strings"),
        ({"matchLabels": ["x"]}, "matchLabels: must be an object"),
        ({"matchLabels": {"x": "-a"}}, "matchLabels.values[0][x]: Invalid value"),
        ({"matchLabels": {"b/a/d": "a"}}, "matchLabels.key: Invalid value"),
        ("x=a", "label selector must be an object or None"),
    ],
)
def test_selector_from_label_selector_errors(obj: object, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        selector_from_label_selector(obj)  # type: ignore[arg-type]
    assert message in str(info.value)


# ------------------------------------------------------- identity, caching, pickling


def test_selector_is_immutable_hashable_and_cached() -> None:
    first = parse_selector("b=1,a in (y,x)")
    assert first is parse_selector("b=1,a in (y,x)")
    assert first == parse_selector("a in (x,y), b=1")
    assert len({first, parse_selector("a in (x,y),b=1")}) == 1
    assert first != parse_selector("a in (x,y),b==1")
    assert first != "a in (x,y),b=1"
    with pytest.raises(AttributeError):
        first._text = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        first.foo = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("selector", [parse_selector("a in (x,y),b=1,!c,d>3"), Selector.nothing(), Selector.everything()])
def test_selector_pickles(selector: Selector) -> None:
    clone = pickle.loads(pickle.dumps(selector))
    assert clone == selector
    assert clone.matches({"a": "x", "b": "1", "d": "4"}) == selector.matches({"a": "x", "b": "1", "d": "4"})


def test_selector_repr() -> None:
    assert repr(parse_selector("x=a")) == "parse_selector('x=a')"
    assert repr(Selector.nothing()) == "Selector.nothing()"


def test_requirements_expose_operator_and_sorted_values() -> None:
    (r,) = parse_selector("machineModel in (A4,A3)").requirements
    assert (r.key, r.operator, r.values) == ("machineModel", Operator.IN, ("A3", "A4"))
    assert r.operator == "in"
    assert [o.value for o in Operator] == ["in", "notin", "=", "==", "!=", "exists", "!", "gt", "lt"]


# ----------------------------------------------------------------------- fuzzing

ALPHABET = string.ascii_letters + string.digits + "=!<>(),./-_ " + "  \t"
label_dicts = st.dictionaries(
    st.sampled_from(["a", "b", "x", "y", "in", "notin", "a.b/c", "z"]),
    st.sampled_from(["", "a", "b", "1", "-3", "42", "x y", "in", "9223372036854775808"]),
    max_size=6,
)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=ALPHABET, max_size=40), labels=label_dicts)
def test_fuzz_parse_round_trips_or_raises_selector_error(text: str, labels: dict[str, str]) -> None:
    try:
        selector = parse_selector(text)
    except SelectorError:
        return
    again = parse_selector(str(selector))
    assert again == selector
    assert str(again) == str(selector)
    assert again.requirements == selector.requirements
    assert isinstance(selector.matches(labels), bool)
    assert selector.matches(labels) == again.matches(labels)


@settings(max_examples=300)
@given(text=st.text(max_size=30))
def test_fuzz_arbitrary_unicode_only_raises_selector_error(text: str) -> None:
    try:
        selector = parse_selector(text)
    except SelectorError:
        return
    assert parse_selector(str(selector)) == selector


KEYS = st.sampled_from(["a", "b", "app", "in", "notin", "k8s.io/role", "x-1", "A_b.c"])
VALUES = st.sampled_from(["", "a", "b", "in", "notin", "v-1", "A.b_c", "0", "7", "12"])
INTS = st.sampled_from(["0", "1", "7", "12", "007"])
SPACE = st.sampled_from(["", " ", "  ", "\t", "\n"])


@st.composite
def requirement_texts(draw: st.DrawFn) -> tuple[str, str, str, frozenset[str]]:
    """A syntactically valid requirement, plus the meaning it must have."""
    key = draw(KEYS)
    kind = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!", ">", "<"]))
    sp = draw(SPACE)
    if kind in ("exists", "!"):
        text = ("!" + sp if kind == "!" else "") + key
        return text, key, kind, frozenset()
    if kind in ("in", "notin"):
        values = draw(st.lists(VALUES, min_size=1, max_size=4))
        inner = ("," + draw(SPACE)).join(values)
        return f"{key} {kind}{sp}({sp}{inner}{sp})", key, kind, frozenset(values)
    value = draw(INTS) if kind in (">", "<") else draw(VALUES)
    return f"{key}{sp}{kind}{sp}{value}", key, kind, frozenset([value])


def reference_matches(terms: list[tuple[str, str, str, frozenset[str]]], labels: dict[str, str]) -> bool:
    """Independent restatement of upstream ``Requirement.Matches``."""
    for _, key, kind, values in terms:
        present = key in labels
        value = labels.get(key, "")
        if kind in ("=", "==", "in") and not (present and value in values):
            return False
        if kind in ("!=", "notin") and present and value in values:
            return False
        if kind == "exists" and not present:
            return False
        if kind == "!" and present:
            return False
        if kind in (">", "<"):
            if not present or not value.lstrip("+-").isdigit() or not value.isascii():
                return False
            number, bound = int(value), int(next(iter(values)))
            if not -(2**63) <= number < 2**63 or not (number > bound if kind == ">" else number < bound):
                return False
    return True


@settings(max_examples=500)
@given(
    terms=st.lists(requirement_texts(), min_size=1, max_size=5),
    labels=st.dictionaries(KEYS, st.one_of(VALUES, st.sampled_from(["+3", "-2", "99999999999999999999"])), max_size=6),
)
def test_fuzz_generated_selectors_parse_and_match_like_upstream(
    terms: list[tuple[str, str, str, frozenset[str]]], labels: dict[str, str]
) -> None:
    text = ",".join(t[0] for t in terms)
    selector = parse_selector(text)
    assert len(selector.requirements) == len(terms)
    assert [r.key for r in selector.requirements] == sorted(t[1] for t in terms)
    assert selector.matches(labels) == reference_matches(terms, labels)
    assert parse_selector(str(selector)) == selector


@settings(max_examples=300)
@given(
    obj=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.sampled_from(["In", "NotIn", "Exists", "x"]),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(
                st.sampled_from(["matchLabels", "matchExpressions", "key", "operator", "values", "a"]), children, max_size=4
            )
        ),
        max_leaves=12,
    )
)
def test_fuzz_structured_selector_only_raises_selector_error(obj: object) -> None:
    try:
        selector = selector_from_label_selector(obj)  # type: ignore[arg-type]
    except SelectorError:
        return
    assert isinstance(selector.matches({"a": "b"}), bool)
