"""The SQL translation of label selectors picks exactly the nodes ``Selector.matches`` picks."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.models import Cluster, Node
from fleet.selectors import selector_q
from kube.labels import SelectorError, parse_selector, selector_from_label_selector

LABEL_SETS = [
    {},
    {"zone": "a"},
    {"zone": "b", "diskMode": "hdd", "machineModel": "A4"},
    {"zone": "a", "diskMode": "ssd", "machineModel": "A3", "gpu": "8"},
    {"zone": "c", "machineModel": "A4", "gpu": "-3", "example.com/team": "x.y"},
    {"zone": "", "gpu": "+5", "drained": "true"},
    {"gpu": "abc", "machineModel": "A1"},
    {"gpu": "12345678901234567890", "zone": "a"},
]

SELECTORS = [
    "", "zone", "!zone", "zone=a", "zone==a", "zone!=a", "zone in (a,b)", "zone notin (a,b)", "zone in ()", "zone notin ()", "zone=",
    "gpu>1", "gpu<1", "!drained,zone", "machineModel in (A3,A4),diskMode=hdd", "diskMode!=hdd,machineModel",
    "example.com/team=x.y", "zone notin (c),gpu", "gpu>0,gpu<10",
]


@pytest.fixture
def nodes(db):
    cluster = Cluster.objects.create(name="c1", connector="simulated")
    Node.objects.bulk_create(Node(cluster=cluster, name=f"n{i}", labels=labels) for i, labels in enumerate(LABEL_SETS))
    return {f"n{i}": labels for i, labels in enumerate(LABEL_SETS)}


def _sql_names(text: str) -> set[str]:
    return set(Node.objects.filter(selector_q(parse_selector(text))).values_list("name", flat=True))


@pytest.mark.django_db
@pytest.mark.parametrize("text", SELECTORS)
def test_sql_matches_the_python_selector(nodes, text):
    selector = parse_selector(text)
    expected = {name for name, labels in nodes.items() if selector.matches(labels)}
    assert _sql_names(text) == expected, text


@pytest.mark.django_db
def test_notin_empty_parentheses_excludes_only_the_empty_value(nodes):
    """Upstream ``parseValues`` reads ``()`` as the set {""} (its own test table prints
    ``z notin ()`` for NotIn {""}), so ``zone notin ()`` is a valid selector that drops
    ``zone=""`` and keeps the rest: not everything, not nothing. An empty value *list*
    (``matchExpressions`` with ``values: []``) is what ``NewRequirement`` refuses."""
    selector = parse_selector("zone notin ()")
    assert str(selector) == "zone notin ()" and selector.requirements[0].values == ("",)
    assert _sql_names("zone notin ()") == {name for name, labels in nodes.items() if labels.get("zone") != ""}
    assert "n5" not in _sql_names("zone notin ()") and len(_sql_names("zone notin ()")) == len(nodes) - 1
    with pytest.raises(SelectorError, match="values set can't be empty"):
        selector_from_label_selector({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": []}]})


@pytest.mark.django_db
def test_nothing_selector_matches_no_row(nodes):
    from kube.labels import Selector

    assert not Node.objects.filter(selector_q(Selector.nothing())).exists()


keys = st.sampled_from(["zone", "diskMode", "machineModel", "gpu", "drained", "example.com/team"])
values = st.sampled_from(["a", "b", "c", "", "hdd", "ssd", "A3", "A4", "1", "8", "-3", "x.y"])
requirement = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", keys, values),
    st.builds(lambda k, v: f"{k}!={v}", keys, values),
    st.builds(lambda k, vs: f"{k} in ({','.join(vs)})", keys, st.lists(values, min_size=1, max_size=3)),
    st.builds(lambda k, vs: f"{k} notin ({','.join(vs)})", keys, st.lists(values, min_size=1, max_size=3)),
    st.builds(lambda k: k, keys),
    st.builds(lambda k: f"!{k}", keys),
    st.builds(lambda k, n: f"{k}>{n}", keys, st.integers(-5, 10)),
    st.builds(lambda k, n: f"{k}<{n}", keys, st.integers(-5, 10)),
)


@pytest.mark.django_db
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(requirement, min_size=1, max_size=3))
def test_random_selectors_agree_with_python(nodes, parts):
    text = ",".join(parts)
    try:
        selector = parse_selector(text)
    except SelectorError:
        return
    expected = {name for name, labels in nodes.items() if selector.matches(labels)}
    assert _sql_names(text) == expected, text
