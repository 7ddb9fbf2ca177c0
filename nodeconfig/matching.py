"""Which config target a node gets, with the precedence and tie rules of Katalyst.

Reference: ``FindMatchedKCCTargetConfigForNode`` / ``findMatchedKCCTargetListForNode`` in
``kubewharf/katalyst-core`` ``pkg/controller/kcc/util/kcct.go``.

Targets fall into exactly one tier, decided by their spec alone:

1. node list: ``node_names`` non-empty (even if a selector is set too); it matches when
   the node's name is listed;
2. label selector: ``node_label_selector`` non-empty; it matches when the selector matches
   the node's labels.  A selector that does not parse counts as *matching* every node:
   upstream does this on purpose so that one broken selector makes the whole selector tier
   fail loudly rather than silently fall through to the global target;
3. global: neither.

The first tier with any match wins.  Within it the highest ``priority`` wins; two or more
matches sharing the highest priority are an error (``same_priority``), which is also what
two node-list targets naming the same node at the same priority produce.  Priorities are
compared as upstream's ``int32``.  Expiry of node-list targets is not considered here (the
controller removes expired targets before matching); see :func:`is_expired`.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from kube.labels import Selector, SelectorError, parse_selector

__all__ = [
    "MatchError",
    "MatchResult",
    "TargetRef",
    "go_duration_ns",
    "int32",
    "is_expired",
    "match_target",
    "parse_go_duration",
    "parsed_selector",
]

MatchError = Literal["not_found", "same_priority"]


@dataclass(frozen=True)
class TargetRef:
    """The parts of a config target that matching and validation look at."""

    name: str
    node_label_selector: str = ""
    priority: int = 0
    node_names: Sequence[str] = ()
    last_duration: str | None = None

    @classmethod
    def stored(cls, name: str, node_label_selector: str, priority: int, node_names: Iterable[str],
               last_duration: str | None) -> TargetRef:
        """A target as a row or a spec holds it: node names in a list, no duration as ""."""
        return cls(name, node_label_selector, priority, tuple(node_names), last_duration or None)


@dataclass(frozen=True)
class MatchResult:
    """Outcome of matching one node: the winner's name, or why there is none.

    ``candidates`` names every match of the winning tier in input order (empty when
    nothing matched), so a ``same_priority`` error can say who is fighting.
    """

    name: str | None
    error: MatchError | None = None
    candidates: list[str] = field(default_factory=list)


def int32(value: int) -> int:
    """``int32(x)`` in Go: upstream reads priorities as int64 and narrows them with wrap-around."""
    return ((int(value) + 2**31) % 2**32) - 2**31


@functools.lru_cache(maxsize=8192)
def parsed_selector(text: str) -> Selector | None:
    """The parsed selector, or ``None`` when Kubernetes would reject it (cached either way)."""
    try:
        return parse_selector(text)
    except SelectorError:
        return None


def match_target(node_name: str, node_labels: Mapping[str, str], targets: Sequence[TargetRef]) -> MatchResult:
    """Pick the target ``node_name`` (carrying ``node_labels``) gets among ``targets`` of one config type."""
    node_tier: list[TargetRef] = []
    selector_tier: list[TargetRef] = []
    global_tier: list[TargetRef] = []
    for target in targets:
        if len(target.node_names) > 0:
            if node_name in target.node_names:
                node_tier.append(target)
            continue
        if target.node_label_selector != "":
            selector = parsed_selector(target.node_label_selector)
            if selector is None or selector.matches(node_labels):
                selector_tier.append(target)
            continue
        global_tier.append(target)

    tier = node_tier or selector_tier or global_tier
    if not tier:
        return MatchResult(name=None, error="not_found", candidates=[])
    candidates = [t.name for t in tier]
    if len(tier) == 1:
        return MatchResult(name=tier[0].name, candidates=candidates)
    top = max(int32(t.priority) for t in tier)
    best = [t for t in tier if int32(t.priority) == top]
    if len(best) > 1:
        return MatchResult(name=None, error="same_priority", candidates=candidates)
    return MatchResult(name=best[0].name, candidates=candidates)


# --------------------------------------------------------------------------- durations

_UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_LIMIT = 1 << 63
_DIGITS = re.compile(r"[0-9]*")
_UNIT = re.compile(r"[^0-9.]*")


def _quote(text: str) -> str:
    """The ``time`` package's own quoting: non-ASCII and control bytes as ``\\xNN``."""
    out = ['"']
    for ch in text:
        if ch < " " or ch >= "\x80":
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
        elif ch in '"\\':
            out.append("\\" + ch)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_duration_ns(text: str) -> int:
    """Nanoseconds of a Go duration string, exactly as ``time.ParseDuration`` reads it.

    Accepts an optional sign and a sequence of decimal numbers, each with a unit
    (``ns``, ``us``/``µs``/``μs``, ``ms``, ``s``, ``m``, ``h``), e.g. ``"1h30m"``, ``"1.5h"``,
    ``"-300ms"``; ``"0"`` alone needs no unit.  Overflow beyond int64 nanoseconds and
    everything Go rejects raise :class:`ValueError` with Go's message.
    """
    if not isinstance(text, str):
        raise ValueError(f"time: invalid duration {text!r}")
    invalid = ValueError(f"time: invalid duration {_quote(text)}")
    s = text
    negative = False
    if s and s[0] in "+-":
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    pos = 0
    end = len(s)
    while pos < end:
        if not (s[pos] == "." or "0" <= s[pos] <= "9"):
            raise invalid
        # Integer part: Go errors out on overflow here.
        match = _DIGITS.match(s, pos)
        assert match is not None
        int_text = match.group()
        pos = match.end()
        whole = 0
        for ch in int_text:
            if whole > _LIMIT // 10:
                raise invalid
            whole = whole * 10 + ord(ch) - 48
            if whole > _LIMIT:
                raise invalid
        # Fraction: Go keeps digits while they fit and silently drops the rest.
        frac = 0
        scale = 1.0
        has_frac_digits = False
        if pos < end and s[pos] == ".":
            pos += 1
            match = _DIGITS.match(s, pos)
            assert match is not None
            frac_text = match.group()
            pos = match.end()
            has_frac_digits = bool(frac_text)
            overflow = False
            for ch in frac_text:
                if overflow:
                    continue
                if frac > (_LIMIT - 1) // 10:
                    overflow = True
                    continue
                candidate = frac * 10 + ord(ch) - 48
                if candidate > _LIMIT:
                    overflow = True
                    continue
                frac = candidate
                scale *= 10
        if not int_text and not has_frac_digits:
            raise invalid
        match = _UNIT.match(s, pos)
        assert match is not None
        unit = match.group()
        pos = match.end()
        if not unit:
            raise ValueError(f"time: missing unit in duration {_quote(text)}")
        unit_ns = _UNIT_NS.get(unit)
        if unit_ns is None:
            raise ValueError(f"time: unknown unit {_quote(unit)} in duration {_quote(text)}")
        if whole > _LIMIT // unit_ns:
            raise invalid
        value = whole * unit_ns
        if frac > 0:
            # Go converts through float64 here (nanosecond-exact for fractions of an hour).
            value += int(float(frac) * (float(unit_ns) / scale))
            if value > _LIMIT:
                raise invalid
        total += value
        if total > _LIMIT:
            raise invalid
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise invalid
    return total


def parse_go_duration(text: str) -> datetime.timedelta:
    """A Go duration string (e.g. a target's ``lastDuration``) as a :class:`~datetime.timedelta`.

    Semantics are :func:`go_duration_ns`; timedelta holds microseconds, so any sub-microsecond
    remainder is dropped (rounding toward zero).
    """
    ns = go_duration_ns(text)
    micros = abs(ns) // 1000
    delta = datetime.timedelta(microseconds=micros)
    return -delta if ns < 0 else delta


def is_expired(last_duration: str | None, created: datetime.datetime, now: datetime.datetime) -> bool:
    """Upstream ``CheckExpired``: a node-list target expires once ``created + lastDuration`` is before ``now``.

    An unparseable duration counts as zero, as upstream ignores the parse error.
    """
    if last_duration is None:
        return False
    try:
        delta = parse_go_duration(last_duration)
    except ValueError:
        delta = datetime.timedelta(0)
    return created + delta < now
