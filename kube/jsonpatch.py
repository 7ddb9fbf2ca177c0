"""RFC 6902 JSON Patch over decoded JSON, as Kubernetes applies ``application/json-patch+json``.

Override policies carry patches written by people, so every problem is a
:class:`JsonPatchError` naming the operation and what is wrong, and a patch that fails
part-way changes nothing (the document is copied first).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["OPERATIONS", "JsonPatchError", "apply_patch", "merge_patch", "parse_pointer", "validate_patch"]

OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")


class JsonPatchError(ValueError):
    """A patch is malformed or does not apply to the document."""


def parse_pointer(pointer: Any) -> list[str]:
    """RFC 6901 tokens of ``pointer`` ("" is the whole document)."""
    if not isinstance(pointer, str):
        raise JsonPatchError("path must be a string")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise JsonPatchError(f"path {pointer!r} must start with '/'")
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def _operation_problem(op: Any) -> str | None:
    if not isinstance(op, Mapping):
        return "an operation must be an object"
    name = op.get("op")
    if name not in OPERATIONS:
        return f"op must be one of {', '.join(OPERATIONS)}"
    try:
        parse_pointer(op.get("path"))
        if name in ("move", "copy"):
            parse_pointer(op.get("from"))
    except JsonPatchError as exc:
        return str(exc)
    if name in ("add", "replace", "test") and "value" not in op:
        return f"{name} needs a value"
    return None


def validate_patch(operations: Any) -> dict[int | None, str]:
    """Problems by operation index (``None`` for the patch as a whole); empty when well-formed."""
    if not isinstance(operations, Sequence) or isinstance(operations, (str, bytes)):
        return {None: "a JSON patch is a list of operations"}
    problems: dict[int | None, str] = {}
    for index, op in enumerate(operations):
        problem = _operation_problem(op)
        if problem:
            problems[index] = problem
    return problems


def _index(container: list, token: str, *, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise JsonPatchError(f"{token!r} is not an array index")
    index = int(token)
    if index > len(container) or (index == len(container) and not for_add):
        raise JsonPatchError(f"index {index} is out of range")
    return index


def _parent(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens[:-1]:
        if isinstance(node, list):
            node = node[_index(node, token, for_add=False)]
        elif isinstance(node, dict):
            if token not in node:
                raise JsonPatchError(f"{token!r} does not exist")
            node = node[token]
        else:
            raise JsonPatchError(f"cannot descend into a {type(node).__name__} at {token!r}")
    return node


def _get(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        return document
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    raise JsonPatchError(f"{last!r} does not exist")


def _add(document: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise JsonPatchError(f"cannot add into a {type(parent).__name__}")
    return document


def _remove(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, list):
        parent.pop(_index(parent, last, for_add=False))
    elif isinstance(parent, dict) and last in parent:
        del parent[last]
    else:
        raise JsonPatchError(f"{last!r} does not exist")
    return document


def _apply_one(document: Any, op: Mapping[str, Any]) -> Any:
    name, tokens = op["op"], parse_pointer(op["path"])
    if name == "add":
        return _add(document, tokens, copy.deepcopy(op["value"]))
    if name == "remove":
        return _remove(document, tokens)
    if name == "replace":
        _get(document, tokens)
        return _add(_remove(document, tokens), tokens, copy.deepcopy(op["value"])) if tokens else copy.deepcopy(op["value"])
    if name == "test":
        if _get(document, tokens) != op["value"]:
            raise JsonPatchError("test failed: the value differs")
        return document
    source = parse_pointer(op["from"])
    value = copy.deepcopy(_get(document, source))
    if name == "move":
        if tokens[: len(source)] == source and len(tokens) > len(source):
            raise JsonPatchError("cannot move a value into itself")
        document = _remove(document, source)
    return _add(document, tokens, value)


def apply_patch(document: Any, operations: Sequence[Mapping[str, Any]]) -> Any:
    """``document`` patched; the input is never modified."""
    problems = validate_patch(operations)
    if problems:
        index, problem = next(iter(problems.items()))
        raise JsonPatchError(problem if index is None else f"operation {index}: {problem}")
    result = copy.deepcopy(document)
    for index, op in enumerate(operations):
        try:
            result = _apply_one(result, op)
        except JsonPatchError as exc:
            raise JsonPatchError(f"operation {index} ({op['op']} {op['path']}): {exc}") from None
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (``kubectl patch --type merge``): ``null`` removes a key,
    objects merge recursively, anything else replaces. Neither input is modified."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
