"""A set of CPU ids that reads and writes the kernel's list format.

The kernel, Docker's ``cpuset_cpus`` and the operator all use the same notation, so it
is parsed and printed in exactly one place:

    >>> CpuSet.parse("0-3,8")
    CpuSet('0-3,8')
    >>> str(CpuSet.parse("8,0-3") - CpuSet.parse("2"))
    '0-1,3,8'
    >>> len(CpuSet.parse(""))
    0
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")
# Linux builds for at most 8192 CPUs (CONFIG_NR_CPUS with MAXSMP); a bound well above
# that keeps a hostile "0-4000000000" from building a set of billions of ids.
MAX_CPU_ID = 65535


class CpuSetError(ValueError):
    """The text is not in the kernel's list format (``0-3,8``)."""


class CpuSet:
    """An immutable, hashable set of non-negative CPU ids, iterated in ascending order."""

    __slots__ = ("_ids",)

    def __init__(self, ids: Iterable[int] = ()) -> None:
        frozen = frozenset(ids)
        if any(i < 0 for i in frozen):
            raise CpuSetError(f"CPU ids must be non-negative, got {sorted(frozen)}")
        self._ids = frozen

    @classmethod
    def parse(cls, text: str) -> CpuSet:
        """Parse ``"0-3,8"``; blank text (an empty sysfs file) is the empty set."""
        ids: set[int] = set()
        stripped = text.strip()
        if not stripped:
            return cls()
        for part in stripped.split(","):
            match = _RANGE.fullmatch(part.strip())
            if match is None:
                raise CpuSetError(f"{text.strip()!r} is not a CPU list like '0-3,8'")
            first = int(match.group(1))
            last = int(match.group(2)) if match.group(2) is not None else first
            if last < first:
                raise CpuSetError(f"{text.strip()!r} has a descending range {part.strip()!r}")
            if last > MAX_CPU_ID:
                raise CpuSetError(f"{text.strip()!r} names CPU {last}, above {MAX_CPU_ID}")
            ids.update(range(first, last + 1))
        return cls(ids)

    def __str__(self) -> str:
        parts: list[str] = []
        ordered = sorted(self._ids)
        start = 0
        while start < len(ordered):
            end = start
            while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
                end += 1
            first, last = ordered[start], ordered[end]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = end + 1
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"CpuSet({str(self)!r})"

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._ids))

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, cpu: object) -> bool:
        return cpu in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CpuSet) and self._ids == other._ids

    def __hash__(self) -> int:
        return hash(self._ids)

    def __or__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._ids | other._ids)

    def __and__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._ids & other._ids)

    def __sub__(self, other: CpuSet) -> CpuSet:
        return CpuSet(self._ids - other._ids)

    def issubset(self, other: CpuSet) -> bool:
        return self._ids <= other._ids


def docker_cpuset(cpus: Iterable[int]) -> str:
    """Ids ascending, joined by commas ("3,5"; "" for none): the form the placement spec
    writes into a container's ``cpuset_cpus``, which ``CpuSet.parse`` reads back."""
    return ",".join(map(str, sorted(cpus)))
