"""apimachinery's ``field.Error`` and field paths (``k8s.io/apimachinery/pkg/util/validation/field``).

Every Kubernetes rule in ``kube/`` that can refuse its input (a label requirement, a node
selector term) says *where* with a field path and *why* in upstream's words, so a message
built here reads exactly like the API server's or the scheduler's: ``spec.x[0].key: Invalid
value: "a b": ...``.  The apps pass these errors on as they are (the scheduler's plugin
arguments) or turn them into their own wording (the federation scheduler's unit errors).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DUPLICATE",
    "FORBIDDEN",
    "INVALID",
    "NOT_SUPPORTED",
    "REQUIRED",
    "FieldError",
    "aggregate",
    "child",
    "go_quote",
    "go_value",
    "index",
    "json_type",
]

#: ``field.ErrorType`` names, as :attr:`FieldError.type` holds them.
INVALID = "Invalid"
REQUIRED = "Required"
NOT_SUPPORTED = "NotSupported"
DUPLICATE = "Duplicate"
FORBIDDEN = "Forbidden"


def child(path: str, name: str) -> str:
    """``field.Path.Child``: dotted, with no leading dot at the root."""
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    """``field.Path.Index``."""
    return f"{path}[{i}]"


_GO_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(text: str) -> str:
    """``strconv.Quote``, so bad values print exactly as the API server prints them."""
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_value(value: Any) -> str:
    """A bad value as ``field.Error`` prints it: strings quoted, string lists as ``[]string{...}``,
    ``nil`` as ``null``, numbers and booleans bare."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[]string{" + ", ".join(go_value(v) for v in value) + "}"
    return str(value)


def json_type(value: Any) -> str | None:
    """The JSON type of a decoded value (``null``, ``boolean``, ``number``, ``string``, ``object``,
    ``array``), so a message names what the client sent, not Python's type; ``None`` for what JSON
    cannot hold (NaN and the infinities among them). Each caller words it in its own tongue."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or isinstance(value, float) and math.isfinite(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return None


_BODIES = {REQUIRED: "Required value", FORBIDDEN: "Forbidden"}
_VALUED = {INVALID: "Invalid value", NOT_SUPPORTED: "Unsupported value", DUPLICATE: "Duplicate value"}


@dataclass(frozen=True, slots=True)
class FieldError:
    """One ``field.Error``: ``type`` is Invalid, Required, NotSupported, Duplicate or Forbidden;
    ``str()`` is upstream's ``Error()`` (``field: body: detail``)."""

    type: str
    field: str
    detail: str = ""
    bad_value: Any = None

    def body(self) -> str:
        """``ErrorBody()``: the message without the field path."""
        if self.type in _BODIES:
            text = _BODIES[self.type]
        else:
            text = f"{_VALUED.get(self.type, self.type)}: {go_value(self.bad_value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}" if self.field else self.body()

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls(INVALID, path, detail, value)

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        return cls(REQUIRED, path, detail)

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        return cls(FORBIDDEN, path, detail)

    @classmethod
    def not_supported(cls, path: str, value: Any, supported: Sequence[str]) -> FieldError:
        return cls(NOT_SUPPORTED, path, "supported values: " + ", ".join(go_quote(s) for s in supported), value)

    @classmethod
    def duplicate(cls, path: str, value: Any) -> FieldError:
        return cls(DUPLICATE, path, "", value)


def aggregate(messages: Iterable[object]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: duplicates dropped, one message bare, several in brackets."""
    unique = list(dict.fromkeys(str(m) for m in messages))
    if len(unique) <= 1:
        return "".join(unique)
    return "[" + ", ".join(unique) + "]"
