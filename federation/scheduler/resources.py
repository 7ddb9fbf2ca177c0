"""Resource amounts in the scheduler's integer units, and Go's integer arithmetic."""

from __future__ import annotations

from collections.abc import Mapping

from kube.quantity import BINARY_SI, Quantity, parse_quantity

from .types import BYTE_RESOURCES, CPU


def go_div(a: int, b: int) -> int:
    """Integer division truncating toward zero, like Go's ``/`` on int64."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def whole_units(milli: int) -> int:
    """Millicores to whole cores rounded away from zero, like ``Quantity.Value()``.

    Upstream weighs clusters by whole cores; rounding the same way keeps our
    water-level weights equal to KubeAdmiral's.
    """
    cores = -(-abs(milli) // 1000)
    return cores if milli >= 0 else -cores


def format_amount(resource: str, amount: int) -> str:
    """An amount in the module's units as a Kubernetes quantity string ("500m", "2Gi")."""
    if resource == CPU:
        return str(Quantity.from_milli(amount))
    if resource in BYTE_RESOURCES or resource.startswith("hugepages-"):
        return str(Quantity.from_int(amount, BINARY_SI))
    return str(Quantity.from_int(amount))


def parse_resources(resources: Mapping[str, str | int]) -> dict[str, int]:
    """Quantity strings to the module's units: cpu in millicores, the rest whole units.

    Raises :class:`kube.quantity.QuantityError` for a bad quantity.
    """
    parsed: dict[str, int] = {}
    for name, value in resources.items():
        quantity = parse_quantity(str(value)) if not isinstance(value, Quantity) else value
        parsed[name] = quantity.milli_value() if name == CPU else quantity.value()
    return parsed
