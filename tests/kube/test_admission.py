"""Tests for kube.admission: AdmissionReview parsing, response builders and JSON Patch diffs."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.admission import (
    ADMISSION_V1,
    ADMISSION_V1BETA1,
    AdmissionRequest,
    AdmissionReviewError,
    allow,
    deny,
    json_patch_diff,
    parse_admission_review,
    patch,
)

UID = "705ab4f5-6393-11e8-b7cc-42010a800002"

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}},
}


def review(**request_overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": UID,
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "name": "web",
        "namespace": "shop",
        "operation": "CREATE",
        "userInfo": {"username": "alice", "uid": "u-1", "groups": ["system:authenticated"], "extra": {"scopes": ["a"]}},
        "object": copy.deepcopy(DEPLOYMENT),
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    request.update(request_overrides)
    return {"apiVersion": ADMISSION_V1, "kind": "AdmissionReview", "request": request}


def without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


# ------------------------------------------------------------------- valid reviews


def test_create_deployment_from_bytes() -> None:
    request = parse_admission_review(json.dumps(review()).encode())
    assert request.uid == UID
    assert request.operation == "CREATE"
    assert request.kind == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert request.resource == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert request.request_kind == request.kind
    assert request.request_resource == request.resource
    assert request.sub_resource == request.request_sub_resource == ""
    assert (request.name, request.namespace) == ("web", "shop")
    assert request.object == DEPLOYMENT
    assert request.old_object is None
    assert request.dry_run is False
    assert request.options == {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    assert request.user_info == {
        "username": "alice",
        "uid": "u-1",
        "groups": ["system:authenticated"],
        "extra": {"scopes": ["a"]},
    }
    assert request.username == "alice"
    assert request.api_version == ADMISSION_V1
    assert request.gvk == "apps/v1, Kind=Deployment"
    assert request.gvr == "apps/v1, Resource=deployments"


@pytest.mark.parametrize(
    "encode", [lambda r: r, json.dumps, lambda r: json.dumps(r).encode(), lambda r: bytearray(json.dumps(r).encode())]
)
def test_body_may_be_mapping_str_or_bytes(encode: Any) -> None:
    assert parse_admission_review(encode(review())).uid == UID


def test_update_with_old_object() -> None:
    old = copy.deepcopy(DEPLOYMENT)
    old["spec"]["replicas"] = 1
    request = parse_admission_review(review(operation="UPDATE", oldObject=old))
    assert request.operation == "UPDATE"
    assert request.old_object == old
    assert request.object == DEPLOYMENT


def test_scale_subresource() -> None:
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "spec": {"replicas": 5}}
    request = parse_admission_review(
        review(
            operation="UPDATE",
            kind={"group": "autoscaling", "version": "v1", "kind": "Scale"},
            subResource="scale",
            requestSubResource="scale",
            object=scale,
            oldObject={**scale, "spec": {"replicas": 2}},
        )
    )
    assert request.sub_resource == request.request_sub_resource == "scale"
    assert request.gvk == "autoscaling/v1, Kind=Scale"
    assert request.gvr == "apps/v1, Resource=deployments"
    assert request.object["spec"]["replicas"] == 5  # type: ignore[index]


def test_dry_run_and_delete() -> None:
    request = parse_admission_review(review(operation="DELETE", dryRun=True, object=None, oldObject=DEPLOYMENT))
    assert request.dry_run is True
    assert request.object is None
    assert request.old_object == DEPLOYMENT


def test_core_group_and_minimal_request() -> None:
    body = {
        "apiVersion": ADMISSION_V1,
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CONNECT",
        },
    }
    request = parse_admission_review(body)
    assert request.kind == {"group": "", "version": "v1", "kind": "Pod"}
    assert request.gvk == "v1, Kind=Pod"
    assert request.gvr == "v1, Resource=pods"
    assert request.user_info == {"username": "", "uid": "", "groups": [], "extra": {}}
    assert request.request_kind is None and request.request_resource is None
    assert request.object is request.old_object is request.options is None
    assert request.dry_run is False
    assert request.name == request.namespace == ""


def test_v1beta1_is_accepted_and_echoed() -> None:
    body = review()
    body["apiVersion"] = ADMISSION_V1BETA1
    request = parse_admission_review(body)
    assert request.api_version == ADMISSION_V1BETA1
    assert allow(request)["apiVersion"] == ADMISSION_V1BETA1


def test_unknown_fields_are_ignored() -> None:
    body = review(somethingNew={"x": 1})
    body["response"] = {"uid": "ignored"}
    assert parse_admission_review(body).uid == UID


def test_request_is_frozen() -> None:
    request = parse_admission_review(review())
    with pytest.raises(AttributeError):
        request.uid = "other"  # type: ignore[misc]


# --------------------------------------------------------------- malformed reviews

MALFORMED: list[tuple[object, str]] = [
    (b"", "body is not valid JSON"),
    (b"{", "body is not valid JSON"),
    (b"\xff\xfe", "body is not valid UTF-8"),
    ("[1, 2]", "AdmissionReview must be a JSON object, not array"),
    ("null", "AdmissionReview must be a JSON object, not null"),
    ('"review"', "AdmissionReview must be a JSON object, not string"),
    ('{"apiVersion": NaN}', "body is not valid JSON"),
    ("[" * 100_000, "body is not valid JSON"),
    (42, "body must be bytes, str or a mapping, not int"),
    (None, "body must be bytes, str or a mapping, not NoneType"),
    (without(review(), "apiVersion"), "apiVersion is required"),
    ({**review(), "apiVersion": "admission.k8s.io/v2"}, "apiVersion must be admission.k8s.io/v1"),
    ({**review(), "apiVersion": 1}, "apiVersion must be admission.k8s.io/v1"),
    ({**review(), "kind": "Review"}, "kind must be 'AdmissionReview'"),
    (without(review(), "kind"), "kind must be 'AdmissionReview', not None"),
    (without(review(), "request"), "request is required"),
    ({**review(), "request": None}, "request is required"),
    ({**review(), "request": []}, "request must be an object, not array"),
    ({**review(), "request": without(review()["request"], "uid")}, "request.uid is required"),
    (review(uid=""), "request.uid is required"),
    (review(uid=None), "request.uid is required"),
    (review(uid=7), "request.uid must be a string, not number"),
    (review(operation="PATCH"), "request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, not 'PATCH'"),
    (review(operation="create"), "request.operation must be one of"),
    (review(operation=1), "request.operation must be a string, not number"),
    ({**review(), "request": without(review()["request"], "operation")}, "request.operation is required"),
    (review(object=[]), "request.object must be an object or null, not array"),
    (review(object="{}"), "request.object must be an object or null, not string"),
    (review(oldObject=5), "request.oldObject must be an object or null, not number"),
    (review(options=True), "request.options must be an object or null, not boolean"),
    (review(dryRun="true"), "request.dryRun must be a boolean, not string"),
    (review(dryRun=1), "request.dryRun must be a boolean, not number"),
    (review(kind="Deployment"), "request.kind must be an object, not string"),
    (review(kind=None), "request.kind is required"),
    (review(kind={"group": "apps", "version": "v1"}), "request.kind.kind is required"),
    (review(kind={"group": "apps", "kind": "Deployment"}), "request.kind.version is required"),
    (review(kind={"group": 1, "version": "v1", "kind": "Deployment"}), "request.kind.group must be a string"),
    (review(resource=[]), "request.resource must be an object, not array"),
    (review(resource={"version": "v1"}), "request.resource.resource is required"),
    (review(requestKind="x"), "request.requestKind must be an object, not string"),
    (review(requestResource={"version": "v1", "resource": 3}), "request.requestResource.resource must be a string"),
    (review(subResource=["scale"]), "request.subResource must be a string, not array"),
    (review(requestSubResource=1), "request.requestSubResource must be a string, not number"),
    (review(namespace={}), "request.namespace must be a string, not object"),
    (review(name=False), "request.name must be a string, not boolean"),
    (review(userInfo="alice"), "request.userInfo must be an object, not string"),
    (review(userInfo={"username": 1}), "request.userInfo.username must be a string"),
    (review(userInfo={"groups": "admins"}), "request.userInfo.groups must be an array of strings"),
    (review(userInfo={"groups": [1]}), "request.userInfo.groups must be an array of strings"),
    (review(userInfo={"extra": []}), "request.userInfo.extra must be an object, not array"),
    (review(userInfo={"extra": {"k": "v"}}), "request.userInfo.extra['k'] must be an array of strings"),
]


@pytest.mark.parametrize(("body", "message"), MALFORMED)
def test_malformed_reviews_raise_admission_review_error(body: object, message: str) -> None:
    with pytest.raises(AdmissionReviewError) as info:
        parse_admission_review(body)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_admission_review_error_is_a_value_error() -> None:
    assert issubclass(AdmissionReviewError, ValueError)


# ---------------------------------------------------------------------- responses


@pytest.fixture
def request_() -> AdmissionRequest:
    return parse_admission_review(review())


def test_allow(request_: AdmissionRequest) -> None:
    assert allow(request_) == {
        "apiVersion": ADMISSION_V1,
        "kind": "AdmissionReview",
        "response": {"uid": UID, "allowed": True},
    }
    assert allow(request_, warnings=["old image"])["response"]["warnings"] == ["old image"]


def test_deny(request_: AdmissionRequest) -> None:
    assert deny(request_, "replicas must be >= 3") == {
        "apiVersion": ADMISSION_V1,
        "kind": "AdmissionReview",
        "response": {
            "uid": UID,
            "allowed": False,
            "status": {"code": 403, "message": "replicas must be >= 3", "status": "Failure"},
        },
    }
    response = deny(request_, "bad", code=422, reason="Invalid", warnings=("w1", "w2"))["response"]
    assert response["status"] == {"code": 422, "message": "bad", "reason": "Invalid", "status": "Failure"}
    assert response["warnings"] == ["w1", "w2"]
    assert response["uid"] == UID


@pytest.mark.parametrize("code", [200, 302, 600, True, "403", 403.0])
def test_deny_rejects_non_error_codes(request_: AdmissionRequest, code: object) -> None:
    with pytest.raises(ValueError):
        deny(request_, "no", code=code)  # type: ignore[arg-type]


def test_response_builders_validate_arguments(request_: AdmissionRequest) -> None:
    with pytest.raises(TypeError):
        allow(request_, warnings="not a list")
    with pytest.raises(TypeError):
        allow(request_, warnings=[1])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        allow({"uid": UID})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        deny(request_, 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        deny(request_, "no", reason=1)  # type: ignore[arg-type]


def decode_patch(review_response: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(review_response["response"]["patch"]))


def test_patch_encodes_operations_as_base64_compact_json(request_: AdmissionRequest) -> None:
    operations = [
        {"op": "add", "path": "/metadata/labels/team", "value": "payments"},
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "remove", "path": "/metadata/annotations~1x"},
        {"op": "move", "from": "/a", "path": "/b"},
        {"op": "copy", "from": "/a", "path": "/c"},
        {"op": "test", "path": "/d", "value": None},
        {"op": "add", "path": "/metadata/labels/name", "value": "caf\u00e9"},
    ]
    result = patch(request_, operations, warnings=["mutated"])
    response = result["response"]
    assert result["apiVersion"] == ADMISSION_V1 and result["kind"] == "AdmissionReview"
    assert response["uid"] == UID
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert response["warnings"] == ["mutated"]
    assert decode_patch(result) == operations
    raw = base64.b64decode(response["patch"]).decode("utf-8")
    assert " " not in raw.replace("caf\u00e9", "")
    assert raw == json.dumps(operations, separators=(",", ":"), ensure_ascii=False)


def test_empty_patch_is_plain_allow(request_: AdmissionRequest) -> None:
    assert patch(request_, []) == allow(request_)
    assert "patch" not in patch(request_, (), warnings=["w"])["response"]


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        ([{"op": "delete", "path": "/a"}], "operations[0].op must be one of"),
        ([{"path": "/a"}], "operations[0].op must be one of"),
        ([{"op": "add", "path": "a", "value": 1}], "operations[0].path must be a JSON pointer"),
        ([{"op": "add", "value": 1}], "operations[0].path must be a JSON pointer"),
        ([{"op": "remove", "path": "/a"}, {"op": "replace", "path": "/a"}], "operations[1] (replace) needs a value"),
        ([{"op": "move", "path": "/a"}], "operations[0].from must be a JSON pointer"),
        ([{"op": "add", "path": "/a", "value": float("nan")}], "not JSON-serialisable"),
        ([{"op": "add", "path": "/a", "value": object()}], "not JSON-serialisable"),
    ],
)
def test_patch_rejects_bad_operations(request_: AdmissionRequest, operations: list[Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        patch(request_, operations)
    assert message in str(info.value)


def test_patch_rejects_non_sequences_and_non_mapping_operations(request_: AdmissionRequest) -> None:
    with pytest.raises(TypeError):
        patch(request_, {"op": "add", "path": "/a", "value": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"operations\[0\] must be a mapping"):
        patch(request_, ["add"])  # type: ignore[list-item]


# ------------------------------------------------------------------ json_patch_diff


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def resolve(doc: Any, path: str) -> tuple[Any, str | int]:
    """Parent container and final token of an RFC 6901 pointer (an independent reference)."""
    tokens = [unescape(t) for t in path.split("/")[1:]]
    parent = doc
    for token in tokens[:-1]:
        parent = parent[int(token)] if isinstance(parent, list) else parent[token]
    last = tokens[-1]
    return parent, (int(last) if isinstance(parent, list) else last)


def apply_patch(doc: Any, operations: list[dict[str, Any]]) -> Any:
    doc = copy.deepcopy(doc)
    for operation in operations:
        op, path = operation["op"], operation["path"]
        if path == "":
            assert op == "replace"
            doc = copy.deepcopy(operation["value"])
            continue
        parent, key = resolve(doc, path)
        if op == "add":
            if isinstance(parent, list):
                assert 0 <= key <= len(parent)  # type: ignore[operator]
                parent.insert(key, copy.deepcopy(operation["value"]))  # type: ignore[arg-type]
            else:
                parent[key] = copy.deepcopy(operation["value"])
        elif op == "remove":
            del parent[key]
        elif op == "replace":
            assert (0 <= key < len(parent)) if isinstance(parent, list) else key in parent  # type: ignore[operator]
            parent[key] = copy.deepcopy(operation["value"])
        else:
            raise AssertionError(op)
    return doc


DIFFS = [
    ({}, {}, []),
    ({"a": 1}, {"a": 1}, []),
    ({"a": 1}, {"a": 2}, [{"op": "replace", "path": "/a", "value": 2}]),
    ({"a": 1}, {}, [{"op": "remove", "path": "/a"}]),
    ({}, {"a": {"b": [1]}}, [{"op": "add", "path": "/a", "value": {"b": [1]}}]),
    (
        {"a/b": 1, "c~d": 1},
        {"a/b": 2, "c~d": 2},
        [
            {"op": "replace", "path": "/a~1b", "value": 2},
            {"op": "replace", "path": "/c~0d", "value": 2},
        ],
    ),
    ({"~1": 1}, {}, [{"op": "remove", "path": "/~01"}]),
    ({"a": [1, 2, 3]}, {"a": [1]}, [{"op": "remove", "path": "/a/2"}, {"op": "remove", "path": "/a/1"}]),
    ({"a": [1]}, {"a": [1, 2, 3]}, [{"op": "add", "path": "/a/1", "value": 2}, {"op": "add", "path": "/a/2", "value": 3}]),
    (
        {"a": [1, {"x": 1}]},
        {"a": [0, {"x": 2}]},
        [
            {"op": "replace", "path": "/a/0", "value": 0},
            {"op": "replace", "path": "/a/1/x", "value": 2},
        ],
    ),
    ({"a": 1}, {"a": True}, [{"op": "replace", "path": "/a", "value": True}]),
    ({"a": 0}, {"a": False}, [{"op": "replace", "path": "/a", "value": False}]),
    ({"a": 1}, {"a": 1.0}, []),
    ({"a": None}, {"a": {}}, [{"op": "replace", "path": "/a", "value": {}}]),
    ({"a": {}}, {"a": []}, [{"op": "replace", "path": "/a", "value": []}]),
    ({"a": "1"}, {"a": 1}, [{"op": "replace", "path": "/a", "value": 1}]),
    ({"": 1}, {"": 2}, [{"op": "replace", "path": "/", "value": 2}]),
]


@pytest.mark.parametrize(("old", "new", "expected"), DIFFS)
def test_json_patch_diff(old: dict[str, Any], new: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    ops = json_patch_diff(old, new)
    assert ops == expected
    assert apply_patch(old, ops) == new


def test_json_patch_diff_on_a_mutated_deployment_round_trips_through_patch(request_: AdmissionRequest) -> None:
    mutated = copy.deepcopy(request_.object)
    assert mutated is not None
    mutated["metadata"]["labels"]["team"] = "payments"
    mutated["metadata"]["annotations"] = {"meridian.io/injected": "true"}
    mutated["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "envoy"})
    del mutated["spec"]["replicas"]
    ops = json_patch_diff(request_.object, mutated)  # type: ignore[arg-type]
    assert decode_patch(patch(request_, ops)) == ops
    assert apply_patch(request_.object, ops) == mutated
    assert request_.object == DEPLOYMENT


def test_json_patch_diff_values_do_not_alias_input() -> None:
    new = {"a": {"b": [1]}}
    ops = json_patch_diff({}, new)
    ops[0]["value"]["b"].append(2)
    assert new == {"a": {"b": [1]}}


@pytest.mark.parametrize(("old", "new"), [([], {}), ({}, None), ({1: "a"}, {}), ({}, {1: "a"})])
def test_json_patch_diff_needs_json_objects(old: Any, new: Any) -> None:
    with pytest.raises(TypeError):
        json_patch_diff(old, new)


# ------------------------------------------------------------------------ fuzzing

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(alphabet="ab/~c", max_size=4), json_values, max_size=5)


@settings(max_examples=300)
@given(body=st.binary(max_size=200))
def test_fuzz_arbitrary_bytes_only_raise_admission_review_error(body: bytes) -> None:
    with pytest.raises(AdmissionReviewError):
        parse_admission_review(body)


@settings(max_examples=300)
@given(value=json_values)
def test_fuzz_arbitrary_json_only_raises_admission_review_error(value: Any) -> None:
    for body in (value, json.dumps(value), json.dumps(value).encode()):
        try:
            parse_admission_review(body)
        except AdmissionReviewError:
            pass


REQUEST_FIELDS = [
    "uid",
    "kind",
    "resource",
    "subResource",
    "requestKind",
    "requestResource",
    "requestSubResource",
    "name",
    "namespace",
    "operation",
    "userInfo",
    "object",
    "oldObject",
    "dryRun",
    "options",
]


@settings(max_examples=500)
@given(
    replacements=st.dictionaries(st.sampled_from(REQUEST_FIELDS), json_values, min_size=1, max_size=3),
    envelope=st.dictionaries(st.sampled_from(["apiVersion", "kind", "request"]), json_values, max_size=1),
)
def test_fuzz_corrupted_fields_give_admission_review_error_or_a_typed_request(
    replacements: dict[str, Any], envelope: dict[str, Any]
) -> None:
    body = review(**replacements)
    body.update(envelope)
    try:
        request = parse_admission_review(json.dumps(body))
    except AdmissionReviewError as exc:
        assert str(exc)
        return
    assert isinstance(request.uid, str) and request.uid
    assert request.operation in ("CREATE", "UPDATE", "DELETE", "CONNECT")
    assert isinstance(request.dry_run, bool)
    for value in (request.object, request.old_object, request.options):
        assert value is None or isinstance(value, dict)
    for text in (request.name, request.namespace, request.sub_resource, request.request_sub_resource):
        assert isinstance(text, str)
    assert allow(request)["response"]["uid"] == request.uid


@settings(max_examples=400)
@given(old=json_objects, new=json_objects)
def test_fuzz_json_patch_diff_applies_back(old: dict[str, Any], new: dict[str, Any]) -> None:
    snapshot = copy.deepcopy(old)
    ops = json_patch_diff(old, new)
    assert old == snapshot
    assert apply_patch(old, ops) == new
    assert json_patch_diff(new, new) == []
