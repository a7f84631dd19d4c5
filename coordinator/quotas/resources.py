"""Resource names and exact quantities of the quota engine (spec sections 2, 3 and 9).

The name rules themselves live in ``shared.resource_names`` (the agent checks the
extended resources it offers by them too).

Invariant: every amount the engine computes with is a ``fractions.Fraction`` in the
resource's unit -- ``cpu`` in cores (a multiple of 1/share_base), ``memory`` in bytes,
``gpu-memory`` in GB, every device or extended resource in units -- so sums, shares and
comparisons are exact; nothing is floored, rounded or held as a float.

    parse_amount("cpu", "500m", share_base=100)                -> Fraction(1, 2)
    parse_request({"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 2})
        -> {"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 2, "gpu-memory": 42}
    gpu_memory_gb({"nvidia.com/mig-1g.10gb": 1, "nvidia.com/gpu": 2})   -> 42
    encode_amounts({"cpu": Fraction(17, 10), "memory": Fraction(2**29)})
        -> {"cpu": "1.7", "memory": 536870912}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction

from coordinator.quotas.errors import QuotaError
from shared.quantity import (
    DEFAULT_SHARE_BASE,
    QuantityError,
    exact_decimal,
    parse_count,
    parse_cpu,
    parse_gpu_memory,
    parse_memory,
)
from shared.resource_names import NVIDIA_GPU, mig_memory_gb, resource_name_problem
from shared.resources import CPU, GPU_MEMORY, MEMORY

DEFAULT_GB_PER_GPU = 16

# What users may write as a quantity (JSON or TOML numbers, strings, exact decimals).
Quantity = int | float | str | Decimal
Amounts = dict[str, Fraction]

# The order in which resource problems are reported: one code per error (section 3).
_NAME_CODES = ("invalid_resource_name", "malformed_mig_name")


def parse_amount(
    resource: str, value: object, *, share_base: int = DEFAULT_SHARE_BASE, field: str = ""
) -> Fraction:
    """The exact amount ``value`` stands for in ``resource``'s unit, or ``QuantityError``.

    cpu: cores in steps of 1/share_base ("1.7", 2, "500m"); memory: whole bytes ("512Mi");
    gpu-memory: whole GB without a suffix; anything else: a whole count. Negative, NaN,
    infinite, boolean, empty or too fine values are refused. O(len(value)).
    """
    where = field or resource
    if resource == CPU:
        pieces = parse_cpu(value, field=where, share_base=share_base)  # type: ignore[arg-type]
        return Fraction(pieces, share_base)
    if resource == MEMORY:
        return Fraction(parse_memory(value, field=where))  # type: ignore[arg-type]
    if resource == GPU_MEMORY:
        return Fraction(parse_gpu_memory(value, field=where))  # type: ignore[arg-type]
    return Fraction(parse_count(where, value))  # type: ignore[arg-type]


def plain(value: object) -> object:
    """``value`` as a JSON-safe detail: strings, integers and booleans as they are,
    anything else (float, Decimal, None, containers) as its ``str``."""
    return value if isinstance(value, str | int) else str(value)


def collect_amounts(
    amounts: object,
    *,
    field: str,
    share_base: int,
    problems: dict[str, list[dict[str, object]]],
    gpu_memory_allowed: bool = True,
    fractions_allowed: bool = False,
) -> Amounts:
    """Parse a map of resource -> quantity, adding every problem to ``problems`` (code ->
    items) instead of raising; returns the amounts that parsed. A key with a bad name is
    not also reported for its quantity. ``fractions_allowed``: a ``Fraction`` value is
    taken as an exact amount (for maps the coordinator builds, like ``free``). O(r)."""
    parsed: Amounts = {}
    if amounts is None:
        return parsed
    if not isinstance(amounts, Mapping):
        problems.setdefault("invalid_quantity", []).append(
            {"field": field, "value": plain(amounts), "reason": "is not a map of resources"}
        )
        return parsed
    for name, value in amounts.items():
        where = f"{field}.{name}"
        code = resource_name_problem(name)
        if code is not None:
            problems.setdefault(code, []).append({"field": where, "resource": plain(name)})
            continue
        if name == GPU_MEMORY and not gpu_memory_allowed:
            problems.setdefault("gpu_memory_not_requestable", []).append(
                {"field": where, "resource": name, "value": plain(value)}
            )
            continue
        if fractions_allowed and isinstance(value, Fraction):
            if value < 0:
                problems.setdefault("invalid_quantity", []).append(
                    {"field": where, "value": str(value), "reason": "is negative"}
                )
                continue
            parsed[name] = value
            continue
        try:
            parsed[name] = parse_amount(name, value, share_base=share_base, field=where)
        except QuantityError as error:
            problems.setdefault("invalid_quantity", []).append(
                {"field": where, "value": plain(value), "reason": error.reason}
            )
    return parsed


def raise_first(
    problems: Mapping[str, list[dict[str, object]]],
    order: tuple[str, ...],
    *,
    subject: str,
    extra: Mapping[str, object] | None = None,
) -> None:
    """Raise ``QuotaError`` for the first code of ``order`` that has problems, its
    details listing every item of that code; return when there are none."""
    for code in order:
        items = problems.get(code)
        if not items:
            continue
        described = "; ".join(_describe(item) for item in items)
        raise QuotaError(
            code,
            f"{subject}: {_TITLES[code]}: {described}",
            details={**(extra or {}), "items": list(items)},
        )


_TITLES = {
    "invalid_name": "not an RFC 1123 label (a-z, 0-9, '-', at most 63 characters)",
    "empty_namespaces": "names no namespace",
    "duplicate_namespace": "names a namespace more than once",
    "too_many_namespaces": "an ElasticQuota governs exactly one namespace",
    "invalid_resource_name": "not cpu, memory, gpu-memory or <domain>/<name>",
    "malformed_mig_name": "not nvidia.com/mig-<N>g.<M>gb[+me]",
    "invalid_quantity": "invalid quantity",
    "max_below_min": "max is below min",
    "gpu_memory_not_requestable": "gpu-memory is derived and cannot be requested",
    "quota_name_taken": "the name belongs to a quota of the other kind",
    "namespace_has_elasticquota": "an ElasticQuota already governs the namespace",
    "namespace_in_composite": "a CompositeElasticQuota already governs the namespace",
}


def _describe(item: Mapping[str, object]) -> str:
    return " ".join(
        f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"
        for key, value in item.items()
    )


# Rules of a request, in the order they are reported.
REQUEST_ORDER = (*_NAME_CODES, "gpu_memory_not_requestable", "invalid_quantity")


def check_gb_per_gpu(gb_per_gpu: object) -> int:
    """``gb_per_gpu`` if it is a positive integer (not a boolean), else ``invalid_config``."""
    if isinstance(gb_per_gpu, bool) or not isinstance(gb_per_gpu, int) or gb_per_gpu < 1:
        raise QuotaError(
            "invalid_config",
            f"nvidia_gpu_resource_memory_gb = {gb_per_gpu!r} must be a positive integer",
            details={"field": "nvidia_gpu_resource_memory_gb", "value": plain(gb_per_gpu)},
        )
    return gb_per_gpu


def check_cooldown(cooldown_s: object) -> float:
    """``cooldown_s`` if it is a finite number >= 0 (not a boolean), else ``invalid_config``."""
    if (
        isinstance(cooldown_s, bool)
        or not isinstance(cooldown_s, int | float)
        or not math.isfinite(cooldown_s)
        or cooldown_s < 0
    ):
        raise QuotaError(
            "invalid_config",
            f"preemption_cooldown_s = {cooldown_s!r} must be a finite number >= 0",
            details={"field": "preemption_cooldown_s", "value": plain(cooldown_s)},
        )
    return float(cooldown_s)


def parse_request(
    requests: object,
    *,
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    share_base: int = DEFAULT_SHARE_BASE,
    field: str = "requests",
) -> Amounts:
    """A container's request, validated whole, as exact amounts plus its derived
    ``gpu-memory`` (section 9) when that is above 0.

    Raises ``QuotaError``: ``invalid_config`` (gb_per_gpu < 1), then, listing every
    offending key, ``invalid_resource_name``, ``malformed_mig_name``,
    ``gpu_memory_not_requestable``, ``invalid_quantity``. Equivalent to the requests as
    parsed plus ``gpu-memory = gb_per_gpu * nvidia.com/gpu + sum(M * count)`` over the MIG
    names. O(r) for r resources.
    """
    check_gb_per_gpu(gb_per_gpu)
    problems: dict[str, list[dict[str, object]]] = {}
    parsed = collect_amounts(
        requests,
        field=field,
        share_base=share_base,
        problems=problems,
        gpu_memory_allowed=False,
    )
    raise_first(problems, REQUEST_ORDER, subject=f"invalid {field}")
    gb = Fraction(0)
    for name, amount in parsed.items():
        if name == NVIDIA_GPU:
            gb += gb_per_gpu * amount
        else:
            per_device = mig_memory_gb(name)
            if per_device is not None:
                gb += per_device * amount
    if gb > 0:
        parsed[GPU_MEMORY] = gb
    return parsed


def gpu_memory_gb(
    requests: Mapping[str, object],
    gb_per_gpu: int = DEFAULT_GB_PER_GPU,
    *,
    share_base: int = DEFAULT_SHARE_BASE,
) -> int:
    """The GB of GPU memory a request is charged (section 9):
    ``gb_per_gpu * request[nvidia.com/gpu] + sum(M * count)`` over the MIG names
    ``nvidia.com/mig-<N>g.<M>gb[+me]``; every other resource adds 0.

    Validates the whole request first and raises ``QuotaError`` as ``parse_request``
    does (``invalid_config``, ``invalid_resource_name``, ``malformed_mig_name``,
    ``gpu_memory_not_requestable``, ``invalid_quantity``); CPU is checked in steps of
    1/share_base. O(r).
    """
    parsed = parse_request(requests, gb_per_gpu=gb_per_gpu, share_base=share_base)
    amount = parsed.get(GPU_MEMORY, Fraction(0))
    return amount.numerator  # a whole number: counts times whole GB


def format_amount(resource: str, value: Fraction) -> int | str:
    """An exact amount as a JSON value: ``cpu`` always as a decimal string of cores
    ("1.7", "2"); any other resource as an integer when whole (bytes, GB, units), else
    as its exact decimal string ("3.75"); a value without a finite decimal (a share such
    as 2/3) as the string "p/q"."""
    if resource != CPU and value.denominator == 1:
        return value.numerator
    text = exact_decimal(value)
    return text if text is not None else f"{value.numerator}/{value.denominator}"


def encode_amounts(amounts: Mapping[str, Fraction]) -> dict[str, int | str]:
    """``format_amount`` over a map, keys in the same order. O(r)."""
    return {name: format_amount(name, value) for name, value in amounts.items()}


def fits(need: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> bool:
    """True when ``need[r] <= free[r]`` for every resource named in ``free`` (resources
    ``free`` does not name are unconstrained; absent from ``need`` = 0). O(len(free))."""
    return all(need.get(name, 0) <= amount for name, amount in free.items())


def add_into(total: Amounts, amounts: Mapping[str, Fraction], sign: int = 1) -> None:
    """``total += sign * amounts``, per resource, in place. O(len(amounts))."""
    for name, amount in amounts.items():
        total[name] = total.get(name, Fraction(0)) + sign * amount
