"""Issue 28's three checks of the cores CPU burners in two pools got
(bench/pools_on_host.py's ``run_cases``), for this host and for the cgroup v2 VM alike:

- both burn: each pool within 10 % of its fair share (1.0 and 1.0 core);
- ``pb``'s burner stopped: ``pa`` at least 1.9 cores from the stop on (its weight held no
  quota, so no pool update is needed);
- a strong guarantee of 1.5 cores on ``pa``: each pool within 10 % of the tree's share,
  1.75 and 0.25 core (pools spec section 3, step 5: the free half core by weight on top of
  the guarantee; not the issue's 1.5 and 0.5).

Every window must hold. A failure prints every case's windows: each pool's cores and what
else used the CPUs meanwhile, to tell a busy machine from a wrong share.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from bench.pools_on_host import Split

TOLERANCE = 0.10  # of a pool's fair share
IDLE_TAKEN = 1.9  # cores the busy pool takes of the node's 2 when the other idles


def report(cases: Mapping[str, list[Split]]) -> str:
    return "\n".join(
        line for splits in cases.values() for split in splits for line in split.lines()
    )


def assert_cases(cases: Mapping[str, list[Split]]) -> None:
    said = report(cases)
    assert cases["both"][0].fair == {"pa": pytest.approx(1.0), "pb": pytest.approx(1.0)}, said
    assert cases["strong pa"][0].fair == {
        "pa": pytest.approx(1.75),
        "pb": pytest.approx(0.25),
    }, said
    for case in ("both", "strong pa"):
        for split in cases[case]:
            for pool, fair in split.fair.items():
                off = abs(split.cores[pool] - fair)
                assert off <= TOLERANCE * fair, f"{split.case}: {pool} {off:.2f} core off\n{said}"
    for split in cases["idle pb"]:
        assert split.cores["pa"] >= IDLE_TAKEN, f"{split.case}: pa under {IDLE_TAKEN}\n{said}"
