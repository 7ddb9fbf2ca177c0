"""nodeconfig.validation against katalyst-core's validateTargetResourceGenericSpec family.

Upstream tables restated: ``Test_validateLabelSelectorWithOthers``,
``Test_validateTargetResourceNodeNamesWithOthers`` and
``Test_validateTargetResourceGlobalWithOthers`` (``pkg/controller/kcc/kcct_test.go``),
where ``want: true`` means valid.  Upstream calls the overlap helpers directly; through
``validate_target`` node-list targets also need a ``lastDuration``, which is added here.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.labels import parse_selector
from nodeconfig.conflicts import key_constraints
from nodeconfig.matching import TargetRef, match_target, parsed_selector
from nodeconfig.validation import REASONS, TargetProblem, validate_target, warnings_for

AA = {0: ["aa"]}


def reasons(problems: list[TargetProblem]) -> list[str]:
    return [p.reason for p in problems]


# ------------------------------------------------------------------- upstream tables

SELECTOR_TABLE = [
    (TargetRef("1", "aa=bb"), [TargetRef("2", "aa=cc")], True),
    (TargetRef("1", "aa=bb"), [TargetRef("2", "aa in (cc,dd)")], True),
    (TargetRef("1", "aa=bb"), [TargetRef("2", "aa in (bb,cc)")], False),
    (TargetRef("1", "aa=bb"), [TargetRef("2", "aa notin (bb,cc)")], True),
]


def _nodes(name: str, nodes: list[str]) -> TargetRef:
    return TargetRef(name, node_names=nodes, last_duration="72h")


NODE_TABLE = [
    (_nodes("1", ["node-1"]), [_nodes("2", ["node-2"])], True),
    (_nodes("1", ["node-1"]), [_nodes("2", ["node-2", "node-3"])], True),
    (_nodes("1", ["node-1"]), [_nodes("2", ["node-1", "node-3"])], False),
    (_nodes("1", ["node-1", "node-2"]), [_nodes("2", ["node-3", "node-4"])], True),
]

GLOBAL_TABLE = [
    (TargetRef("1"), [TargetRef("2")], False),
    (TargetRef("1"), [TargetRef("1"), TargetRef("2", "aa=bb")], True),
]

#: Each upstream test, its table and the reason its invalid cases get.
UPSTREAM_TABLES = [
    ("Test_validateLabelSelectorWithOthers", SELECTOR_TABLE, "selector_overlap"),
    ("Test_validateTargetResourceNodeNamesWithOthers", NODE_TABLE, "node_names_overlap"),
    ("Test_validateTargetResourceGlobalWithOthers", GLOBAL_TABLE, "global_duplicated"),
]


@pytest.mark.parametrize(("target", "others", "valid", "reason"), [
    pytest.param(*case, reason, id=f"{test}-{i}") for test, table, reason in UPSTREAM_TABLES for i, case in enumerate(table)])
def test_upstream_tables(target, others, valid, reason):
    problems = validate_target(target, AA, others)
    assert (not problems) is valid
    if not valid:
        assert reasons(problems) == [reason]


# ---------------------------------------------------------------- every reason code

REASON_CASES = [
    ("both_selector_and_node_names", TargetRef("t", "aa=bb", node_names=["n1"], last_duration="1h"), AA, []),
    ("label_selector_not_supported", TargetRef("t", "aa=bb"), None, []),
    ("label_selector_not_supported", TargetRef("t", "aa=bb"), {}, []),
    ("selector_with_last_duration", TargetRef("t", "aa=bb", last_duration="72h"), AA, []),
    ("selector_parse_failed", TargetRef("t", "aa in (bb"), AA, []),
    ("priority_not_supported", TargetRef("t", "aa=bb", priority=1), AA, []),
    ("selector_key_not_allowed", TargetRef("t", "aa=bb,zz=1"), AA, []),
    ("selector_key_not_allowed", TargetRef("t", "aa=bb"), {0: []}, []),
    ("selector_overlap", TargetRef("t", "aa=bb"), AA, [TargetRef("hdd", "aa in (bb,cc)")]),
    ("node_names_without_last_duration", TargetRef("t", node_names=["n1"]), AA, []),
    ("node_names_overlap", _nodes("t", ["n1"]), AA, [_nodes("o", ["n1"])]),
    ("global_with_last_duration", TargetRef("t", last_duration="1h"), AA, []),
    ("global_duplicated", TargetRef("t"), AA, [TargetRef("o")]),
]


@pytest.mark.parametrize(("reason", "target", "allowed", "others"), REASON_CASES)
def test_each_reason_code(reason, target, allowed, others):
    problems = validate_target(target, allowed, others)
    assert reasons(problems) == [reason]
    assert all(isinstance(p.message, str) and p.message for p in problems)


def test_reason_codes_are_the_contract_list():
    assert set(REASONS) == {case[0] for case in REASON_CASES}
    assert len(REASONS) == 11


def test_valid_targets_of_each_mode():
    assert validate_target(TargetRef("hdd", "aa=hdd"), AA, []) == []
    assert validate_target(_nodes("gray", ["node1", "node2"]), AA, []) == []
    assert validate_target(TargetRef("global"), AA, []) == []
    assert validate_target(TargetRef("global"), None, []) == []
    assert validate_target(_nodes("gray", ["node1"]), None, []) == []


# --------------------------------------------------------------------- check order


@pytest.mark.parametrize(
    ("target", "allowed", "expected"),
    [
        # Mode conflict is decided before anything about the selector.
        (TargetRef("t", "(((", node_names=["n"]), None, "both_selector_and_node_names"),
        # No selector support beats lastDuration, parse errors, priority and keys.
        (TargetRef("t", "(((", priority=9, last_duration="1h"), None, "label_selector_not_supported"),
        # lastDuration beats parse errors.
        (TargetRef("t", "(((", priority=9, last_duration="1h"), AA, "selector_with_last_duration"),
        # Parse errors beat an unsupported priority.
        (TargetRef("t", "(((", priority=9), AA, "selector_parse_failed"),
        # An unsupported priority beats disallowed keys.
        (TargetRef("t", "zz=1", priority=9), AA, "priority_not_supported"),
        # Disallowed keys beat overlap.
        (TargetRef("t", "zz=1,aa=bb"), AA, "selector_key_not_allowed"),
    ],
)
def test_checks_run_in_upstream_order(target, allowed, expected):
    others = [TargetRef("o", "aa=bb")]
    assert reasons(validate_target(target, allowed, others)) == [expected]


# -------------------------------------------------------------- which others count


def test_selector_overlap_only_within_the_same_priority():
    allowed = {0: ["aa"], 1: ["aa"]}
    target = TargetRef("t", "aa=bb", priority=1)
    assert validate_target(target, allowed, [TargetRef("o", "aa=bb", priority=0)]) == []
    assert reasons(validate_target(target, allowed, [TargetRef("o", "aa=bb", priority=1)])) == ["selector_overlap"]


def test_selector_overlap_uses_that_prioritys_allowed_keys():
    target = TargetRef("t", "zone=a", priority=1)
    other = TargetRef("o", "zone=a,rack=r1", priority=1)
    # Only priority 1's keys (zone) are compared; the other's rack term (not allowed at
    # priority 1, a problem reported on that target itself) cannot separate the two.
    allowed = {0: ["rack"], 1: ["zone"]}
    assert reasons(validate_target(target, allowed, [other])) == ["selector_overlap"]
    assert validate_target(TargetRef("t", "zone=b", priority=1), allowed, [other]) == []


def test_selector_overlap_skips_self_globals_node_lists_and_broken_selectors():
    target = TargetRef("t", "aa=bb")
    others = [
        TargetRef("t", "aa=bb"),  # itself (an older copy)
        TargetRef("g"),  # global
        _nodes("n", ["n1"]),  # node list without selector
        TargetRef("broken", "aa in (bb"),  # does not parse: reported on itself, skipped here
    ]
    assert validate_target(target, AA, others) == []


def test_selector_overlap_considers_others_with_both_modes_set():
    """Upstream only asks whether the other has a selector."""
    other = TargetRef("both", "aa=bb", node_names=["n1"], last_duration="1h")
    assert reasons(validate_target(TargetRef("t", "aa=bb"), AA, [other])) == ["selector_overlap"]


def test_one_problem_per_overlapping_target_sorted_by_name_and_named_in_message():
    others = [TargetRef("zeta", "aa in (bb)"), TargetRef("hdd", "aa!=cc"), TargetRef("ssd", "aa=ssd")]
    problems = validate_target(TargetRef("t", "aa=bb"), AA, others)
    assert problems == [
        TargetProblem("selector_overlap", 'selector overlaps with target "hdd" at priority 0'),
        TargetProblem("selector_overlap", 'selector overlaps with target "zeta" at priority 0'),
    ]


def test_node_names_overlap_messages_name_target_and_nodes():
    others = [_nodes("b", ["n3", "n2"]), _nodes("a", ["n1"]), _nodes("c", ["n9"])]
    problems = validate_target(_nodes("t", ["n1", "n2", "n3"]), None, others)
    assert reasons(problems) == ["node_names_overlap", "node_names_overlap"]
    assert '"a"' in problems[0].message and "n1" in problems[0].message
    assert '"b"' in problems[1].message and "n2, n3" in problems[1].message


def test_node_names_overlap_considers_others_with_both_modes_set():
    other = TargetRef("both", "aa=bb", node_names=["n1"], last_duration="1h")
    assert reasons(validate_target(_nodes("t", ["n1"]), AA, [other])) == ["node_names_overlap"]


def test_node_names_overlap_ignores_self_and_other_modes():
    others = [_nodes("t", ["n1"]), TargetRef("g"), TargetRef("s", "aa=bb")]
    assert validate_target(_nodes("t", ["n1"]), AA, others) == []


def test_global_duplicate_ignores_priority_and_other_modes():
    others = [TargetRef("g2", priority=7), TargetRef("s", "aa=bb"), _nodes("n", ["n1"])]
    problems = validate_target(TargetRef("g1"), AA, others)
    assert problems == [TargetProblem("global_duplicated", 'another global target exists: "g2"')]


def test_messages_carry_details():
    [p] = validate_target(TargetRef("t", "aa=bb,zz=1,yy=2"), AA, [])
    assert "[yy zz]" in p.message and "[aa]" in p.message
    [p] = validate_target(TargetRef("t", "aa=bb", priority=3), {0: ["aa"], 1: ["aa"]}, [])
    assert "3" in p.message and "[0 1]" in p.message
    [p] = validate_target(TargetRef("t", "aa in (bb"), AA, [])
    assert p.message.startswith("nodeLabelSelector does not parse: ")


def test_whitespace_only_selector_is_selector_mode_like_upstream():
    """Upstream tests len(selector) != 0; "  " parses to match-everything and so overlaps anything."""
    assert reasons(validate_target(TargetRef("t", "  "), AA, [TargetRef("o", "aa=bb")])) == ["selector_overlap"]
    assert reasons(validate_target(TargetRef("t", "  "), None, [])) == ["label_selector_not_supported"]


def test_priority_lookup_is_int32_like_upstream():
    assert validate_target(TargetRef("t", "aa=bb", priority=2**32), AA, []) == []


def test_validating_against_500_parses_each_selector_once():
    """What keeps validation fast (timed against its goal in ``bench/bench_nodeconfig.py``, not
    here): each selector is parsed once, for matching and for the conflict check, and a second
    validation against the same targets parses nothing."""
    others = [TargetRef(f"o{i}", f"aa=v{i},bb in (x{i},y{i})") for i in range(500)]
    allowed = {0: ["aa", "bb"]}
    parsed_selector.cache_clear()
    key_constraints.cache_clear()
    for _ in range(2):
        assert validate_target(TargetRef("new", "aa=v-new"), allowed, others) == []
        assert parsed_selector.cache_info().misses == 500
        assert key_constraints.cache_info().misses == 501


# ------------------------------------------------------------------------ warnings


@pytest.mark.parametrize(
    ("allowed", "count"),
    [
        (None, 0),
        ({}, 0),
        ({0: ["a", "b"]}, 0),
        ({0: ["a"], 1: ["b", "c"]}, 0),
        ({0: ["a", "b", "c"]}, 1),
        ({0: ["a", "a", "b"]}, 0),
        ({0: ["a"], 1: ["b"], 2: ["c"]}, 1),
        ({0: ["a", "b", "c"], 1: ["a", "b", "c", "d"], 2: []}, 3),
    ],
)
def test_warnings_for(allowed, count):
    warnings = warnings_for(allowed)
    assert len(warnings) == count
    assert all(isinstance(w, str) and w for w in warnings)


# ------------------------------------------------------------------------ property

_KEYS = ("a", "b")
_UNIVERSE = [
    {k: v for k, v in zip(_KEYS, combo) if v is not None}
    for combo in itertools.product((None, "1", "2", "3"), repeat=len(_KEYS))
]
_selector = st.sampled_from(
    ["a=1", "a=2", "a!=1", "a in (1,2)", "a notin (1,2)", "b=1", "b notin (3)", "a=1,b=2", "a=3,b!=1", "a", "!b", "a>1"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_selector, st.integers(0, 1)), min_size=1, max_size=5))
def test_accepted_selector_targets_never_tie_on_any_node(specs):
    """If every selector target validates, no node label set can produce a same-priority tie."""
    allowed = {0: list(_KEYS), 1: list(_KEYS)}
    targets = [TargetRef(f"t{i}", sel, priority=p) for i, (sel, p) in enumerate(specs)]
    if any(validate_target(t, allowed, targets) for t in targets):
        return
    for labels in _UNIVERSE:
        result = match_target("node", labels, targets)
        assert result.error != "same_priority", (labels, [(t.name, t.node_label_selector) for t in targets])
        if result.name is not None:
            winner = next(t for t in targets if t.name == result.name)
            assert parse_selector(winner.node_label_selector).matches(labels)
