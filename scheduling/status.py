"""Plugin verdicts and argument errors shared by the scheduling framework, engine and simulator.

Kept apart from ``framework.py`` so the engine can build and compare verdicts without importing the
contract module (and so plugins do not import their own registry).  Wording follows kube-scheduler:
``Status`` mirrors ``fwk.Status`` (a code plus reasons), ``FieldError`` mirrors apimachinery's
``field.Error`` so argument errors name the offending field exactly as upstream validation does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SKIP",
    "UNRESOLVABLE",
    "UNSCHEDULABLE",
    "ArgsError",
    "FieldError",
    "FilterResult",
    "Status",
    "aggregate_message",
    "child",
    "index",
]

UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"


class _Skip:
    """Upstream's ``Skip`` status: the plugin has nothing to say about this pod (one instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SKIP"


SKIP = _Skip()


@dataclass(frozen=True, slots=True)
class Status:
    """A rejection: ``code`` is Unschedulable or UnschedulableAndUnresolvable, reasons in upstream order."""

    code: str
    reasons: tuple[str, ...]

    @classmethod
    def of(cls, code: str, *reasons: str) -> Status:
        return cls(code, tuple(reasons))


@dataclass(frozen=True, slots=True)
class FilterResult:
    """One node's verdict: ``ok``, upstream's status ``reasons`` and ``code`` ("" when ok)."""

    ok: bool
    reasons: list[str] = field(default_factory=list)
    code: str = ""

    @classmethod
    def from_status(cls, status: Status | None) -> FilterResult:
        if status is None:
            return _PASSED
        return cls(False, list(status.reasons), status.code)


_PASSED = FilterResult(True, [], "")

# ----------------------------------------------------------------------------- field errors


def child(path: str, name: str) -> str:
    """``field.Path.Child``: dotted, with no leading dot at the root."""
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    """``field.Path.Index``."""
    return f"{path}[{i}]"


def _go_value(value: Any) -> str:
    """Render a bad value roughly as Go's ``%#v``/``%q`` would in ``field.Error`` bodies."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[]string{" + ", ".join(_go_value(v) for v in value) + "}"
    return str(value)


@dataclass(frozen=True, slots=True)
class FieldError:
    """apimachinery ``field.Error``: ``type`` is Invalid, Required, NotSupported, Duplicate or Forbidden."""

    type: str
    field: str
    detail: str = ""
    bad_value: Any = None

    def __str__(self) -> str:
        if self.type == "Required":
            body = "Required value"
        elif self.type == "Forbidden":
            body = "Forbidden"
        elif self.type == "Duplicate":
            body = f"Duplicate value: {_go_value(self.bad_value)}"
        elif self.type == "NotSupported":
            body = f"Unsupported value: {_go_value(self.bad_value)}"
        else:
            body = f"Invalid value: {_go_value(self.bad_value)}"
        text = f"{self.field}: {body}" if self.field else body
        return f"{text}: {self.detail}" if self.detail else text

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls("Invalid", path, detail, value)

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        return cls("Required", path, detail)

    @classmethod
    def not_supported(cls, path: str, value: Any, supported: Sequence[str]) -> FieldError:
        return cls("NotSupported", path, "supported values: " + ", ".join(json.dumps(s) for s in supported), value)

    @classmethod
    def duplicate(cls, path: str, value: Any) -> FieldError:
        return cls("Duplicate", path, "", value)


def aggregate_message(messages: Iterable[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message bare, several in brackets."""
    items = list(messages)
    if len(items) == 1:
        return items[0]
    return "[" + ", ".join(items) + "]"


class ArgsError(ValueError):
    """Plugin or policy arguments that upstream validation would refuse; ``errors`` lists each field."""

    def __init__(self, errors: Sequence[FieldError | str], prefix: str = "") -> None:
        self.errors = [e for e in errors if isinstance(e, FieldError)]
        self.messages = [str(e) for e in errors]
        text = aggregate_message(self.messages)
        super().__init__(f"{prefix}{text}" if prefix else text)

    @property
    def fields(self) -> list[str]:
        return [e.field for e in self.errors]
