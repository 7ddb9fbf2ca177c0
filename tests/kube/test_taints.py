"""Conformance tests for kube.taints, ported from upstream's tables by case name.

``k8s.io/api/core/v1``: TestTolerationToleratesTaint (``toleration_test.go``; its comparison
operator cases run with the ``TaintTolerationComparisonOperators`` gate off, as it is by default
and as Meridian runs: Gt/Lt tolerate nothing) and TestTaintToString (``taint_test.go``).
``k8s.io/component-helpers/scheduling/corev1``: TestFindMatchingUntoleratedTaint
(``helpers_test.go``; the inclusion filter is a set of effects here, which is how both schedulers
use it).  Then the JSON shapes Go cannot decode, which must tolerate nothing rather than raise.
"""

from __future__ import annotations

from typing import Any

import pytest

from kube.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    TAINT_EFFECTS,
    Toleration,
    count_intolerable_prefer_no_schedule,
    find_untolerated_taint,
    parse_toleration,
    parse_tolerations,
    prefer_no_schedule_tolerations,
    taint_to_string,
    tolerates_taint,
)

NS = NO_SCHEDULE
SLA = "node.kubernetes.io/sla"

# ------------------------------------------------------------ TestTolerationToleratesTaint

TOLERATES = [
    ("toleration and taint have the same key and effect, and operator is Exists, and taint has no value, expect tolerated",
     Toleration("foo", "Exists", "", NS), {"key": "foo", "effect": NS}, True),
    ("toleration and taint have the same key and effect, and operator is Exists, and taint has some value, expect tolerated",
     Toleration("foo", "Exists", "", NS), {"key": "foo", "value": "bar", "effect": NS}, True),
    (("toleration and taint have the same effect, toleration has empty key and operator is Exists, means match all taints, "
     "expect tolerated"), Toleration("", "Exists", "", NS), {"key": "foo", "value": "bar", "effect": NS}, True),
    ("toleration and taint have the same key, effect and value, and operator is Equal, expect tolerated",
     Toleration("foo", "Equal", "bar", NS), {"key": "foo", "value": "bar", "effect": NS}, True),
    ("toleration and taint have the same key and effect, but different values, and operator is Equal, expect not tolerated",
     Toleration("foo", "Equal", "value1", NS), {"key": "foo", "value": "value2", "effect": NS}, False),
    ("toleration and taint have the same key and value, but different effects, and operator is Equal, expect not tolerated",
     Toleration("foo", "Equal", "bar", NS), {"key": "foo", "value": "bar", "effect": NO_EXECUTE}, False),
    # The comparison operator cases, gate off: none is tolerated (upstream's "expect tolerated"
    # ones need the gate on).
    ("toleration with Gt operator - taint value less than toleration value, expect not tolerated",
     Toleration(SLA, "Gt", "950", NS), {"key": SLA, "value": "800", "effect": NS}, False),
    ("toleration with Gt operator - taint value greater than toleration value, expect tolerated (gate off: not)",
     Toleration(SLA, "Gt", "750", NS), {"key": SLA, "value": "950", "effect": NS}, False),
    ("toleration with Lt operator - taint value less than toleration value, expect tolerated (gate off: not)",
     Toleration(SLA, "Lt", "950", NS), {"key": SLA, "value": "800", "effect": NS}, False),
    # Beyond upstream's table: the rules its doc comment states.
    ("empty effect matches every effect", Toleration("foo", "Equal", "bar", ""), {"key": "foo", "value": "bar", "effect": NO_EXECUTE}, True),
    ("empty operator means Equal", Toleration("foo", "", "bar", NS), {"key": "foo", "value": "bar", "effect": NS}, True),
    ("empty operator means Equal, and compares values", Toleration("foo", "", "bar", NS), {"key": "foo", "effect": NS}, False),
    ("Exists ignores a value validation would refuse", Toleration("foo", "Exists", "bar", NS), {"key": "foo", "value": "x", "effect": NS}, True),
    ("operators are case-sensitive", Toleration("foo", "exists", "", NS), {"key": "foo", "effect": NS}, False),
    ("empty key with Equal (refused by validation) matches any key without a value", Toleration("", "Equal", "", ""),
     {"key": "anything", "effect": NS}, True),
    ("empty key with Equal does not match a taint with a value", Toleration("", "Equal", "", ""),
     {"key": "anything", "value": "v", "effect": NS}, False),
]


@pytest.mark.parametrize(("toleration", "taint", "tolerated"), [pytest.param(*case[1:], id=case[0]) for case in TOLERATES])
def test_toleration_tolerates_taint(toleration: Toleration, taint: dict[str, str], tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated
    as_json = {"key": toleration.key, "operator": toleration.operator, "value": toleration.value, "effect": toleration.effect}
    assert tolerates_taint(as_json, taint) is tolerated


# ------------------------------------------------------------------------ TestTaintToString

TO_STRING = [
    ({"key": "foo", "value": "bar", "effect": NS}, "foo=bar:NoSchedule"),
    ({"key": "foo", "effect": NS}, "foo:NoSchedule"),
    ({"key": "foo"}, "foo"),
    ({"key": "foo", "value": "bar"}, "foo=bar:"),
]


@pytest.mark.parametrize(("taint", "text"), TO_STRING, ids=[str(i) for i in range(len(TO_STRING))])
def test_taint_to_string(taint: dict[str, str], text: str) -> None:
    assert taint_to_string(taint) == text


# -------------------------------------------------------- TestFindMatchingUntoleratedTaint

FOO_EXISTS = Toleration("foo", "Exists", "", NS)
FIND_UNTOLERATED = [
    ("empty tolerations tolerate empty taints", [], [], TAINT_EFFECTS, True),
    ("non-empty tolerations tolerate empty taints", [FOO_EXISTS], [], TAINT_EFFECTS, True),
    ("tolerations match all taints, expect tolerated", [FOO_EXISTS], [{"key": "foo", "effect": NS}], TAINT_EFFECTS, True),
    ("tolerations don't match taints, but no taints apply to the filter, expect tolerated", [FOO_EXISTS],
     [{"key": "bar", "effect": NS}], (), True),
    ("no filterFunc indicated, means all taints apply to the filter, tolerations don't match taints, expect untolerated",
     [FOO_EXISTS], [{"key": "bar", "effect": NS}], TAINT_EFFECTS, False),
    ("tolerations match taints, expect tolerated", [Toleration("foo", "Exists", "", NO_EXECUTE)],
     [{"key": "foo", "effect": NO_EXECUTE}, {"key": "bar", "effect": NS}], (NO_EXECUTE,), True),
]


@pytest.mark.parametrize(("tolerations", "taints", "effects", "tolerated"),
                         [pytest.param(*case[1:], id=case[0]) for case in FIND_UNTOLERATED])
def test_find_matching_untolerated_taint(tolerations: list[Toleration], taints: list[dict[str, str]],
                                         effects: tuple[str, ...], tolerated: bool) -> None:
    assert (find_untolerated_taint(taints, tolerations, effects) is None) is tolerated


def test_the_first_untolerated_taint_is_returned() -> None:
    taints = [{"key": "a", "effect": NS}, {"key": "b", "effect": NO_EXECUTE}, {"key": "c", "effect": NS}]
    assert find_untolerated_taint(taints, [Toleration("a", "Exists")], (NS, NO_EXECUTE)) == {"key": "b", "effect": NO_EXECUTE}


# ------------------------------------------------------------------ TaintToleration's score


def test_prefer_no_schedule_tolerations_keep_the_empty_effect() -> None:
    """``getAllTolerationPreferNoSchedule``: an empty effect means every effect."""
    tolerations = (Toleration("a", effect=NS), Toleration("b"), Toleration("c", effect=PREFER_NO_SCHEDULE))
    assert prefer_no_schedule_tolerations(tolerations) == (Toleration("b"), Toleration("c", effect=PREFER_NO_SCHEDULE))


def test_count_intolerable_prefer_no_schedule() -> None:
    taints = [{"key": "a", "effect": PREFER_NO_SCHEDULE}, {"key": "b", "effect": PREFER_NO_SCHEDULE}, {"key": "c", "effect": NS}]
    assert count_intolerable_prefer_no_schedule(taints, [Toleration("a", "Exists")]) == 1


# ------------------------------------------------------------------ decoding


@pytest.mark.parametrize("raw", ["gpu", None, 3, {"key": "gpu", "value": 1}, {"key": ["gpu"]}, {"operator": True}])
def test_a_toleration_kubernetes_could_not_decode_tolerates_nothing(raw: Any) -> None:
    assert parse_toleration(raw) is None
    assert tolerates_taint(raw, {"key": "gpu", "value": "1", "effect": NS}) is False


def test_null_fields_decode_as_empty() -> None:
    assert parse_toleration({"key": "k", "operator": None, "value": None, "effect": None, "tolerationSeconds": 5}) == Toleration("k")


def test_parse_tolerations_leaves_out_what_it_cannot_decode() -> None:
    assert parse_tolerations([{"key": "a"}, "b", {"key": 3}]) == (Toleration("a"),)
    assert parse_tolerations("not a list") == ()
    assert parse_tolerations(None) == ()
