"""Plugin verdicts and argument errors shared by the scheduling framework, engine and simulator.

Kept apart from ``framework.py`` so the engine can build and compare verdicts without importing the
contract module (and so plugins do not import their own registry).  Wording follows kube-scheduler:
``Status`` mirrors ``fwk.Status`` (a code plus reasons), ``FieldError`` mirrors apimachinery's
``field.Error`` so argument errors name the offending field exactly as upstream validation does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kube.field import FieldError, child, index

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


class Skip:
    """Upstream's ``Skip`` status: the plugin has nothing to say about this pod (one instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SKIP"


SKIP = Skip()


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
# ``FieldError`` (apimachinery's ``field.Error``) and its paths are ``kube.field``'s, re-exported here
# so argument validation and the Kubernetes rules in ``kube/`` report one and the same error type.


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
