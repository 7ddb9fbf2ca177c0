"""Integer arithmetic and normalisation exactly as kube-scheduler's Go code does it.

Scores are compared with upstream's test tables to the unit, so the Go semantics that differ from
Python's matter: integer division truncates toward zero (``//`` floors), and float-to-int
conversion truncates.  ``framework/plugins/helper/normalize_score.go`` and ``shape_score.go`` are
reproduced here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MAX_CUSTOM_PRIORITY_SCORE",
    "MAX_NODE_SCORE",
    "ShapePoint",
    "broken_linear",
    "default_normalize",
    "go_div",
]

MAX_NODE_SCORE = 100
MAX_CUSTOM_PRIORITY_SCORE = 10


def go_div(a: int, b: int) -> int:
    """Go's ``a / b`` for integers: truncation toward zero, not Python's floor."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def default_normalize(scores: Sequence[int], reverse: bool = False, max_priority: int = MAX_NODE_SCORE) -> list[int]:
    """``helper.DefaultNormalizeScore``: scale so the best raw score becomes ``max_priority``.

    With ``reverse`` the highest raw score becomes 0 (TaintToleration counts intolerable taints,
    so fewer is better).  All-zero input stays 0, or becomes ``max_priority`` when reversed.
    """
    top = 0
    for s in scores:
        top = max(top, s)
    if top == 0:
        return [max_priority] * len(scores) if reverse else [0] * len(scores)
    if reverse:
        return [max_priority - go_div(max_priority * s, top) for s in scores]
    return [go_div(max_priority * s, top) for s in scores]


@dataclass(frozen=True, slots=True)
class ShapePoint:
    """``helper.FunctionShapePoint``: utilization 0..100 mapped to a score."""

    utilization: int
    score: int


def broken_linear(shape: Sequence[ShapePoint], p: int) -> int:
    """``helper.BuildBrokenLinearFunction`` evaluated at ``p`` (points sorted by utilization).

    Below the first point the first score holds, above the last the last; in between the
    segment is interpolated with Go's truncating integer division, so a falling segment rounds
    toward the higher score.
    """
    for i, point in enumerate(shape):
        if p <= point.utilization:
            if i == 0:
                return shape[0].score
            prev = shape[i - 1]
            return prev.score + go_div((point.score - prev.score) * (p - prev.utilization), point.utilization - prev.utilization)
    return shape[-1].score
