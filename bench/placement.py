"""Placement engine: how fast a deployment is planned, against the spec's goals and Eru.

    .venv/bin/python bench/placement.py [--runs 7] [--no-full-reference]

Spec section 15. Nodes ``node-0000``... of 24 cores (P = 100; NUMA 0 = cores 0-11,
NUMA 1 = 12-23; 128 GiB, 64 GiB per NUMA node), no containers yet:

- 1,000 nodes, 10,000 cpu-bind containers of 1.7 CPU + 512 MiB, AUTO: the three phases
  (capacities, strategy, plans) separately, their total against the 65 ms goal and Eru's
  ~650 ms (1.3 CPU, same class of 2-vCPU machine); the capacities alone against Eru's
  255-314 ms;
- the same on 1,000 distinct, randomly partly used nodes (no two alike, so no sharing;
  as many containers as they hold, up to 10,000);
- the same in memory mode (goal <= 10 ms; Eru ~3.8 ms);
- 10,000 nodes, 100,000 containers, both modes;
- one container (1.7 CPU + 512 MiB, cpu-bind, AUTO) on 100, 1,000 and 10,000
  heterogeneous nodes (eight hardware shapes of 8-128 cores and 1-8 NUMA nodes, each
  node partly used at random, so no two alike): ``place()`` end to end on fresh views
  (the first decision after start-up), and on views kept from the decision before with
  one node's view replaced (the service's case: a decision changes the nodes it placed
  on, and ``NodeState.view()`` keeps every other view);
- the straightforward per-container reference planner (``coordinator.placement.
  reference.place_auto``: every node on its own, section 5 transcribed literally, AUTO
  one container at a time) on the same 1,000 / 10,000 case, run once (about 4 s), and on
  100 nodes / 1,000 containers, best of the runs, with the ratio.

Times are wall-clock ``perf_counter`` in this one process, pure computation only: the
``Node`` views are built before timing (their build time is printed separately), each
run starts from a fresh ``Planner`` on fresh copies of the views (a view remembers its
capacities between calls, ``node.Memo``, so a second run on the same views would time
lookups; the single-container lines time both), best of ``--runs`` with a
``gc.collect()`` before each. No assertions; not part of ``make test``.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from timing import best_of

from coordinator.placement import GiB, MiB, Node, Planner, Request, distribute, place
from coordinator.placement import reference as ref

GOAL_BIND_MS = 65.0
GOAL_MEMORY_MS = 10.0
ERU_BIND_MS = 650.0
ERU_MEMORY_MS = 3.8
ERU_CAPACITIES_MS = (255.0, 314.0)


def partly_used_nodes(count: int) -> list[Node]:
    """The same shape, each node with its own random partial use: free pieces per core
    one of 100, 100, 100, 70, 50, 30, 0; node and NUMA 0 memory partly used. Every node is
    distinct, so nothing is shared between nodes (seeded: the same nodes every run)."""
    rng = random.Random(5)
    numa = {c: c // 12 for c in range(24)}
    return [
        Node(
            f"node-{i:04d}",
            {c: rng.choice((100, 100, 100, 70, 50, 30, 0)) for c in range(24)},
            numa=numa,
            memory=128 * GiB - rng.randint(0, 64) * GiB,
            numa_memory={0: 64 * GiB - rng.randint(0, 32) * GiB, 1: 64 * GiB},
        )
        for i in range(count)
    ]


# (cores, NUMA nodes, GiB of memory) of the heterogeneous fleet.
SHAPES = (
    (8, 1, 32),
    (16, 1, 64),
    (24, 2, 128),
    (32, 2, 256),
    (48, 2, 384),
    (64, 4, 512),
    (96, 4, 768),
    (128, 8, 1024),
)


def heterogeneous_nodes(count: int) -> list[Node]:
    """Nodes of the eight ``SHAPES``, each partly used at random like ``partly_used_nodes``
    (one NUMA node: no map), so that no two are alike (seeded)."""
    rng = random.Random(11)
    nodes = []
    for i in range(count):
        cores, numas, gib = rng.choice(SHAPES)
        per = cores // numas
        numa = {c: c // per for c in range(cores)} if numas > 1 else None
        numa_memory = (
            {n: gib * GiB // numas - rng.randint(0, gib // numas // 2) * GiB for n in range(numas)}
            if numa
            else None
        )
        nodes.append(
            Node(
                f"node-{i:05d}",
                {c: rng.choice((100, 100, 100, 70, 50, 30, 0)) for c in range(cores)},
                numa=numa,
                memory=gib * GiB - rng.randint(0, gib // 2) * GiB,
                numa_memory=numa_memory,
            )
        )
    return nodes


def fresh(node: Node) -> Node:
    """A new view of the same node: equal, but nothing computed on it yet."""
    return Node(
        node.name,
        node.cores,
        numa=node.numa,
        memory=node.memory,
        numa_memory=node.numa_memory,
        share_base=node.share_base,
        shared_pool=node.shared_pool,
    )


def single_container(nodes: list[Node], request: Request, runs: int) -> tuple[float, float]:
    """Best of ``runs`` of ``place(nodes, request, 1, "auto")``: on fresh views of every
    node, and on the views of the run before with one node's view replaced."""
    first = on_fresh_views(runs, nodes, lambda views: place(views, request, 1, "auto"))
    warm = float("inf")
    rng = random.Random(3)
    views = [fresh(node) for node in nodes]
    place(views, request, 1, "auto")
    for _ in range(runs):
        k = rng.randrange(len(views))
        views[k] = fresh(views[k])
        gc.collect()
        started = time.perf_counter()
        place(views, request, 1, "auto")
        warm = min(warm, time.perf_counter() - started)
    return first, warm


def bench_nodes(count: int) -> list[Node]:
    cores = dict.fromkeys(range(24), 100)
    numa = {c: c // 12 for c in range(24)}
    return [
        Node(
            f"node-{i:04d}",
            cores,
            numa=numa,
            memory=128 * GiB,
            numa_memory={0: 64 * GiB, 1: 64 * GiB},
        )
        for i in range(count)
    ]


@dataclass
class Phases:
    capacities: float = float("inf")
    strategy: float = float("inf")
    plans: float = float("inf")
    total: float = float("inf")  # best single run, not the sum of the best phases


def on_fresh_views(runs: int, nodes: list[Node], call: Callable[[list[Node]], object]) -> float:
    """Best of ``runs`` of ``call(views)``, on fresh views of ``nodes`` each run (built
    before the clock starts): a view remembers its capacities (``node.Memo``), and these
    figures are of the work, not of the lookups."""
    best = float("inf")
    for _ in range(runs):
        views = [fresh(node) for node in nodes]
        gc.collect()
        started = time.perf_counter()
        call(views)
        best = min(best, time.perf_counter() - started)
    return best


def phases(nodes: list[Node], request: Request, need: int, runs: int) -> Phases:
    """Best of ``runs`` for each phase of ``place``, as ``place`` runs them, each run on
    fresh views (see ``on_fresh_views``)."""
    best = Phases()
    for _ in range(runs):
        views = [fresh(node) for node in nodes]
        gc.collect()
        t0 = time.perf_counter()
        planner = Planner(views, request)
        planner.capacities()
        t1 = time.perf_counter()
        deploy = distribute("auto", planner.columns(), need)
        t2 = time.perf_counter()
        plans = planner.plans(deploy)
        t3 = time.perf_counter()
        del plans
        best.capacities = min(best.capacities, t1 - t0)
        best.strategy = min(best.strategy, t2 - t1)
        best.plans = min(best.plans, t3 - t2)
        best.total = min(best.total, t3 - t0)
    return best


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


def report(title: str, p: Phases, goal_ms: float, eru_ms: float) -> None:
    print(f"{title}")
    print(f"  capacities {ms(p.capacities)}")
    print(f"  strategy   {ms(p.strategy)}   (distribute('auto', ...), columns included)")
    print(f"  plans      {ms(p.plans)}")
    total_ms = p.total * 1e3
    verdict = "within" if total_ms <= goal_ms else "OVER"
    print(
        f"  total      {ms(p.total)}   goal <= {goal_ms:.0f} ms: {verdict}"
        f" ({total_ms / goal_ms:.0%} of it); Eru ~{eru_ms:g} ms: {eru_ms / total_ms:.1f}x"
        f" {'faster' if total_ms < eru_ms else 'slower'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per measurement (best of)")
    parser.add_argument(
        "--no-full-reference",
        action="store_true",
        help="skip the reference planner on 1,000 nodes (about 4 s)",
    )
    args = parser.parse_args()
    runs = args.runs
    bound = Request("1.7", 512 * MiB, cpu_bind=True)
    memory = Request("1.7", 512 * MiB)

    started = time.perf_counter()
    nodes = bench_nodes(1_000)
    print(f"setup: 1,000 Node views built and validated in {ms(time.perf_counter() - started)}")
    print(f"       (not part of the figures below; best of {runs} runs each)\n")

    bind = phases(nodes, bound, 10_000, runs)
    report(
        "cpu-bind, 1,000 nodes, 10,000 x (1.7 CPU + 512Mi), AUTO:", bind, GOAL_BIND_MS, ERU_BIND_MS
    )
    low, high = ERU_CAPACITIES_MS
    capacities_ms = bind.capacities * 1e3
    print(
        f"  capacities alone {ms(bind.capacities)} vs Eru {low:.0f}-{high:.0f} ms:"
        f" {low / capacities_ms:.0f}-{high / capacities_ms:.0f}x faster"
    )
    whole = on_fresh_views(runs, nodes, lambda views: place(views, bound, 10_000, "auto"))
    print(f"  place() end to end {ms(whole)}\n")

    used = partly_used_nodes(1_000)
    room = sum(Planner(used, bound).capacities().values())
    distinct = phases(used, bound, min(10_000, room), runs)
    report(
        f"cpu-bind, 1,000 distinct partly used nodes, {min(10_000, room):,} x (1.7 CPU + 512Mi)"
        " (all they hold), AUTO:",
        distinct,
        GOAL_BIND_MS,
        ERU_BIND_MS,
    )
    print()

    mem = phases(nodes, memory, 10_000, runs)
    report(
        "memory mode, 1,000 nodes, 10,000 x (1.7 CPU + 512Mi), AUTO:",
        mem,
        GOAL_MEMORY_MS,
        ERU_MEMORY_MS,
    )
    print()

    big = bench_nodes(10_000)
    for title, request in (("cpu-bind", bound), ("memory mode", memory)):
        p = phases(big, request, 100_000, max(3, runs // 2))
        print(
            f"{title}, 10,000 nodes, 100,000 containers: capacities {ms(p.capacities)},"
            f" strategy {ms(p.strategy)}, plans {ms(p.plans)}, total {ms(p.total)}"
        )
    print()

    print("one container of 1.7 CPU + 512Mi, cpu-bind, AUTO, heterogeneous nodes, place():")
    fleet = heterogeneous_nodes(10_000)
    for size in (100, 1_000, 10_000):
        first, warm = single_container(fleet[:size], bound, runs)
        print(f"  {size:6,} nodes: fresh views {ms(first)}, views kept (one replaced) {ms(warm)}")
    print()

    print("against the straightforward per-container reference planner (cpu-bind, AUTO):")
    small = nodes[:100]
    fast_small = on_fresh_views(runs, small, lambda views: place(views, bound, 1_000, "auto"))
    slow_small = best_of(max(1, runs // 3), lambda: ref.place_auto(small, bound, 1_000))
    print(
        f"  100 nodes, 1,000 containers: place {ms(fast_small)}, reference {ms(slow_small)}"
        f" -> {slow_small / fast_small:.0f}x"
    )
    if not args.no_full_reference:
        slow = best_of(1, lambda: ref.place_auto(nodes, bound, 10_000))
        print(
            f"  1,000 nodes, 10,000 containers: place {ms(whole)}, reference {ms(slow)} (one run)"
            f" -> {slow / whole:.0f}x"
        )


if __name__ == "__main__":
    main()
