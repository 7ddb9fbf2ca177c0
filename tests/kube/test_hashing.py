import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.hashing import canonical_json, facts_digest, object_digest, shard_of, stable_hash


def test_canonical_json_sorts_keys_at_every_depth_and_is_compact():
    assert canonical_json({"b": 1, "a": {"d": [1, {"z": 0, "y": None}], "c": "é"}}) == '{"a":{"c":"é","d":[1,{"y":null,"z":0}]},"b":1}'.encode()


def test_equal_objects_have_equal_digests_whatever_the_key_order():
    assert object_digest({"a": 1, "b": [1, 2]}) == object_digest({"b": [1, 2], "a": 1})
    assert object_digest({"a": 1}) != object_digest({"a": 2})


def test_canonical_json_refuses_nan():
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


@pytest.mark.parametrize("count", [1, 3, 16])
def test_shard_of_is_in_range_and_matches_the_hash(count):
    for key in ("a", "cluster/bj-3", "quota-group/vision"):
        assert shard_of(key, count) == stable_hash(key) % count
        assert 0 <= shard_of(key, count) < count


def test_shard_of_refuses_zero_shards():
    with pytest.raises(ValueError):
        shard_of("a", 0)


_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text()
_FACTS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                      max_leaves=20)


@settings(database=None, max_examples=300)
@given(_FACTS)
def test_facts_digest_is_object_digest_for_json_without_floats(value):
    """The inventory's rows (strings, integers, booleans, None, lists, string-keyed dicts) keep
    the digests the stored rows were written with: control characters, non-ASCII text, key order."""
    assert facts_digest(value) == object_digest(value)


@pytest.mark.parametrize("value", [{"big": 2**64}, {1: "a"}, [{"n": -(2**70)}]])
def test_facts_digest_falls_back_where_orjson_refuses(value):
    assert facts_digest(value) == object_digest(value)
