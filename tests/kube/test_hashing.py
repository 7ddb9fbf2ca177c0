import pytest

from kube.hashing import canonical_json, object_digest, shard_of, stable_hash


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
