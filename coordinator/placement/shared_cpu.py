"""The shared pool's CPU: what unbound (memory-mode) containers are charged.

An unbound container runs on the node's shared pool, the cores no bound container uses,
and is charged its CPU request there. Invariant (kept by every operation of ``state``):
the unbound containers' requests add up to at most the shared pool's pieces times the
node's ``cpu_overcommit`` (1 = no oversell: each gets its request when all are busy, as
the Eru seed promises memory-mode workloads), and none asks for more than the pool has.
Bound cores stay exclusive: a bound plan may take a shared core only while the cores
left over still cover the unbound requests (``kept_cores``), and the pool is never
widened onto bound cores.

    overcommit_ratio("1.5")                                   -> Fraction(3, 2)
    shared_limit(200, Fraction(3, 2))                         -> 300 pieces
    kept_cores({0: 100, 1: 100, 2: 100}, (1, 2), Fraction(1), requested=50, largest=50)
                                                              -> (2,)
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from fractions import Fraction

from coordinator.placement.errors import invalid_request
from shared.quantity import QuantityError, format_cpu, parse_cpu

MAX_OVERCOMMIT = 100
_STEP = 100  # a ratio is given in hundredths: "1.25"
_RULE = f"must be a decimal from 1 to {MAX_OVERCOMMIT} in steps of 0.01 (1 = no oversell)"


def overcommit_ratio(value: object) -> Fraction:
    """A node's ``cpu_overcommit`` as an exact ratio: a decimal ("1.5", 2) from 1 to
    ``MAX_OVERCOMMIT`` in steps of 0.01; anything else is ``invalid_request``."""
    if type(value) in (str, int, Fraction):  # not bool: True == 1 would share 1's answer
        return _known_ratio(value)
    return _ratio(value)


# A fleet has a few ratios and every node state is checked with one: a restart of 10,000
# nodes made 20,000 Fractions from text and of Fractions (0.6 s of its 11 s of CPU). A
# refusal is not kept (the cache keeps only what returns).
@functools.lru_cache(maxsize=64, typed=True)
def _known_ratio(value: str | int | Fraction) -> Fraction:
    return _ratio(value)


def _ratio(value: object) -> Fraction:
    if isinstance(value, Fraction):
        hundredths = value * _STEP
        if hundredths.denominator == 1 and _STEP <= hundredths <= MAX_OVERCOMMIT * _STEP:
            return value
        raise invalid_request("cpu_overcommit", overcommit_text(value), _RULE)
    try:
        hundredths_int = parse_cpu(value, field="cpu_overcommit", share_base=_STEP)  # type: ignore[arg-type]
    except QuantityError:
        raise invalid_request("cpu_overcommit", value, _RULE) from None
    if not _STEP <= hundredths_int <= MAX_OVERCOMMIT * _STEP:
        raise invalid_request("cpu_overcommit", value, _RULE)
    return Fraction(hundredths_int, _STEP)


@functools.cache  # a few ratios in a fleet; each node's record is written with one
def overcommit_text(ratio: Fraction) -> str:
    """The ratio as its decimal: "1", "1.5"."""
    if (ratio * _STEP).denominator == 1:
        return format_cpu(int(ratio * _STEP), share_base=_STEP)
    return str(float(ratio))


def shared_limit(shared_cpu: int, ratio: Fraction) -> int:
    """Pieces the unbound containers may request in all: floor(shared pieces x ratio)."""
    return shared_cpu * ratio.numerator // ratio.denominator


def kept_cores(
    cores: Mapping[int, int],
    shared: Sequence[int],
    ratio: Fraction,
    *,
    requested: int,
    largest: int,
    avoid: Collection[int] = (),
) -> tuple[int, ...]:
    """The shared cores a bound plan must leave alone: the fewest that still cover the
    unbound containers, ``requested`` pieces in all (times ``ratio``) and ``largest``
    for the biggest one; none when there is no unbound container (``largest`` 0).

    Cores not in ``avoid`` first (a realloc keeps the container's own cores), then the
    most pieces, then the highest id (bound plans start from the lowest ids); the last
    core kept is the smallest that completes the cover, so that a larger one stays free
    for bound plans. (Most pieces alone kept a whole free core for a 0.1-CPU unbound
    container beside a core of one piece that covered it, and a bound container shrunk
    off that whole core could not grow back.) When even every shared core falls short (a
    record an older version stored), all of them are kept. Ascending ids. Cost O(s) when
    one core covers them, else O(s log s + k s) for s shared cores, k of them kept.
    """
    if not largest:
        return ()
    # covered(pieces) is pieces >= largest and shared_limit(pieces, ratio) >= requested
    need = max(largest, -(-requested * ratio.denominator // ratio.numerator))
    # The walk's first step needs no order: one core alone covers them on most nodes,
    # and sorting every shared core first, each by a key of Python calls, was 10 % of
    # the coordinator's CPU in the fleet benchmark (a view per node a deployment touches).
    alone = [c for c in shared if cores[c] >= need]
    if alone:
        return (_smallest(alone, cores, avoid),)
    order = sorted(shared, key=lambda c: (c in avoid, -cores[c], -c))
    kept: list[int] = []
    pieces = 0
    for index, core in enumerate(order):
        if pieces >= need:
            break
        completing = [c for c in order[index:] if pieces + cores[c] >= need]
        if completing:
            kept.append(_smallest(completing, cores, avoid))
            break
        kept.append(core)
        pieces += cores[core]
    return tuple(sorted(kept))


def _smallest(candidates: list[int], cores: Mapping[int, int], avoid: Collection[int]) -> int:
    """The first of ``candidates`` by (in ``avoid``, fewest pieces, highest id)."""
    preferred = [c for c in candidates if c not in avoid] if avoid else candidates
    preferred = preferred or candidates
    least = min(cores[c] for c in preferred)
    return max(c for c in preferred if cores[c] == least)


def describe_pool(shared: Sequence[int], shared_cpu: int, ratio: Fraction, p: int) -> str:
    """``"1 CPU (cores 1) x cpu_overcommit 1"``, for messages."""
    cores = ",".join(map(str, shared)) or "none"
    cpu = format_cpu(shared_cpu, share_base=p)
    return f"{cpu} CPU (cores {cores}) x cpu_overcommit {overcommit_text(ratio)}"
