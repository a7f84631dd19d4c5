"""Whether two amounts of a resource, as a user writes them and as the coordinator stores
them, are the same: "500m" and "0.5" cores, "1Gi" and 1073741824 bytes.

    same_amount("cpu", "500m", "0.5")            -> True
    same_amounts({"memory": "1Gi"}, {"memory": 1073741824})  -> True

``allotctl apply`` asks this before writing, so that a file applied twice writes nothing
the second time. Values that do not parse (the coordinator would refuse them) are the
same only when equal as written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TypeGuard

from shared.quantity import Number, QuantityError, parse_count, parse_cpu, parse_memory

# Fine enough that every decimal a user writes comes to whole pieces: "1.7" -> 1.7e9.
_CPU_PIECES = 10**9
_PARSERS: dict[str, Callable[[Number], int]] = {
    "cpu": lambda value: parse_cpu(value, share_base=_CPU_PIECES),
    "memory": parse_memory,
}
# A deployment's limits are in the units of its requests.
_PARSERS |= {f"{name}_limit": parse for name, parse in _PARSERS.items()}


def same_amount(resource: str, mine: object, theirs: object) -> bool:
    if isinstance(mine, bool) or isinstance(theirs, bool):  # True == 1, but is no amount
        return mine is theirs
    if mine == theirs:
        return True
    if not _is_number(mine) or not _is_number(theirs):
        return False
    parse = _PARSERS.get(resource, partial(parse_count, resource))
    try:
        return parse(mine) == parse(theirs)
    except QuantityError:
        return False


def same_amounts(mine: Mapping[str, object], theirs: Mapping[str, object]) -> bool:
    """The same resources, each with the same amount. A resource at 0 on one side only
    is not the same: the coordinator keeps what it was given."""
    return mine.keys() == theirs.keys() and all(
        same_amount(resource, mine[resource], theirs[resource]) for resource in mine
    )


def _is_number(value: object) -> TypeGuard[int | float | str]:
    return isinstance(value, int | float | str) and not isinstance(value, bool)
