"""Taints and tolerations, with Kubernetes' matching rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def taint_text(taint: Mapping[str, str]) -> str:
    """``key=value:Effect`` (``key:Effect`` without value), as kubectl prints taints."""
    key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def tolerates(toleration: Mapping[str, str], taint: Mapping[str, str]) -> bool:
    """Kubernetes ``Toleration.ToleratesTaint``.

    An empty effect tolerates every effect, an empty key with ``Exists``
    tolerates every taint, and ``Equal`` (the default operator) compares
    values.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect", ""):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key", ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def _tolerated(tolerations: Sequence[Mapping[str, str]], taint: Mapping[str, str]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def _first_untolerated(
    taints: Iterable[Mapping[str, str]],
    tolerations: Sequence[Mapping[str, str]],
    effects: tuple[str, ...],
) -> Mapping[str, str] | None:
    """Upstream ``FindMatchingUntoleratedTaint`` restricted to ``effects``."""
    for taint in taints:
        if taint.get("effect") in effects and not _tolerated(tolerations, taint):
            return taint
    return None
