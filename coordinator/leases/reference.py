"""Slow, obviously correct equilibria, for the tests and the benchmark only.

Both work in exact rational arithmetic (``fractions.Fraction``; every float converts
exactly), follow the spec's band loop literally (``left -= sum(shares)``) and convert
to float only at the end. ``algorithms.py`` must agree with them within 1e-6.

    water_filling(120, [1000, 50, 10])        -> [60.0, 50.0, 10.0]
    proportional(120, [1000, 50, 10])         -> [69.69..., 40.30..., 10.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

BandReference = Callable[[Fraction, list[Fraction], list[int]], list[Fraction]]


def _water_filling_band(
    left: Fraction, wants: list[Fraction], weights: list[int]
) -> list[Fraction]:
    # Pour what is left over the unsatisfied subclients in equal slices; a client whose
    # slice covers the rest of its wants takes only that and returns the remainder to
    # the pool. Stop when nothing is left or everyone is satisfied. Every round either
    # satisfies someone or pours out everything, so there are at most n + 1 rounds.
    shares = [Fraction(0)] * len(wants)
    hungry = {i for i, w in enumerate(wants) if w > 0}
    while left > 0 and hungry:
        slice_ = left / sum(weights[i] for i in hungry)
        for i in sorted(hungry):
            given = min(slice_ * weights[i], wants[i] - shares[i])
            shares[i] += given
            left -= given
        hungry = {i for i in hungry if shares[i] < wants[i]}
    return shares


def _proportional_band(left: Fraction, wants: list[Fraction], weights: list[int]) -> list[Fraction]:
    # A direct transcription of the spec's pseudo-code.
    if sum(wants) <= left:
        return list(wants)
    q = left / sum(weights)
    base = [q * s for s in weights]
    slack = sum((b - w for w, b in zip(wants, base, strict=True) if w < b), Fraction(0))
    excess = sum((w - b for w, b in zip(wants, base, strict=True) if w >= b), Fraction(0))
    return [w if w <= b else b + (w - b) * slack / excess for w, b in zip(wants, base, strict=True)]


def _bands(
    band: BandReference,
    capacity: float,
    wants: Sequence[float],
    weights: Sequence[int] | None,
    priorities: Sequence[int] | None,
) -> list[float]:
    n = len(wants)
    exact = [Fraction(w) for w in wants]
    s = list(weights) if weights is not None else [1] * n
    p = list(priorities) if priorities is not None else [0] * n
    shares = [Fraction(0)] * n
    left = Fraction(capacity)
    for priority in sorted(set(p), reverse=True):
        members = [i for i in range(n) if p[i] == priority]
        got = band(max(left, Fraction(0)), [exact[i] for i in members], [s[i] for i in members])
        for i, share in zip(members, got, strict=True):
            shares[i] = share
        left -= sum(got, Fraction(0))
    return [float(x) for x in shares]


def water_filling(
    capacity: float,
    wants: Sequence[float],
    weights: Sequence[int] | None = None,
    priorities: Sequence[int] | None = None,
) -> list[float]:
    """Weighted max-min by repeated equal slices, exactly. O(n^2) rounds of Fractions."""
    return _bands(_water_filling_band, capacity, wants, weights, priorities)


def proportional(
    capacity: float,
    wants: Sequence[float],
    weights: Sequence[int] | None = None,
    priorities: Sequence[int] | None = None,
) -> list[float]:
    """PROPORTIONAL_SHARE transcribed from the spec, exactly. O(n) Fractions per band."""
    return _bands(_proportional_band, capacity, wants, weights, priorities)
