"""shared.quantity: exact parsing and printing of CPU, memory, GPU memory and counts."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from shared.quantity import (
    MAX_BYTES,
    MAX_CORES,
    MAX_UNITS,
    Number,
    QuantityError,
    decimal_text,
    format_cpu,
    format_memory,
    format_memory_approx,
    parse_count,
    parse_cpu,
    parse_gpu_memory,
    parse_memory,
)

MEMORY_MULTIPLIERS = {
    "": 1,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
}
SHARE_BASES = (1, 10, 100, 1000, 1024)

Parser = Callable[[Number], int]


def cpu_with_base(share_base: int) -> Parser:
    return lambda value: parse_cpu(value, share_base=share_base)


def count_of(field: str) -> Parser:
    return lambda value: parse_count(field, value)


# --- accepted values ---------------------------------------------------------------------

ACCEPTED: list[tuple[str, Parser, Number, int]] = [
    ("cpu-decimal", parse_cpu, "1.7", 170),
    ("cpu-millicores", parse_cpu, "500m", 50),
    ("cpu-int", parse_cpu, 2, 200),
    ("cpu-int-string", parse_cpu, "2", 200),
    ("cpu-smallest-piece", parse_cpu, "0.01", 1),
    ("cpu-leading-dot", parse_cpu, ".5", 50),
    ("cpu-zero", parse_cpu, "0", 0),
    ("cpu-float-repr-exact", parse_cpu, 1.7, 170),
    ("cpu-float-0.1", parse_cpu, 0.1, 10),
    ("cpu-float-whole", parse_cpu, 3.0, 300),
    ("cpu-decimal-type", parse_cpu, Decimal("1.25"), 125),
    ("cpu-decimal-exponent", parse_cpu, Decimal("1E+1"), 1000),
    ("cpu-base1000-thousandth", cpu_with_base(1000), "0.001", 1),
    ("cpu-base1000-decimal", cpu_with_base(1000), "1.7", 1700),
    ("cpu-base1000-millicore", cpu_with_base(1000), "1m", 1),
    ("cpu-base1024-half", cpu_with_base(1024), "0.5", 512),
    ("cpu-base1-whole", cpu_with_base(1), "3", 3),
    ("memory-mebibytes", parse_memory, "512Mi", 536870912),
    ("memory-decimal-kilo", parse_memory, "1.5K", 1500),
    ("memory-decimal-kibi", parse_memory, "1.5Ki", 1536),
    ("memory-giga", parse_memory, "2G", 2_000_000_000),
    ("memory-tebi", parse_memory, "1Ti", 1_099_511_627_776),
    ("memory-plain-string", parse_memory, "536870912", 536870912),
    ("memory-int-bytes", parse_memory, 4096, 4096),
    ("memory-float-bytes", parse_memory, 1e9, 1_000_000_000),
    ("memory-decimal-type", parse_memory, Decimal("2048"), 2048),
    ("memory-fraction-to-whole", parse_memory, "0.5Ki", 512),
    ("memory-zero", parse_memory, 0, 0),
    ("gpu-memory-int", parse_gpu_memory, 16, 16),
    ("gpu-memory-string", parse_gpu_memory, "16", 16),
    ("gpu-memory-float-whole", parse_gpu_memory, 16.0, 16),
    ("count-int", count_of("nvidia.com/gpu"), 2, 2),
    ("count-string", count_of("nvidia.com/gpu"), "2", 2),
    ("count-decimal-whole", count_of("nvidia.com/gpu"), "2.0", 2),
    ("count-zero", count_of("example.com/dongle"), "0", 0),
]


@pytest.mark.parametrize(
    ("parse", "value", "expected"),
    [case[1:] for case in ACCEPTED],
    ids=[case[0] for case in ACCEPTED],
)
def test_accepted_value_parses_exactly(parse: Parser, value: Number, expected: int) -> None:
    result = parse(value)
    assert result == expected
    assert type(result) is int


def test_the_largest_amounts_stay_exact() -> None:
    assert parse_memory(f"{MAX_BYTES // 1024**4}Ti") == MAX_BYTES
    assert parse_cpu(f"{MAX_CORES - 1}.99") == MAX_CORES * 100 - 1
    assert parse_count("units", str(MAX_UNITS)) == MAX_UNITS


def test_many_digits_are_not_rounded_to_28() -> None:
    # 31 significant digits: a Decimal rounded to 28 would drop the final 5 and call it
    # a whole number of bytes.
    with pytest.raises(QuantityError, match="whole number of bytes"):
        parse_memory("1234567890123456.000000000000005Ki")
    assert parse_memory("1234567890123456.000000000000000Ki") == 1234567890123456 * 1024


@pytest.mark.parametrize(
    ("parse", "value", "unit"),
    [
        (parse_cpu, MAX_CORES + 1, "cores"),
        (parse_cpu, 3.8e16, "cores"),
        (parse_cpu, f"{MAX_CORES}.01", "cores"),
        (parse_cpu, f"{MAX_CORES * 1000 + 1}m", "cores"),
        (parse_memory, MAX_BYTES + 1, "bytes"),
        (parse_memory, "9999999Ti", "bytes"),
        (parse_gpu_memory, MAX_UNITS + 1, "GB"),
    ],
    ids=["cores", "float-cores", "fraction", "millicores", "bytes", "Ti", "gb"],
)
def test_an_amount_above_the_largest_is_refused(parse: Parser, value: Number, unit: str) -> None:
    with pytest.raises(QuantityError, match=f"above the largest amount allot takes, .* {unit}"):
        parse(value)


def test_a_long_text_is_refused_without_echoing_all_of_it() -> None:
    with pytest.raises(QuantityError, match="is not cores") as raised:
        parse_cpu("1" * 100_000)
    assert len(str(raised.value)) < 200


def test_share_base_below_one_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="share_base"):
        parse_cpu("1", share_base=0)


# --- refused values ----------------------------------------------------------------------

REFUSED: list[tuple[str, Parser, str, object, str]] = [
    # id, parser, field it names, value, words expected in .reason
    ("negative-string", parse_cpu, "cpu", "-1", "negative"),
    ("negative-int", parse_cpu, "cpu", -1, "negative"),
    ("negative-float", parse_cpu, "cpu", -0.5, "negative"),
    ("negative-memory", parse_memory, "memory", "-512Mi", "negative"),
    ("negative-count", count_of("nvidia.com/gpu"), "nvidia.com/gpu", -2, "negative"),
    ("nan-float", parse_cpu, "cpu", float("nan"), "not a finite number"),
    ("inf-float", parse_memory, "memory", float("inf"), "not a finite number"),
    ("minus-inf-float", parse_cpu, "cpu", float("-inf"), "not a finite number"),
    ("nan-decimal", parse_cpu, "cpu", Decimal("NaN"), "not a finite number"),
    ("nan-string", parse_cpu, "cpu", "nan", "is not cores"),
    ("inf-string", parse_memory, "memory", "inf", "is not bytes"),
    ("bool-true", parse_cpu, "cpu", True, "boolean"),
    ("bool-false-memory", parse_memory, "memory", False, "boolean"),
    ("bool-count", count_of("nvidia.com/gpu"), "nvidia.com/gpu", True, "boolean"),
    ("two-dots", parse_cpu, "cpu", "1.7.1", "is not cores"),
    ("letters", parse_cpu, "cpu", "abc", "is not cores"),
    ("empty", parse_cpu, "cpu", "", "is not cores"),
    ("leading-space", parse_cpu, "cpu", " 1", "is not cores"),
    ("trailing-space", parse_cpu, "cpu", "1 ", "is not cores"),
    ("exponent", parse_cpu, "cpu", "1e3", "is not cores"),
    ("plus-sign", parse_cpu, "cpu", "+1", "is not cores"),
    ("trailing-dot", parse_cpu, "cpu", "1.", "is not cores"),
    ("double-milli", parse_cpu, "cpu", "1mm", "is not cores"),
    ("arabic-indic-digit", parse_cpu, "cpu", "\u0661", "is not cores"),
    ("fullwidth-digits", parse_memory, "memory", "\uff15\uff11\uff12Mi", "is not bytes"),
    ("memory-suffix-on-cpu", parse_cpu, "cpu", "1Mi", "is not cores"),
    ("milli-on-memory", parse_memory, "memory", "512m", "is not bytes"),
    ("lowercase-k-memory", parse_memory, "memory", "1k", "is not bytes"),
    ("suffix-on-gpu-memory", parse_gpu_memory, "gpu-memory", "16Gi", "whole number of GB"),
    ("fraction-count", count_of("nvidia.com/gpu"), "nvidia.com/gpu", "1.5", "whole number"),
    ("fraction-count-float", count_of("nvidia.com/gpu"), "nvidia.com/gpu", 1.5, "whole number"),
    ("too-fine-cpu", parse_cpu, "cpu", "0.001", "finer than 1/100 of a core"),
    ("too-fine-millicore", parse_cpu, "cpu", "1m", "finer than 1/100 of a core"),
    ("too-fine-float-cpu", parse_cpu, "cpu", 0.005, "finer than 1/100 of a core"),
    ("half-byte", parse_memory, "memory", "0.5", "not a whole number of bytes"),
    ("fraction-gb", parse_gpu_memory, "gpu-memory", "1.5", "not a whole number of GB"),
    ("none", parse_cpu, "cpu", None, "has type NoneType"),
    ("list", parse_memory, "memory", [1], "has type list"),
    ("bytes", count_of("widgets"), "widgets", b"1", "has type bytes"),
]


@pytest.mark.parametrize(
    ("parse", "field", "value", "reason"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_refused_value_names_field_value_and_reason(
    parse: Parser, field: str, value: object, reason: str
) -> None:
    with pytest.raises(QuantityError) as caught:
        parse(value)  # type: ignore[arg-type]  # deliberately the wrong types too
    error = caught.value
    assert error.field == field
    assert error.value is value
    assert reason in error.reason
    message = str(error)
    assert message.startswith(f"{field}: ")
    assert repr(value) in message
    assert error.reason in message


def test_too_fine_cpu_is_fine_enough_with_a_larger_share_base() -> None:
    with pytest.raises(QuantityError, match="finer than 1/100"):
        parse_cpu("0.001")
    assert parse_cpu("0.001", share_base=1000) == 1


def test_custom_field_name_appears_in_the_error() -> None:
    with pytest.raises(QuantityError) as caught:
        parse_memory("lots", field="limits.memory")
    assert caught.value.field == "limits.memory"
    assert str(caught.value).startswith("limits.memory: 'lots' ")


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="cpu: 'x'"):
        parse_cpu("x")


# --- formatting --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pieces", "share_base", "expected"),
    [
        (170, 100, "1.7"),
        (200, 100, "2"),
        (0, 100, "0"),
        (1, 100, "0.01"),
        (1, 1000, "0.001"),
        (1700, 1000, "1.7"),
        (512, 1024, "0.5"),
        (1, 1024, "0.0009765625"),
        (7, 1, "7"),
        (1, 3, "1/3"),
        (10**27 + 1, 100, "10000000000000000000000000.01"),
    ],
    ids=[
        "decimal",
        "whole",
        "zero",
        "one-piece",
        "one-of-thousand",
        "base1000",
        "binary-half",
        "binary-smallest",
        "base1",
        "no-decimal-form",
        "27-digits",
    ],
)
def test_format_cpu(pieces: int, share_base: int, expected: str) -> None:
    assert format_cpu(pieces, share_base=share_base) == expected


def test_format_cpu_gives_the_exact_decimal_beyond_28_digits() -> None:
    # 10**30 + 1 thousandths of a core is exactly 1000000000000000000000000000.001 cores,
    # a decimal; it must not fall back to the "p/q" form just because it is long.
    assert format_cpu(10**30 + 1, share_base=1000) == "1000000000000000000000000000.001"


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (536870912, "512Mi"),
        (1536, "1536"),
        (1024, "1Ki"),
        (3 * 1024**4, "3Ti"),
        (1536 * 1024**3, "1536Gi"),
        (1000, "1000"),
        (0, "0"),
    ],
    ids=["mebi", "not-a-kibi-multiple", "kibi", "tebi", "gibi-not-tebi", "decimal", "zero"],
)
def test_format_memory(amount: int, expected: str) -> None:
    assert format_memory(amount) == expected


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (0, "0"),
        (1023, "1023"),
        (1024, "1.0Ki"),
        (1536, "1.5Ki"),
        (4187593113, "3.9Gi"),
        (512 * 1024**2, "512.0Mi"),
        (2 * 1024**4, "2.0Ti"),
        (5000 * 1024**4, "5000.0Ti"),
        (1024**2 - 1, "1.0Mi"),
        (1024**3 - 1, "1.0Gi"),
    ],
    ids=[
        "zero",
        "below-kibi",
        "one-kibi",
        "kibi-and-half",
        "gibi",
        "mebi",
        "tebi",
        "many-tebi",
        "rounds-up-to-mebi",
        "rounds-up-to-gibi",
    ],
)
def test_format_memory_approx(amount: int, expected: str) -> None:
    assert format_memory_approx(amount) == expected


# --- properties --------------------------------------------------------------------------


@settings(max_examples=300)
@given(
    pieces=st.integers(min_value=0, max_value=MAX_CORES), share_base=st.sampled_from(SHARE_BASES)
)
def test_format_cpu_round_trips(pieces: int, share_base: int) -> None:
    text = format_cpu(pieces, share_base=share_base)
    assume("/" not in text)  # the "p/q" form is not meant to be parsed back
    assert parse_cpu(text, share_base=share_base) == pieces


@settings(max_examples=300)
@given(pieces=st.integers(min_value=0), share_base=st.sampled_from(SHARE_BASES))
@example(pieces=10**30 + 1, share_base=1000)
@example(pieces=10**40 + 3, share_base=1024)
def test_format_cpu_prints_a_decimal_when_one_exists(pieces: int, share_base: int) -> None:
    # Each of these bases divides a power of ten, so every amount has an exact decimal
    # form, and format_cpu promises it whenever it exists, however many digits it takes.
    assert "/" not in format_cpu(pieces, share_base=share_base)


@settings(max_examples=200)
@given(
    pieces=st.integers(min_value=0, max_value=10**6),
    share_base=st.integers(min_value=1, max_value=2000),
)
def test_format_cpu_is_exact_for_any_share_base(pieces: int, share_base: int) -> None:
    text = format_cpu(pieces, share_base=share_base)
    if "/" in text:  # no decimal form: the exact fraction of a core
        numerator, denominator = (int(part) for part in text.split("/"))
        assert numerator * share_base == pieces * denominator
    else:
        assert parse_cpu(text, share_base=share_base) == pieces


@settings(max_examples=300)
@given(st.integers(min_value=0, max_value=MAX_BYTES))
def test_format_memory_round_trips(amount: int) -> None:
    assert parse_memory(format_memory(amount)) == amount


@settings(max_examples=300)
@given(
    n=st.integers(min_value=0, max_value=2**64), suffix=st.sampled_from(sorted(MEMORY_MULTIPLIERS))
)
def test_memory_suffix_multiplies_exactly(n: int, suffix: str) -> None:
    amount = n * MEMORY_MULTIPLIERS[suffix]
    if amount > MAX_BYTES:
        with pytest.raises(QuantityError, match="above the largest"):
            parse_memory(f"{n}{suffix}")
    else:
        assert parse_memory(f"{n}{suffix}") == amount


@settings(max_examples=300)
@given(
    whole=st.integers(min_value=0, max_value=MAX_CORES - 1),
    frac=st.integers(min_value=0, max_value=99),
    width=st.sampled_from((1, 2)),
)
def test_cpu_decimal_equals_integer_arithmetic(whole: int, frac: int, width: int) -> None:
    frac %= 10**width
    text = f"{whole}.{frac:0{width}d}"
    # Cores = whole + frac / 10**width, in hundredths of a core.
    assert parse_cpu(text) == whole * 100 + frac * 10 ** (2 - width)


@settings(max_examples=200)
@given(
    whole=st.integers(min_value=0, max_value=MAX_CORES - 1),
    frac=st.integers(min_value=1, max_value=999),
)
def test_cpu_thousandths_need_a_fine_enough_share_base(whole: int, frac: int) -> None:
    text = f"{whole}.{frac:03d}"
    assert parse_cpu(text, share_base=1000) == whole * 1000 + frac
    if frac % 10:
        with pytest.raises(QuantityError, match="finer than 1/100"):
            parse_cpu(text)
    else:
        assert parse_cpu(text) == whole * 100 + frac // 10


@settings(max_examples=200)
@given(st.integers(min_value=0, max_value=MAX_CORES * 1000))
def test_millicores_are_thousandths_of_a_core(milli: int) -> None:
    assert parse_cpu(f"{milli}m", share_base=1000) == milli
    if milli % 10:
        with pytest.raises(QuantityError, match="finer than 1/100"):
            parse_cpu(f"{milli}m")
    else:
        assert parse_cpu(f"{milli}m") == milli // 10


@settings(max_examples=200)
@given(st.integers(max_value=-1))
def test_any_negative_int_is_refused(value: int) -> None:
    for parse in (parse_cpu, parse_memory, parse_gpu_memory, count_of("widgets")):
        with pytest.raises(QuantityError, match="negative"):
            parse(value)


@pytest.mark.parametrize(
    ("value", "text"),
    [(3.8e16, "38000000000000000"), (0.5, "0.5"), (1e-05, "0.00001"), (2, "2"), (1.7, "1.7")],
)
def test_decimal_text_is_what_the_json_number_said(value: int | float, text: str) -> None:
    assert decimal_text(value) == text
    assert Decimal(text) == Decimal(repr(value))
