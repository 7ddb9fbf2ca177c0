"""Helpers for admission webhooks: parse an ``AdmissionReview``, build the review to send back.

The API server gives a webhook one chance per request and fails closed or open depending on
the webhook's ``failurePolicy``, so a malformed review must turn into one predictable
exception (:class:`AdmissionReviewError`, a ``ValueError``) that the view can map to a 400,
never into a ``KeyError`` or ``TypeError`` deep inside a handler.

Accepted envelopes are ``admission.k8s.io/v1`` and, leniently, ``admission.k8s.io/v1beta1``:
the request schema is the same in both, and the API server requires the response to carry
the apiVersion it sent, so :class:`AdmissionRequest` records it and every response builder
echoes it.  Unknown fields are ignored, as Go's JSON decoder ignores them.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube.field import json_type

__all__ = [
    "ADMISSION_V1",
    "ADMISSION_V1BETA1",
    "OPERATIONS",
    "AdmissionRequest",
    "AdmissionReviewError",
    "allow",
    "deny",
    "json_patch_diff",
    "parse_admission_review",
    "patch",
]

ADMISSION_V1 = "admission.k8s.io/v1"
ADMISSION_V1BETA1 = "admission.k8s.io/v1beta1"
_API_VERSIONS = (ADMISSION_V1, ADMISSION_V1BETA1)
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
_PATCH_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})
_PATCH_OPS_WITH_VALUE = frozenset({"add", "replace", "test"})
_PATCH_OPS_WITH_FROM = frozenset({"move", "copy"})


class AdmissionReviewError(ValueError):
    """The body is not an AdmissionReview the API server could have sent."""


@dataclass(frozen=True, kw_only=True)
class AdmissionRequest:
    """The ``request`` of an AdmissionReview, validated and with Python names.

    ``kind``/``request_kind`` hold ``group``/``version``/``kind`` and ``resource``/
    ``request_resource`` hold ``group``/``version``/``resource``, each with ``group``
    defaulting to ``""`` (the core group).  ``user_info`` always has ``username``, ``uid``,
    ``groups`` and ``extra``.
    """

    uid: str
    kind: Mapping[str, str]
    resource: Mapping[str, str]
    operation: str
    sub_resource: str = ""
    request_kind: Mapping[str, str] | None = None
    request_resource: Mapping[str, str] | None = None
    request_sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    user_info: Mapping[str, Any] = field(default_factory=dict)
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    dry_run: bool = False
    options: Mapping[str, Any] | None = None
    api_version: str = ADMISSION_V1

    @property
    def gvk(self) -> str:
        """``apps/v1, Kind=Deployment`` (Go's ``GroupVersionKind.String()``, minus the lone ``/`` of the core group)."""
        return f"{_group_version(self.kind)}, Kind={self.kind['kind']}"

    @property
    def gvr(self) -> str:
        """``apps/v1, Resource=deployments``, formatted like :attr:`gvk`."""
        return f"{_group_version(self.resource)}, Resource={self.resource['resource']}"

    @property
    def username(self) -> str:
        return self.user_info.get("username", "")


def _group_version(gv: Mapping[str, str]) -> str:
    return f"{gv['group']}/{gv['version']}" if gv.get("group") else gv["version"]


# ----------------------------------------------------------------------------- parsing


def _type_name(value: object) -> str:
    return json_type(value) or type(value).__name__


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _load(body: object) -> object:
    if isinstance(body, Mapping):
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AdmissionReviewError(f"body is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    elif isinstance(body, str):
        text = body
    else:
        raise AdmissionReviewError(f"body must be bytes, str or a mapping, not {type(body).__name__}")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise AdmissionReviewError("body is not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise AdmissionReviewError(f"body is not valid JSON: {exc}") from None


def _string(obj: Mapping[str, Any], key: str, path: str, required: bool = False) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise AdmissionReviewError(f"{path}.{key} is required")
        return ""
    if not isinstance(value, str):
        raise AdmissionReviewError(f"{path}.{key} must be a string, not {_type_name(value)}")
    return value


def _object(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise AdmissionReviewError(f"{path}.{key} must be an object or null, not {_type_name(value)}")
    return value


def _group_version_thing(obj: Mapping[str, Any], key: str, thing: str, required: bool) -> dict[str, str] | None:
    """A GroupVersionKind or GroupVersionResource: the group may be empty (core), the rest may not."""
    path = f"request.{key}"
    value = obj.get(key)
    if value is None:
        if required:
            raise AdmissionReviewError(f"{path} is required")
        return None
    if not isinstance(value, Mapping):
        raise AdmissionReviewError(f"{path} must be an object, not {_type_name(value)}")
    return {
        "group": _string(value, "group", path),
        "version": _string(value, "version", path, required=True),
        thing: _string(value, thing, path, required=True),
    }


def _string_list(value: object, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise AdmissionReviewError(f"{path} must be an array of strings")
    return list(value)


def _user_info(request: Mapping[str, Any]) -> dict[str, Any]:
    value = request.get("userInfo")
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise AdmissionReviewError(f"request.userInfo must be an object, not {_type_name(value)}")
    extra = value.get("extra")
    if extra is None:
        extra = {}
    if not isinstance(extra, Mapping):
        raise AdmissionReviewError(f"request.userInfo.extra must be an object, not {_type_name(extra)}")
    return {
        "username": _string(value, "username", "request.userInfo"),
        "uid": _string(value, "uid", "request.userInfo"),
        "groups": _string_list(value.get("groups"), "request.userInfo.groups"),
        "extra": {k: _string_list(v, f"request.userInfo.extra[{k!r}]") for k, v in extra.items()},
    }


def _operation(request: Mapping[str, Any]) -> str:
    operation = _string(request, "operation", "request", required=True)
    if operation not in OPERATIONS:
        raise AdmissionReviewError(f"request.operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    return operation


def _dry_run(request: Mapping[str, Any]) -> bool:
    value = request.get("dryRun")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise AdmissionReviewError(f"request.dryRun must be a boolean, not {_type_name(value)}")
    return value


def _envelope(review: object) -> tuple[str, Mapping[str, Any]]:
    if not isinstance(review, Mapping):
        raise AdmissionReviewError(f"AdmissionReview must be a JSON object, not {_type_name(review)}")
    api_version = review.get("apiVersion")
    if api_version is None or api_version == "":
        raise AdmissionReviewError("apiVersion is required")
    if api_version not in _API_VERSIONS:
        raise AdmissionReviewError(f"apiVersion must be {ADMISSION_V1} (or {ADMISSION_V1BETA1}), not {api_version!r}")
    kind = review.get("kind")
    if kind != "AdmissionReview":
        raise AdmissionReviewError(f"kind must be 'AdmissionReview', not {kind!r}")
    request = review.get("request")
    if request is None:
        raise AdmissionReviewError("request is required")
    if not isinstance(request, Mapping):
        raise AdmissionReviewError(f"request must be an object, not {_type_name(request)}")
    return api_version, request


def parse_admission_review(body: bytes | str | Mapping[str, Any]) -> AdmissionRequest:
    """Validate an AdmissionReview (raw body or decoded JSON) and return its request."""
    api_version, request = _envelope(_load(body))
    return AdmissionRequest(
        uid=_string(request, "uid", "request", required=True),
        kind=_group_version_thing(request, "kind", "kind", required=True),  # type: ignore[arg-type]
        resource=_group_version_thing(request, "resource", "resource", required=True),  # type: ignore[arg-type]
        sub_resource=_string(request, "subResource", "request"),
        request_kind=_group_version_thing(request, "requestKind", "kind", required=False),
        request_resource=_group_version_thing(request, "requestResource", "resource", required=False),
        request_sub_resource=_string(request, "requestSubResource", "request"),
        name=_string(request, "name", "request"),
        namespace=_string(request, "namespace", "request"),
        operation=_operation(request),
        user_info=_user_info(request),
        object=_object(request, "object", "request"),
        old_object=_object(request, "oldObject", "request"),
        dry_run=_dry_run(request),
        options=_object(request, "options", "request"),
        api_version=api_version,
    )


# --------------------------------------------------------------------------- responses


def _warnings(warnings: Sequence[str]) -> list[str]:
    if isinstance(warnings, str) or not all(isinstance(w, str) for w in warnings):
        raise TypeError("warnings must be a sequence of strings")
    return list(warnings)


def _review(request: AdmissionRequest, response: dict[str, Any], warnings: Sequence[str]) -> dict[str, Any]:
    if not isinstance(request, AdmissionRequest):
        raise TypeError(f"request must be an AdmissionRequest, not {type(request).__name__}")
    response = {"uid": request.uid, **response}
    listed = _warnings(warnings)
    if listed:
        response["warnings"] = listed
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}


def allow(request: AdmissionRequest, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """Admit the request unchanged."""
    return _review(request, {"allowed": True}, warnings)


def deny(
    request: AdmissionRequest,
    message: str,
    code: int = 403,
    reason: str | None = None,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """Refuse the request; ``message`` is what ``kubectl`` shows the user.

    ``code`` becomes the HTTP status of the user's request, so it must be a 4xx/5xx code;
    ``reason`` is a ``metav1.StatusReason`` such as ``"Forbidden"`` or ``"Invalid"``.
    """
    if not isinstance(message, str):
        raise TypeError("message must be a string")
    if isinstance(code, bool) or not isinstance(code, int) or not 400 <= code <= 599:
        raise ValueError(f"code must be an HTTP error status (400-599), not {code!r}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError("reason must be a string or None")
    status: dict[str, Any] = {"code": code, "message": message, "status": "Failure"}
    if reason:
        status["reason"] = reason
    return _review(request, {"allowed": False, "status": status}, warnings)


def _json_pointer(value: object, where: str) -> str:
    if not isinstance(value, str) or (value and not value.startswith("/")):
        raise ValueError(f"{where} must be a JSON pointer ('' or starting with '/'), not {value!r}")
    return value


def _checked_operation(index: int, operation: object) -> dict[str, Any]:
    where = f"operations[{index}]"
    if not isinstance(operation, Mapping):
        raise TypeError(f"{where} must be a mapping, not {type(operation).__name__}")
    op = operation.get("op")
    if op not in _PATCH_OPS:
        raise ValueError(f"{where}.op must be one of {', '.join(sorted(_PATCH_OPS))}, not {op!r}")
    _json_pointer(operation.get("path"), f"{where}.path")
    if op in _PATCH_OPS_WITH_VALUE and "value" not in operation:
        raise ValueError(f"{where} ({op}) needs a value")
    if op in _PATCH_OPS_WITH_FROM:
        _json_pointer(operation.get("from"), f"{where}.from")
    return dict(operation)


def patch(request: AdmissionRequest, operations: Sequence[Mapping[str, Any]], warnings: Sequence[str] = ()) -> dict[str, Any]:
    """Admit the request with an RFC 6902 JSON Patch applied (mutating webhooks only).

    An empty patch is sent as a plain allow: the API server treats a ``patchType`` with no
    operations as an error on some versions, and there is nothing to apply anyway.
    """
    if isinstance(operations, (str, bytes, Mapping)):
        raise TypeError("operations must be a sequence of JSON Patch operations")
    checked = [_checked_operation(i, op) for i, op in enumerate(operations)]
    if not checked:
        return allow(request, warnings)
    try:
        payload = json.dumps(checked, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"operations are not JSON-serialisable: {exc}") from None
    encoded = base64.b64encode(payload.encode("utf-8")).decode("ascii")
    return _review(request, {"allowed": True, "patchType": "JSONPatch", "patch": encoded}, warnings)


# --------------------------------------------------------------------------- JSON Patch


def _escape(token: str) -> str:
    """RFC 6901: ``~`` first, or the ``~1`` produced for ``/`` would be escaped again."""
    return token.replace("~", "~0").replace("/", "~1")


def _is_array(value: object) -> bool:
    return isinstance(value, (list, tuple))


def _same_scalar(old: object, new: object) -> bool:
    """JSON equality: ``True`` is not ``1`` even though Python says so; ``1`` and ``1.0`` are one number."""
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is type(new) and old == new
    return bool(old == new)


def _diff_objects(old: Mapping[str, Any], new: Mapping[str, Any], path: str, ops: list[dict[str, Any]]) -> None:
    for key in (*old, *new):
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys must be strings, found {key!r} under {path or 'the root'}")
    for key, old_value in old.items():
        child = f"{path}/{_escape(key)}"
        if key in new:
            _diff(old_value, new[key], child, ops)
        else:
            ops.append({"op": "remove", "path": child})
    for key, new_value in new.items():
        if key not in old:
            ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": copy.deepcopy(new_value)})


def _diff_arrays(old: Sequence[Any], new: Sequence[Any], path: str, ops: list[dict[str, Any]]) -> None:
    """Index-wise diff; removals run from the end so earlier indices stay valid while applying."""
    common = min(len(old), len(new))
    for i in range(common):
        _diff(old[i], new[i], f"{path}/{i}", ops)
    for i in range(len(old) - 1, common - 1, -1):
        ops.append({"op": "remove", "path": f"{path}/{i}"})
    for i in range(common, len(new)):
        ops.append({"op": "add", "path": f"{path}/{i}", "value": copy.deepcopy(new[i])})


def _diff(old: Any, new: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        _diff_objects(old, new, path, ops)
    elif _is_array(old) and _is_array(new):
        _diff_arrays(old, new, path, ops)
    elif isinstance(old, (Mapping, list, tuple)) or isinstance(new, (Mapping, list, tuple)) or not _same_scalar(old, new):
        ops.append({"op": "replace", "path": path, "value": copy.deepcopy(new)})


def json_patch_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RFC 6902 operations (add/remove/replace) that turn ``old`` into ``new``.

    Meant for mutating webhooks that edit a copy of ``request.object`` and need the patch
    the API server expects; values in the result are copies, never aliases of ``new``.
    """
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        raise TypeError("json_patch_diff compares two JSON objects")
    ops: list[dict[str, Any]] = []
    _diff(old, new, "", ops)
    return ops
