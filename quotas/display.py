"""Quantities as people read them on the quota pages (the API keeps the canonical form)."""

from __future__ import annotations

from functools import lru_cache
from html import escape

from kube.quantity import Quantity, QuantityError

BINARY_UNITS = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
DECIMAL_UNITS = ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"))
HUGE = 10**21


@lru_cache(maxsize=8192)
def readable(text: str | None, binary: bool = False) -> str:
    """A stored quantity as people read it: ``15478900m`` → ``15,478.9``, ``40552320Mi`` → ``38.7Ti``.

    Pages show this; the API and the title attributes keep the canonical Kubernetes form.
    """
    if text is None:
        return "—"
    try:
        amount = Quantity.parse(str(text)).as_decimal()
    except (QuantityError, ValueError):
        return str(text)
    if abs(amount) >= HUGE:  # beyond exa: no unit reads better than the quantity itself (10e399)
        return str(text)
    if binary or str(text).endswith(BINARY_UNITS):
        for power, unit in reversed(list(enumerate(BINARY_UNITS, start=1))):
            if abs(amount) >= 1024**power:
                return f"{_trimmed(amount / 1024**power)}{unit}"
        return _trimmed(amount)
    for size, unit in DECIMAL_UNITS:
        if abs(amount) >= size * 10:
            return f"{_trimmed(amount / size)}{unit}"
    return f"{float(amount):,.3f}".rstrip("0").rstrip(".") if amount != amount.to_integral() else f"{int(amount):,}"


def _trimmed(value) -> str:
    return f"{float(value):,.1f}".removesuffix(".0")


def is_binary(key: str) -> bool:
    return "memory" in key or "storage" in key or key.startswith("hugepages")


# ---------------------------------------------------------------------------- numbers and bars

@lru_cache(maxsize=4096)
def number(text: str | None) -> float | None:
    """A stored quantity as a float for charts and ratios (display keeps the canonical string)."""
    if text is None:
        return None
    try:
        return float(Quantity.parse(str(text)).as_decimal())
    except (QuantityError, ValueError):
        return None


def ratio(used: float | None, hard: float | None) -> float | None:
    """used/hard; a key with no hard but some usage counts as over (2), none at all as unknown."""
    if hard is None:
        return None
    if hard <= 0:
        return 2.0 if (used or 0) > 0 else 0.0
    return (used or 0.0) / hard


def percent(value: float | None) -> str:
    """A bar width for an inline style: unlocalized, capped at 100."""
    return f"{min(max(value or 0.0, 0.0), 1.0) * 100:.1f}"


def bar_html(used_text: str | None, hard_text: str | None, key: str = "") -> str:
    """A compact used/hard bar and its numbers; red at or above hard.

    The bar is an empty span, so assistive technology reads the numbers next to it; 5,000
    of these are on the index, hence no wrapper or attribute that is not needed.
    """
    if hard_text is None:
        return '<span class="qt-num muted">—</span>'
    value = ratio(number(used_text), number(hard_text)) or 0.0
    level = ' class="hot"' if value >= 1 else (' class="warm"' if value >= 0.8 else "")
    binary = is_binary(key)
    return (f'<span class="qt-bar"><span{level} style="width:{percent(value)}%"></span></span>'
            f'<span class="qt-num">{escape(readable(used_text or "0", binary))} / {escape(readable(hard_text, binary))}</span>')
