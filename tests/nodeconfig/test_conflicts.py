"""nodeconfig.conflicts against katalyst-core's checkLabelSelectorOverlap.

The first table restates upstream's ``Test_checkLabelSelectorOverlap`` and the selector
cases of ``Test_validateLabelSelectorWithOthers`` (``pkg/controller/kcc/kcct_test.go``);
the rest pins the corners upstream's code decides (other operators, keys outside the
allowed list, value-set unions).  Property tests check symmetry, soundness against brute
force over a small label universe, and agreement with a literal reading of the Go code.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.labels import Operator, SelectorError, parse_selector
from nodeconfig.conflicts import key_constraints, selectors_may_conflict

# (a, b, allowed keys, may conflict)
UPSTREAM_OVERLAP_TABLE = [
    ("label1=aa", "label1=bb", ["label1"], False),
    ("label1=aa", "label1!=bb", ["label1"], True),
    ("label1=aa", "label1 in (aa,bb)", ["label1"], True),
    ("label1=aa", "label1 notin (aa,bb)", ["label1"], False),
    ("label1=aa", "label1 in (aa,bb),label2=cc", ["label1", "label2"], True),
    ("label1=aa", "label2=bb", ["label1", "label2"], True),
    ("label1 notin (aa, bb),label2=bb", "label1 in (aa),label2=bb", ["label1", "label2"], False),
    ("label1 in (aa),label2 notin (bb,cc)", "label1 notin (cc,dd),label2 notin (cc)", ["label1", "label2"], True),
    ("label1=aa", "label1 notin (cc,dd),label2 notin (cc)", ["label1", "label2"], True),
    # Test_validateLabelSelectorWithOthers, allowed keys {0: [aa]}: "valid" there means no overlap.
    ("aa=bb", "aa=cc", ["aa"], False),
    ("aa=bb", "aa in (cc,dd)", ["aa"], False),
    ("aa=bb", "aa in (bb,cc)", ["aa"], True),
    ("aa=bb", "aa notin (bb,cc)", ["aa"], False),
]

CORNER_CASES = [
    # = and == and in are one equal set; != and notin one not-equal set.
    ("k==a", "k=a", ["k"], True),
    ("k==a", "k in (b)", ["k"], False),
    ("k in (a,b)", "k notin (a,b)", ["k"], False),
    ("k in (a,b)", "k notin (a)", ["k"], True),
    ("k!=a", "k!=b", ["k"], True),
    ("k notin (a)", "k notin (a)", ["k"], True),
    ("k=a", "k=a", ["k"], True),
    # Several requirements on one key: their values are pooled (conservatively).
    ("k in (a,b),k in (b,c)", "k=c", ["k"], True),
    ("k=a,k!=b", "k=b", ["k"], False),
    ("k=a,k!=b", "k notin (a)", ["k"], False),
    # The empty value is a value like any other.
    ("k=", "k=a", ["k"], False),
    ("k=", "k!=", ["k"], False),
    ("k=", "k in (,a)", ["k"], True),
    # Operators outside the equality family make the whole key unconstrained for upstream.
    ("k", "k=v", ["k"], True),
    ("!k", "k=v", ["k"], True),
    ("k>5", "k=v", ["k"], True),
    ("k<5", "k notin (v)", ["k"], True),
    ("k=a,k", "k=b", ["k"], True),
    ("k,k=a", "k=b", ["k"], True),
    ("k=a", "k=b", ["k"], False),
    ("!k", "k", ["k"], True),
    # Keys outside the allowed list never separate two selectors.
    ("a=1,b=1", "a=1,b=2", ["a"], True),
    ("a=1,b=1", "a=1,b=2", ["a", "b"], False),
    ("a=1,b=1", "a=1,b=2", ["b"], False),
    ("a=1", "a=2", [], True),
    ("a=1", "a=2", ["zzz"], True),
    # No selector at all (or one about other keys) matches any value.
    ("", "", ["k"], True),
    ("", "k=v", ["k"], True),
    ("other=x", "k=v", ["k", "other"], True),
    ("", "k notin (v)", ["k"], True),
    # Spacing does not matter.
    ("  k in ( a , b ) ", "k=b", ["k"], True),
]


@pytest.mark.parametrize(("a", "b", "keys", "expected"), UPSTREAM_OVERLAP_TABLE + CORNER_CASES)
def test_overlap_table(a, b, keys, expected):
    assert selectors_may_conflict(a, b, keys) is expected
    assert selectors_may_conflict(b, a, keys) is expected


def test_allowed_keys_may_be_any_iterable():
    assert selectors_may_conflict("k=a", "k=b", iter(["k"])) is False
    assert selectors_may_conflict("k=a", "k=b", frozenset({"k"})) is False
    assert selectors_may_conflict("k=a", "k=b", ("x" for _ in range(2))) is True


@pytest.mark.parametrize("bad", ["k in (", "=x", "k in a", "k in (a", "k>a", "!k=a", "k=a b", "Bad Key=x", "k=@"])
def test_unparseable_selectors_raise_selector_error(bad):
    with pytest.raises(SelectorError):
        selectors_may_conflict(bad, "k=a", ["k"])
    with pytest.raises(SelectorError):
        selectors_may_conflict("k=a", bad, ["k"])


def test_key_constraints_are_cached_and_read_only():
    first = key_constraints("zone in (a,b),rack!=r1,gpu")
    assert key_constraints("zone in (a,b),rack!=r1,gpu") is first
    assert dict(first) == {"zone": (frozenset({"a", "b"}), frozenset()), "rack": (frozenset(), frozenset({"r1"}))}
    with pytest.raises(TypeError):
        first["x"] = (frozenset(), frozenset())  # type: ignore[index]


# -------------------------------------------------------------------------- properties

_KEYS = ("a", "b", "c")
_VALUES = ("1", "2", "3")


@st.composite
def _requirement(draw) -> str:
    key = draw(st.sampled_from(_KEYS))
    form = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!", ">", "<"]))
    if form in ("in", "notin"):
        values = draw(st.lists(st.sampled_from(_VALUES), min_size=1, max_size=3, unique=True))
        return f"{key} {form} ({','.join(values)})"
    if form == "exists":
        return key
    if form == "!":
        return "!" + key
    return f"{key}{form}{draw(st.sampled_from(_VALUES))}"


_selectors = st.lists(_requirement(), max_size=3).map(",".join)
_allowed = st.lists(st.sampled_from(_KEYS), max_size=3, unique=True)

_UNIVERSE = [
    {k: v for k, v in zip(_KEYS, combo) if v is not None}
    for combo in itertools.product((None,) + _VALUES, repeat=len(_KEYS))
]


def _upstream_reading(a: str, b: str, keys: list[str]) -> bool:
    """checkLabelSelectorOverlap read line by line, as an oracle."""

    def value_sets(text: str, key: str) -> tuple[set[str], set[str]]:
        equal: set[str] = set()
        not_equal: set[str] = set()
        for req in parse_selector(text).requirements:
            if req.key != key:
                continue
            if req.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN):
                equal |= set(req.values)
            elif req.operator in (Operator.NOT_EQUALS, Operator.NOT_IN):
                not_equal |= set(req.values)
            else:
                return set(), set()
        return equal, not_equal

    for key in keys:
        eq, ne = value_sets(a, key)
        oeq, one = value_sets(b, key)
        if (
            (len(eq) > 0 and len(oeq) > 0 and len(eq & oeq) > 0)
            or (len(eq) == 0 and len(oeq) == 0)
            or (len(ne) > 0 and (ne & oeq) != oeq)
            or (len(one) > 0 and (one & eq) != eq)
            or (len(eq) > 0 and len(oeq) == 0 and len(one) == 0)
            or (len(oeq) > 0 and len(eq) == 0 and len(ne) == 0)
        ):
            continue
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(_selectors, _selectors, _allowed)
def test_symmetric(a, b, keys):
    assert selectors_may_conflict(a, b, keys) == selectors_may_conflict(b, a, keys)


@settings(max_examples=400, deadline=None)
@given(_selectors, _selectors, _allowed)
def test_agrees_with_a_literal_reading_of_upstream(a, b, keys):
    assert selectors_may_conflict(a, b, keys) == _upstream_reading(a, b, keys)


@settings(max_examples=400, deadline=None)
@given(_selectors, _selectors, _allowed)
def test_sound_no_shared_node_is_ever_missed(a, b, keys):
    """If any label set matches both selectors, they must be reported as possibly conflicting."""
    sa, sb = parse_selector(a), parse_selector(b)
    witness = next((labels for labels in _UNIVERSE if sa.matches(labels) and sb.matches(labels)), None)
    if witness is not None:
        assert selectors_may_conflict(a, b, keys), f"both match {witness}"


@settings(max_examples=200, deadline=None)
@given(_selectors)
def test_a_selector_always_may_conflict_with_itself_when_it_can_match(a):
    if any(parse_selector(a).matches(labels) for labels in _UNIVERSE):
        assert selectors_may_conflict(a, a, _KEYS)


# ------------------------------------------------------------------------- performance


def _fleet_selectors(count: int) -> list[str]:
    return [f"zone=z{i % 50},rack in (r{i},r{i + 1}),tier!=t{i % 7}" for i in range(count)]


def test_checking_one_against_500_parses_each_selector_once():
    """What keeps a conflict check fast, cold or warm (timed against its goal in
    ``bench/bench_nodeconfig.py``, not here): each selector is parsed once, and a second pass
    over the same targets parses nothing."""
    key_constraints.cache_clear()
    others = _fleet_selectors(500)
    new = "zone=z3,rack in (r999,r1000)"
    keys = ["zone", "rack", "tier"]
    assert not any(selectors_may_conflict(new, other, keys) for other in others)
    assert key_constraints.cache_info().misses == 501
    assert not any(selectors_may_conflict(new, other, keys) for other in others)
    assert key_constraints.cache_info().misses == 501, "the warm pass parsed again"
