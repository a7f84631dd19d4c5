"""Pools: how long one fair-share update takes, with figures to compare against.

    .venv/bin/python bench/pools.py

How "10,000 pools and 100,000 demands" is read here: a 3-level tree whose 10,000 leaf
pools each carry a demand over 10 resources (100,000 demand amounts per update), below
10 top-level pools and 100 middle pools (10,110 pools in all). Top-level pools carry
strong guarantees, a limit, and the flow/burst ceilings their children need; a third of
the middle pools are burst pools and a third relaxed, all starting with full volumes; a
tenth of the leaves have a strong guarantee and a tenth a limit. Demand is about twice
the total, so every weight split has to find its level, and the relaxed pools' fill
binds at every top-level pool's limit. Every measured update gets fresh demands and
moves time by one second, so volumes move too.

Sections (no assertions, wall clock, single thread, best of a few runs):

- the update at 1,000 / 2,000 / 5,000 / 10,000 leaves, ms and ms per 1,000 leaves;
- the first update after a change of the cluster total (config ratios recomputed);
- ``PoolTree.from_config`` at 10,000 leaves;
- the slow exact reference against the fast update on a small tree, and the ratio.
"""

from __future__ import annotations

import random
from typing import Any

from timing import best_of

from coordinator.pools import PoolTree
from coordinator.pools import reference as ref

RESOURCES = [
    "cpu",
    "memory",
    "gpu-memory",
    "nvidia.com/gpu",
    *(f"example.com/r{i}" for i in range(6)),
]
TOP, MIDDLE = 10, 10  # top-level pools, middle pools per top-level pool
TOTAL = {r: 1000.0 * (i + 1) for i, r in enumerate(RESOURCES)}


def make_config(leaves: int, seed: int = 1) -> dict[str, Any]:
    """A 3-level tree with ``leaves`` leaf pools (see the module docstring)."""
    rng = random.Random(seed)
    per_middle = max(1, leaves // (TOP * MIDDLE))
    pools: dict[str, Any] = {}
    for t in range(TOP):
        top = f"t{t}"
        pools[top] = {
            "strong_guarantee_resources": {"cpu": 40.0},
            "resource_limits": {"cpu": 70.0},
            "integral_guarantees": {
                "resource_flow": {"cpu": 20.0},
                "burst_guarantee_resources": {"cpu": 20.0},
            },
        }
        for m in range(MIDDLE):
            middle = f"{top}.m{m}"
            kind = ("burst", "relaxed", "none")[m % 3]
            guarantees: dict[str, Any] = {"guarantee_type": kind}
            if kind != "none":
                guarantees["resource_flow"] = {"cpu": 2.0}
            if kind == "burst":
                guarantees["burst_guarantee_resources"] = {"cpu": 4.0}
            pools[middle] = {
                "parent": top,
                "strong_guarantee_resources": {"cpu": 4.0},
                "weight": rng.choice((1.0, 2.0, 5.0)),
                "integral_guarantees": guarantees,
            }
            for leaf in range(per_middle):
                spec: dict[str, Any] = {"parent": middle, "weight": rng.uniform(0.5, 3.0)}
                if leaf % 10 == 0:
                    spec["strong_guarantee_resources"] = {"cpu": 4.0 / (per_middle // 10 + 1)}
                if leaf % 10 == 5:
                    spec["resource_limits"] = {"cpu": 5.0, "memory": 50.0}
                pools[f"{middle}.l{leaf}"] = spec
    return {"settings": {"smooth_period": 60}, "pools": pools}


def full_buckets(config: dict[str, Any]) -> dict[str, Any]:
    """A state where every integral pool's volume is at its capacity (phi * 86,400 s)."""
    pools = {}
    for name, spec in config["pools"].items():
        guarantees = spec.get("integral_guarantees", {})
        if guarantees.get("guarantee_type", "none") != "none":
            flow = guarantees["resource_flow"]["cpu"] / TOTAL["cpu"]
            pools[name] = {"volume_ratio_s": flow * 86_400}
    return {"updated_at": None, "pools": pools}


def make_demands(config: dict[str, Any], seed: int) -> dict[str, dict[str, float]]:
    """Every leaf demands all 10 resources; in sum about twice the cluster."""
    rng = random.Random(seed)
    leaves = [name for name in config["pools"] if name.count(".") == 2]
    scale = 2.0 / len(leaves)
    return {
        name: {r: rng.uniform(0.0, 2.0) * scale * TOTAL[r] for r in RESOURCES} for name in leaves
    }


def update_ms(leaves: int, runs: int = 5) -> tuple[int, int, float, float]:
    """(pools, demand amounts, ms per update at a steady total, ms after a new total)."""
    config = make_config(leaves)
    tree = PoolTree.from_config(config, full_buckets(config), now=0.0)
    demand_sets = [make_demands(config, seed) for seed in range(runs + 1)]
    tree.update(TOTAL, demand_sets[0], 1.0)  # warm: volumes and cached ratios
    clock = iter(range(2, 10_000))
    feed = iter(demand_sets[1:] * 2)
    steady = best_of(runs, lambda: tree.update(TOTAL, next(feed), float(next(clock))))
    totals = iter({r: v * (1.0 + 0.01 * k) for r, v in TOTAL.items()} for k in range(1, 99))
    moved = best_of(runs, lambda: tree.update(next(totals), next(feed), float(next(clock))))
    amounts = sum(len(d) for d in demand_sets[0].values())
    return len(config["pools"]), amounts, steady * 1000, moved * 1000


def main() -> None:
    print("pools: one update of a saturated 3-level tree (10 top, 100 middle, leaves below)")
    print(
        f"{'leaves':>7} {'pools':>7} {'demands':>8} {'update ms':>10} {'per 1k leaves':>14}"
        f" {'new total ms':>13}"
    )
    for leaves in (1_000, 2_000, 5_000, 10_000):
        pools, amounts, steady, moved = update_ms(leaves)
        print(
            f"{leaves:>7} {pools:>7} {amounts:>8} {steady:>10.1f} "
            f"{steady / leaves * 1000:>14.2f} {moved:>13.1f}"
        )
    config = make_config(10_000)
    built = best_of(3, lambda: PoolTree.from_config(config))
    print(f"from_config, 10,000 leaves: {built * 1000:.1f} ms")

    small = make_config(100, seed=3)  # one leaf per middle pool: 210 pools
    small_demands = make_demands(small, 7)
    tree = PoolTree.from_config(small, now=0.0)
    tree.update(TOTAL, small_demands, 1.0)
    state = tree.state()
    trees = iter([PoolTree.from_config(small, state) for _ in range(5)])
    fast = best_of(5, lambda: next(trees).update(TOTAL, small_demands, 2.0))
    built = best_of(5, lambda: PoolTree.from_config(small, state).update(TOTAL, small_demands, 2.0))
    slow = best_of(3, lambda: ref.update(small, state, TOTAL, small_demands, 2.0))
    print(
        f"reference on {len(small['pools'])} pools: {slow * 1000:.0f} ms; fast update "
        f"{fast * 1000:.2f} ms (ratio {slow / fast:.0f}x), with from_config "
        f"{built * 1000:.2f} ms (ratio {slow / built:.0f}x)"
    )


if __name__ == "__main__":
    main()
