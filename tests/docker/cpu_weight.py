"""How runc turns Docker's CPU shares into a cgroup v2 ``cpu.weight``, and back:

    cpu_weight(512, runc="1.1.5")   # 20: the linear map of runc before 1.3.2
    cpu_weight(512, runc="1.3.2")   # 59: the log-quadratic map since (runc PR 4785)
    least_shares(20, runc="1.1.5")  # 497: the fewest shares that runc writes as weight 20

runc 1.3.2 and 1.4.0 changed the map so that the default 1024 shares give the default
weight 100 (opencontainers/runc issue 4896); both map 2 to 1 and 262144 to 10000. The map
is many to one (262143 shares onto 10000 weights), so shares read back from a weight are
only known up to the weight: compare ``least_shares(cpu_weight(s))`` on both sides.
"""

from __future__ import annotations

import bisect
import math
import re

MIN_SHARES = 2
MAX_SHARES = 262_144
MAX_WEIGHT = 10_000
FIRST_QUADRATIC = (1, 3, 2)  # 1.4.0-rc.1 and later, and 1.3.2 and later in 1.3


def cpu_weight(shares: int, *, runc: str) -> int:
    """The ``cpu.weight`` runc version ``runc`` writes for ``shares`` (2..262144)."""
    if _quadratic(runc):
        if shares <= MIN_SHARES:
            return 1
        if shares >= MAX_SHARES:
            return MAX_WEIGHT
        # The same double arithmetic as runc's Go: math.Log2, math.Pow, math.Ceil.
        log = math.log2(shares)
        exponent = (log * log + 125 * log) / 612.0 - 7.0 / 34.0
        return math.ceil(math.pow(10, exponent))
    return 1 + (shares - MIN_SHARES) * 9999 // (MAX_SHARES - MIN_SHARES)


def least_shares(weight: int, *, runc: str) -> int:
    """The fewest shares (2..262144) that runc ``runc`` writes as ``weight`` or more; the
    map never decreases, so this is a bisection (18 steps)."""
    shares = range(MIN_SHARES, MAX_SHARES + 1)
    return MIN_SHARES + bisect.bisect_left(shares, weight, key=lambda s: cpu_weight(s, runc=runc))


def _quadratic(runc: str) -> bool:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", runc)
    if match is None:
        raise ValueError(f"not a runc version: {runc!r}")
    version = tuple(int(part) for part in match.groups())
    return version >= FIRST_QUADRATIC
