"""A vector of resource amounts with exact integer arithmetic.

Amounts are integers in each resource's unit: ``cpu`` in pieces (share_base per core),
``memory`` in bytes, ``gpu-memory`` in GB, everything else (``nvidia.com/gpu``, MIG
profiles, extended resources) in whole units. A missing resource is zero, so vectors
with different keys combine naturally:

    a = ResourceVector.parse({"cpu": "1.5", "memory": "1Gi"})
    b = ResourceVector({"cpu": 50})
    a + b == ResourceVector({"cpu": 200, "memory": 1073741824})
    b.fits_in(a)    # True: every amount of b is at most a's
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from shared.quantity import (
    DEFAULT_SHARE_BASE,
    Number,
    parse_count,
    parse_cpu,
    parse_gpu_memory,
    parse_memory,
)

CPU = "cpu"
MEMORY = "memory"
GPU_MEMORY = "gpu-memory"


def parse_amount(name: str, value: Number, *, share_base: int = DEFAULT_SHARE_BASE) -> int:
    """One resource's quantity in its unit; ``QuantityError`` names the resource."""
    if name == CPU:
        return parse_cpu(value, field=name, share_base=share_base)
    if name == MEMORY:
        return parse_memory(value, field=name)
    if name == GPU_MEMORY:
        return parse_gpu_memory(value, field=name)
    return parse_count(name, value)


class ResourceVector(Mapping[str, int]):
    """An immutable mapping resource name -> integer amount; zero amounts are not stored,
    so equal vectors compare and hash equal whatever zeros they were built with."""

    __slots__ = ("_amounts",)

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        items = (amounts or {}).items()
        for name, amount in items:
            if isinstance(amount, bool) or not isinstance(amount, int):
                raise TypeError(f"{name}: amount must be an int, got {amount!r}")
        self._amounts = {name: amount for name, amount in sorted(items) if amount != 0}

    @classmethod
    def parse(
        cls, quantities: Mapping[str, Number], *, share_base: int = DEFAULT_SHARE_BASE
    ) -> ResourceVector:
        """Quantities as users write them ({"cpu": "1.7", "memory": "512Mi"})."""
        return cls(
            {name: parse_amount(name, v, share_base=share_base) for name, v in quantities.items()}
        )

    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def get_amount(self, name: str) -> int:
        """The amount of ``name``, zero when absent."""
        return self._amounts.get(name, 0)

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ResourceVector):
            return self._amounts == other._amounts
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self._amounts.items()))

    def __repr__(self) -> str:
        return f"ResourceVector({self._amounts!r})"

    def __add__(self, other: ResourceVector) -> ResourceVector:
        names = self._amounts.keys() | other._amounts.keys()
        return ResourceVector({n: self.get_amount(n) + other.get_amount(n) for n in names})

    def __sub__(self, other: ResourceVector) -> ResourceVector:
        names = self._amounts.keys() | other._amounts.keys()
        return ResourceVector({n: self.get_amount(n) - other.get_amount(n) for n in names})

    def __neg__(self) -> ResourceVector:
        return ResourceVector({n: -a for n, a in self._amounts.items()})

    def __mul__(self, factor: int) -> ResourceVector:
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return ResourceVector({n: a * factor for n, a in self._amounts.items()})

    __rmul__ = __mul__

    def fits_in(self, other: ResourceVector) -> bool:
        """Every amount of self is at most other's (missing amounts are zero)."""
        names = self._amounts.keys() | other._amounts.keys()
        return all(self.get_amount(n) <= other.get_amount(n) for n in names)

    def is_nonnegative(self) -> bool:
        return all(a > 0 for a in self._amounts.values())
