"""Kubernetes label selectors with the exact semantics of ``k8s.io/apimachinery/pkg/labels``.

The console filters fleets client-side and hands selector strings to the API server, so the
two must agree byte for byte: a selector this module accepts, rejects, prints or matches
must be accepted, rejected, printed or matched the same way by ``labels.Parse``.  The
grammar's odd corners are therefore reproduced on purpose, not tidied up:

* ``x in ()`` is the set ``{""}``, ``x in (a,)`` is ``{"", "a"}``, ``x=`` means "equals the
  empty string".  ``x in (a,,)`` and ``x in (,,)`` are accepted, as in current upstream
  (older releases rejected them).
* ``in`` and ``notin`` are keywords only where an operator is expected, so ``in in (in)``
  is a valid selector.
* A NUL character ends the input when it starts a token and splits a word otherwise,
  because the Go lexer uses byte 0 as its end-of-input sentinel.
* ``x=a`` prints as ``x=a`` and ``x==a`` as ``x==a``: the two operators are kept apart so
  that ``str()`` equals upstream ``String()``.
* ``!x=a`` is rejected (a negated key takes no operator), ``x>`` and ``x<a`` are rejected
  (``gt``/``lt`` need one integer), ``>``/``<`` only match label values that parse as a
  signed 64-bit decimal integer.

Error messages reuse upstream's wording (``unable to parse requirement: found '(',
expected: ...``, ``values[0]: Invalid value: "a": ...``) and add the character offset of
the offending token.  One deliberate difference: an invalid key found while parsing text is
reported under the field name ``key`` where upstream prints an empty field name.

Operators are stored as upstream stores them (:class:`Operator`), so ``=``/``==``/``in``
and ``!=``/``notin`` stay distinct even though they match identically; code that
translates selectors to SQL should treat ``EQUALS``, ``DOUBLE_EQUALS`` and ``IN`` as one
"value in set" test and ``NOT_EQUALS``/``NOT_IN`` as "key absent or value not in set".

Requirements are sorted by key with a stable sort.  Go sorts with ``sort.Sort``, which is
stable for up to 12 requirements; beyond that, requirements sharing a key may be ordered
differently by upstream.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple

from kube.field import FieldError, aggregate, child, go_quote, index

__all__ = [
    "LABEL_SELECTOR_OPERATORS",
    "Operator",
    "Requirement",
    "Selector",
    "SelectorError",
    "Token",
    "TokenKind",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "is_valid_label_key",
    "is_valid_label_value",
    "parse_int64",
    "parse_selector",
    "requirement_errors",
    "selector_from_label_selector",
    "selector_from_set",
    "tokenize",
    "validate_label_key",
    "validate_label_value",
]


class SelectorError(ValueError):
    """A selector that Kubernetes would refuse.

    ``reason`` carries upstream's wording; ``position`` (0-based offset into the selector
    text) and ``token`` say where parsing stopped, for selectors that came from text.
    """

    def __init__(self, reason: str, position: int | None = None, token: str | None = None) -> None:
        self.reason = reason
        self.position = position
        self.token = token
        super().__init__(reason if position is None else f"{reason} (at position {position})")


class Operator(enum.StrEnum):
    """Requirement operators, spelled as ``k8s.io/apimachinery/pkg/selection`` spells them."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_BINARY_OPERATORS = (
    Operator.IN,
    Operator.NOT_IN,
    Operator.EQUALS,
    Operator.DOUBLE_EQUALS,
    Operator.NOT_EQUALS,
    Operator.GREATER_THAN,
    Operator.LESS_THAN,
)
_ALL_OPERATORS = _BINARY_OPERATORS + (Operator.EXISTS, Operator.DOES_NOT_EXIST)
_OPERATOR_BY_VALUE = {op.value: op for op in _ALL_OPERATORS}

# --------------------------------------------------------------------------- validation

_LABEL_KEY_MAX = 63
_LABEL_VALUE_MAX = 63
_DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_LABEL_MAX = 63
_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE_FMT = f"({_NAME_FMT})?"
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_NAME_RE = re.compile(_NAME_FMT)
_VALUE_RE = re.compile(_VALUE_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_NAME_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_EMPTY_MSG = "must be non-empty"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream's ``RegexError``, double spaces before "or" included, so messages compare equal."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{fmt}')"


def _max_len_error(limit: int) -> str:
    return f"must be no more than {limit} bytes"


def _byte_len(text: str) -> int:
    """Length in UTF-8 bytes: Go's ``len`` counts bytes, and limits are stated in bytes."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Why ``value`` is not an object name such as a node's (``IsDNS1123Subdomain``); empty when valid."""
    errors = []
    if _byte_len(value) > _DNS1123_SUBDOMAIN_MAX:
        errors.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errors.append(_regex_error(_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def dns1123_label_errors(value: str) -> list[str]:
    """Why ``value`` is not a namespace's name (``IsDNS1123Label``); empty when valid."""
    errors = []
    if _byte_len(value) > _DNS1123_LABEL_MAX:
        errors.append(_max_len_error(_DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errors.append("must not contain dots")  # a subdomain within the length: only dots are wrong
        else:
            errors.append(_regex_error(_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def validate_label_key(key: object) -> list[str]:
    """Why ``key`` is not a label key (``[prefix/]name``), as upstream ``IsLabelKey`` words it.

    An empty list means the key is valid.
    """
    if not isinstance(key, str):
        return [f"must be a string, not {type(key).__name__}"]
    parts = key.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append(f"prefix part {_EMPTY_MSG}")
        else:
            errors.extend(f"prefix part {msg}" for msg in dns1123_subdomain_errors(prefix))
    if not name:
        errors.append(f"name part {_EMPTY_MSG}")
    elif _byte_len(name) > _LABEL_KEY_MAX:
        errors.append(f"name part {_max_len_error(_LABEL_KEY_MAX)}")
    if not _NAME_RE.fullmatch(name):
        errors.append("name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc"))
    return errors


def validate_label_value(value: object) -> list[str]:
    """Why ``value`` is not a label value, as upstream ``IsLabelValue`` words it (empty = valid)."""
    if not isinstance(value, str):
        return [f"must be a string, not {type(value).__name__}"]
    errors = []
    if _byte_len(value) > _LABEL_VALUE_MAX:
        errors.append(_max_len_error(_LABEL_VALUE_MAX))
    if not _VALUE_RE.fullmatch(value):
        errors.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def is_valid_label_key(key: object) -> bool:
    return not validate_label_key(key)


def is_valid_label_value(value: object) -> bool:
    return not validate_label_value(value)


_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def parse_int64(text: object) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``; Python's ``int()`` would also take spaces, ``_`` and non-ASCII digits."""
    if text.__class__ is not str or not _INT64_RE.fullmatch(text):  # type: ignore[arg-type]
        return None
    number = int(text)  # type: ignore[arg-type]
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def requirement_errors(key: object, op: Operator, values: Sequence[str], path: str = "") -> list[FieldError]:
    """Every complaint upstream ``NewRequirement(key, op, values)`` would make, in its order and
    wording, with ``values`` in the order given (error indices point into it).  Empty = valid."""
    errors = []
    key_errors = validate_label_key(key)
    if key_errors:
        errors.append(FieldError.invalid(child(path, "key"), key, "; ".join(key_errors)))
    values_path = child(path, "values")
    if op in (Operator.IN, Operator.NOT_IN):
        if not values:
            errors.append(FieldError.invalid(values_path, list(values), "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS):
        if len(values) != 1:
            errors.append(FieldError.invalid(values_path, list(values), "exact-match compatibility requires one single value"))
    elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        if values:
            errors.append(FieldError.invalid(values_path, list(values), "values set must be empty for exists and does not exist"))
    else:
        if len(values) != 1:
            errors.append(FieldError.invalid(values_path, list(values), "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, value in enumerate(values):
            if parse_int64(value) is None:
                errors.append(FieldError.invalid(index(values_path, i), value, "for 'Gt', 'Lt' operators, the value must be an integer"))
    for i, value in enumerate(values):
        value_errors = validate_label_value(value)
        if value_errors:
            errors.append(FieldError.invalid(f"{index(values_path, i)}[{key}]", value, "; ".join(value_errors)))
    return errors


def _requirement_message(key: str, op: Operator, values: tuple[str, ...], path: str = "") -> str | None:
    """``NewRequirement``'s aggregated error text, or None when the requirement is valid."""
    errors = requirement_errors(key, op, values, path)
    return aggregate(errors) if errors else None


# ----------------------------------------------------------------------- requirements

_Check = Callable[[Mapping[str, str]], bool]


def _compile_membership(key: str, values: tuple[str, ...], negate: bool) -> _Check:
    """One dict probe per call: a single value compares directly, several use a frozenset."""
    if len(values) == 1:
        only = values[0]
        if negate:
            return lambda labels: labels.get(key) != only
        return lambda labels: labels.get(key) == only
    allowed = frozenset(values)
    if negate:
        return lambda labels: labels.get(key) not in allowed
    return lambda labels: labels.get(key) in allowed


def _compile_comparison(key: str, bound: int, greater: bool) -> _Check:
    def check(labels: Mapping[str, str]) -> bool:
        number = parse_int64(labels.get(key))
        if number is None:
            return False
        return number > bound if greater else number < bound

    return check


def _compile(key: str, op: Operator, values: tuple[str, ...]) -> _Check:
    """Turn a requirement into a closure at construction time so matching allocates nothing."""
    if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
        return _compile_membership(key, values, negate=False)
    if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
        return _compile_membership(key, values, negate=True)
    if op is Operator.EXISTS:
        return lambda labels: key in labels
    if op is Operator.DOES_NOT_EXIST:
        return lambda labels: key not in labels
    bound = parse_int64(values[0])
    assert bound is not None
    return _compile_comparison(key, bound, greater=op is Operator.GREATER_THAN)


def _coerce_operator(operator: object, path: str = "") -> Operator:
    found = _OPERATOR_BY_VALUE.get(operator) if isinstance(operator, str) else None
    if found is None:
        supported = ", ".join(go_quote(op.value) for op in _ALL_OPERATORS)
        shown = go_quote(operator) if isinstance(operator, str) else repr(operator)
        raise SelectorError(f"{child(path, 'operator')}: Unsupported value: {shown}: supported values: {supported}")
    return found


def _list_of(obj: object, path: str, item_type: type, list_name: str, item_name: str) -> list[Any]:
    """The items of a JSON list, each an ``item_type``; a string or an object is not a list."""
    if isinstance(obj, (str, bytes, Mapping)) or not isinstance(obj, Iterable):
        raise SelectorError(f"{path}: must be {list_name}, not {type(obj).__name__}")
    items = list(obj)
    for i, item in enumerate(items):
        if not isinstance(item, item_type):
            raise SelectorError(f"{index(path, i)}: must be {item_name}, not {type(item).__name__}")
    return items


def _coerce_values(values: object, path: str = "") -> tuple[str, ...]:
    return tuple(sorted(_list_of(values, child(path, "values"), str, "a list of strings", "a string")))


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key op values`` term; constructing it validates like upstream ``NewRequirement``.

    ``values`` is always a sorted tuple.  Duplicates are kept (upstream keeps them too and
    prints them), but selectors parsed from text never contain any.
    """

    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    _check: _Check = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.key, str):
            raise SelectorError(f"key: must be a string, not {type(self.key).__name__}")
        op = _coerce_operator(self.operator)
        values = _coerce_values(self.values)
        message = _requirement_message(self.key, op, values)
        if message is not None:
            raise SelectorError(message)
        object.__setattr__(self, "operator", op)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_check", _compile(self.key, op, values))

    @classmethod
    def _trusted(cls, key: str, op: Operator, values: tuple[str, ...]) -> Requirement:
        """Skip re-validation for requirements the parser has already validated."""
        self = object.__new__(cls)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "operator", op)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "_check", _compile(key, op, values))
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self._check(labels)

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(self.values)
        if op is Operator.IN:
            return f"{self.key} in ({joined})"
        if op is Operator.NOT_IN:
            return f"{self.key} notin ({joined})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{joined}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Requirement, (self.key, self.operator, self.values))


def _new_requirement(key: object, operator: object, values: object, path: str = "", position: int | None = None) -> Requirement:
    """``NewRequirement`` with a field path, for errors that must say which input was wrong."""
    if not isinstance(key, str):
        raise SelectorError(f"{child(path, 'key')}: must be a string, not {type(key).__name__}", position)
    op = _coerce_operator(operator, path)
    coerced = _coerce_values(values, path)
    message = _requirement_message(key, op, coerced, path)
    if message is not None:
        raise SelectorError(message, position, key)
    return Requirement._trusted(key, op, coerced)


# --------------------------------------------------------------------------- selectors


def _never(_labels: Mapping[str, str]) -> bool:
    return False


class _NoMatch:
    """Stand-in for non-string label values: present, but equal to no selector value."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0


_NO_MATCH = _NoMatch()


class _EmptyAccessor:
    """``Selector.empty()`` builds the match-everything selector; ``sel.empty()`` is upstream's ``Empty()``.

    Callers written against either reading of the name keep working, and the instance form
    keeps Go's meaning (the selector does not restrict the selection space).
    """

    def __get__(self, obj: Selector | None, owner: type[Selector]) -> Callable[[], Any]:
        if obj is None:
            return owner.everything
        return obj._is_empty


class Selector:
    """An immutable, hashable conjunction of requirements.

    Equality and hashing go by the canonical string (plus whether the selector can match at
    all, since "nothing" and "everything" both print as ``""``).
    """

    __slots__ = ("_checks", "_requirements", "_selectable", "_text")

    empty = _EmptyAccessor()

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        reqs = tuple(requirements)
        for req in reqs:
            if not isinstance(req, Requirement):
                raise SelectorError(f"requirements must be Requirement instances, not {type(req).__name__}")
        self._init(tuple(sorted(reqs, key=attrgetter("key"))), selectable=True)

    def _init(self, requirements: tuple[Requirement, ...], selectable: bool) -> None:
        set_ = object.__setattr__
        set_(self, "_requirements", requirements)
        set_(self, "_selectable", selectable)
        set_(self, "_text", ",".join(str(r) for r in requirements))
        set_(self, "_checks", tuple(r._check for r in requirements) if selectable else (_never,))

    @classmethod
    def _from_sorted(cls, requirements: tuple[Requirement, ...], selectable: bool = True) -> Selector:
        self = object.__new__(cls)
        self._init(requirements, selectable)
        return self

    @classmethod
    def everything(cls) -> Selector:
        """Matches every label set (upstream ``labels.Everything()``)."""
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> Selector:
        """Matches no label set (upstream ``labels.Nothing()``), e.g. a ``None`` LabelSelector."""
        return _NOTHING

    def _is_empty(self) -> bool:
        return self._selectable and not self._requirements

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        return self._requirements

    @property
    def selectable(self) -> bool:
        """False only for :meth:`nothing`, mirroring the second result of upstream ``Requirements()``."""
        return self._selectable

    def matches(self, labels: Mapping[str, str]) -> bool:
        try:
            for check in self._checks:
                if not check(labels):
                    return False
            return True
        except (TypeError, AttributeError):
            return self._matches_sanitised(labels)

    def _matches_sanitised(self, labels: object) -> bool:
        """Slow path for inputs outside ``Mapping[str, str]`` (``None``, unhashable values, ...).

        Go's ``Labels`` can only hold strings, so a non-string value is treated as present but
        equal to nothing; keeping ``matches`` total lets callers feed raw JSON safely.
        """
        if labels is None:
            labels = {}
        items = getattr(labels, "items", None)
        if items is None:
            raise TypeError(f"labels must be a mapping, not {type(labels).__name__}")
        clean = {k: (v if isinstance(v, str) else _NO_MATCH) for k, v in items() if isinstance(k, str)}
        return all(check(clean) for check in self._checks)

    def add(self, *requirements: Requirement) -> Selector:
        """A new selector with extra requirements (upstream ``Add``); "nothing" stays nothing."""
        if not self._selectable:
            return self
        return Selector(self._requirements + requirements)

    def requires_exact_match(self, key: str) -> str | None:
        """The single value ``key`` must have, if the first requirement on ``key`` pins one (upstream semantics)."""
        for req in self._requirements:
            if req.key == key:
                exact = req.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN)
                return req.values[0] if exact and len(req.values) == 1 else None
        return None

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        if not self._selectable:
            return "Selector.nothing()"
        return f"parse_selector({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selector):
            return NotImplemented
        return self._selectable == other._selectable and self._text == other._text

    def __hash__(self) -> int:
        return hash((self._selectable, self._text))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Selector is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Selector is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        if not self._selectable:
            return (Selector.nothing, ())
        return (Selector, (self._requirements,))


_EVERYTHING = Selector._from_sorted(())
_NOTHING = Selector._from_sorted((), selectable=False)

# ------------------------------------------------------------------------------ lexer


class TokenKind(enum.Enum):
    """Upstream's lexer tokens (``ErrorToken`` is unreachable but kept for parity)."""

    ERROR = "error"
    END_OF_STRING = "end of string"
    CLOSED_PAR = ")"
    COMMA = ","
    DOES_NOT_EXIST = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER_THAN = ">"
    IDENTIFIER = "identifier"
    IN = "in"
    LESS_THAN = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN_PAR = "("


class Token(NamedTuple):
    kind: TokenKind
    literal: str
    position: int


_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),<>")
_SYMBOLS = {
    k.value: k
    for k in (
        TokenKind.CLOSED_PAR,
        TokenKind.COMMA,
        TokenKind.DOES_NOT_EXIST,
        TokenKind.DOUBLE_EQUALS,
        TokenKind.EQUALS,
        TokenKind.GREATER_THAN,
        TokenKind.LESS_THAN,
        TokenKind.NOT_EQUALS,
        TokenKind.OPEN_PAR,
    )
}
_KEYWORDS = {"in": TokenKind.IN, "notin": TokenKind.NOT_IN}
_WORD_RE = re.compile(r"[^=!(),<> \t\r\n\x00]*")


def _scan_symbol(text: str, pos: int) -> tuple[Token, int]:
    """Longest run of special characters that still forms a token, like Go's ``scanSpecialSymbol``."""
    start, end = pos, len(text)
    buffer = ""
    last: TokenKind | None = None
    last_literal = ""
    while pos < end:
        ch = text[pos]
        pos += 1
        if ch == "\x00":
            break
        if ch not in _SPECIAL:
            pos -= 1
            break
        buffer += ch
        kind = _SYMBOLS.get(buffer)
        if kind is not None:
            last, last_literal = kind, buffer
        elif last is not None:
            pos -= 1
            break
    if last is None:
        return Token(TokenKind.ERROR, f"error expected: keyword found '{buffer}'", start), pos
    return Token(last, last_literal, start), pos


def _scan_word(text: str, pos: int) -> tuple[Token, int]:
    match = _WORD_RE.match(text, pos)
    assert match is not None
    end = match.end()
    literal = text[pos:end]
    after = end + 1 if end < len(text) and text[end] == "\x00" else end
    return Token(_KEYWORDS.get(literal, TokenKind.IDENTIFIER), literal, pos), after


def _lex(text: str, pos: int) -> tuple[Token, int]:
    end = len(text)
    while pos < end and text[pos] in _WHITESPACE:
        pos += 1
    if pos >= end:
        return Token(TokenKind.END_OF_STRING, "", end), end
    ch = text[pos]
    if ch == "\x00":
        return Token(TokenKind.END_OF_STRING, "", pos), pos + 1
    if ch in _SPECIAL:
        return _scan_symbol(text, pos)
    return _scan_word(text, pos)


def tokenize(text: str) -> list[Token]:
    """Upstream's token stream, ending with (and stopping at) the first end-of-string token."""
    tokens = []
    pos = 0
    while True:
        token, pos = _lex(text, pos)
        tokens.append(token)
        if token.kind is TokenKind.END_OF_STRING:
            return tokens


# ----------------------------------------------------------------------------- parser

_AS_VALUE = {TokenKind.IN: TokenKind.IDENTIFIER, TokenKind.NOT_IN: TokenKind.IDENTIFIER}
_OPERATOR_TOKENS = {
    TokenKind.IN: Operator.IN,
    TokenKind.NOT_IN: Operator.NOT_IN,
    TokenKind.EQUALS: Operator.EQUALS,
    TokenKind.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    TokenKind.NOT_EQUALS: Operator.NOT_EQUALS,
    TokenKind.GREATER_THAN: Operator.GREATER_THAN,
    TokenKind.LESS_THAN: Operator.LESS_THAN,
}
_EXPECTED_OPERATORS = ", ".join(op.value for op in _BINARY_OPERATORS)
_REQUIREMENT_START = (TokenKind.IDENTIFIER, TokenKind.DOES_NOT_EXIST)
_REQUIREMENT_END = (TokenKind.END_OF_STRING, TokenKind.COMMA)


def _unexpected(token: Token, expected: str) -> SelectorError:
    return SelectorError(f"found '{token.literal}', expected: {expected}", token.position, token.literal)


class _Parser:
    """Recursive descent over a pre-scanned token list, with upstream's two lookahead contexts.

    In value context ``in``/``notin`` are plain identifiers; only the operator slot reads
    them as keywords, which is what lets ``in in (in)`` parse.
    """

    __slots__ = ("_index", "_tokens")

    def __init__(self, text: str) -> None:
        self._tokens = tokenize(text)
        self._index = 0

    def peek(self, as_value: bool = True) -> Token:
        token = self._tokens[self._index]
        return self._contextual(token, as_value)

    def take(self, as_value: bool = True) -> Token:
        token = self._tokens[self._index]
        self._index += 1
        return self._contextual(token, as_value)

    @staticmethod
    def _contextual(token: Token, as_value: bool) -> Token:
        if as_value and token.kind in _AS_VALUE:
            return token._replace(kind=TokenKind.IDENTIFIER)
        return token

    def selector(self) -> list[Requirement]:
        requirements = []
        while True:
            token = self.peek()
            if token.kind is TokenKind.END_OF_STRING:
                return requirements
            if token.kind not in _REQUIREMENT_START:
                raise _unexpected(token, "!, identifier, or 'end of string'")
            requirements.append(self._wrapped_requirement())
            token = self.take()
            if token.kind is TokenKind.END_OF_STRING:
                return requirements
            if token.kind is not TokenKind.COMMA:
                raise _unexpected(token, "',' or 'end of string'")
            following = self.peek()
            if following.kind not in _REQUIREMENT_START:
                raise _unexpected(following, "identifier after ','")

    def _wrapped_requirement(self) -> Requirement:
        try:
            return self.requirement()
        except SelectorError as exc:
            raise SelectorError(f"unable to parse requirement: {exc.reason}", exc.position, exc.token) from None

    def requirement(self) -> Requirement:
        start = self.peek().position
        key, operator = self.key_and_inferred_operator()
        if operator is not None:
            return _new_requirement(key, operator, (), position=start)
        operator = self.operator()
        if operator in (Operator.IN, Operator.NOT_IN):
            values = self.value_set()
        else:
            values = self.exact_value()
        try:
            return _new_requirement(key, operator, {v.literal for v in values}, position=start)
        except SelectorError as exc:
            culprit = next((v for v in values if _bad_value(operator, v.literal)), None)
            if culprit is None:
                raise
            raise SelectorError(exc.reason, culprit.position, culprit.literal) from None

    def key_and_inferred_operator(self) -> tuple[str, Operator | None]:
        operator = None
        token = self.take()
        if token.kind is TokenKind.DOES_NOT_EXIST:
            operator = Operator.DOES_NOT_EXIST
            token = self.take()
        if token.kind is not TokenKind.IDENTIFIER:
            raise _unexpected(token, "identifier")
        errors = validate_label_key(token.literal)
        if errors:
            raise SelectorError(
                f"key: Invalid value: {go_quote(token.literal)}: {'; '.join(errors)}", token.position, token.literal
            )
        if operator is None and self.peek().kind in _REQUIREMENT_END:
            operator = Operator.EXISTS
        return token.literal, operator

    def operator(self) -> Operator:
        token = self.take(as_value=False)
        operator = _OPERATOR_TOKENS.get(token.kind)
        if operator is None:
            raise _unexpected(token, _EXPECTED_OPERATORS)
        return operator

    def value_set(self) -> list[Token]:
        token = self.take()
        if token.kind is not TokenKind.OPEN_PAR:
            raise SelectorError(f"found '{token.literal}' expected: '('", token.position, token.literal)
        first = self.peek()
        if first.kind is TokenKind.CLOSED_PAR:
            self.take()
            return [_empty_value(first)]
        if first.kind not in (TokenKind.IDENTIFIER, TokenKind.COMMA):
            raise _unexpected(first, "',', ')' or identifier")
        values = self.identifier_list()
        closing = self.take()
        if closing.kind is not TokenKind.CLOSED_PAR:
            raise _unexpected(first, "')'")
        return values

    def identifier_list(self) -> list[Token]:
        """Comma-separated, possibly empty identifiers; every empty slot contributes ``""``.

        Follows current upstream, which accepts ``(a,,)`` and ``(,,)``; releases before the
        fix consumed the second comma of ``,,`` and so rejected them.
        """
        values: list[Token] = []
        while True:
            token = self.take()
            if token.kind is TokenKind.IDENTIFIER:
                values.append(token)
                following = self.peek()
                if following.kind is TokenKind.CLOSED_PAR:
                    return values
                if following.kind is not TokenKind.COMMA:
                    raise _unexpected(following, "',' or ')'")
            elif token.kind is TokenKind.COMMA:
                if not values:
                    values.append(_empty_value(token))
                following = self.peek()
                if following.kind is TokenKind.CLOSED_PAR:
                    values.append(_empty_value(following))
                    return values
                if following.kind is TokenKind.COMMA:
                    values.append(_empty_value(following))
            else:
                raise _unexpected(token, "',', or identifier")

    def exact_value(self) -> list[Token]:
        following = self.peek()
        if following.kind in _REQUIREMENT_END:
            return [_empty_value(following)]
        token = self.take()
        if token.kind is not TokenKind.IDENTIFIER:
            raise _unexpected(token, "identifier")
        return [token]


def _empty_value(where: Token) -> Token:
    """The implicit ``""`` of ``x=`` or ``x in (,a)``, placed where the value was left out."""
    return Token(TokenKind.IDENTIFIER, "", where.position)


def _bad_value(operator: Operator, value: str) -> bool:
    if operator in (Operator.GREATER_THAN, Operator.LESS_THAN) and parse_int64(value) is None:
        return True
    return bool(validate_label_value(value))


def _parse(text: str) -> Selector:
    requirements = _Parser(text).selector()
    if not requirements:
        return _EVERYTHING
    requirements.sort(key=attrgetter("key"))
    return Selector._from_sorted(tuple(requirements))


_parse_cached = functools.lru_cache(maxsize=4096)(_parse)


def parse_selector(text: str) -> Selector:
    """Parse selector text exactly as upstream ``labels.Parse`` does.

    Results are cached: selectors are immutable, and dashboards re-parse the same few
    strings on every request.
    """
    if not isinstance(text, str):
        raise SelectorError(f"selector must be a string, not {type(text).__name__}")
    return _parse_cached(str(text))


# ------------------------------------------------------------------ structured inputs

#: ``metav1.LabelSelectorOperator`` → selection operator (``matchExpressions`` of a LabelSelector).
LABEL_SELECTOR_OPERATORS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


def _string_map(obj: object, path: str) -> Mapping[str, str]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise SelectorError(f"{path}: must be an object, not {type(obj).__name__}")
    for key, value in obj.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise SelectorError(f"{path}: must map strings to strings, found {key!r}: {value!r}")
    return obj


def _expression_list(obj: object) -> list[Mapping[str, Any]]:
    if obj is None:
        return []
    return _list_of(obj, "matchExpressions", Mapping, "a list", "an object")


def _expression_requirement(expr: Mapping[str, Any], path: str) -> Requirement:
    operator = expr.get("operator")
    op = LABEL_SELECTOR_OPERATORS.get(operator) if isinstance(operator, str) else None
    if op is None:
        shown = go_quote(operator) if isinstance(operator, str) else repr(operator)
        raise SelectorError(f"{shown} is not a valid label selector operator")
    values = expr.get("values")
    return _new_requirement(expr.get("key"), op, () if values is None else values, path)


def selector_from_label_selector(obj: Mapping[str, Any] | None) -> Selector:
    """A ``metav1.LabelSelector`` (as decoded JSON) as a Selector, like ``metav1.LabelSelectorAsSelector``.

    ``None`` selects nothing while ``{}`` selects everything: that is how Kubernetes
    objects distinguish "no selector" from "empty selector", so it must not be collapsed.
    """
    if obj is None:
        return _NOTHING
    if not isinstance(obj, Mapping):
        raise SelectorError(f"label selector must be an object or None, not {type(obj).__name__}")
    match_labels = _string_map(obj.get("matchLabels"), "matchLabels")
    expressions = _expression_list(obj.get("matchExpressions"))
    if not match_labels and not expressions:
        return _EVERYTHING
    requirements = [_new_requirement(k, Operator.EQUALS, (match_labels[k],), "matchLabels") for k in sorted(match_labels)]
    requirements += [_expression_requirement(e, f"matchExpressions[{i}]") for i, e in enumerate(expressions)]
    requirements.sort(key=attrgetter("key"))
    return Selector._from_sorted(tuple(requirements))


def selector_from_set(labels: Mapping[str, str] | None) -> Selector:
    """Exact-match selector for a label set, validated like upstream ``ValidatedSelectorFromSet``."""
    match_labels = _string_map(labels, "labels")
    if not match_labels:
        return _EVERYTHING
    requirements = tuple(_new_requirement(k, Operator.EQUALS, (match_labels[k],)) for k in sorted(match_labels))
    return Selector._from_sorted(requirements)
