"""Capacity leases: how fast the engine decides, with figures to compare against.

    .venv/bin/python bench/leases.py [--block-sizes]

Sections, each a function that prints its own figures (no assertions):

- ``engine_benchmark``: the pure functions on 100,000 clients; the slow exact reference
  against ``fair_share`` on 2,000; a ``LeaseTable`` with 10,000 and 100,000 distinct
  clients making a first request each, then refreshing once with unchanged wants, then
  once more with changed wants (the case where every request moves the index).
- ``block_size_sweep`` (``--block-sizes``): the same table phases for several index
  block sizes, the measurement behind ``band_index.LOAD``.

Single-threaded, in this process; times are wall-clock, best of a few runs for the pure
functions. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import time
from collections.abc import Callable

from coordinator.leases import Kind, LeaseTable, band_index, fair_share, proportional_share
from coordinator.leases.reference import proportional, water_filling

SHARING = (Kind.FAIR_SHARE, Kind.PROPORTIONAL_SHARE)


def _claims(n: int, seed: int) -> tuple[float, list[float], list[int], list[int]]:
    """n clients with random wants (0-100), subclients (1-4) and three priority bands;
    capacity half the total demand, so the middle band is cut and the lowest starves."""
    rng = random.Random(seed)
    wants = [rng.uniform(0, 100) for _ in range(n)]
    weights = [rng.randint(1, 4) for _ in range(n)]
    priorities = [rng.choice((-1, 0, 1)) for _ in range(n)]
    return 0.5 * sum(wants), wants, weights, priorities


def _best_of(runs: int, call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def _table_phases(kind: Kind, n: int) -> tuple[float, float, float]:
    """Requests per second for n first requests, n unchanged refreshes, n changed ones."""
    rng = random.Random(n)
    wants = [rng.uniform(0, 40) for _ in range(n)]
    changed = [w * rng.uniform(0.9, 1.1) for w in wants]
    ids = [f"host-{i}:{i * 7919 % 65536}:{i:08x}" for i in range(n)]
    # Capacity half the demand: every decision has to find the water level.
    table = LeaseTable(kind, 10.0 * n, lease_length=30, refresh_interval=10)
    rates = []
    for now, values in ((1.0, wants), (2.0, wants), (3.0, changed)):
        gc.collect()
        started = time.perf_counter()
        for client_id, value in zip(ids, values, strict=True):
            table.request(client_id, value, now=now)
        rates.append(n / (time.perf_counter() - started))
    return rates[0], rates[1], rates[2]


def engine_benchmark() -> None:
    print("== lease engine (pure, one core) ==")
    capacity, wants, weights, priorities = _claims(100_000, seed=1)
    for name, share in (("fair_share", fair_share), ("proportional_share", proportional_share)):
        took = _best_of(3, functools.partial(share, capacity, wants, weights, priorities))
        print(f"{name:<19} 100,000 clients, 3 bands: {took * 1e3:8.1f} ms per call")

    capacity, wants, weights, priorities = _claims(2_000, seed=2)
    for name, fast, slow in (
        ("fair_share", fair_share, water_filling),
        ("proportional_share", proportional_share, proportional),
    ):
        fast_time = _best_of(3, functools.partial(fast, capacity, wants, weights, priorities))
        slow_time = _best_of(1, functools.partial(slow, capacity, wants, weights, priorities))
        print(
            f"{name:<19} 2,000 clients: {fast_time * 1e3:7.2f} ms; exact reference"
            f" {slow_time * 1e3:8.1f} ms ({slow_time / fast_time:.0f}x slower)"
        )

    for n in (10_000, 100_000):
        for kind in SHARING:
            first, same, changed = _table_phases(kind, n)
            print(
                f"LeaseTable {kind:<18} {n:>7,} clients: first request {first:8,.0f} req/s,"
                f" refresh {same:8,.0f} req/s, refresh with new wants {changed:8,.0f} req/s"
                f" ({1e6 / changed:.1f} us each)"
            )


def block_size_sweep() -> None:
    print("== band index block size (load), FAIR_SHARE, microseconds per request ==")
    default = band_index.LOAD
    try:
        for n in (10_000, 100_000):
            for load in (16, 32, 64, 128, 256):
                band_index.BandIndex.__init__.__defaults__ = (load,)
                first, same, changed = _table_phases(Kind.FAIR_SHARE, n)
                print(
                    f"n {n:>7,} load {load:>3}: first {1e6 / first:5.1f} us,"
                    f" refresh {1e6 / same:5.1f} us, new wants {1e6 / changed:5.1f} us"
                )
    finally:
        band_index.BandIndex.__init__.__defaults__ = (default,)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--block-sizes", action="store_true", help="also sweep block sizes")
    args = parser.parse_args()
    engine_benchmark()
    if args.block_sizes:
        block_size_sweep()


if __name__ == "__main__":
    main()
