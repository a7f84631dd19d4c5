"""Issue 28's three checks of the cores CPU burners in two pools got
(bench/pools_on_host.py's ``run_cases``), for this host and for the cgroup v2 VM alike:

- both burn: each pool within 10 % of its fair share, 1.0 and 1.0 core (``off_fair``,
  ``allowed_off``);
- ``pb``'s burner stopped: ``pa`` takes the idle CPU from the stop on (its weight held no
  quota, so no pool update is needed): at least 1.9 cores, or 97 % of what the rest of
  the machine left, whichever is less (``idle_floor``);
- a strong guarantee of 1.5 cores on ``pa``: each pool within 10 % of the tree's share
  (or 0.05 core, the kernel's grain: ``GRAIN``), 1.75 and 0.25 core (pools spec section
  3, step 5: the free half core by weight on top of the guarantee; not the issue's 1.5
  and 0.5).

Every window must hold. A failure prints every case's windows: each pool's cores and what
else used the CPUs meanwhile, to tell a busy machine from a wrong share.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from bench.pools_on_host import Split
from tests.quiet import tell

TOLERANCE = 0.10  # of a pool's fair share ...
# ... or this many cores, whichever is more: how finely the kernel can split a CPU between
# burners its balancer keeps in place. In the VM's strong case pb's one burner shares a CPU
# with one of pa's three: its slice's weight 10 against a third of pa's 69 there gives it
# 10 / 33 of that CPU, 0.30 core of a 0.25 share, whatever the weights' ratio. The guest
# measured 0.27 and 0.28, which is 8 and 12 % of 0.25; at shares of 0.5 core and up the
# 10 % are the larger.
GRAIN = 0.05
CPUS = 2  # the node's
IDLE_TAKEN = 1.9  # cores the busy pool takes of the node's 2 when the other idles ...
IDLE_OF_LEFT = 0.97  # ... or this much of what the rest of the machine left it


def _others(split: Split) -> float:
    return split.crowding.others if split.crowding is not None else 0.0


def allowed_off(fair: float) -> float:
    """How far, in cores, a pool may be from its fair share of ``fair`` cores."""
    return max(TOLERANCE * fair, GRAIN)


def off_fair(split: Split, pool: str) -> float:
    """How far the pool's cores were from its fair share, in cores. The tree shares out
    the node's CPUs, but the machine's own processes (agent, dockerd, the test, whatever
    else runs beside) are outside the pools and outrank the burners, and which pool their
    CPU came from is the kernel's choice. So the fair share is taken as anywhere from the
    tree's share of the node to its share of what the others left the burners. A make
    test run in CI measured pb 0.89 core beside pa's 1.04 while others used 0.07 of the 2:
    0.11 off the node's 1.00, 0.075 off the 0.965 left to each pool."""
    most = split.fair[pool]
    least = most * (CPUS - _others(split)) / CPUS
    measured = split.cores[pool]
    return max(least - measured, measured - most, 0.0)


def idle_floor(split: Split) -> float:
    """The cores the busy pool must take while the other idles: the issue's 1.9 of 2 on a
    machine whose own processes use under 0.04 core, else 97 % of what they leave. The
    rest of the machine outranks the burners and takes what it needs: in the emulated
    guest its agent and dockerd (cpu.weight 100 against the burners' 13) use 0.05 to 0.10
    core, which leaves 1.90 to 1.95 for the burners even with no CPU idle."""
    return min(IDLE_TAKEN, IDLE_OF_LEFT * (CPUS - _others(split)))


def report(cases: Mapping[str, list[Split]]) -> str:
    return "\n".join(
        line for splits in cases.values() for split in splits for line in split.lines()
    )


def assert_cases(cases: Mapping[str, list[Split]]) -> None:
    """The checks above; the figures go to the run's summary too (``tell``)."""
    tell(report(cases).splitlines())
    check_cases(cases)


def check_cases(cases: Mapping[str, list[Split]]) -> None:
    """The checks above, each failure with every window's figures."""
    said = report(cases)
    assert cases["both"][0].fair == {"pa": pytest.approx(1.0), "pb": pytest.approx(1.0)}, said
    assert cases["strong pa"][0].fair == {
        "pa": pytest.approx(1.75),
        "pb": pytest.approx(0.25),
    }, said
    for case in ("both", "strong pa"):
        for split in cases[case]:
            for pool, fair in split.fair.items():
                off = off_fair(split, pool)
                assert off <= allowed_off(fair), f"{split.case}: {pool} {off:.2f} core off\n{said}"
    for split in cases["idle pb"]:
        floor = idle_floor(split)
        assert split.cores["pa"] >= floor, f"{split.case}: pa under {floor:.2f}\n{said}"
