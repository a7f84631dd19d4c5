"""Slow, obviously correct placement, for the tests and the benchmark only.

- ``pool_capacity`` / ``pool_plans``: section 5.1 transcribed literally -- T(V) by
  counting t up, every k tried, rounds that re-sort the remaining cores, the whole slot
  list written out;
- ``node_capacity`` / ``cpu_plans``: section 5.2's walk, charging one plan at a time to a
  running copy of the availability;
- ``exhaustive_pool_capacity``: the most containers a pool can hold, by trying every
  placement (a memoised search over multisets; pools without oversold cores only);
- ``one_fits``: whether one container fits a pool at all (for section 5.3);
- ``auto`` / ``place_auto``: section 9 with AUTO, one container at a time: the
  straightforward per-container planner the benchmark compares ``place`` with.

    node_capacity(node, request)             == engine.node_capacity(node, request)
    cpu_plans(node, request, d)              == engine.cpu_plans(node, request, d)
    exhaustive_pool_capacity([100, 100], 100, 1, 70)  -> 1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

from coordinator.placement.engine import AnyRequest, demand
from coordinator.placement.errors import PlacementError
from coordinator.placement.node import Node, Plan


def units(a: int, p: int) -> int:
    """u_c: a // P for a whole core (a >= P and a multiple of P), else 0."""
    return a // p if a >= p and a % p == 0 else 0


def rounds_for(values: Sequence[int], x: int) -> int:
    """T(V): the largest t with sum(min(v, t)) >= t * X, counting t up from 0."""
    t = 0
    while sum(min(v, t + 1) for v in values) >= (t + 1) * x:
        t += 1
    return t


def _order(
    avail: Mapping[int, int], ids: Sequence[int], p: int, y: int
) -> tuple[list[int], list[int]]:
    # W by (u asc, id asc); E (u = 0, a >= Y) by (a asc, id asc).
    whole = sorted(
        (c for c in ids if units(avail[c], p) >= 1), key=lambda c: (units(avail[c], p), c)
    )
    frag = []
    if y:
        frag = sorted(
            (c for c in ids if units(avail[c], p) == 0 and avail[c] >= y),
            key=lambda c: (avail[c], c),
        )
    return whole, frag


def _value(
    avail: Mapping[int, int], whole: list[int], frag: list[int], p: int, x: int, y: int, k: int
) -> int:
    # min(T(W[k:]), S + F_k), with the Y = 0 and X = 0 cases of section 5.1.
    if not y:
        return rounds_for([units(avail[c], p) for c in whole], x)
    slots = sum(avail[c] // y for c in frag) + sum(avail[c] // y for c in whole[:k])
    if not x:
        return slots
    return min(rounds_for([units(avail[c], p) for c in whole[k:]], x), slots)


def pool_capacity(avail: Mapping[int, int], ids: Sequence[int], p: int, x: int, y: int) -> int:
    """Section 5.1's CPU capacity, every k tried (X = 0: all of W converted)."""
    whole, frag = _order(avail, ids, p, y)
    if x == 0:
        return _value(avail, whole, frag, p, x, y, len(whole))
    return max(_value(avail, whole, frag, p, x, y, k) for k in range(len(whole) + 1))


def pool_plans(
    avail: Mapping[int, int],
    ids: Sequence[int],
    p: int,
    x: int,
    y: int,
    n: int,
    numa: int | None,
    m: int,
) -> list[Plan]:
    """Section 5.1's plans for n containers, step by step."""
    if n == 0:
        return []
    whole, frag = _order(avail, ids, p, y)
    k = 0
    if y:
        k = next(k for k in range(len(whole) + 1) if _value(avail, whole, frag, p, x, y, k) >= n)
    converted, kept = whole[:k], whole[k:]
    left = {c: units(avail[c], p) for c in kept}
    slot_list = [c for c in frag for _ in range(avail[c] // y)] if y else []
    slot_list += [c for c in converted for _ in range(avail[c] // y)] if y else []
    plans = []
    for i in range(n):
        cores = {}
        for c in sorted(left, key=lambda c: (-left[c], c))[:x]:
            left[c] -= 1
            cores[c] = p
        if y:
            cores[slot_list[i]] = y
        plans.append(Plan(dict(sorted(cores.items())), numa, m, slot_list[i] if y else None))
    return plans


def _walk(node: Node, request: AnyRequest, target: int | None) -> tuple[int, list[Plan]]:
    need = demand(request, node.share_base)
    p = node.share_base
    x, y = divmod(need.cpu_request, p)
    m = need.memory_request
    avail = dict(node.cores)
    left = node.memory
    numa_left = dict(node.numa_memory) if node.numa_memory is not None else None
    pools: list[tuple[int | None, list[int]]] = []
    if node.numa is not None:
        numa = node.numa
        for k in sorted(set(numa.values())):
            pools.append((k, sorted(c for c in node.cores if numa[c] == k)))
    pools.append((None, sorted(node.cores)))
    capacity = 0
    plans: list[Plan] = []
    for n, ids in pools:
        cap = pool_capacity(avail, ids, p, x, y)
        if m:
            budget = left if n is None or numa_left is None else min(numa_left[n], left)
            cap = min(cap, budget // m)
        capacity += cap
        take = cap if target is None else min(cap, target - len(plans))
        for plan in pool_plans(avail, ids, p, x, y, take, n, m):
            for c, pieces in plan.cores.items():  # charge one container at a time
                avail[c] -= pieces
                assert avail[c] >= 0
            left -= m
            if n is not None and numa_left is not None:
                numa_left[n] -= m
            plans.append(plan)
    return capacity, plans


def _memory_capacity(node: Node, cpu: int, memory: int) -> int:
    # Section 6 with the shared pool charged: nothing if the CPU request exceeds the
    # pool; else as many as both the memory and the pool's free CPU take, one by one.
    if cpu > node.pool_cpu:
        return 0
    count, memory_left, cpu_left = 0, node.memory, node.pool_free
    while memory_left >= memory and cpu_left >= cpu:
        count, memory_left, cpu_left = count + 1, memory_left - memory, cpu_left - cpu
    return count


def node_capacity(node: Node, request: AnyRequest) -> int:
    """Section 5.2 / 6, literally."""
    need = demand(request, node.share_base)
    if not need.cpu_bind:
        return _memory_capacity(node, need.cpu_request, need.memory_request)
    return _walk(node, request, None)[0]


def cpu_plans(node: Node, request: AnyRequest, count: int) -> list[Plan]:
    """Section 5.2's plans for ``count`` containers, literally; more than capacity raises
    ``insufficient_resource``."""
    need = demand(request, node.share_base)
    if not need.cpu_bind:
        if count > _memory_capacity(node, need.cpu_request, need.memory_request):
            raise PlacementError("insufficient_resource", f"node {node.name}", node=node.name)
        return [Plan({}, None, need.memory_request, None)] * count
    capacity, plans = _walk(node, request, count)
    if count > capacity:
        raise PlacementError("insufficient_resource", f"node {node.name}", node=node.name)
    return plans


def exhaustive_pool_capacity(values: Sequence[int], p: int, x: int, y: int) -> int:
    """The most containers of X whole cores + a Y-piece fragment (on another core) that
    the pool's available pieces can hold, trying every placement. Without oversold cores
    (every value <= P), a whole part needs a core at exactly P. Memoised on the sorted
    multiset; exponential in the worst case: small pools only."""
    if any(v > p for v in values):
        raise ValueError("exhaustive_pool_capacity: oversold cores are outside its definition")

    @cache
    def best(state: tuple[int, ...]) -> int:
        full = [i for i, v in enumerate(state) if v == p]
        if len(full) < x:
            return 0
        result = 0
        chosen = full[:x]  # whole cores are interchangeable: any X of them
        rest = list(state)
        for i in chosen:
            rest[i] = 0
        if not y:
            return 1 + best(tuple(sorted(rest)))
        tried = set()
        for j, v in enumerate(rest):
            if v >= y and v not in tried:
                tried.add(v)
                after = list(rest)
                after[j] -= y
                result = max(result, 1 + best(tuple(sorted(after))))
        return result

    return best(tuple(sorted(values)))


def one_fits(avail: Mapping[int, int], ids: Sequence[int], p: int, x: int, y: int) -> bool:
    """Whether one container fits the pool (no oversold cores): X cores at P and, when
    Y > 0, another core with >= Y pieces."""
    full = [c for c in ids if avail[c] == p]
    if not y:
        return len(full) >= x
    return any(avail[g] >= y and len([c for c in full if c != g]) >= x for g in ids)


def auto(
    capacities: Mapping[str, int],
    need: int,
    limit: int = 0,
    existing: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """Section 8's AUTO, one container at a time: the least (count, -capacity left, name)
    among the nodes with room gets one. Raises like ``distribute``'s kinds."""
    count = {n: (existing or {}).get(n, 0) for n in capacities}
    left = dict(capacities)
    if sum(left.values()) < need:
        raise PlacementError("insufficient_capacity", "", need=need, available=sum(left.values()))
    if limit and sum(min(left[n], max(0, limit - count[n])) for n in left) < need:
        raise PlacementError("node_limit", "", need=need, limit=limit)
    added = dict.fromkeys(capacities, 0)
    for _ in range(need):
        name = min(
            (n for n in left if left[n] > 0 and (not limit or count[n] < limit)),
            key=lambda n: (count[n], -left[n], n),
        )
        count[name] += 1
        left[name] -= 1
        added[name] += 1
    return {n: added[n] for n in sorted(added) if added[n]}


def place_auto(
    nodes: Sequence[Node],
    request: AnyRequest,
    count: int,
    nodes_limit: int = 0,
    existing: Mapping[str, int] | None = None,
) -> tuple[dict[str, int], dict[str, int], dict[str, list[Plan]]]:
    """Section 9 with AUTO, straightforwardly: (capacities, deploy, plans), every node
    computed on its own, containers distributed one at a time."""
    capacities = {node.name: node_capacity(node, request) for node in nodes}
    deploy = auto(capacities, count, nodes_limit, existing)
    by_name = {node.name: node for node in nodes}
    plans = {name: cpu_plans(by_name[name], request, d) for name, d in deploy.items()}
    return capacities, deploy, plans
