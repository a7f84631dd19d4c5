"""Exact parsing of the quantities users write: CPU, memory, GPU memory and counts.

    parse_cpu("1.7")          == 170          # pieces, share_base 100 per core
    parse_cpu("500m")         == 50
    parse_memory("512Mi")     == 536870912    # bytes
    parse_memory("1.5K")      == 1500
    parse_gpu_memory(16)      == 16           # GB
    parse_count("nvidia.com/gpu", "2") == 2

Every parser returns an exact integer in its unit or raises ``QuantityError`` naming
the field and the value. Nothing is ever truncated or rounded: a value finer than the
unit ("0.001" of a core with share_base 100, "0.5" bytes) is refused, as is anything
negative, non-finite, boolean, malformed, or above the largest amount allot takes
(``MAX_CORES``, ``MAX_BYTES``, ``MAX_UNITS``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

DEFAULT_SHARE_BASE = 100
# The largest amounts taken, far above any host or cluster (a cluster of 65,536 hosts of
# 256 cores is 2**24 cores), so that every figure derived from one -- CPU pieces, a CFS
# quota in microseconds, bytes for Docker -- stays well inside a signed 64-bit integer.
MAX_CORES = 2**24
MAX_BYTES = 2**62
MAX_UNITS = 2**32
MAX_QUANTITY_TEXT = 64  # characters: more digits than any amount below these needs

_DECIMAL = re.compile(r"([0-9]+(?:\.[0-9]+)?|\.[0-9]+)([A-Za-z]*)")  # ASCII digits only
_MEMORY_SUFFIXES = {
    "": 1,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_CPU_SUFFIXES = {"": Fraction(1), "m": Fraction(1, 1000)}

Number = int | float | str | Decimal


class QuantityError(ValueError):
    """A quantity that cannot be taken exactly; the message names the field and value."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field}: {value!r} {reason}")
        self.field = field
        self.value = value
        self.reason = reason


def parse_cpu(value: Number, *, field: str = "cpu", share_base: int = DEFAULT_SHARE_BASE) -> int:
    """Cores ("1.7", 2, "500m") as integer pieces: ``cores * share_base``, exactly."""
    if share_base < 1:
        raise ValueError(f"share_base must be at least 1, got {share_base}")
    cores = _scaled(field, value, _CPU_SUFFIXES, "cores, like '1.7', '2' or '500m'")
    _at_most(field, value, cores, MAX_CORES, "cores")
    return _whole(field, value, cores * share_base, f"is finer than 1/{share_base} of a core")


def parse_memory(value: Number, *, field: str = "memory") -> int:
    """Bytes: an integer, or a number with K M G T (powers of 1000) or Ki Mi Gi Ti
    (powers of 1024) that comes to whole bytes ("512Mi", "1.5K")."""
    suffixes = {k: Fraction(v) for k, v in _MEMORY_SUFFIXES.items()}
    amount = _scaled(field, value, suffixes, "bytes, like '536870912', '512Mi' or '2G'")
    _at_most(field, value, amount, MAX_BYTES, "bytes")
    return _whole(field, value, amount, "is not a whole number of bytes")


def parse_gpu_memory(value: Number, *, field: str = "gpu-memory") -> int:
    """GPU memory in whole GB, written without a suffix (16, "16")."""
    return parse_count(field, value, unit="GB")


def parse_count(field: str, value: Number, *, unit: str = "") -> int:
    """A whole, non-negative number of devices or units, without a suffix."""
    described = f"a whole number of {unit}" if unit else "a whole number"
    amount = _scaled(field, value, {"": Fraction(1)}, described)
    _at_most(field, value, amount, MAX_UNITS, unit or "units")
    return _whole(field, value, amount, f"is not {described}")


def format_cpu(pieces: int, *, share_base: int = DEFAULT_SHARE_BASE) -> str:
    """Pieces as cores, the shortest exact decimal: 170 -> "1.7", 200 -> "2".

    A share_base with a prime factor other than 2 and 5 (3, say) can give a fraction
    without a finite decimal; it is printed exactly as "p/q" instead.
    """
    exact = Fraction(pieces, share_base)
    return exact_decimal(exact) or f"{exact.numerator}/{exact.denominator}"


def exact_decimal(value: Fraction) -> str | None:
    """The shortest exact decimal of ``value`` ("1.7", "3.75", "-2"), or None when it has
    none (2/3: the denominator has a prime factor other than 2 and 5). O(digits)."""
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        return None
    # With the fewest places that hold the value exactly, it never ends in a zero.
    places = max(twos, fives)
    digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    if places == 0:
        return sign + digits
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def decimal_text(value: int | float) -> str:
    """A JSON number as the plain decimal a quantity string takes, exactly as written:
    3.8e16 -> "38000000000000000", 0.5 -> "0.5" (``str`` would give "3.8e+16")."""
    exact = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return format(exact, "f")


def format_memory(amount: int) -> str:
    """Bytes in the largest binary unit that divides them exactly ("512Mi", "1536")."""
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = _MEMORY_SUFFIXES[suffix]
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def format_memory_approx(amount: int) -> str:
    """Bytes for a human to read, to one decimal in the largest binary unit that keeps
    the figure at least 1 ("3.9Gi"; 1048575 bytes is "1.0Mi", not "1024.0Ki")."""
    if amount < 1024:
        return str(amount)
    suffixes = ("Ki", "Mi", "Gi", "Ti")
    for suffix in suffixes[:-1]:
        figure = round(amount / _MEMORY_SUFFIXES[suffix], 1)
        if figure < 1024:
            return f"{figure:.1f}{suffix}"
    return f"{amount / _MEMORY_SUFFIXES['Ti']:.1f}Ti"


def _scaled(field: str, value: Number, suffixes: dict[str, Fraction], expected: str) -> Fraction:
    """The exact decimal a value stands for, its suffix applied; refuses anything else."""
    if isinstance(value, bool):
        raise QuantityError(field, value, f"is a boolean, expected {expected}")
    if isinstance(value, int | Decimal | float):
        number = _exact(field, value)
        if number < 0:
            raise QuantityError(field, value, "is negative")
        return number
    if not isinstance(value, str):
        raise QuantityError(field, value, f"has type {type(value).__name__}, expected {expected}")
    if len(value) > MAX_QUANTITY_TEXT:
        raise QuantityError(field, value[:MAX_QUANTITY_TEXT] + "...", f"is not {expected}")
    match = _DECIMAL.fullmatch(value)
    if match is None or match.group(2) not in suffixes:
        reason = "is negative" if value.strip().startswith("-") else f"is not {expected}"
        raise QuantityError(field, value, reason)
    return Fraction(Decimal(match.group(1))) * suffixes[match.group(2)]


def _exact(field: str, value: int | float | Decimal) -> Fraction:
    # A float is taken as the shortest decimal that prints as it (repr), which is what
    # the user wrote in JSON or TOML: 1.7 means 1.7, not 1.6999999999999999556.
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation as error:
        raise QuantityError(field, value, "is not a number") from error
    if not number.is_finite():
        raise QuantityError(field, value, "is not a finite number")
    return Fraction(number)


def _at_most(field: str, value: object, amount: Fraction, most: int, unit: str) -> None:
    if amount > most:
        raise QuantityError(field, value, f"is above the largest amount allot takes, {most} {unit}")


def _whole(field: str, value: object, amount: Fraction, reason: str) -> int:
    if amount.denominator != 1:
        raise QuantityError(field, value, reason)
    return amount.numerator
