"""Kubernetes label selectors as SQL over a JSON ``labels`` column.

The ORM side of ``kube.labels``: the same selector text must pick exactly the rows that
``Selector.matches`` would pick, so every operator is translated with its null and
absent-key semantics spelled out. On PostgreSQL equality uses ``@>`` (served by the GIN
index on ``fleet_node.labels``); SQLite uses ``json_extract``.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import BigIntegerField, Case, Q, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.db.models.lookups import GreaterThan, In, LessThan, Regex

from kube.labels import Operator, Requirement, Selector

IN_SET = {Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN}
NOT_IN_SET = {Operator.NOT_EQUALS, Operator.NOT_IN}
#: Upstream parses Gt/Lt values with strconv.ParseInt: optional sign, decimal digits. Values
#: of 19 digits are not compared here (they may overflow the SQL cast); they never match.
INTEGER_PATTERN = r"^[+-]?[0-9]{1,18}$"


def selector_q(selector: Selector, field: str = "labels") -> Q:
    """A Q object selecting the rows whose ``field`` labels match ``selector``."""
    if not selector.selectable:
        return Q(pk__in=[])
    q = Q()
    for requirement in selector.requirements:
        q &= requirement_q(requirement, field)
    return q


def requirement_q(requirement: Requirement, field: str = "labels") -> Q:
    key, op, values = requirement.key, requirement.operator, list(requirement.values)
    has_key = Q(**{f"{field}__has_key": key})
    if op in IN_SET:
        return _value_in(field, key, values)
    if op in NOT_IN_SET:
        return ~(has_key & _value_in(field, key, values))
    if op == Operator.EXISTS:
        return has_key
    if op == Operator.DOES_NOT_EXIST:
        return ~has_key
    if op in (Operator.GREATER_THAN, Operator.LESS_THAN):
        return has_key & Q(_integer_comparison(field, key, int(values[0]), op == Operator.GREATER_THAN))
    raise ValueError(f"unsupported selector operator {op!r}")


def _value_in(field: str, key: str, values: list[str]) -> Q:
    if connection.vendor == "postgresql":
        q = Q()
        for value in values:
            q |= Q(**{f"{field}__contains": {key: value}})
        return q
    return Q(In(KeyTextTransform(key, field), values))


def _integer_comparison(field: str, key: str, bound: int, greater: bool):
    text = KeyTextTransform(key, field)
    as_int = Case(When(Regex(text, INTEGER_PATTERN), then=Cast(text, BigIntegerField())), default=Value(None), output_field=BigIntegerField())
    return GreaterThan(as_int, bound) if greater else LessThan(as_int, bound)
