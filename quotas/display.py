"""Quantities as people read them on the quota pages (the API keeps the canonical form)."""

from __future__ import annotations

from functools import lru_cache

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
