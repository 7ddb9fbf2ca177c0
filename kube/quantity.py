"""Kubernetes resource quantities with the semantics of ``k8s.io/apimachinery/pkg/api/resource``.

The console compares, sums and prints quantities that the API server also parses, so this
module reproduces upstream ``ParseQuantity`` / ``Quantity.String()`` / ``Add`` / ``Cmp`` /
``Value`` rather than a tidier model of "a number with a unit".  Values are exact
(``coefficient * 10**exponent`` with Python integers); no float is ever involved.

Upstream behaviour kept on purpose, even where it surprises:

* A number part with no digits is zero: ``"."``, ``"+"``, ``"-"``, ``"m"``, ``"Ki"``, ``"Ti"``
  all parse as 0, while ``"Pi"``, ``"Ei"`` and ``"e-10"`` are errors (upstream only rejects
  them on its slow path, which those suffixes reach).
* Parsing rounds a non-zero value *away from zero* to nano precision: ``"0.1n"`` -> ``1n``,
  ``"-0.1n"`` -> ``-1n``.
* Only BinarySI values are capped, at ``2**63 - 1`` ("9Ei" parses to 9223372036854775807);
  decimal values are unbounded.  A BinarySI value between -1 and 1 parses as DecimalSI.
* ``str()`` is the canonical form upstream prints after arithmetic: BinarySI falls back to
  DecimalSI below 1024 or for non-integers, DecimalSI falls back to ``e`` notation beyond
  ``E`` (10**18) as the current upstream does.  (Upstream's ``String()`` of a freshly parsed
  value echoes the input for a few spellings it mistakes for canonical, e.g. ``"1E3"``,
  ``"+1"``, ``"01"``; here ``str()`` is canonical always.)
* A BinarySI whole number that is not a multiple of 1024 prints as a bare number, which reads
  back as DecimalSI: ``"9.765625Ki"`` prints ``10000``, and ``10000`` prints ``10k``.
* ``value()``/``milli_value()``/``scaled_value()`` round away from zero like upstream's
  int64 fast path (``negativeScaleInt64``): ``-1500m`` has value -2.

Deliberate differences, each because upstream's behaviour there is a wrap-around bug:

* Integers are exact Python ints: nothing overflows int64; ``value()`` of a huge quantity is
  exact instead of "undefined".
* An ``e``/``E`` exponent outside the int32 range raises QuantityError (upstream truncates it
  to int32, so ``1e4294967296`` would parse as ``1``).
* A BinarySI value of 1024**7 or more prints with the ``Ei`` suffix (``1024Ei``) instead of
  losing its suffix; such values only arise from arithmetic, parsing caps them.
* Arithmetic that would need more than ``MAX_EXACT_DIGITS`` digits to align two exponents
  (``1e2000000000 + 1``) raises QuantityError instead of exhausting memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Any, NoReturn

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "FORMATS",
    "MAX_BINARY_SI",
    "MAX_EXACT_DIGITS",
    "Quantity",
    "QuantityError",
    "parse_quantity",
    "sum_quantities",
]

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"
FORMATS = frozenset({DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT})

MAX_BINARY_SI = 2**63 - 1
MAX_EXACT_DIGITS = 100_000

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_ERR_NUMERIC = "unable to parse numeric part of quantity"
_ERR_SUFFIX = "unable to parse quantity's suffix"

_DECIMAL_SUFFIX_BY_EXPONENT = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIX_BY_POWER = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
# What a suffix means when parsing (base, exponent, format), read off the two tables above.
_SUFFIXES: dict[str, tuple[int, int, str]] = {
    **{suffix: (10, exponent, DECIMAL_SI) for exponent, suffix in _DECIMAL_SUFFIX_BY_EXPONENT.items()},
    **{suffix: (2, 10 * power, BINARY_SI) for power, suffix in enumerate(_BINARY_SUFFIX_BY_POWER) if suffix},
}

# Upstream's scanner, as one pattern: sign, digits, optional fraction, then the suffix
# letters, an optional sign and digits (the suffix is validated separately).
_SCAN = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)").fullmatch
_SIGNED_DIGITS = re.compile(r"[+-]?0*([0-9]+)").fullmatch

_POW10 = tuple(10**i for i in range(64))
_INT_STR_SAFE = 10**4000
_INT_STR_SAFE_DIGITS = 4000
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)

_CACHE_LIMIT = 4096
_CACHE_KEY_MAX_LEN = 64
_cache: dict[str, Quantity] = {}


class QuantityError(ValueError):
    """A quantity that upstream would reject, or arithmetic that cannot be done exactly."""

    def __init__(self, message: str, text: object = None) -> None:
        super().__init__(message)
        self.text = text


_SAFE_REPR_TYPES = (str, bytes, int, float, bool, type(None), Decimal)


def _describe(text: object) -> str:
    """A short rendering of bad input for error messages.

    Only built-in types are repr()'d: an arbitrary object's ``__repr__`` could raise, and
    bad input must never surface as anything but QuantityError.
    """
    if type(text) not in _SAFE_REPR_TYPES:
        return f"<{type(text).__name__} object>"
    if isinstance(text, str) and len(text) > 80:
        return repr(text[:60]) + f"... ({len(text)} characters)"
    return repr(text)


def _invalid(text: object, reason: str) -> QuantityError:
    return QuantityError(f"invalid quantity {_describe(text)}: {reason}", text)


def _pow10(n: int) -> int:
    return _POW10[n] if n < 64 else 10**n


def _aligned_pow10(gap: int) -> int:
    """10**gap for aligning exponents, refused when the result could not be held exactly."""
    if gap > MAX_EXACT_DIGITS:
        raise QuantityError(
            f"quantities differ by 10**{gap}; exact arithmetic on them would need more than {MAX_EXACT_DIGITS} digits"
        )
    return _pow10(gap)


def _int_from_digits(digits: str) -> int:
    """int() of a decimal digit string of any length (int() refuses over 4300 digits)."""
    if len(digits) <= _INT_STR_SAFE_DIGITS:
        return int(digits)
    return int(Decimal(digits))


def _int_text(n: int) -> str:
    """str() of an int of any size (str() refuses over 4300 digits)."""
    if -_INT_STR_SAFE < n < _INT_STR_SAFE:
        return str(n)
    return str(Decimal(n))


def _normalize(coef: int, exp: int) -> tuple[int, int]:
    """Move every trailing zero of the coefficient into the exponent.

    A normalized pair is unique per value, which makes ``==`` and ``hash`` O(1) and gives
    the canonical printer its mantissa directly.  Long zero runs are removed in
    power-of-two chunks so that a value like ``10**100000`` does not take quadratic time.
    """
    if coef == 0:
        return 0, 0
    if coef % 10:
        return coef, exp
    coef //= 10
    exp += 1
    if coef % 10:
        return coef, exp
    width = 1
    while coef % _pow10(width * 2) == 0:
        width *= 2
    while width:
        chunk = _pow10(width)
        if coef % chunk == 0:
            coef //= chunk
            exp += width
        width //= 2
    return coef, exp


def _compare(c1: int, e1: int, c2: int, e2: int) -> int:
    """Three-way compare of two exact values without building huge aligned integers.

    When the exponents are further apart than the smaller side's coefficient has bits,
    the magnitudes already decide (|c| < 2**bits <= 10**bits), as upstream's cmpDec does.
    """
    if e1 != e2 and c1 and c2:
        if (c1 > 0) != (c2 > 0):
            return 1 if c1 > 0 else -1
        if e1 > e2:
            gap = e1 - e2
            if gap >= c2.bit_length():
                return 1 if c1 > 0 else -1
            c1 *= _pow10(gap)
        else:
            gap = e2 - e1
            if gap >= c1.bit_length():
                return -1 if c1 > 0 else 1
            c2 *= _pow10(gap)
    return (c1 > c2) - (c1 < c2)


def _add(c1: int, e1: int, c2: int, e2: int) -> tuple[int, int]:
    if not c2:
        return c1, e1
    if not c1:
        return c2, e2
    if e1 == e2:
        return _normalize(c1 + c2, e1)
    if e1 > e2:
        return _normalize(c1 * _aligned_pow10(e1 - e2) + c2, e2)
    return _normalize(c1 + c2 * _aligned_pow10(e2 - e1), e1)


def _check_format(fmt: object) -> str:
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise QuantityError(f"unknown quantity format {_describe(fmt)}; expected one of {sorted(FORMATS)}")
    return fmt  # type: ignore[return-value]


def _check_int(value: object, what: str) -> int:
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise QuantityError(f"{what} must be an int, got {_describe(value)}")
    return int.__int__(value)  # type: ignore[arg-type]


class Quantity:
    """An immutable, exact Kubernetes quantity that remembers its serialization format.

    Build one with :func:`parse_quantity`, :meth:`from_int`, :meth:`from_milli` or
    :meth:`from_scaled`.  Equality, ordering and hashing use the value only (like upstream
    ``Cmp``/``Equal``), so ``parse_quantity("1Gi") == parse_quantity("1073741824")``;
    the format only affects ``str()`` and is inherited through arithmetic the way
    upstream ``Add``/``Sub`` inherit it (the left operand's, or the right one's when the
    left is zero).
    """

    __slots__ = ("_coef", "_exp", "_format", "_text")

    _coef: int
    _exp: int
    _format: str
    _text: str | None

    def __new__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("use parse_quantity(), Quantity.from_int(), Quantity.from_milli() or Quantity.from_scaled()")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Quantity is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Quantity is immutable")

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Same as :func:`parse_quantity`."""
        return parse_quantity(text)

    @classmethod
    def from_int(cls, value: int, format: str = DECIMAL_SI) -> Quantity:
        """``value`` units, like upstream ``NewQuantity``."""
        return _build(*_normalize(_check_int(value, "value"), 0), _check_format(format))

    @classmethod
    def from_milli(cls, value: int, format: str = DECIMAL_SI) -> Quantity:
        """``value / 1000`` units, like upstream ``NewMilliQuantity``."""
        return _build(*_normalize(_check_int(value, "value"), -3), _check_format(format))

    @classmethod
    def from_scaled(cls, value: int, scale: int, format: str = DECIMAL_SI) -> Quantity:
        """``value * 10**scale`` units, like upstream ``NewScaledQuantity``.

        Unlike parsing, this does not round to nano precision (upstream does not either),
        so ``from_scaled(1, -12)`` prints as ``1e-12`` and does not survive a parse.
        """
        return _build(*_normalize(_check_int(value, "value"), _check_int(scale, "scale")), _check_format(format))

    @property
    def format(self) -> str:
        """``"DecimalSI"``, ``"BinarySI"`` or ``"DecimalExponent"``."""
        return self._format

    def is_zero(self) -> bool:
        return self._coef == 0

    def sign(self) -> int:
        return (self._coef > 0) - (self._coef < 0)

    def scaled_value(self, scale: int = 0) -> int:
        """``self / 10**scale`` as an int, rounded away from zero (upstream ``ScaledValue``)."""
        coef = self._coef
        if not coef:
            return 0
        shift = self._exp - _check_int(scale, "scale")
        if shift >= 0:
            if shift > MAX_EXACT_DIGITS:
                raise QuantityError(f"quantity {self} is too large to convert to an exact integer")
            return coef * _pow10(shift)
        down = -shift
        if down >= coef.bit_length():
            return 1 if coef > 0 else -1
        whole, rest = divmod(abs(coef), _pow10(down))
        if rest:
            whole += 1
        return whole if coef > 0 else -whole

    def value(self) -> int:
        """Whole units, rounded away from zero (upstream ``Value``)."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """Thousandths of a unit, rounded away from zero (upstream ``MilliValue``)."""
        return self.scaled_value(-3)

    def as_decimal(self) -> Decimal:
        """The exact value; the Decimal is built without any context rounding."""
        if not self._coef:
            return Decimal(0)
        return Decimal(self._coef).scaleb(self._exp, _EXACT)

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = _canonical(self._coef, self._exp, self._format)
            _set_text(self, text)
        return text

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self._format!r})"

    def __bool__(self) -> bool:
        return self._coef != 0

    def __hash__(self) -> int:
        return hash((self._coef, self._exp))

    def __eq__(self, other: object) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return self._coef == other._coef and self._exp == other._exp

    def __ne__(self, other: object) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return self._coef != other._coef or self._exp != other._exp

    def __lt__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return _compare(self._coef, self._exp, other._coef, other._exp) < 0

    def __le__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return _compare(self._coef, self._exp, other._coef, other._exp) <= 0

    def __gt__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return _compare(self._coef, self._exp, other._coef, other._exp) > 0

    def __ge__(self, other: Quantity) -> bool:
        if type(other) is not Quantity:
            return NotImplemented
        return _compare(self._coef, self._exp, other._coef, other._exp) >= 0

    def __add__(self, other: Quantity) -> Quantity:
        if type(other) is not Quantity:
            return NotImplemented
        fmt = self._format if self._coef else other._format
        return _build(*_add(self._coef, self._exp, other._coef, other._exp), fmt)

    def __radd__(self, other: object) -> Quantity:
        """Accept the ``0`` that builtin ``sum()`` starts from, as upstream's zero value would."""
        if type(other) is int and other == 0:
            return self
        return NotImplemented

    def __sub__(self, other: Quantity) -> Quantity:
        if type(other) is not Quantity:
            return NotImplemented
        fmt = self._format if self._coef else other._format
        return _build(*_add(self._coef, self._exp, -other._coef, other._exp), fmt)

    def __mul__(self, other: int) -> Quantity:
        if type(other) is not int and (isinstance(other, bool) or not isinstance(other, int)):
            return NotImplemented
        return _build(*_normalize(self._coef * int.__int__(other), self._exp), self._format)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return _build(-self._coef, self._exp, self._format)

    def __pos__(self) -> Quantity:
        return self

    def __abs__(self) -> Quantity:
        return self if self._coef >= 0 else -self

    def __copy__(self) -> Quantity:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Quantity:
        return self

    def __reduce__(self) -> tuple[Any, tuple[int, int, str]]:
        return _restore, (self._coef, self._exp, self._format)


_new_object = object.__new__
_set_coef = Quantity._coef.__set__  # type: ignore[attr-defined]
_set_exp = Quantity._exp.__set__  # type: ignore[attr-defined]
_set_format = Quantity._format.__set__  # type: ignore[attr-defined]
_set_text = Quantity._text.__set__  # type: ignore[attr-defined]


def _build(coef: int, exp: int, fmt: str) -> Quantity:
    """Create a Quantity from an already-normalized pair, bypassing the immutability guard."""
    q = _new_object(Quantity)
    _set_coef(q, coef)
    _set_exp(q, exp)
    _set_format(q, fmt)
    _set_text(q, None)
    return q


def _restore(coef: int, exp: int, fmt: str) -> Quantity:
    return _build(*_normalize(coef, exp), _check_format(fmt))


_ZERO = _build(0, 0, DECIMAL_SI)


def sum_quantities(quantities: Iterable[Quantity]) -> Quantity:
    """Sum like upstream accumulating into a zero ``Quantity``: the first non-zero term's format wins.

    An empty iterable gives DecimalSI zero.
    """
    total = _ZERO
    for q in quantities:
        total = total + q
    return total


# ---------------------------------------------------------------------------------------
# Canonical form


def _canonical(coef: int, exp: int, fmt: str) -> str:
    """Upstream ``CanonicalizeBytes``: the largest suffix that keeps every digit."""
    if not coef:
        return "0"
    if fmt == BINARY_SI:
        text = _binary_text(coef, exp)
        if text is not None:
            return text
        fmt = DECIMAL_SI
    shift = exp % 3
    if shift:
        coef *= _POW10[shift]
        exp -= shift
    if fmt == DECIMAL_SI:
        suffix = _DECIMAL_SUFFIX_BY_EXPONENT.get(exp)
        if suffix is not None:
            return _int_text(coef) + suffix
    return _int_text(coef) + (f"e{exp}" if exp else "")


def _binary_text(coef: int, exp: int) -> str | None:
    """The BinarySI spelling, or None when upstream would print DecimalSI instead.

    Upstream prints DecimalSI for |value| < 1024 and for values that are not whole numbers
    (a normalized negative exponent means a fraction).
    """
    if exp < 0:
        return None
    whole = coef * _pow10(exp) if exp else coef
    if -1024 < whole < 1024:
        return None
    power = 0
    while power < 6 and whole % 1024 == 0:
        whole //= 1024
        power += 1
    return _int_text(whole) + _BINARY_SUFFIX_BY_POWER[power]


# ---------------------------------------------------------------------------------------
# Parsing


def parse_quantity(text: str) -> Quantity:
    """Parse like upstream ``ParseQuantity``; any rejection is a :class:`QuantityError`.

    Results of short inputs are cached: quantities are immutable, and manifests repeat the
    same few strings (``100m``, ``1Gi``) thousands of times.
    """
    if type(text) is not str:
        if not isinstance(text, str):
            raise _invalid(text, f"expected a string, got {type(text).__name__}")
        text = str.__str__(text)
    cached = _cache.get(text)
    if cached is not None:
        return cached
    q = _parse_uncached(text)
    if len(text) <= _CACHE_KEY_MAX_LEN:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[text] = q
    return q


def _parse_uncached(text: str) -> Quantity:
    match = _SCAN(text) if text else None
    if match is None:
        raise _invalid(text, _ERR_FORMAT)
    sign, num, frac, suffix = match.groups()
    spec = _SUFFIXES.get(suffix)
    if spec is None:
        spec = _exponent_suffix(text, suffix)
    base, exponent, fmt = spec
    if frac is None:
        frac = ""
    if not num and not frac:
        return _digitless(text, base, exponent, fmt)
    if base == 10:
        coef, exp = _decimal_amount(num, frac, exponent)
    else:
        coef, exp, fmt = _binary_amount(num, frac, exponent)
    if exp > _INT32_MAX:
        raise _invalid(text, "exponent out of range")
    return _build(-coef if sign == "-" else coef, exp, fmt)


def _exponent_suffix(text: str, suffix: str) -> tuple[int, int, str]:
    """Interpret an ``e``/``E`` exponent suffix, the only suffix not in the table."""
    if len(suffix) > 1 and suffix[0] in "eE":
        match = _SIGNED_DIGITS(suffix, 1)
        if match is not None and len(match.group(1)) <= 19:
            exponent = int(suffix[1:])
            if _INT64_MIN <= exponent <= _INT64_MAX:
                if not _INT32_MIN <= exponent <= _INT32_MAX:
                    raise _invalid(text, "exponent out of range")
                return 10, exponent, DECIMAL_EXPONENT
    raise _invalid(text, _ERR_SUFFIX)


def _digitless(text: str, base: int, exponent: int, fmt: str) -> Quantity:
    """A number part without digits: zero on upstream's fast path, an error on its slow path."""
    if (base == 2 and exponent >= 50) or (base == 10 and exponent < -9):
        raise _invalid(text, _ERR_NUMERIC)
    return _build(0, 0, fmt)


def _decimal_amount(num: str, frac: str, exponent: int) -> tuple[int, int]:
    """Magnitude of ``num.frac * 10**exponent``, rounded up to nano precision.

    Rounding works on the digit string: once trailing zeros are gone, any dropped digit
    is non-zero, so a dropped tail always rounds the kept part up by one.
    """
    digits = (num + frac).lstrip("0")
    stripped = digits.rstrip("0")
    if not stripped:
        return 0, 0
    exp = exponent - len(frac) + (len(digits) - len(stripped))
    if exp >= -9:
        return _int_from_digits(stripped), exp
    drop = -9 - exp
    kept = stripped[:-drop] if drop < len(stripped) else ""
    return _normalize(_int_from_digits(kept or "0") + 1, -9)


def _binary_amount(num: str, frac: str, exponent: int) -> tuple[int, int, str]:
    """Magnitude of ``num.frac * 2**exponent`` with upstream's rounding, cap and format rules."""
    digits = (num + frac).lstrip("0")
    if not digits:
        return 0, 0, BINARY_SI
    coef, exp = _normalize(_int_from_digits(digits) << exponent, -len(frac))
    if exp < -9:
        coef, exp = _normalize(coef // _pow10(-9 - exp) + 1, -9)
    if _compare(coef, exp, MAX_BINARY_SI, 0) > 0:
        return MAX_BINARY_SI, 0, BINARY_SI
    if _compare(coef, exp, 1, 0) < 0:
        return coef, exp, DECIMAL_SI
    return coef, exp, BINARY_SI
