"""kube.quantity against the tables of k8s.io/apimachinery/pkg/api/resource/quantity_test.go."""

from __future__ import annotations

import copy
import operator
import pickle
from decimal import ROUND_UP, Decimal, localcontext

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kube.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    MAX_BINARY_SI,
    Quantity,
    QuantityError,
    parse_quantity,
    sum_quantities,
)

FUZZ = settings(database=None, deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])

MOST_POSITIVE = 2**63 - 1
MOST_NEGATIVE = -(2**63)


def dec(value: int, exponent: int) -> Decimal:
    """Upstream's ``decQuantity(value, exponent, ...)`` value."""
    return Decimal(f"{value}e{exponent}")


def scaled(value: int, exponent: int, fmt: str) -> Quantity:
    return Quantity.from_scaled(value, exponent, fmt)


# TestQuantityParse: input, expected value, expected format.
PARSE_TABLE = [
    ("0", dec(0, 0), DECIMAL_SI),
    ("0n", dec(0, 0), DECIMAL_SI),
    ("0u", dec(0, 0), DECIMAL_SI),
    ("0m", dec(0, 0), DECIMAL_SI),
    ("0Ki", dec(0, 0), BINARY_SI),
    ("0k", dec(0, 0), DECIMAL_SI),
    ("0Mi", dec(0, 0), BINARY_SI),
    ("0M", dec(0, 0), DECIMAL_SI),
    ("0Gi", dec(0, 0), BINARY_SI),
    ("0G", dec(0, 0), DECIMAL_SI),
    ("0Ti", dec(0, 0), BINARY_SI),
    ("0T", dec(0, 0), DECIMAL_SI),
    ("1", dec(1, 0), DECIMAL_SI),
    ("1Ki", dec(1024, 0), BINARY_SI),
    ("8Ki", dec(8 * 1024, 0), BINARY_SI),
    ("7Mi", dec(7 * 1024**2, 0), BINARY_SI),
    ("6Gi", dec(6 * 1024**3, 0), BINARY_SI),
    ("5Ti", dec(5 * 1024**4, 0), BINARY_SI),
    ("4Pi", dec(4 * 1024**5, 0), BINARY_SI),
    ("3Ei", dec(3 * 1024**6, 0), BINARY_SI),
    ("10Ti", dec(10 * 1024**4, 0), BINARY_SI),
    ("100Ti", dec(100 * 1024**4, 0), BINARY_SI),
    ("5n", dec(5, -9), DECIMAL_SI),
    ("4u", dec(4, -6), DECIMAL_SI),
    ("3m", dec(3, -3), DECIMAL_SI),
    ("9", dec(9, 0), DECIMAL_SI),
    ("8k", dec(8, 3), DECIMAL_SI),
    ("50k", dec(5, 4), DECIMAL_SI),
    ("7M", dec(7, 6), DECIMAL_SI),
    ("6G", dec(6, 9), DECIMAL_SI),
    ("5T", dec(5, 12), DECIMAL_SI),
    ("40T", dec(4, 13), DECIMAL_SI),
    ("300T", dec(3, 14), DECIMAL_SI),
    ("2P", dec(2, 15), DECIMAL_SI),
    ("1E", dec(1, 18), DECIMAL_SI),
    ("1E-3", dec(1, -3), DECIMAL_EXPONENT),
    ("1e3", dec(1, 3), DECIMAL_EXPONENT),
    ("1E6", dec(1, 6), DECIMAL_EXPONENT),
    ("1e9", dec(1, 9), DECIMAL_EXPONENT),
    ("1E12", dec(1, 12), DECIMAL_EXPONENT),
    ("1e15", dec(1, 15), DECIMAL_EXPONENT),
    ("1E18", dec(1, 18), DECIMAL_EXPONENT),
    ("1e14", dec(1, 14), DECIMAL_EXPONENT),
    ("1e13", dec(1, 13), DECIMAL_EXPONENT),
    ("100.035k", dec(100035, 0), DECIMAL_SI),
    ("0.001", dec(1, -3), DECIMAL_SI),
    ("0.0005k", dec(5, -1), DECIMAL_SI),
    ("0.005", dec(5, -3), DECIMAL_SI),
    ("0.05", dec(5, -2), DECIMAL_SI),
    ("0.5", dec(5, -1), DECIMAL_SI),
    ("0.00050k", dec(5, -1), DECIMAL_SI),
    ("0.00500", dec(5, -3), DECIMAL_SI),
    ("0.05000", dec(5, -2), DECIMAL_SI),
    ("0.50000", dec(5, -1), DECIMAL_SI),
    ("0.5e0", dec(5, -1), DECIMAL_EXPONENT),
    ("0.5e-1", dec(5, -2), DECIMAL_EXPONENT),
    ("0.5e-2", dec(5, -3), DECIMAL_EXPONENT),
    ("10.035M", dec(10035, 3), DECIMAL_SI),
    ("1.2e3", dec(12, 2), DECIMAL_EXPONENT),
    ("1.3E+6", dec(13, 5), DECIMAL_EXPONENT),
    ("1.40e9", dec(14, 8), DECIMAL_EXPONENT),
    ("1.53E12", dec(153, 10), DECIMAL_EXPONENT),
    ("1.6e15", dec(16, 14), DECIMAL_EXPONENT),
    ("1.7E18", dec(17, 17), DECIMAL_EXPONENT),
    ("9.01", dec(901, -2), DECIMAL_SI),
    ("8.1k", dec(81, 2), DECIMAL_SI),
    ("7.123456M", dec(7123456, 0), DECIMAL_SI),
    ("6.987654321G", dec(6987654321, 0), DECIMAL_SI),
    ("5.444T", dec(5444, 9), DECIMAL_SI),
    ("40.1T", dec(401, 11), DECIMAL_SI),
    ("300.2T", dec(3002, 11), DECIMAL_SI),
    ("2.5P", dec(25, 14), DECIMAL_SI),
    ("1.01E", dec(101, 16), DECIMAL_SI),
    ("3.001n", dec(4, -9), DECIMAL_SI),
    ("1.1E-9", dec(2, -9), DECIMAL_EXPONENT),
    ("0.0000000001", dec(1, -9), DECIMAL_SI),
    ("0.0000000005", dec(1, -9), DECIMAL_SI),
    ("0.00000000050", dec(1, -9), DECIMAL_SI),
    ("0.5e-9", dec(1, -9), DECIMAL_EXPONENT),
    ("0.9n", dec(1, -9), DECIMAL_SI),
    ("0.00000012345", dec(124, -9), DECIMAL_SI),
    ("0.00000012354", dec(124, -9), DECIMAL_SI),
    ("9Ei", dec(MOST_POSITIVE, 0), BINARY_SI),
    ("9223372036854775807Ki", dec(MOST_POSITIVE, 0), BINARY_SI),
    ("12E", dec(12, 18), DECIMAL_SI),
    ("100.035Ki", dec(10243584, -2), BINARY_SI),
    ("0.5Mi", dec(512 * 1024, 0), BINARY_SI),
    ("0.05Gi", dec(536870912, -1), BINARY_SI),
    ("0.025Ti", dec(274877906944, -1), BINARY_SI),
    ("0.000000000001Ki", dec(2, -9), DECIMAL_SI),
    (".001", dec(1, -3), DECIMAL_SI),
    (".0001k", dec(100, -3), DECIMAL_SI),
    ("1.", dec(1, 0), DECIMAL_SI),
    ("1.G", dec(1, 9), DECIMAL_SI),
]


# Each entry as written, negated and with an explicit plus, as upstream's test runs it.
@pytest.mark.parametrize("sign", ["", "-", "+"], ids=["as-written", "negated", "explicit-plus"])
@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_TABLE)
def test_parse_table(text: str, value: Decimal, fmt: str, sign: str) -> None:
    q = parse_quantity(sign + text)
    assert q.as_decimal() == (-value if sign == "-" else value)
    assert q.format == fmt


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        " 1",
        "1 ",
        "1.1.1",
        "1Ki1",
        "x",
        "1Zi",
        "Non-Numeric",
        "invalid",
        "1K",
        "1e",
        "1E+",
        "1ee3",
        "1e3Ki",
        "1e3.5",
        "1kk",
        "1KiB",
        "1\n",
        "\uff11",
        "1_000",
        "0x10",
        "1e99999999999999999999",
        "1e4294967296",
        "1e-2147483649",
        "Pi",
        "Ei",
        "-.Ei",
        "e-10",
    ],
)
def test_invalid_text_raises_quantity_error_naming_input(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [None, 5, 1.5, b"1Gi", ["1"], {"cpu": "1"}, object(), Decimal(1)])
def test_non_string_input_raises_quantity_error(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


# The upstream scanner accepts a number part with no digits; it is zero unless the
# suffix sends the value down upstream's slow path, which then rejects it.
@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (".", DECIMAL_SI),
        ("-.", DECIMAL_SI),
        ("+", DECIMAL_SI),
        ("-", DECIMAL_SI),
        ("m", DECIMAL_SI),
        ("n", DECIMAL_SI),
        ("k", DECIMAL_SI),
        ("E", DECIMAL_SI),
        ("Ki", BINARY_SI),
        ("-Mi", BINARY_SI),
        ("Gi", BINARY_SI),
        ("Ti", BINARY_SI),
        ("e3", DECIMAL_EXPONENT),
        ("e-9", DECIMAL_EXPONENT),
        ("000", DECIMAL_SI),
        ("-0", DECIMAL_SI),
    ],
)
def test_digitless_number_is_zero(text: str, fmt: str) -> None:
    q = parse_quantity(text)
    assert q.is_zero()
    assert q.format == fmt
    assert str(q) == "0"


# TestParseQuantity: values beyond int64, with their canonical spelling (default: the input).
BIG_TABLE = [
    ("-999999999999999999", "-999999999999999999", None),
    ("999999999999999999", "999999999999999999", None),
    ("-999999999999999999.0", "-999999999999999999", "-999999999999999999"),
    ("999999999999999999.0", "999999999999999999", "999999999999999999"),
    ("-999999999999999999.1", "-999999999999999999.1", "-999999999999999999100m"),
    ("999999999999999999.1", "999999999999999999.1", "999999999999999999100m"),
    ("-9999999999999999999", "-9999999999999999999", None),
    ("9999999999999999999", "9999999999999999999", None),
    ("-1E", "-1000000000000000000", None),
    ("1E", "1000000000000000000", None),
    ("-1000000000000000000", "-1000000000000000000", "-1E"),
    ("1000000000000000000", "1000000000000000000", "1E"),
    ("-9999999999999999999.0", "-9999999999999999999", "-9999999999999999999"),
    ("9999999999999999999.0", "9999999999999999999", "9999999999999999999"),
    ("-1.0E", "-1000000000000000000", "-1E"),
    ("1.0E", "1000000000000000000", "1E"),
    ("-1000000000000000000.0", "-1000000000000000000", "-1E"),
    ("1000000000000000000.0", "1000000000000000000", "1E"),
    ("-9999999999999999999000m", "-9999999999999999999", "-9999999999999999999"),
    ("9999999999999999999000m", "9999999999999999999", "9999999999999999999"),
    ("-9999999999999999999.1", "-9999999999999999999.1", "-9999999999999999999100m"),
    ("9999999999999999999.1", "9999999999999999999.1", "9999999999999999999100m"),
    ("-1.0000000000000000001E", "-1000000000000000000.1", "-1000000000000000000100m"),
    ("1.0000000000000000001E", "1000000000000000000.1", "1000000000000000000100m"),
    ("-1000000000000000000.1", "-1000000000000000000.1", "-1000000000000000000100m"),
    ("1000000000000000000.1", "1000000000000000000.1", "1000000000000000000100m"),
    ("-1.000000000000000001E", "-1000000000000000001", "-1000000000000000001"),
    ("1.000000000000000001E", "1000000000000000001", "1000000000000000001"),
    ("-1000000000000000001", "-1000000000000000001", None),
    ("1000000000000000001", "1000000000000000001", None),
    ("-10E", "-10000000000000000000", None),
    ("10E", "10000000000000000000", None),
    ("-10000000000000000000", "-10000000000000000000", "-10E"),
    ("10000000000000000000", "10000000000000000000", "10E"),
    ("-10.0E", "-10000000000000000000", "-10E"),
    ("10.0E", "10000000000000000000", "10E"),
    ("-10000000000000000000.0", "-10000000000000000000", "-10E"),
    ("10000000000000000000.0", "10000000000000000000", "10E"),
    ("-10000000000000000000000m", "-10000000000000000000", "-10E"),
    ("10000000000000000000000m", "10000000000000000000", "10E"),
    ("-10.0000000000000000001E", "-10000000000000000000.1", "-10000000000000000000100m"),
    ("10.0000000000000000001E", "10000000000000000000.1", "10000000000000000000100m"),
    ("-10000000000000000000.1", "-10000000000000000000.1", "-10000000000000000000100m"),
    ("10000000000000000000.1", "10000000000000000000.1", "10000000000000000000100m"),
    ("-10.000000000000000001E", "-10000000000000000001", "-10000000000000000001"),
    ("10.000000000000000001E", "10000000000000000001", "10000000000000000001"),
    ("-10000000000000000001", "-10000000000000000001", None),
    ("10000000000000000001", "10000000000000000001", None),
    ("-9223372036854775809", "-9223372036854775809", None),
    ("9223372036854775806", "9223372036854775806", None),
    ("-9223372036854775809.0", "-9223372036854775809", "-9223372036854775809"),
    ("9223372036854775806.0", "9223372036854775806", "9223372036854775806"),
    ("-9223372036854775809000m", "-9223372036854775809", "-9223372036854775809"),
    ("9223372036854775806000m", "9223372036854775806", "9223372036854775806"),
    ("-9223372036854775809.1", "-9223372036854775809.1", "-9223372036854775809100m"),
    ("9223372036854775806.1", "9223372036854775806.1", "9223372036854775806100m"),
    ("-9223372036854775808", "-9223372036854775808", None),
    ("9223372036854775807", "9223372036854775807", None),
    ("-9223372036854775808.0", "-9223372036854775808", "-9223372036854775808"),
    ("9223372036854775807.0", "9223372036854775807", "9223372036854775807"),
    ("-9223372036854775808000m", "-9223372036854775808", "-9223372036854775808"),
    ("9223372036854775807000m", "9223372036854775807", "9223372036854775807"),
    ("-9223372036854775808.1", "-9223372036854775808.1", "-9223372036854775808100m"),
    ("9223372036854775807.1", "9223372036854775807.1", "9223372036854775807100m"),
    ("-9223372036854775807", "-9223372036854775807", None),
    ("9223372036854775808", "9223372036854775808", None),
    ("-9223372036854775807.0", "-9223372036854775807", "-9223372036854775807"),
    ("9223372036854775808.0", "9223372036854775808", "9223372036854775808"),
    ("-9223372036854775807000m", "-9223372036854775807", "-9223372036854775807"),
    ("9223372036854775808000m", "9223372036854775808", "9223372036854775808"),
    ("-9223372036854775807.1", "-9223372036854775807.1", "-9223372036854775807100m"),
    ("9223372036854775808.1", "9223372036854775808.1", "9223372036854775808100m"),
]


@pytest.mark.parametrize(("text", "value", "canonical"), BIG_TABLE)
def test_parse_values_beyond_int64(text: str, value: str, canonical: str | None) -> None:
    q = parse_quantity(text)
    assert q.as_decimal() == Decimal(value)
    assert str(q) == (canonical or text)


# TestQuantityString: (value, exponent, format), canonical, alternate spelling.
STRING_TABLE = [
    ((1024**3, 0, BINARY_SI), "1Gi", "1024Mi"),
    ((300 * 1024**2, 0, BINARY_SI), "300Mi", "307200Ki"),
    ((6 * 1024, 0, BINARY_SI), "6Ki", ""),
    ((1001 * 1024**3, 0, BINARY_SI), "1001Gi", "1025024Mi"),
    ((1024**4, 0, BINARY_SI), "1Ti", "1024Gi"),
    ((5, 0, BINARY_SI), "5", "5000m"),
    ((500, -3, BINARY_SI), "500m", "0.5"),
    ((1, 9, DECIMAL_SI), "1G", "1000M"),
    ((1000, 6, DECIMAL_SI), "1G", "0.001T"),
    ((1000000, 3, DECIMAL_SI), "1G", ""),
    ((1000000000, 0, DECIMAL_SI), "1G", ""),
    ((1, -3, DECIMAL_SI), "1m", "1000u"),
    ((80, -3, DECIMAL_SI), "80m", ""),
    ((1080, -3, DECIMAL_SI), "1080m", "1.08"),
    ((108, -2, DECIMAL_SI), "1080m", "1080000000n"),
    ((10800, -4, DECIMAL_SI), "1080m", ""),
    ((300, 6, DECIMAL_SI), "300M", ""),
    ((1, 12, DECIMAL_SI), "1T", ""),
    ((1, 18, DECIMAL_SI), "1E", ""),
    ((1, 21, DECIMAL_SI), "1e21", "1000E"),
    ((5, 21, DECIMAL_SI), "5e21", "5000E"),
    ((1, 24, DECIMAL_SI), "1e24", "1000000E"),
    ((1234567, 6, DECIMAL_SI), "1234567M", ""),
    ((1234567, -3, BINARY_SI), "1234567m", ""),
    ((3, 3, DECIMAL_SI), "3k", ""),
    ((1025, 0, BINARY_SI), "1025", ""),
    ((0, 0, DECIMAL_SI), "0", ""),
    ((0, 0, BINARY_SI), "0", ""),
    ((1, 9, DECIMAL_EXPONENT), "1e9", ".001e12"),
    ((1, -3, DECIMAL_EXPONENT), "1e-3", "0.001e0"),
    ((1, -9, DECIMAL_EXPONENT), "1e-9", "1000e-12"),
    ((80, -3, DECIMAL_EXPONENT), "80e-3", ""),
    ((300, 6, DECIMAL_EXPONENT), "300e6", ""),
    ((1, 12, DECIMAL_EXPONENT), "1e12", ""),
    ((1, 3, DECIMAL_EXPONENT), "1e3", ""),
    ((3, 3, DECIMAL_EXPONENT), "3e3", ""),
    ((3, 3, DECIMAL_SI), "3k", ""),
    ((0, 0, DECIMAL_EXPONENT), "0", "00"),
    ((1, -9, DECIMAL_SI), "1n", ""),
    ((80, -9, DECIMAL_SI), "80n", ""),
    ((1080, -9, DECIMAL_SI), "1080n", ""),
    ((108, -8, DECIMAL_SI), "1080n", ""),
    ((10800, -10, DECIMAL_SI), "1080n", ""),
    ((1, -6, DECIMAL_SI), "1u", ""),
    ((80, -6, DECIMAL_SI), "80u", ""),
    ((1080, -6, DECIMAL_SI), "1080u", ""),
]


@pytest.mark.parametrize(("args", "expect", "alternate"), STRING_TABLE)
def test_canonical_string(args: tuple[int, int, str], expect: str, alternate: str) -> None:
    q = scaled(*args)
    assert str(q) == expect
    assert parse_quantity(expect) == q
    if alternate:
        assert str(parse_quantity(alternate)) == expect
    if not q.is_zero():
        assert str(-q) == "-" + expect


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
        ("1.5Gi", "1536Mi"),
        ("0.1Mi", "104857600m"),
        ("1000m", "1"),
        ("1E3", "1e3"),
        ("1e03", "1e3"),
        ("01", "1"),
        ("1.", "1"),
        ("100m", "100m"),
        ("0.1n", "1n"),
        ("1.5", "1500m"),
        ("1536Ki", "1536Ki"),
        ("1536", "1536"),
        ("2048", "2048"),
        ("1.5e3", "1500"),
        ("1024Ei", "9223372036854775807"),
    ],
)
def test_parse_emit(text: str, expect: str) -> None:
    assert str(parse_quantity(text)) == expect
    assert str(parse_quantity("-" + text)) == "-" + expect


@pytest.mark.parametrize(("text", "expect"), [("+1", "1"), ("-0", "0"), ("-0.0Ki", "0"), ("+0.5Mi", "512Ki"), ("-0.1n", "-1n")])
def test_signs_in_canonical_form(text: str, expect: str) -> None:
    assert str(parse_quantity(text)) == expect


@pytest.mark.parametrize(("x", "y", "expect"), [("0", "0", 0), ("100m", "50m", 1), ("50m", "100m", -1), ("10000T", "100Gi", 1)])
def test_compare(x: str, y: str, expect: int) -> None:
    a, b = parse_quantity(x), parse_quantity(y)
    assert ((a > b) - (a < b)) == expect
    assert (a == b) == (expect == 0)


# TestQuantityCmpInt64AndDec: (value, scale) pairs and the expected sign of a - b.
CMP_TABLE = [
    ((901, -2), (901, -2), 0),
    ((90, -1), (901, -2), -1),
    ((901, -2), (900, -2), 1),
    ((0, 0), (0, 0), 0),
    ((0, 1), (0, -1), 0),
    ((0, -1), (0, 1), 0),
    ((800, -3), (1, 0), -1),
    ((800, -3), (79, -2), 1),
    ((MOST_POSITIVE, 0), (1, -1), 1),
    ((MOST_POSITIVE, 1), (1, 0), 1),
    ((MOST_POSITIVE, 1), (1, 1), 1),
    ((MOST_POSITIVE, 1), (0, 1), 1),
    ((MOST_POSITIVE, -16), (1, 3), -1),
    ((MOST_NEGATIVE, 0), (0, 0), -1),
    ((MOST_NEGATIVE, -18), (-1, 0), -1),
    ((MOST_NEGATIVE, -19), (-1, 0), 1),
    ((10**18, -17), (1, 1), 0),
    ((10**18, -17), (-10, 0), 1),
    ((-(10**18), -17), (-10, 0), 0),
    ((10**18, -17), (1, 0), 1),
    ((10**18 + 1, -17), (1, 1), 1),
    ((10**18 - 1, -17), (1, 1), -1),
]


@pytest.mark.parametrize(("a", "b", "expect"), CMP_TABLE)
def test_compare_across_scales(a: tuple[int, int], b: tuple[int, int], expect: int) -> None:
    qa, qb = scaled(*a, DECIMAL_SI), scaled(*b, DECIMAL_SI)
    assert ((qa > qb) - (qa < qb)) == expect
    assert ((qb > qa) - (qb < qa)) == -expect
    assert (qa == qb) == (expect == 0)
    assert (qa <= qb) == (expect <= 0)
    assert (qa >= qb) == (expect >= 0)


def test_compare_far_apart_exponents_without_materializing() -> None:
    huge, tiny = parse_quantity("1e2147483647"), parse_quantity("1n")
    assert huge > tiny and tiny < huge and -huge < -tiny
    assert parse_quantity("-1e2147483647") < parse_quantity("-1")


@pytest.mark.parametrize("text", ["100m", "1Gi"])
def test_add_and_sub_with_zero_preserve_suffix(text: str) -> None:
    value, zero = parse_quantity(text), parse_quantity("0")
    assert str(value + zero) == text
    assert str(zero + value) == text
    assert str(value - zero) == text
    assert str(zero - value) == str(-value)


@pytest.mark.parametrize(
    ("a", "b", "expected", "fmt"),
    [
        ((10, 0, DECIMAL_SI), (1, 1, DECIMAL_SI), dec(20, 0), DECIMAL_SI),
        ((10, 0, DECIMAL_SI), (1, 0, BINARY_SI), dec(11, 0), DECIMAL_SI),
        ((10, 0, BINARY_SI), (1, 0, DECIMAL_SI), dec(11, 0), BINARY_SI),
        ((0, 0, DECIMAL_SI), (50, 0, DECIMAL_SI), dec(50, 0), DECIMAL_SI),
        ((50, 0, DECIMAL_SI), (0, 0, DECIMAL_SI), dec(50, 0), DECIMAL_SI),
        ((0, 0, DECIMAL_SI), (0, 0, DECIMAL_SI), dec(0, 0), DECIMAL_SI),
        ((0, 0, DECIMAL_SI), (0, 0, BINARY_SI), dec(0, 0), BINARY_SI),
    ],
)
def test_add(a: tuple[int, int, str], b: tuple[int, int, str], expected: Decimal, fmt: str) -> None:
    result = scaled(*a) + scaled(*b)
    assert result.as_decimal() == expected
    assert result.format == fmt


@pytest.mark.parametrize(
    ("a", "b", "expected", "fmt"),
    [
        ((10, 0, DECIMAL_SI), (1, 1, DECIMAL_SI), dec(0, 0), DECIMAL_SI),
        ((10, 0, DECIMAL_SI), (1, 0, BINARY_SI), dec(9, 0), DECIMAL_SI),
        ((10, 0, BINARY_SI), (1, 0, DECIMAL_SI), dec(9, 0), BINARY_SI),
        ((0, 0, DECIMAL_SI), (50, 0, DECIMAL_SI), dec(-50, 0), DECIMAL_SI),
        ((50, 0, DECIMAL_SI), (0, 0, DECIMAL_SI), dec(50, 0), DECIMAL_SI),
        ((0, 0, DECIMAL_SI), (0, 0, DECIMAL_SI), dec(0, 0), DECIMAL_SI),
    ],
)
def test_sub(a: tuple[int, int, str], b: tuple[int, int, str], expected: Decimal, fmt: str) -> None:
    result = scaled(*a) - scaled(*b)
    assert result.as_decimal() == expected
    assert result.format == fmt


# TestMul, minus upstream's "exact" flag: products here are always exact.
@pytest.mark.parametrize(
    ("a", "factor", "expected"),
    [
        ((10, 0, DECIMAL_SI), 10, dec(100, 0)),
        ((10, 0, DECIMAL_SI), 1, dec(10, 0)),
        ((10, 0, BINARY_SI), 1, dec(10, 0)),
        ((0, 0, DECIMAL_SI), 50, dec(0, 0)),
        ((50, 0, DECIMAL_SI), 0, dec(0, 0)),
        ((10, 0, DECIMAL_SI), -10, dec(-100, 0)),
        ((-10, 0, DECIMAL_SI), 1, dec(-10, 0)),
        ((10, 0, BINARY_SI), -1, dec(-10, 0)),
        ((-50, 0, DECIMAL_SI), -50, dec(2500, 0)),
        ((MOST_POSITIVE, 0, DECIMAL_SI), 0, dec(0, 0)),
        ((MOST_POSITIVE, 0, DECIMAL_SI), -1, dec(-MOST_POSITIVE, 0)),
        ((MOST_POSITIVE // 2, 0, DECIMAL_SI), 2, dec((MOST_POSITIVE // 2) * 2, 0)),
        ((MOST_POSITIVE, 0, DECIMAL_SI), 2, dec(MOST_POSITIVE * 2, 0)),
        ((MOST_POSITIVE, 0, DECIMAL_SI), 10, dec(MOST_POSITIVE, 1)),
        ((MOST_POSITIVE, 0, DECIMAL_SI), -10, dec(-MOST_POSITIVE, 1)),
        ((MOST_NEGATIVE, 0, DECIMAL_SI), -1, dec(MOST_POSITIVE + 1, 0)),
        ((MOST_NEGATIVE // 2, 0, DECIMAL_SI), 2, dec(MOST_NEGATIVE, 0)),
        ((MOST_NEGATIVE, 0, DECIMAL_SI), 2, dec(MOST_NEGATIVE * 2, 0)),
        ((MOST_NEGATIVE, 0, DECIMAL_SI), -10, dec(MOST_POSITIVE + 1, 1)),
    ],
)
def test_mul(a: tuple[int, int, str], factor: int, expected: Decimal) -> None:
    q = scaled(*a)
    assert (q * factor).as_decimal() == expected
    assert (factor * q).as_decimal() == expected
    assert (q * factor).format == q.format


def test_mul_rejects_non_integers() -> None:
    q = parse_quantity("1")
    for factor in (1.5, True, "2", Decimal(2)):
        with pytest.raises(TypeError):
            q * factor  # type: ignore[operator]


def test_negation_does_not_mutate_and_prints_exactly() -> None:
    q = scaled(901, -2, DECIMAL_SI)
    negated = -q
    assert str(negated) == "-9010m"
    assert q.as_decimal() == Decimal("9.01")
    assert -negated == q
    assert (-scaled(10, 0, BINARY_SI)).format == BINARY_SI


def test_most_negative_negates_and_subtracts_exactly() -> None:
    most_negative = scaled(MOST_NEGATIVE, 0, DECIMAL_SI)
    two_63 = parse_quantity("9223372036854775808")
    assert -most_negative == two_63
    assert str(-most_negative) == "9223372036854775808"
    assert parse_quantity("0") - most_negative == two_63
    assert str(scaled(1, 0, DECIMAL_SI) - most_negative) == "9223372036854775809"
    assert str(-scaled(MOST_NEGATIVE, -3, DECIMAL_SI)) == "9223372036854775808m"
    assert str(scaled(1, -3, DECIMAL_SI) - scaled(MOST_NEGATIVE, -3, DECIMAL_SI)) == "9223372036854775809m"
    assert str(scaled(1, 1, DECIMAL_SI) - most_negative) == "9223372036854775818"
    zero_minus_binary = parse_quantity("0") - scaled(MOST_NEGATIVE, 0, BINARY_SI)
    assert zero_minus_binary.format == BINARY_SI
    assert str(zero_minus_binary) == "8Ei"
    assert zero_minus_binary == two_63


# TestMilliNewSet / TestNewSet / TestNewScaledSet: built from a count of a unit, printed, and read back in that unit.
UNITS = {"milli": (Quantity.from_milli, Quantity.milli_value), "int": (Quantity.from_int, Quantity.value)}


@pytest.mark.parametrize(
    ("unit", "value", "fmt", "expect"),
    [
        ("milli", 1, DECIMAL_SI, "1m"),
        ("milli", 1000, DECIMAL_SI, "1"),
        ("milli", 1234000, DECIMAL_SI, "1234"),
        ("milli", 1024, BINARY_SI, "1024m"),
        ("milli", 1024 * 1024, BINARY_SI, "1048576m"),
        ("int", 1, DECIMAL_SI, "1"),
        ("int", 1000, DECIMAL_SI, "1k"),
        ("int", 1234000, DECIMAL_SI, "1234k"),
        ("int", 1024, BINARY_SI, "1Ki"),
        ("int", 1000000, DECIMAL_EXPONENT, "1e6"),
        ("int", 1024 * 1024, BINARY_SI, "1Mi"),
    ],
)
def test_from_unit(unit: str, value: int, fmt: str, expect: str) -> None:
    build, read = UNITS[unit]
    q = build(value, fmt)
    assert str(q) == expect
    assert read(parse_quantity(str(q))) == value


def test_from_milli_in_exponent_format() -> None:
    assert str(Quantity.from_milli(1000000, DECIMAL_EXPONENT)) == "1e3"


@pytest.mark.parametrize(
    ("value", "scale", "expect"),
    [
        (1, -9, "1n"),
        (1000, -9, "1u"),
        (1, -6, "1u"),
        (1000, -6, "1m"),
        (1, -3, "1m"),
        (1000, -3, "1"),
        (1, 0, "1"),
        (0, -9, "0"),
        (0, -6, "0"),
        (0, -3, "0"),
        (0, 0, "0"),
    ],
)
def test_from_scaled(value: int, scale: int, expect: str) -> None:
    q = Quantity.from_scaled(value, scale)
    assert str(q) == expect
    assert parse_quantity(str(q)).scaled_value(scale) == value


@pytest.mark.parametrize(
    ("from_scale", "to_scale", "expected"),
    [
        (-9, -9, 1), (-9, -6, 1), (-9, -3, 1), (-9, 0, 1),
        (-6, -9, 1000), (-6, -6, 1), (-6, -3, 1), (-6, 0, 1),
        (-3, -9, 10**6), (-3, -6, 1000), (-3, -3, 1), (-3, 0, 1),
        (0, -9, 10**9), (0, -6, 10**6), (0, -3, 1000), (0, 0, 1),
        (2, -2, 100 * 100),
    ],
)  # fmt: skip
def test_scaled_value(from_scale: int, to_scale: int, expected: int) -> None:
    assert Quantity.from_scaled(1, from_scale).scaled_value(to_scale) == expected


# TestQuantityRoundUp, read through scaled_value: rounding is away from zero.
@pytest.mark.parametrize(
    ("text", "scale", "expected"),
    [
        ("9.01", -3, 9010), ("9.01", -2, 901), ("9.01", -1, 91), ("9.01", 0, 10), ("9.01", 1, 1), ("9.01", 2, 1),
        ("-9.01", -3, -9010), ("-9.01", -2, -901), ("-9.01", -1, -91), ("-9.01", 0, -10), ("-9.01", 1, -1), ("-9.01", 2, -1),
    ],
)  # fmt: skip
def test_scaled_value_rounds_away_from_zero(text: str, scale: int, expected: int) -> None:
    assert parse_quantity(text).scaled_value(scale) == expected


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("1Mi", 1048576, 1048576000),
        ("100m", 1, 100),
        ("1500m", 2, 1500),
        ("-1500m", -2, -1500),
        ("1n", 1, 1),
        ("-1n", -1, -1),
        ("0.5Mi", 524288, 524288000),
        ("12E", 12 * 10**18, 12 * 10**21),
        ("9Ei", MOST_POSITIVE, MOST_POSITIVE * 1000),
        ("0", 0, 0),
    ],
)
def test_value_and_milli_value(text: str, value: int, milli: int) -> None:
    q = parse_quantity(text)
    assert q.value() == value
    assert q.milli_value() == milli


def test_value_of_unmaterializable_quantity_is_a_quantity_error() -> None:
    with pytest.raises(QuantityError):
        parse_quantity("1e2147483647").value()


def test_exact_arithmetic_limit() -> None:
    with pytest.raises(QuantityError):
        parse_quantity("1e2147483647") + parse_quantity("1")
    assert (parse_quantity("1e2147483647") + parse_quantity("0")) == parse_quantity("1e2147483647")


def test_binary_si_caps_only_on_parse() -> None:
    four_ei = parse_quantity("4Ei")
    assert str(four_ei * 256) == "1024Ei"
    assert (four_ei * 256).format == BINARY_SI
    assert parse_quantity("-9Ei").value() == -MAX_BINARY_SI
    assert parse_quantity("99999999999999999999E").as_decimal() == Decimal("99999999999999999999E18")


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(QuantityError):
        Quantity.from_int(1, "invalidFormatDefaultsToExponent")


def test_quantity_is_immutable_hashable_and_copyable() -> None:
    q = parse_quantity("1Gi")
    with pytest.raises(AttributeError):
        q._coef = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        q.format = DECIMAL_SI  # type: ignore[misc]
    with pytest.raises(TypeError):
        Quantity()
    assert hash(q) == hash(parse_quantity("1073741824")) and q == parse_quantity("1073741824")
    assert len({parse_quantity("1"), parse_quantity("1000m"), parse_quantity("1e0")}) == 1
    assert copy.copy(q) is q and copy.deepcopy(q) is q
    restored = pickle.loads(pickle.dumps(q))
    assert restored == q and restored.format == BINARY_SI and str(restored) == "1Gi"


def test_truthiness_sign_and_helpers() -> None:
    assert not parse_quantity("0") and parse_quantity("1n")
    assert parse_quantity("-1").sign() == -1 and parse_quantity("0").sign() == 0 and parse_quantity("2").sign() == 1
    assert max(parse_quantity("1Gi"), parse_quantity("1G")) == parse_quantity("1Gi")
    assert sorted(map(parse_quantity, ["1Gi", "500m", "2"])) == list(map(parse_quantity, ["500m", "2", "1Gi"]))
    assert abs(parse_quantity("-2")) == parse_quantity("2")
    assert str(sum_quantities([])) == "0"
    total = sum_quantities(map(parse_quantity, ["0", "512Mi", "512Mi"]))
    assert str(total) == "1Gi" and total.format == BINARY_SI
    assert sum([parse_quantity("1"), parse_quantity("2")]) == parse_quantity("3")
    assert repr(parse_quantity("1Gi")) == "Quantity('1Gi', 'BinarySI')"
    assert parse_quantity("1") != "1"
    with pytest.raises(TypeError):
        operator.lt(parse_quantity("1"), 1)


def test_binary_whole_number_without_suffix_reads_back_as_decimal() -> None:
    q = parse_quantity("9.765625Ki")
    assert (str(q), q.format) == ("10000", BINARY_SI)
    assert (str(parse_quantity(str(q))), parse_quantity(str(q)).format) == ("10k", DECIMAL_SI)


def test_parse_cache_returns_equal_immutable_values() -> None:
    assert parse_quantity("250m") is parse_quantity("250m")
    assert Quantity.parse("250m") == parse_quantity("250m")


def test_long_inputs_beyond_python_int_string_limit() -> None:
    digits = "7" * 5000
    q = parse_quantity(digits)
    assert str(q) == digits
    assert parse_quantity("0." + "0" * 5000 + "1") == parse_quantity("1n")
    assert str(parse_quantity("0." + "0" * 5000 + "1Ki")) == "1n"


# ---------------------------------------------------------------------------------------
# Property tests

QUANTITY_ALPHABET = "0123456789.+-eEinumkKMGTPZ "
SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL_EXPONENTS = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

exponent_suffixes = st.builds(
    lambda letter, sign, digits: f"{letter}{sign}{digits}",
    st.sampled_from("eE"),
    st.sampled_from(["", "+", "-"]),
    st.integers(0, 40).map(str),
)
structured = st.tuples(
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", max_size=22),
    st.one_of(st.none(), st.text("0123456789", max_size=22)),
    st.one_of(st.sampled_from(SUFFIXES), exponent_suffixes),
)


def reference(sign: str, num: str, frac: str | None, suffix: str) -> tuple[Decimal, str]:
    """An independent Decimal model of upstream parsing, for inputs with at least one digit."""
    with localcontext() as ctx:
        ctx.prec = 500
        value = Decimal(f"{num or '0'}.{frac or '0'}")
        if suffix in BINARY_EXPONENTS:
            value *= Decimal(2) ** BINARY_EXPONENTS[suffix]
            fmt = BINARY_SI
        elif suffix in DECIMAL_EXPONENTS:
            value = value.scaleb(DECIMAL_EXPONENTS[suffix])
            fmt = DECIMAL_SI
        else:
            value = value.scaleb(int(suffix[1:]))
            fmt = DECIMAL_EXPONENT
        if value and value != value.quantize(Decimal("1e-9"), rounding=ROUND_UP):
            value = value.quantize(Decimal("1e-9"), rounding=ROUND_UP)
        if fmt == BINARY_SI and value > MAX_BINARY_SI:
            value = Decimal(MAX_BINARY_SI)
        if fmt == BINARY_SI and 0 < value < 1:
            fmt = DECIMAL_SI
        return (-value if sign == "-" else value), fmt


@FUZZ
@given(structured)
def test_parse_matches_decimal_reference(parts: tuple[str, str, str | None, str]) -> None:
    sign, num, frac, suffix = parts
    assume(num or frac)
    text = sign + num + ("" if frac is None else "." + frac) + suffix
    q = parse_quantity(text)
    value, fmt = reference(sign, num, frac, suffix)
    assert q.as_decimal() == value
    assert q.format == fmt


def assert_canonical_is_stable(q: Quantity) -> None:
    """``parse(str(q)) == q`` and the canonical text reproduces itself.

    Upstream exception, kept: a BinarySI whole number that is not a multiple of 1024 prints
    without a suffix ("10000"), and that text reads back as DecimalSI ("10k").  One more
    round trip is then stable.
    """
    text = str(q)
    again = parse_quantity(text)
    assert again == q
    if str(again) != text:
        assert q.format == BINARY_SI and text.lstrip("-").isdigit()
    assert str(parse_quantity(str(again))) == str(again)


def assert_round_trips_if_valid(text: str) -> None:
    """Text that parses has a stable canonical form; any other text is refused with a QuantityError."""
    try:
        q = parse_quantity(text)
    except QuantityError:
        return
    assert_canonical_is_stable(q)


@FUZZ
@given(st.text(QUANTITY_ALPHABET, max_size=16))
def test_fuzz_quantity_alphabet_round_trips(text: str) -> None:
    assert_round_trips_if_valid(text)


@FUZZ
@given(structured)
def test_fuzz_structured_round_trips(parts: tuple[str, str, str | None, str]) -> None:
    text = "".join(part or "" for part in (parts[0], parts[1], None if parts[2] is None else "." + parts[2], parts[3]))
    assert_round_trips_if_valid(text)


@FUZZ
@given(st.text(max_size=30))
def test_fuzz_any_text_only_raises_quantity_error(text: str) -> None:
    try:
        parse_quantity(text)
    except QuantityError:
        pass


@FUZZ
@given(st.one_of(st.none(), st.integers(), st.floats(), st.binary(), st.lists(st.text()), st.booleans()))
def test_fuzz_non_string_only_raises_quantity_error(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


quantities = st.builds(
    Quantity.from_scaled,
    st.integers(-(10**30), 10**30),
    st.integers(-9, 40),
    st.sampled_from([DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT]),
)


@FUZZ
@given(quantities, quantities)
def test_fuzz_arithmetic_is_exact(a: Quantity, b: Quantity) -> None:
    da, db = a.as_decimal(), b.as_decimal()
    assert a + b - b == a
    assert a + b == b + a
    with localcontext() as ctx:
        ctx.prec = 200
        assert (a + b).as_decimal() == da + db
        assert (a - b).as_decimal() == da - db
    assert ((a < b), (a == b), (a > b)) == ((da < db), (da == db), (da > db))
    assert (hash(a) == hash(b)) or a != b


@FUZZ
@given(quantities, st.integers(-50, 50))
def test_fuzz_multiplication_is_repeated_addition(q: Quantity, n: int) -> None:
    expected = sum_quantities([q] * abs(n))
    assert q * n == (expected if n >= 0 else -expected)


@FUZZ
@given(quantities)
def test_fuzz_canonical_form_of_arithmetic_results_round_trips(q: Quantity) -> None:
    """Holds except for BinarySI beyond 2**63-1, which upstream cannot round-trip either (parse caps it)."""
    assume(q.format != BINARY_SI or abs(q) <= Quantity.from_int(MAX_BINARY_SI))
    assert_canonical_is_stable(q)
    with localcontext() as ctx:
        ctx.prec = 200
        assert q.scaled_value(-9) == int(q.as_decimal().scaleb(9))
        assert q.value() == int(q.as_decimal().to_integral_value(rounding=ROUND_UP))
