"""The Go text/template subset: what it renders, and Go's messages for what it refuses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.gotemplate import Field, TemplateError, Text, format_value, parse

RENDER_CASES = [
    ("literal text only", "pool: A\n", {}, "pool: A\n"),
    ("one field", "{{.Pool}}", {"Pool": "A"}, "A"),
    ("spaces inside the action", "{{ .Pool }}", {"Pool": "A"}, "A"),
    ("newlines inside the action", "{{\n.Pool\n}}", {"Pool": "A"}, "A"),
    ("field chain", "{{.A.B}}", {"A": {"B": "x"}}, "x"),
    ("text around fields", "pool-{{.Zone}}-{{.Rack}}", {"Zone": "z1", "Rack": 7}, "pool-z1-7"),
    ("left trim eats spaces and newlines", "a  \n\t {{- .X}}", {"X": "b"}, "ab"),
    ("right trim eats spaces and newlines", "{{.X -}} \n\n c", {"X": "b"}, "bc"),
    ("dash without a space is no trim marker", "a {{.X}}- b", {"X": 1}, "a 1- b"),
    ("comment", "a{{/* note */}}b", {}, "ab"),
    ("comment over several lines", "a{{/* one\ntwo */}}b", {}, "ab"),
    ("comment with trim markers", "a \n{{- /* note */ -}}\n b", {}, "ab"),
    ("integral number prints without a point", "{{.N}}", {"N": 3.0}, "3"),
    ("float", "{{.N}}", {"N": 1.5}, "1.5"),
    ("large float uses %v's exponent threshold", "{{.N}}|{{.M}}", {"N": 1e20, "M": 1e21}, "100000000000000000000|1e+21"),
    ("tiny float", "{{.N}}", {"N": 0.00001}, "1e-05"),
    ("boolean", "{{.B}}", {"B": False}, "false"),
    ("null prints <no value>", "{{.V}}", {"V": None}, "<no value>"),
    ("unicode field name and value", "{{.池}}", {"池": "资源池A"}, "资源池A"),
    ("closing braces in text are literal", "}} {{.X}} }}", {"X": "y"}, "}} y }}"),
]


@pytest.mark.parametrize(("source", "data", "expected"), [c[1:] for c in RENDER_CASES], ids=[c[0] for c in RENDER_CASES])
def test_render(source, data, expected):
    assert parse(source, "t").execute(data) == expected


EXECUTE_ERRORS = [
    ("missing key", "{{.DefaultPool}}", {}, "missing_argument",
     'template: nsc:1:2: executing "nsc" at <.DefaultPool>: map has no entry for key "DefaultPool"'),
    ("missing key on a later line, spaced action", "values:\n  - {{ .DefaultPool }}", {"Other": 1}, "missing_argument",
     'template: nsc:2:7: executing "nsc" at <.DefaultPool>: map has no entry for key "DefaultPool"'),
    ("missing nested key", "{{.A.B}}", {"A": {}}, "missing_argument",
     'template: nsc:1:2: executing "nsc" at <.A.B>: map has no entry for key "B"'),
    ("field of a string", "{{.A.B}}", {"A": "x"}, "bad_argument",
     "template: nsc:1:2: executing \"nsc\" at <.A.B>: can't evaluate field B in type string"),
    ("field of a number", "{{.A.B}}", {"A": 1}, "bad_argument",
     "template: nsc:1:2: executing \"nsc\" at <.A.B>: can't evaluate field B in type float64"),
    ("field of null", "{{.A.B}}", {"A": None}, "bad_argument",
     'template: nsc:1:2: executing "nsc" at <.A.B>: nil pointer evaluating interface {}.B'),
    ("no data at all", "{{.A}}", None, "bad_argument",
     'template: nsc:1:2: executing "nsc" at <.A>: nil data; no entry for key "A"'),
    ("column counts bytes, as Go does", "池 {{.X}}", {}, "missing_argument",
     'template: nsc:1:6: executing "nsc" at <.X>: map has no entry for key "X"'),
]


@pytest.mark.parametrize(("source", "data", "code", "message"), [c[1:] for c in EXECUTE_ERRORS],
                         ids=[c[0] for c in EXECUTE_ERRORS])
def test_execute_errors(source, data, code, message):
    with pytest.raises(TemplateError) as caught:
        parse(source, "nsc").execute(data)
    assert caught.value.code == code
    assert str(caught.value) == message


def test_missing_key_error_carries_its_position_and_key():
    with pytest.raises(TemplateError) as caught:
        parse("a:\n  b: {{.Pool}}\n", "nsc").execute({})
    error = caught.value
    assert (error.key, error.line, error.column, error.context) == ("Pool", 2, 7, ".Pool")


PARSE_ERRORS = [
    ("if", "{{if .X}}a{{end}}", "template_unsupported", "template: t:1:2: {{if}} actions are not supported"),
    ("range", "a\n{{ range .Pools }}", "template_unsupported", "template: t:2:3: {{range}} actions are not supported"),
    ("end", "{{end}}", "template_unsupported", "{{end}} actions are not supported"),
    ("pipeline", "{{.X | printf}}", "template_unsupported", "pipelines are not supported in {{.X | printf}}"),
    ("function", "{{default .X}}", "template_unsupported", 'function "default" is not supported'),
    ("variable", "{{$x}}", "template_unsupported", "variables are not supported ($x)"),
    ("bare dot", "{{.}}", "template_unsupported", "the dot alone is not supported"),
    ("arguments", "{{.X .Y}}", "template_unsupported", "arguments are not supported in {{.X .Y}}"),
    ("string constant", '{{"a"}}', "template_unsupported", 'constants are not supported ("a")'),
    ("number constant", "{{3}}", "template_unsupported", "constants are not supported (3)"),
    ("dash without space is not a trim marker", "{{-3}}", "template_unsupported", "constants are not supported (-3)"),
    ("empty action", "a {{ }}", "template_syntax", "template: t:1:5: missing value for command"),
    ("unclosed action", "a\nb {{.X", "template_syntax", "template: t:2:2: unclosed action"),
    ("unclosed comment", "{{/* x", "template_syntax", "template: t:1:0: unclosed comment"),
    ("comment must end at the delimiter", "{{/* x */ .X}}", "template_syntax", "comment ends before closing delimiter"),
    ("stray character", "{{)}}", "template_syntax", 'unexpected ")" in command'),
    ("dash glued to a field is no trim marker", "{{.X-}}", "template_syntax", 'unexpected "-" after .X'),
]


@pytest.mark.parametrize(("source", "code", "message"), [c[1:] for c in PARSE_ERRORS], ids=[c[0] for c in PARSE_ERRORS])
def test_parse_errors(source, code, message):
    with pytest.raises(TemplateError) as caught:
        parse(source, "t")
    assert caught.value.code == code
    assert message in str(caught.value)


def test_nodes_placeholders_and_canonical_text():
    template = parse("a {{- /* c */}} {{ .X }}{{.Y.Z}}\n", "t")
    assert template.nodes == (Text("a "), Field(("X",)), Field(("Y", "Z")), Text("\n"))
    assert template.placeholders == {"X", "Y"}
    assert parse(template.canonical(), "t").nodes == template.nodes


def test_left_trim_applies_to_the_text_before_the_action():
    assert parse("a \n {{- .X}}", "t").nodes == (Text("a"), Field(("X",)))
    assert parse("{{.X -}} \n b", "t").nodes == (Field(("X",)), Text("b"))


def test_evaluate_keeps_the_type_of_a_single_action():
    assert parse("{{.W}}").evaluate({"W": 3}) == 3
    assert parse("{{ .W }}").evaluate({"W": True}) is True
    assert parse("w{{.W}}").evaluate({"W": 3}) == "w3"


@pytest.mark.parametrize(("value", "text"), [
    (3, "3"), (-0.0, "-0"), (1e-4, "0.0001"), (123456.789, "123456.789"), (float("inf"), "+Inf"),
    ({"b": 1, "a": "x"}, "map[a:x b:1]"), (["a", 2], "[a 2]"),
])
def test_format_value_like_go(value, text):
    assert format_value(value) == text


_literal = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12).filter(
    lambda s: "{{" not in s and not s.endswith("{"))
_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_literal, _name), max_size=5), _literal, st.dictionaries(_name, st.text(max_size=8)))
def test_canonical_text_reparses_and_renders_like_concatenation(pieces, tail, data):
    source = "".join(f"{text}{{{{.{name}}}}}" for text, name in pieces) + tail
    template = parse(source, "t")
    assert parse(template.canonical(), "t").nodes == template.nodes
    names = {name for _, name in pieces}
    args = {name: data.get(name, name.lower()) for name in names}
    assert template.execute(args) == "".join(text + args[name] for text, name in pieces) + tail
