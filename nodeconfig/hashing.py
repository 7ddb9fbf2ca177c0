"""Config hashes that agree byte for byte with Katalyst's.

Agents compare the hash in their node config with the hash of the body they hold, and the
outside conformance suite compares ours with the controller's, so the bytes that are hashed
must be exactly what Go's ``encoding/json`` produces for the same decoded JSON value.

Upstream reference (``kubewharf/katalyst-core``):

* ``pkg/util/kcct.go``, ``KCCTargetResourceGeneral.GenerateConfigHash``: takes a copy of
  ``spec.config`` (an absent or ``null`` config becomes an empty object), removes from the
  object's ``status`` every field that the generic status struct re-emits, copies each
  remaining status field onto the config as ``"status/<field>"``, ``json.Marshal``s the
  result and hashes it.  Older releases hashed ``spec.config`` alone, so a missing config was
  ``null``; the current rule is the one implemented here.
* ``pkg/util/general``, ``GenerateHash``: lowercase hex SHA-256, cut to the first 12 characters.

The Go side is built with the toolchain named in its ``go.mod`` (Go 1.18), so control
characters other than ``\\n``, ``\\r`` and ``\\t`` are written as ``\\u00XX`` (Go 1.22 began
writing ``\\b`` and ``\\f``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CONFIG_HASH_LENGTH",
    "GENERIC_STATUS_FIELDS",
    "config_hash",
    "go_float_repr",
    "go_json_dumps",
    "kind_specific_status",
]

CONFIG_HASH_LENGTH = 12

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# --------------------------------------------------------------------------- strings

_HEX = "0123456789abcdef"


def _build_escapes() -> dict[int, str]:
    table = {i: "\\u00" + _HEX[i >> 4] + _HEX[i & 0xF] for i in range(0x20)}
    table[ord("\n")] = "\\n"
    table[ord("\r")] = "\\r"
    table[ord("\t")] = "\\t"
    table[ord('"')] = '\\"'
    table[ord("\\")] = "\\\\"
    # encoding/json's HTML-safe default (json.Marshal always escapes these)...
    for ch in "<>&":
        table[ord(ch)] = "\\u00" + format(ord(ch), "02x")
    # ...and the two JavaScript line terminators that are valid JSON but break JSONP.
    table[0x2028] = "\\u2028"
    table[0x2029] = "\\u2029"
    # Lone surrogates cannot appear in a Go string decoded from JSON: Go's decoder turns
    # them into U+FFFD, which is then written as a plain character.
    for cp in range(0xD800, 0xE000):
        table[cp] = "\ufffd"
    return table


_ESCAPES = _build_escapes()
_NEEDS_ESCAPE = re.compile("[\x00-\x1f\"\\\\<>&\u2028\u2029\ud800-\udfff]")


def _go_string(text: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:
        return '"' + text + '"'
    return '"' + text.translate(_ESCAPES) + '"'


# ---------------------------------------------------------------------------- numbers


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of a positive finite float and the decimal point position.

    ``repr`` yields the same shortest, closest digit string as Go's ``strconv`` with
    precision -1; ``point`` is where the decimal point sits relative to the digits
    (value = 0.DIGITS x 10**point).
    """
    text = repr(value)
    exponent = 0
    if "e" in text:
        text, exp_text = text.split("e")
        exponent = int(exp_text)
    whole, _, frac = text.partition(".")
    digits = whole + frac
    point = len(whole) + exponent
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    return digits, point


def go_float_repr(value: float) -> str:
    """A float64 as Go's ``encoding/json`` writes it.

    Plain decimal (``strconv`` 'f', shortest digits) unless the magnitude is below 1e-6 or
    at least 1e21, where Go switches to exponent form ('e') and then trims a leading zero
    from a negative two-digit exponent (``1e-07`` becomes ``1e-7``).  Integral values carry
    no ``.0``; negative zero stays ``-0``.
    """
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    digits, point = _shortest_digits(magnitude)
    if magnitude < 1e-6 or magnitude >= 1e21:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        exp = point - 1
        exp_text = f"{abs(exp):02d}"
        if exp < 0 and len(exp_text) == 2 and exp_text[0] == "0":
            exp_text = exp_text[1:]
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{exp_text}"
    if point <= 0:
        body = "0." + "0" * (-point) + digits
    elif point >= len(digits):
        body = digits + "0" * (point - len(digits))
    else:
        body = digits[:point] + "." + digits[point:]
    return sign + body


def _go_int(value: int) -> str:
    """Integers as Kubernetes' JSON decoder holds them: int64, or float64 when out of range."""
    if _INT64_MIN <= value <= _INT64_MAX:
        return str(value)
    try:
        as_float = float(value)
    except OverflowError:
        raise ValueError(f"json: unsupported value: {value} does not fit a float64") from None
    return go_float_repr(as_float)


# ------------------------------------------------------------------------------ values


def _encode(obj: Any, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        out.append(_go_string(obj))
    elif isinstance(obj, int):
        out.append(_go_int(int(obj)))
    elif isinstance(obj, float):
        out.append(go_float_repr(obj))
    elif isinstance(obj, Mapping):
        keys = []
        for key in obj:
            if not isinstance(key, str):
                raise TypeError(f"json: object keys must be strings, not {type(key).__name__}")
            keys.append(key)
        # Go sorts keys by their UTF-8 bytes, which is the same order as by code point.
        keys.sort()
        out.append("{")
        for i, key in enumerate(keys):
            if i:
                out.append(",")
            out.append(_go_string(key))
            out.append(":")
            _encode(obj[key], out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"json: unsupported type: {type(obj).__name__}")


def go_json_dumps(obj: Any) -> bytes:
    """``json.Marshal`` of a decoded-JSON value (``map[string]interface{}`` and friends).

    Compact, keys sorted at every depth, HTML-safe escapes, U+2028/U+2029 escaped, other
    non-ASCII written as UTF-8, numbers as Go prints int64 and float64.
    """
    out: list[str] = []
    _encode(obj, out)
    return "".join(out).encode("utf-8")


# ------------------------------------------------------------------------------ status

# JSON names of katalyst-api's GenericConfigStatus and how each is zero under omitempty.
# Fields tagged without omitempty (the node counters) are always re-emitted by the
# converter, so they are always dropped; the others only when they hold a non-zero value.
GENERIC_STATUS_FIELDS: dict[str, bool] = {
    "targetNodes": False,
    "canaryNodes": False,
    "updatedTargetNodes": False,
    "updatedNodes": False,
    "currentHash": True,
    "collisionCount": True,
    "observedGeneration": True,
    "conditions": True,
}


def _omitted_when_empty(name: str, value: Any) -> bool:
    """Whether Go's struct round trip would leave ``name`` out (so upstream keeps it in the hash)."""
    if value is None:
        return True
    if name == "collisionCount":  # a pointer: any present number is emitted, even 0
        return False
    if name == "currentHash":
        return value == ""
    if name == "observedGeneration":
        return value == 0
    if name == "conditions":
        return isinstance(value, (list, tuple)) and len(value) == 0
    return False


def kind_specific_status(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status fields upstream folds into the hash: ``status`` minus what the generic struct re-emits.

    Upstream converts ``status`` to ``GenericConfigStatus`` and back, then deletes every key
    that came back.  An omitempty generic field holding its zero value therefore does *not*
    come back and stays in the hash (e.g. ``observedGeneration: 0``); this mirrors that.
    """
    if not status:
        return {}
    result: dict[str, Any] = {}
    for key, value in status.items():
        omitempty = GENERIC_STATUS_FIELDS.get(key)
        if omitempty is None:
            result[key] = value
        elif omitempty and _omitted_when_empty(key, value):
            result[key] = value
    return result


def config_hash(config: Mapping[str, Any] | None, status_extra: Mapping[str, Any] | None = None) -> str:
    """Katalyst's 12-character config hash of a target.

    ``config`` is the target's ``spec.config``; ``None`` hashes as ``{}`` (current upstream).
    ``status_extra`` holds the kind-specific status fields (use :func:`kind_specific_status`
    to derive them from a whole ``status``); each is added at the top level as
    ``"status/<field>"``, replacing a config key of that exact name as upstream's map
    assignment does.  The digest is SHA-256 over :func:`go_json_dumps` of the result.
    """
    value: Any = {} if config is None else config
    if status_extra:
        if not isinstance(value, Mapping):
            raise TypeError("config must be an object when status fields are added to the hash")
        merged = dict(value)
        for key, item in status_extra.items():
            merged[f"status/{key}"] = item
        value = merged
    return hashlib.sha256(go_json_dumps(value)).hexdigest()[:CONFIG_HASH_LENGTH]
