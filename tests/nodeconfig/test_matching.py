"""nodeconfig.matching against katalyst-core's FindMatchedKCCTargetConfigForNode, and Go durations.

``UPSTREAM_TABLE`` restates ``Test_findMatchedTargetConfig``
(``pkg/controller/kcc/util/kcct_test.go``): upstream asserts the matched tier, which is our
``candidates``; the single-winner/tie outcome follows ``FindMatchedKCCTargetConfigForNode``.
Duration cases restate Go's ``time`` package ``parseDurationTests`` and
``parseDurationErrorTests``.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodeconfig.matching import (
    MatchResult,
    TargetRef,
    go_duration_ns,
    int32,
    is_expired,
    match_target,
    parse_go_duration,
    parsed_selector,
)

AA_DEFAULT = {"aa": "default"}

# (case, node name, labels, targets, expected name, expected error, expected candidates)
UPSTREAM_TABLE = [
    (
        "only nodeNames config",
        "node-1",
        AA_DEFAULT,
        [TargetRef("config-1", node_names=["node-1"]), TargetRef("config-2", node_names=["node-2"])],
        "config-1",
        None,
        ["config-1"],
    ),
    (
        "nodeNames overlap",
        "node-1",
        AA_DEFAULT,
        [TargetRef("config-1", node_names=["node-1"]), TargetRef("config-2", node_names=["node-1"])],
        None,
        "same_priority",
        ["config-1", "config-2"],
    ),
    (
        "target config invalid (selector plus nodeNames counts as node list)",
        "node-1",
        AA_DEFAULT,
        [
            TargetRef("config-1", node_label_selector="aa=default", node_names=["node-1"], last_duration="1m"),
            TargetRef("config-2", last_duration="1m"),
        ],
        "config-1",
        None,
        ["config-1"],
    ),
    (
        "nodeNames prior than labelSelector",
        "node-1",
        AA_DEFAULT,
        [TargetRef("config-1", node_label_selector="aa=default"), TargetRef("config-2", node_names=["node-1"])],
        "config-2",
        None,
        ["config-2"],
    ),
    (
        "labelSelector overlap",
        "node-1",
        AA_DEFAULT,
        [
            TargetRef("config-1", node_label_selector="aa=default"),
            TargetRef("config-2"),
            TargetRef("config-3", node_label_selector="aa in (default,non-standard)"),
        ],
        None,
        "same_priority",
        ["config-1", "config-3"],
    ),
    (
        "labelSelector overlap but nodeName valid",
        "node-1",
        AA_DEFAULT,
        [
            TargetRef("config-1", node_label_selector="aa=default"),
            TargetRef("config-2", node_names=["node-1"]),
            TargetRef("config-3", node_label_selector="aa in (default,non-standard)"),
        ],
        "config-2",
        None,
        ["config-2"],
    ),
]

MORE_CASES = [
    ("nothing at all", "n1", {}, [], None, "not_found", []),
    (
        "nothing matches",
        "n1",
        {"disk": "ssd"},
        [TargetRef("hdd", node_label_selector="disk=hdd"), TargetRef("gray", node_names=["n2"], last_duration="72h")],
        None,
        "not_found",
        [],
    ),
    (
        "global when nothing more specific matches",
        "n1",
        {"disk": "ssd"},
        [TargetRef("hdd", node_label_selector="disk=hdd"), TargetRef("global")],
        "global",
        None,
        ["global"],
    ),
    (
        "selector beats global whatever the priorities",
        "n1",
        {"disk": "hdd"},
        [TargetRef("global", priority=10), TargetRef("hdd", node_label_selector="disk=hdd", priority=0)],
        "hdd",
        None,
        ["hdd"],
    ),
    (
        "highest matching priority wins",
        "n1",
        {"disk": "hdd", "zone": "a"},
        [
            TargetRef("hdd", node_label_selector="disk=hdd", priority=0),
            TargetRef("zone-a", node_label_selector="zone=a", priority=1),
            TargetRef("zone-b", node_label_selector="zone=b", priority=5),
        ],
        "zone-a",
        None,
        ["hdd", "zone-a"],
    ),
    (
        "a tie below the top priority is no problem",
        "n1",
        {"disk": "hdd", "zone": "a"},
        [
            TargetRef("hdd", node_label_selector="disk=hdd", priority=0),
            TargetRef("zone-a", node_label_selector="zone=a", priority=0),
            TargetRef("top", node_label_selector="zone in (a,b)", priority=2),
        ],
        "top",
        None,
        ["hdd", "zone-a", "top"],
    ),
    (
        "negative priorities order too",
        "n1",
        {"disk": "hdd"},
        [
            TargetRef("low", node_label_selector="disk=hdd", priority=-5),
            TargetRef("lower", node_label_selector="disk", priority=-6),
        ],
        "low",
        None,
        ["low", "lower"],
    ),
    (
        "node lists of different priority: the higher wins",
        "n1",
        {},
        [
            TargetRef("a", node_names=["n1"], priority=0, last_duration="1h"),
            TargetRef("b", node_names=["n0", "n1"], priority=3, last_duration="1h"),
        ],
        "b",
        None,
        ["a", "b"],
    ),
    (
        "two globals tie",
        "n1",
        {},
        [TargetRef("g1"), TargetRef("g2")],
        None,
        "same_priority",
        ["g1", "g2"],
    ),
    (
        "two globals of different priority: the higher wins",
        "n1",
        {},
        [TargetRef("g1", priority=1), TargetRef("g2", priority=2)],
        "g2",
        None,
        ["g1", "g2"],
    ),
    (
        "an empty node list is not a node list",
        "n1",
        {"disk": "hdd"},
        [TargetRef("sel", node_label_selector="disk=hdd", node_names=[])],
        "sel",
        None,
        ["sel"],
    ),
    (
        "a broken selector matches every node, blocking the selector tier",
        "n1",
        {"disk": "ssd"},
        [TargetRef("broken", node_label_selector="disk in (hdd"), TargetRef("global")],
        "broken",
        None,
        ["broken"],
    ),
    (
        "a broken selector ties with a real match",
        "n1",
        {"disk": "hdd"},
        [TargetRef("hdd", node_label_selector="disk=hdd"), TargetRef("broken", node_label_selector="===")],
        None,
        "same_priority",
        ["hdd", "broken"],
    ),
    (
        "priorities compare as int32 (2**32 wraps to 0)",
        "n1",
        {"disk": "hdd"},
        [TargetRef("a", node_label_selector="disk=hdd", priority=2**32), TargetRef("b", node_label_selector="disk")],
        None,
        "same_priority",
        ["a", "b"],
    ),
    (
        "seed grey release",
        "node2",
        {"diskMode": "hdd"},
        [
            TargetRef("global"),
            TargetRef("hdd", node_label_selector="diskMode=hdd"),
            TargetRef("numa-memory-eviction-gray", node_names=("node1", "node2"), last_duration="72h"),
        ],
        "numa-memory-eviction-gray",
        None,
        ["numa-memory-eviction-gray"],
    ),
]


@pytest.mark.parametrize(
    ("case", "node", "labels", "targets", "name", "error", "candidates"),
    UPSTREAM_TABLE + MORE_CASES,
    ids=[row[0] for row in UPSTREAM_TABLE + MORE_CASES],
)
def test_match_table(case, node, labels, targets, name, error, candidates):
    result = match_target(node, labels, targets)
    assert result == MatchResult(name=name, error=error, candidates=candidates)
    assert (result.name is None) == (result.error is not None)


def test_match_result_is_frozen():
    result = match_target("n", {}, [TargetRef("g")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.name = "x"  # type: ignore[misc]


def test_target_ref_defaults():
    ref = TargetRef("x")
    assert (ref.node_label_selector, ref.priority, tuple(ref.node_names), ref.last_duration) == ("", 0, (), None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.priority = 1  # type: ignore[misc]


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (-1, -1), (2**31 - 1, 2**31 - 1), (2**31, -(2**31)), (2**32 + 7, 7)])
def test_int32_wraps_like_go(value, expected):
    assert int32(value) == expected


def test_selectors_are_parsed_once():
    parsed_selector.cache_clear()
    targets = [TargetRef(f"t{i}", node_label_selector=f"rack=r{i}") for i in range(50)]
    for node in range(20):
        match_target(f"n{node}", {"rack": f"r{node}"}, targets)
    info = parsed_selector.cache_info()
    assert info.misses == 50 and info.hits == 50 * 19


_KEYS = ("a", "b")
_VALUES = ("1", "2")
_UNIVERSE = [
    {k: v for k, v in zip(_KEYS, combo) if v is not None} for combo in itertools.product((None,) + _VALUES, repeat=2)
]
_target = st.builds(
    TargetRef,
    name=st.sampled_from([f"t{i}" for i in range(6)]),
    node_label_selector=st.sampled_from(["", "a=1", "a!=1", "b in (1,2)", "a,b=2", "!a"]),
    priority=st.integers(0, 2),
    node_names=st.sampled_from([(), ("n1",), ("n1", "n2"), ("n2",)]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_target, max_size=6), st.sampled_from(["n1", "n2", "n3"]), st.sampled_from(_UNIVERSE))
def test_match_invariants(targets, node, labels):
    result = match_target(node, labels, targets)
    names = [t.name for t in targets]
    if result.error == "not_found":
        assert result.name is None and result.candidates == []
        return
    assert result.candidates, "a match always lists its tier"
    # Candidates keep input order (a subsequence of the input).
    it = iter(names)
    assert all(c in it for c in result.candidates)
    if result.error is None:
        assert result.name in result.candidates
    else:
        assert result.error == "same_priority" and result.name is None and len(result.candidates) >= 2


# --------------------------------------------------------------------------- durations

NS, US, MS, S = 1, 1_000, 1_000_000, 1_000_000_000
MIN, HOUR = 60 * S, 3600 * S

GO_PARSE_DURATION_CASES = [
    ("0", 0),
    ("5s", 5 * S),
    ("30s", 30 * S),
    ("1478s", 1478 * S),
    ("-5s", -5 * S),
    ("+5s", 5 * S),
    ("-0", 0),
    ("+0", 0),
    ("5.0s", 5 * S),
    ("5.6s", 5 * S + 600 * MS),
    ("5.s", 5 * S),
    (".5s", 500 * MS),
    ("1.0s", 1 * S),
    ("1.00s", 1 * S),
    ("1.004s", 1 * S + 4 * MS),
    ("1.0040s", 1 * S + 4 * MS),
    ("100.00100s", 100 * S + 1 * MS),
    ("10ns", 10 * NS),
    ("11us", 11 * US),
    ("12\u00b5s", 12 * US),
    ("12\u03bcs", 12 * US),
    ("13ms", 13 * MS),
    ("14s", 14 * S),
    ("15m", 15 * MIN),
    ("16h", 16 * HOUR),
    ("3h30m", 3 * HOUR + 30 * MIN),
    ("10.5s4m", 4 * MIN + 10 * S + 500 * MS),
    ("-2m3.4s", -(2 * MIN + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", 1 * HOUR + 2 * MIN + 3 * S + 4 * MS + 5 * US + 6 * NS),
    ("39h9m14.425s", 39 * HOUR + 9 * MIN + 14 * S + 425 * MS),
    ("52763797000ns", 52763797000 * NS),
    ("0.3333333333333333333h", 20 * MIN),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", 2**63 - 1),
    ("9223372036854775.807us", 2**63 - 1),
    ("9223372036s854ms775us807ns", 2**63 - 1),
    ("-9223372036854775808ns", -(2**63)),
    ("-9223372036854775.808us", -(2**63)),
    ("-9223372036s854ms775us808ns", -(2**63)),
    ("-2562047h47m16.854775808s", -(2**63)),
    ("0.100000000000000000000h", 6 * MIN),
    ("0.830103483285477580700h", 49 * MIN + 48 * S + 372539827 * NS),
    # Meridian's own uses.
    ("72h", 72 * HOUR),
    ("1h30m", 90 * MIN),
    ("1.5h", 90 * MIN),
    ("300ms", 300 * MS),
    ("-1h", -HOUR),
]

GO_PARSE_DURATION_ERRORS = [
    ("", 'time: invalid duration ""'),
    ("3", 'time: missing unit in duration "3"'),
    ("-", 'time: invalid duration "-"'),
    ("s", 'time: invalid duration "s"'),
    (".", 'time: invalid duration "."'),
    ("-.", 'time: invalid duration "-."'),
    (".s", 'time: invalid duration ".s"'),
    ("+.s", 'time: invalid duration "+.s"'),
    ("1d", 'time: unknown unit "d" in duration "1d"'),
    ("\u0085\u0085", 'time: invalid duration "\\xc2\\x85\\xc2\\x85"'),
    ("9223372036854775810ns", 'time: invalid duration "9223372036854775810ns"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'),
    ("9223372036854776us", 'time: invalid duration "9223372036854776us"'),
    ("3000000h", 'time: invalid duration "3000000h"'),
    ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
    ("9223372036854ms775us808ns", 'time: invalid duration "9223372036854ms775us808ns"'),
    ("1h 30m", 'time: unknown unit "h " in duration "1h 30m"'),
    (" 1h", 'time: invalid duration " 1h"'),
    ("1H", 'time: unknown unit "H" in duration "1H"'),
    ("--1h", 'time: invalid duration "--1h"'),
]


@pytest.mark.parametrize(("text", "ns"), GO_PARSE_DURATION_CASES)
def test_go_duration_ns(text, ns):
    assert go_duration_ns(text) == ns


@pytest.mark.parametrize(("text", "message"), GO_PARSE_DURATION_ERRORS)
def test_go_duration_errors(text, message):
    with pytest.raises(ValueError) as info:
        go_duration_ns(text)
    assert str(info.value) == message
    with pytest.raises(ValueError):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("72h", datetime.timedelta(hours=72)),
        ("1h30m", datetime.timedelta(hours=1, minutes=30)),
        ("1.5h", datetime.timedelta(hours=1, minutes=30)),
        ("300ms", datetime.timedelta(milliseconds=300)),
        ("-1h", -datetime.timedelta(hours=1)),
        ("1500ns", datetime.timedelta(microseconds=1)),
        ("-1500ns", -datetime.timedelta(microseconds=1)),
        ("999ns", datetime.timedelta(0)),
        ("0", datetime.timedelta(0)),
    ],
)
def test_parse_go_duration_as_timedelta(text, delta):
    assert parse_go_duration(text) == delta


def test_non_string_duration_is_a_value_error():
    with pytest.raises(ValueError):
        parse_go_duration(72)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(["ns", "us", "ms", "s", "m", "h"]), st.booleans())
def test_integer_durations_scale_by_unit(amount, unit, negative):
    factor = {"ns": NS, "us": US, "ms": MS, "s": S, "m": MIN, "h": HOUR}[unit]
    text = ("-" if negative else "") + f"{amount}{unit}"
    assert go_duration_ns(text) == (-1 if negative else 1) * amount * factor


def test_is_expired_follows_creation_plus_duration():
    created = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    assert not is_expired(None, created, created + datetime.timedelta(days=1000))
    assert not is_expired("72h", created, created + datetime.timedelta(hours=72))
    assert is_expired("72h", created, created + datetime.timedelta(hours=72, microseconds=1))
    assert is_expired("bogus", created, created + datetime.timedelta(microseconds=1))
