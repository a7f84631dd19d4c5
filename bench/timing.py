"""How the benchmarks time pure computation: the best of a few runs, each started after
a garbage collection so that one run's garbage is not paid for by the next."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def best_of(runs: int, call: Callable[[], object]) -> float:
    """The shortest wall-clock time, in seconds, of ``runs`` calls of ``call``."""
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best
