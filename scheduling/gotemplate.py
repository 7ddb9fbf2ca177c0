"""The subset of Go's ``text/template`` that scheduling templates use, with Go's wording.

Ctrip's NodeSchedulerConfig / PodSchedulerConfig templates are Go templates rendered with
``Option("missingkey=error")`` over a JSON object of arguments.  Users copy them from
upstream, so what upstream accepts here must mean the same thing, and what it rejects must
be rejected with a message a Go user recognises.

Supported, exactly as Go lexes and executes them:

* literal text, copied as is;
* field actions ``{{.Name}}``, ``{{ .Name }}`` and chains ``{{.A.B}}`` (map lookups);
* trim markers ``{{- `` and `` -}}``, which remove *all* adjacent spaces, tabs and newlines
  of the neighbouring text (a marker needs its space: ``{{-3}}`` is not a trim marker);
* comments ``{{/* ... */}}`` (possibly with trim markers, possibly over several lines).

Missing keys are errors, as with ``missingkey=error``:
``template: nsc:18:13: executing "nsc" at <.DefaultPool>: map has no entry for key "DefaultPool"``
(line is 1-based, column is the 0-based byte offset in the line, as Go prints them).

Deliberately *not* supported: ``if``/``range``/``with``/``define``/``template``/``block``,
pipelines (``|``), functions, variables, constants and the bare dot.  Scheduling templates
are rendered value by value into an already parsed YAML tree (see
:mod:`scheduling.schedconfig`), so an action may only ever produce one value; control
structures would let an argument change the structure of the affinity, which is exactly
what the renderer guarantees cannot happen.  Each of them is refused at parse time with
code ``template_unsupported``, naming the construct and its position, rather than failing
later at admission.

Values are printed like Go's ``fmt.Print`` does for decoded JSON (numbers as ``float64``
with ``%v``, so ``3`` and ``3.0`` both print ``3`` and ``1e21`` prints ``1e+21``; booleans
as ``true``/``false``; ``null`` as ``<no value>``).  One difference: integers beyond 2**53
print exactly, where Go would first round them to a float64.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.field import json_type

__all__ = [
    "Field",
    "Template",
    "TemplateError",
    "Text",
    "format_value",
    "parse",
]

_SPACE = " \t\r\n"
_LEFT, _RIGHT = "{{", "}}"
_KEYWORDS = frozenset({"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"})
# Go's isAlphaNumeric is '_' or a Unicode letter or digit; a field must not start with a digit ('.1' is a number).
_IDENT = r"[^\W\d]\w*"
_FIELD_CHAIN = re.compile(rf"(?:\.{_IDENT})+")
_FIELD_NAME = re.compile(rf"\.({_IDENT})")
_IDENTIFIER = re.compile(_IDENT)


class TemplateError(ValueError):
    """A template Go would refuse to parse or execute, or one outside the supported subset.

    ``code`` is ``template_syntax`` (Go would refuse it too), ``template_unsupported`` (valid
    Go, outside the subset), ``missing_argument`` (``map has no entry for key``, the key in
    ``key``) or ``bad_argument`` (a field looked up on a value that is not an object).
    ``line`` (1-based) and ``column`` (0-based bytes) locate the action in ``name``'s text.
    """

    def __init__(self, code: str, message: str, *, name: str, line: int, column: int, offset: int,
                 context: str | None = None, key: str | None = None) -> None:
        self.code = code
        self.message = message
        self.name = name
        self.line = line
        self.column = column
        self.offset = offset
        self.context = context
        self.key = key
        where = f"template: {name}:{line}:{column}: "
        if context is not None:
            where += f"executing {_go_quote(name)} at <{context}>: "
        super().__init__(where + message)


@dataclass(frozen=True)
class Text:
    """Literal text (after trim markers have been applied); ``offset`` is where it starts in the source."""

    text: str
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Field:
    """A field action ``{{.A.B}}``: ``names`` is the chain, ``offset`` the source offset of its first ``.``."""

    names: tuple[str, ...]
    offset: int = field(default=0, compare=False)
    line: int = field(default=1, compare=False)
    column: int = field(default=0, compare=False)

    @property
    def source(self) -> str:
        """The chain as Go prints the node (``.A.B``), used in error contexts and canonical text."""
        return "".join(f".{name}" for name in self.names)


Node = Text | Field


def _go_quote(text: str) -> str:
    """``%q`` for the plain strings that appear in template messages (keys, names)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{escaped}"'


def _line_and_column(source: str, offset: int) -> tuple[int, int]:
    """Go's ``ErrorContext``: 1-based line, 0-based byte column."""
    line_start = source.rfind("\n", 0, offset) + 1
    return source.count("\n", 0, offset) + 1, len(source[line_start:offset].encode("utf-8", "surrogatepass"))


# ------------------------------------------------------------------------------ formatting

def _go_float(number: float) -> str:
    """``fmt.Sprint(float64)`` (``%v``): shortest digits, exponent form below 1e-4 or from 1e21 on."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, number) < 0 else ""
    if number == 0:
        return sign + "0"
    mantissa, _, exp_text = repr(abs(number)).partition("e")  # repr holds the shortest round-trip digits
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + (int(exp_text) if exp_text else 0)  # decimal point position within ``digits``
    leading = len(digits) - len(digits.lstrip("0"))
    digits, point = digits[leading:].rstrip("0") or "0", point - leading
    exponent = point - 1
    if exponent < -4 or exponent >= 21:
        tail = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'+' if exponent >= 0 else '-'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def format_value(value: Any) -> str:
    """How Go's template engine prints a JSON-decoded value (``fmt.Fprint``)."""
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{format_value(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, Sequence):
        return "[" + " ".join(format_value(v) for v in value) + "]"
    return str(value)


#: The Go type ``encoding/json`` decodes each JSON type to.
_GO_TYPES = {"boolean": "bool", "number": "float64", "string": "string", "array": "[]interface {}"}


def _go_type(value: Any) -> str:
    """The Go type of ``value`` as decoded, for "can't evaluate field" messages."""
    return _GO_TYPES.get(json_type(value) or "") or type(value).__name__


# ---------------------------------------------------------------------------------- lexing

def _has_left_trim(source: str, pos: int) -> bool:
    """``{{- `` : a dash right after the delimiter, then a space character."""
    return source.startswith("-", pos) and pos + 1 < len(source) and source[pos + 1] in _SPACE


def _at_right_delim(source: str, pos: int) -> tuple[bool, bool]:
    """Go's ``atRightDelim``: (at a closing delimiter, with a trim marker)."""
    if pos + 1 < len(source) and source[pos] in _SPACE and source[pos + 1] == "-" and source.startswith(_RIGHT, pos + 2):
        return True, True
    return source.startswith(_RIGHT, pos), False


class _Parser:
    """Splits a source into Text and Field nodes, applying trims and dropping comments."""

    def __init__(self, source: str, name: str) -> None:
        self.source = source
        self.name = name

    def error(self, code: str, message: str, offset: int) -> TemplateError:
        line, column = _line_and_column(self.source, offset)
        return TemplateError(code, message, name=self.name, line=line, column=column, offset=offset)

    def parse(self) -> tuple[Node, ...]:
        source, nodes = self.source, []
        pos, trim_next = 0, False
        while True:
            start = source.find(_LEFT, pos)
            end = len(source) if start < 0 else start
            text_start = pos
            if trim_next:
                while text_start < end and source[text_start] in _SPACE:
                    text_start += 1
            text_end = end
            if start >= 0 and _has_left_trim(source, start + len(_LEFT)):
                while text_end > text_start and source[text_end - 1] in _SPACE:
                    text_end -= 1
            if text_end > text_start:
                nodes.append(Text(source[text_start:text_end], text_start))
            if start < 0:
                return _merge_texts(nodes)
            pos, node, trim_next = self.action(start)
            if node is not None:
                nodes.append(node)

    def action(self, start: int) -> tuple[int, Field | None, bool]:
        """Lex one action starting at ``start`` (its ``{{``): (position after it, node, trim after)."""
        source = self.source
        pos = start + len(_LEFT)
        if _has_left_trim(source, pos):
            pos += 2
        if source.startswith("/*", pos):
            return self.comment(start, pos)
        close = source.find(_RIGHT, pos)
        if close < 0:
            raise self.error("template_syntax", "unclosed action", start)
        body_end, trim = close, False
        if close - 2 >= pos and source[close - 1] == "-" and source[close - 2] in _SPACE:
            body_end, trim = close - 1, True
        return close + len(_RIGHT), self.field(pos, body_end), trim

    def comment(self, start: int, pos: int) -> tuple[int, None, bool]:
        end = self.source.find("*/", pos + 2)
        if end < 0:
            raise self.error("template_syntax", "unclosed comment", start)
        after = end + 2
        delim, trim = _at_right_delim(self.source, after)
        if not delim:
            raise self.error("template_syntax", "comment ends before closing delimiter", start)
        return after + (3 if trim else 0) + len(_RIGHT), None, trim

    def field(self, pos: int, end: int) -> Field:
        body = self.source[pos:end]
        stripped = body.strip(_SPACE)
        at = pos + (len(body) - len(body.lstrip(_SPACE)))
        if _FIELD_CHAIN.fullmatch(stripped):
            line, column = _line_and_column(self.source, at)
            return Field(tuple(_FIELD_NAME.findall(stripped)), at, line, column)
        raise self.unsupported(stripped, at)

    def unsupported(self, body: str, at: int) -> TemplateError:
        """Name what the action is, so the author knows what to rewrite."""
        if not body:
            return self.error("template_syntax", "missing value for command", at)
        word = re.match(r"\S+", body).group(0)  # type: ignore[union-attr]
        if word in _KEYWORDS:
            return self.error("template_unsupported", f"{{{{{word}}}}} actions are not supported: a scheduling template "
                              "renders one value per placeholder and its structure cannot depend on arguments", at)
        if "|" in body:
            return self.error("template_unsupported", f"pipelines are not supported in {{{{{body}}}}}: "
                              "use a single field such as {{.Pool}}", at)
        if word.startswith("$"):
            return self.error("template_unsupported", f"variables are not supported ({word})", at)
        if word == ".":
            return self.error("template_unsupported", "the dot alone is not supported: name a field such as {{.Pool}}", at)
        chain = _FIELD_CHAIN.match(body)
        if chain and body[chain.end()] not in _SPACE:
            return self.error("template_syntax", f"unexpected {_go_quote(body[chain.end()])} after {chain.group(0)}", at)
        if chain:
            return self.error("template_unsupported", f"arguments are not supported in {{{{{body}}}}}: "
                              "an action is a single field such as {{.Pool}}", at)
        if word[0] in "\"'`0123456789+-" or word in ("true", "false", "nil"):
            return self.error("template_unsupported", f"constants are not supported ({word})", at)
        if _IDENTIFIER.fullmatch(word):
            return self.error("template_unsupported", f"function {_go_quote(word)} is not supported", at)
        return self.error("template_syntax", f"unexpected {_go_quote(body[:1])} in command", at)


def _merge_texts(nodes: list[Node]) -> tuple[Node, ...]:
    """Adjacent texts (split by a comment) become one node, so equal templates compare equal."""
    merged: list[Node] = []
    for node in nodes:
        if isinstance(node, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(merged[-1].text + node.text, merged[-1].offset)
        else:
            merged.append(node)
    return tuple(merged)


# --------------------------------------------------------------------------------- template

@dataclass(frozen=True)
class Template:
    """A parsed template: ``nodes`` alternate literal text and field actions."""

    name: str
    source: str = field(compare=False)
    nodes: tuple[Node, ...]

    @property
    def fields(self) -> tuple[Field, ...]:
        return tuple(node for node in self.nodes if isinstance(node, Field))

    @property
    def placeholders(self) -> frozenset[str]:
        """Top-level argument names the template reads (``{{.A.B}}`` reads ``A``)."""
        return frozenset(f.names[0] for f in self.fields)

    @property
    def single_field(self) -> Field | None:
        """The field when the whole template is exactly one action (its value keeps its JSON type)."""
        if len(self.nodes) == 1 and isinstance(self.nodes[0], Field):
            return self.nodes[0]
        return None

    def lookup(self, node: Field, data: Any) -> Any:
        """Evaluate one field against ``data`` with ``missingkey=error`` semantics."""
        value = data
        for depth, key in enumerate(node.names):
            if value is None:
                message = f"nil data; no entry for key {_go_quote(key)}" if depth == 0 else \
                    f"nil pointer evaluating interface {{}}.{key}"
                raise self._exec_error("bad_argument", message, node)
            if not isinstance(value, Mapping):
                raise self._exec_error("bad_argument", f"can't evaluate field {key} in type {_go_type(value)}", node)
            if key not in value:
                raise self._exec_error("missing_argument", f"map has no entry for key {_go_quote(key)}", node, key)
            value = value[key]
        return value

    def execute(self, data: Any) -> str:
        """The rendered text, as ``template.Execute`` would write it."""
        return "".join(node.text if isinstance(node, Text) else format_value(self.lookup(node, data)) for node in self.nodes)

    def evaluate(self, data: Any) -> Any:
        """Like :meth:`execute`, but a template that is one action yields the raw value (typed)."""
        single = self.single_field
        return self.lookup(single, data) if single is not None else self.execute(data)

    def canonical(self) -> str:
        """Source text that parses back to the same nodes, with actions written ``{{.A}}``."""
        return "".join(node.text if isinstance(node, Text) else f"{_LEFT}{node.source}{_RIGHT}" for node in self.nodes)

    def _exec_error(self, code: str, message: str, node: Field, key: str | None = None) -> TemplateError:
        return TemplateError(code, message, name=self.name, line=node.line, column=node.column, offset=node.offset,
                             context=node.source, key=key)


def parse(source: str, name: str = "template") -> Template:
    """Parse ``source``; raises :class:`TemplateError` on syntax outside the supported subset."""
    if not isinstance(source, str):
        raise TypeError(f"template source must be a string, not {type(source).__name__}")
    return Template(name, source, _Parser(source, name).parse())
