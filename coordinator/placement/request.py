"""What one container asks for, checked and normalised (placement spec sections 3 and 4).

Invariant: every ``Normalized`` obeys all ten rules of section 4 -- no negative amount,
every container has CPU, a bound one reserves its limit, a limit is 0 (none) or at least its
request, memory is 0 or at least 6 MiB, a memory-mode container has memory and either no
CPU limit or one of at least 0.01 core. Amounts are exact integers: CPU in pieces
(``share_base`` per core), memory in bytes.

    normalize(Resources(cpu_request="1.7", memory_request="512Mi", cpu_bind=True))
        -> Normalized(cpu_request=170, cpu_limit=0, memory_request=536870912,
                      memory_limit=0, cpu_bind=True, soft_memory=False, share_base=100)
    Request("1.7", 512 * MiB, cpu_bind=True).normalized(100).cpu_request   -> 170
    signed_cpu("-0.5", field="cpu", share_base=100)                          -> -50

A ``Request`` is the engine's short form: ``cpu`` and ``memory`` stand for the request
*and* the limit (Eru's ``--cpu 1.7 --memory 512M``), so ``Request(cpu, memory, b)`` is
``Resources(cpu, cpu, memory, memory, b)``. Errors are ``PlacementError("invalid_request")``
naming the field, the value and the rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from coordinator.placement.errors import invalid_request
from shared.quantity import QuantityError, format_cpu, format_memory, parse_cpu, parse_memory

MiB = 2**20
MIN_MEMORY = 6 * MiB  # Docker Engine 20.10+ refuses a memory limit below this
DEFAULT_SHARE_BASE = 100

CpuValue = str | int | float | Decimal
MemoryValue = int | str


@dataclass(frozen=True, slots=True)
class Resources:
    """A container's resources as the user wrote them (section 4): CPU as exact decimals
    ("1.7", "500m", 2), memory as bytes or quantity strings ("512Mi"); 0 = not given."""

    cpu_request: CpuValue = 0
    cpu_limit: CpuValue = 0
    memory_request: MemoryValue = 0
    memory_limit: MemoryValue = 0
    cpu_bind: bool = False
    soft_memory: bool = False


@dataclass(frozen=True, slots=True)
class Normalized:
    """Resources after section 4: CPU in pieces of ``share_base``, memory in bytes.

    ``cpu_limit == 0``: no CFS quota (memory mode); ``memory_limit == 0``: no hard limit
    (the node is still charged ``memory_request``).
    """

    cpu_request: int
    cpu_limit: int
    memory_request: int
    memory_limit: int
    cpu_bind: bool = False
    soft_memory: bool = False
    share_base: int = DEFAULT_SHARE_BASE

    def describe(self) -> str:
        """``"1.7 CPU + 512Mi"`` (the request), for messages."""
        return describe(self.cpu_request, self.memory_request, self.share_base)


@dataclass(frozen=True, slots=True)
class Request:
    """The engine's request: ``cpu`` cores (exact decimal: "1.7", or an int / float taken
    as its shortest decimal), ``memory`` bytes (or a quantity string; 0 = no memory
    bound, cpu-bind only), ``cpu_bind``. Request and limit are the same amounts.

    Memory and the flag are checked when it is built (``memory`` becomes an int); the CPU
    only when a share_base is known (``normalized``), because "finer than a piece"
    depends on it.
    """

    cpu: CpuValue
    memory: MemoryValue = 0
    cpu_bind: bool = False

    def __post_init__(self) -> None:
        check_flag("cpu_bind", self.cpu_bind)
        if isinstance(self.cpu, bool):
            raise invalid_request("cpu", self.cpu, "must be a number of cores, not a boolean")
        object.__setattr__(self, "memory", memory_amount("memory", self.memory))
        memory = int(self.memory)
        if 0 < memory < MIN_MEMORY:
            raise invalid_request(
                "memory", memory, f"must be 0 or at least {MIN_MEMORY} bytes (6Mi)"
            )
        if not self.cpu_bind and memory == 0:
            raise invalid_request("memory", memory, "memory mode needs memory > 0")

    def normalized(self, share_base: int = DEFAULT_SHARE_BASE) -> Normalized:
        """The request as ``Normalized`` resources with limit = request. Cost O(len(cpu))."""
        return normalize(
            Resources(self.cpu, self.cpu, self.memory, self.memory, self.cpu_bind), share_base
        )


# --- checks -----------------------------------------------------------------------------


def check_flag(field: str, value: object) -> None:
    """Raise ``invalid_request`` unless ``value`` is a real boolean (not 1, not "yes")."""
    if type(value) is not bool:
        raise invalid_request(field, value, "must be a boolean (true or false)")


def cpu_amount(field: str, value: object, share_base: int) -> int:
    """Non-negative cores as exact pieces, or ``invalid_request`` (malformed, NaN,
    infinite, negative, finer than 1/share_base, boolean)."""
    try:
        return parse_cpu(value, field=field, share_base=share_base)  # type: ignore[arg-type]
    except QuantityError as error:
        raise invalid_request(field, value, error.reason) from None


def memory_amount(field: str, value: object) -> int:
    """Non-negative bytes (an int or "512Mi"), or ``invalid_request``; never a silent 0."""
    try:
        return parse_memory(value, field=field)  # type: ignore[arg-type]
    except QuantityError as error:
        raise invalid_request(field, value, error.reason) from None


def _negated(value: object) -> tuple[bool, object]:
    # (negative?, magnitude) of a signed quantity: "-0.5" -> (True, "0.5"), -2 -> (True, 2),
    # "+32Mi" -> (False, "32Mi"): allotctl and the README write growth with a plus.
    if isinstance(value, str) and value.startswith(("-", "+")):
        return value[0] == "-", value[1:]
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool) and value < 0:
        return True, -value
    return False, value


def signed_cpu(value: object, *, field: str, share_base: int) -> int:
    """A CPU delta (signed: "-0.5", "+0.5", -1) as exact pieces. Realloc only."""
    negative, magnitude = _negated(value)
    pieces = cpu_amount(field, magnitude, share_base)
    return -pieces if negative else pieces


def signed_memory(value: object, *, field: str) -> int:
    """A memory delta (signed: "-512Mi", "+32Mi", -1024) as bytes. Realloc and SetNode."""
    negative, magnitude = _negated(value)
    amount = memory_amount(field, magnitude)
    return -amount if negative else amount


def describe(cpu: int, memory: int, share_base: int) -> str:
    """``"1.7 CPU + 512Mi"``; memory omitted when 0."""
    text = f"{format_cpu(cpu, share_base=share_base)} CPU"
    return f"{text} + {format_memory(memory)}" if memory else text


# --- section 4 --------------------------------------------------------------------------


def normalize(resources: Resources, share_base: int = DEFAULT_SHARE_BASE) -> Normalized:
    """Resources parsed exactly (section 3) and normalised by section 4, steps 1-10.

    Postcondition: the result satisfies the module invariant, or ``invalid_request`` is
    raised naming the first field that breaks a rule (flags first, then the quantities
    in field order, then the steps in order). Cost O(length of the quantities).
    """
    check_share_base(share_base)
    check_flag("cpu_bind", resources.cpu_bind)
    check_flag("soft_memory", resources.soft_memory)
    return normalize_amounts(
        cpu_amount("cpu_request", resources.cpu_request, share_base),
        cpu_amount("cpu_limit", resources.cpu_limit, share_base),
        memory_amount("memory_request", resources.memory_request),
        memory_amount("memory_limit", resources.memory_limit),
        cpu_bind=resources.cpu_bind,
        soft_memory=resources.soft_memory,
        share_base=share_base,
    )


def check_share_base(share_base: object) -> None:
    """``invalid_request`` unless share_base is an integer >= 1."""
    if type(share_base) is not int or share_base < 1:
        raise invalid_request("share_base", share_base, "must be an integer >= 1 (pieces per core)")


def normalize_amounts(
    cpu_request: int,
    cpu_limit: int,
    memory_request: int,
    memory_limit: int,
    *,
    cpu_bind: bool,
    soft_memory: bool,
    share_base: int,
) -> Normalized:
    """Section 4 on exact amounts (pieces, bytes), which may be negative (a realloc adds
    signed deltas first). Postcondition as ``normalize``. Cost O(1)."""
    check_flag("cpu_bind", cpu_bind)
    check_flag("soft_memory", soft_memory)
    p = share_base

    def cores(pieces: int) -> str:
        return format_cpu(pieces, share_base=p)

    # 1. A request defaults to the limit.
    if cpu_request == 0 and cpu_limit > 0:
        cpu_request = cpu_limit
    # 2. Nothing negative.
    for field, cpu in (("cpu_request", cpu_request), ("cpu_limit", cpu_limit)):
        if cpu < 0:
            raise invalid_request(field, cores(cpu), "is negative")
    for field, memory in (("memory_request", memory_request), ("memory_limit", memory_limit)):
        if memory < 0:
            raise invalid_request(field, memory, "is negative")
    # 3. Every container asks for some CPU (Eru: bound ones only): an unbound one is
    #    charged its request on the node's shared pool, and without one it would run
    #    uncounted by the node and the quotas.
    if cpu_request == 0:
        rule = "cpu-bind needs cpu > 0" if cpu_bind else "must be > 0: every container asks for CPU"
        raise invalid_request("cpu_request", "0", rule)
    # 4.-6. Memory request defaults to the limit; a limit below its request is raised to it.
    if memory_request == 0 and memory_limit > 0:
        memory_request = memory_limit
    if 0 < memory_limit < memory_request:
        memory_limit = memory_request
    if 0 < cpu_limit < cpu_request:
        cpu_limit = cpu_request
    # 7. A bound container reserves its limit.
    if cpu_bind and cpu_limit > cpu_request:
        cpu_request = cpu_limit
    # 8. Docker's minimum.
    for field, memory in (("memory_request", memory_request), ("memory_limit", memory_limit)):
        if 0 < memory < MIN_MEMORY:
            raise invalid_request(field, memory, f"must be 0 or at least {MIN_MEMORY} bytes (6Mi)")
    if not cpu_bind:
        # 9. Memory mode is planned by memory alone.
        if memory_request == 0:
            raise invalid_request("memory_request", 0, "memory mode needs memory > 0")
        # 10. A CFS quota under 1 ms of each 100 ms period: cpu_limit / P < 1/100.
        if cpu_limit > 0 and cpu_limit * 100 < p:
            raise invalid_request(
                "cpu_limit", cores(cpu_limit), "memory mode needs 0 (no quota) or >= 0.01"
            )
    return Normalized(
        cpu_request, cpu_limit, memory_request, memory_limit, cpu_bind, soft_memory, share_base
    )
