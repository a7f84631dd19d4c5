"""How many containers of one request a node can take, and where they go (placement spec
sections 5 and 6). Pure functions of an available view; nothing is charged.

Invariants, for a cpu-bind request of R = X * P + Y pieces and M bytes on a node whose
capacity is ``c = node_capacity(node, r)``:

- ``cpu_plans(node, r, d)`` for every ``d <= c`` returns ``d`` plans that fit together:
  added up they take no core's pieces, no node memory and no NUMA node's memory twice;
- each plan holds exactly X whole cores at P pieces and, when Y > 0, one fragment core at
  Y pieces; a NUMA-local plan uses cores of its NUMA node only;
- plans are listed in pool order (NUMA pools by ascending id, then the cross pool), each
  pool built with the fewest converted whole cores for its share; ``d > c`` raises
  ``insufficient_resource``.

    node_capacity(fresh_24_cores, Request("1.7", 512 * MiB, cpu_bind=True))  -> 12
    pool_capacities(seed_numa, Request("1", 600 * MiB, cpu_bind=True))       -> (1, 1, 1)
    cpu_plans(seed_numa, Request("1", 600 * MiB, cpu_bind=True), 3)[2]
        -> Plan(cores={1: 100}, numa=None, memory=629145600, fragment=None)   (cross-NUMA)

(``seed_numa``: the spec's NUMA example, 2 NUMA nodes of 2 cores and 1 GiB each, 2 GiB.)
Every plan's ``cores`` is in ascending id order.

Two versions of the section 5.1/5.2 walk live here. The fast one covers nodes without
oversold cores (every core offers at most P pieces: the closed form applies and capacity
needs no plans); the general one materialises the walk on a running copy of the
availability and covers everything, oversold cores included. ``reference.py`` holds the
slow literal transcription that the tests compare both with.

A view's signature and its per-pool capacities are remembered on the view
(``kept_signature``, ``node_caps``; ``node.Memo``): asking the same view again is a lookup.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from heapq import nsmallest

from coordinator.placement.errors import PlacementError, invalid_request
from coordinator.placement.node import MEMO_REQUESTS, Node, Plan, Signature
from coordinator.placement.request import Normalized, Request, describe
from shared.quantity import format_cpu, format_memory

AnyRequest = Request | Normalized


def demand(request: AnyRequest, share_base: int) -> Normalized:
    """The request as normalised resources for this share_base (section 4)."""
    if isinstance(request, Normalized):
        if request.share_base != share_base:
            raise invalid_request(
                "share_base",
                share_base,
                f"the resources were normalised with share_base {request.share_base}",
            )
        return request
    if isinstance(request, Request):
        return request.normalized(share_base)
    raise invalid_request("request", request, "is not a Request or Normalized resources")


# --- one pool without oversold cores: the closed form -----------------------------------


def figures(values: Sequence[int], p: int, y: int) -> tuple[int, int]:
    """(A, S) of a pool without oversold cores, from its available pieces sorted ascending
    (all <= P): A = whole cores (== P), S = fragment slots, sum of a // Y over the cores
    with Y <= a < P (0 when Y = 0). Cost O(log n + fragment cores)."""
    whole = bisect_left(values, p)
    if not y:
        return len(values) - whole, 0
    first = bisect_left(values, y, 0, whole)
    return len(values) - whole, sum([v // y for v in values[first:whole]])


def closed_form(a: int, s: int, x: int, y: int, q: int) -> int:
    """CPU capacity of a pool without oversold cores (section 5.1):
    ``max over k in 0..A of min((A - k) // X, S + k * q)``, q = P // Y.

    Equivalent to trying every k. The first term falls and the second rises with k, so the
    maximum is at floor or ceil of k* = (A - X*S) / (1 + X*q), clamped to 0..A. O(1).
    """
    if not y:
        return a // x
    if not x:
        return s + a * q
    k = (a - x * s) // (1 + x * q)
    best = 0
    for kk in (k, k + 1):
        kk = 0 if kk < 0 else a if kk > a else kk
        value = min((a - kk) // x, s + kk * q)
        if value > best:
            best = value
    return best


def conversions(n: int, s: int, y: int, q: int) -> int:
    """Fewest whole cores to convert for n <= capacity containers: 0 when Y = 0 or the
    S slots suffice, else ceil((n - S) / q). O(1).

    Equivalent to "the least k whose value is >= n": below k* the value is S + k*q (the
    slot term is the smaller), so the least k with S + k*q >= n is the answer."""
    if not y or s >= n:
        return 0
    return -(-(n - s) // q)


def signature(node: Node) -> Signature:
    """The node's capacity key (see ``Signature``): capacity depends on nothing else, so
    nodes with equal signatures share one computation. Cost O(c log c) in C."""
    cores = node.cores
    if not node.pools:
        return node.share_base, node.memory, False, ((None, tuple(sorted(cores.values()))),)
    nm = node.numa_memory
    get = cores.__getitem__
    return (
        node.share_base,
        node.memory,
        True,
        tuple(
            (None if nm is None else nm[n], tuple(sorted(map(get, ids)))) for n, ids in node.pools
        ),
    )


def oversold(sig: Signature) -> bool:
    """True when some core offers more than P pieces (the closed form does not apply)."""
    p = sig[0]
    return any(values and values[-1] > p for _, values in sig[3])


def kept_signature(node: Node) -> Signature:
    """``signature(node)``, worked out on the first call and kept in ``node.memo`` (a view
    never changes). Cost O(c log c) once, then O(1)."""
    sig = node.memo.signature
    if sig is None:
        sig = node.memo.signature = signature(node)
    return sig


def remember_caps(
    node: Node, key: tuple[int, int, int], caps: tuple[int, ...]
) -> tuple[int, tuple[int, ...]]:
    """Keep ``(sum(caps), caps)`` as the node's capacity and per-pool capacities for
    (X, Y, M) = ``key``, in a memo of at most ``MEMO_REQUESTS`` entries (a full one is
    emptied first); return it. O(pools). The sum is kept too: summing 10,000 small
    tuples took 1.6 ms of a 10,000-node decision."""
    memo = node.memo.caps
    if len(memo) >= MEMO_REQUESTS:
        memo.clear()
    known = memo[key] = (sum(caps), caps)
    return known


# Why capacity from figures and not from plans: on the benchmark node (24 cores, two
# NUMA nodes, 1.7 CPU + 512Mi) the materialising walk (general_walk, which builds all 12
# plans and charges them) takes 220 us, this 4.6 us plus 2.3 us for the signature
# (measured, best of 5): 1,000 distinct nodes cost 7 ms instead of 220 ms.
def fast_caps(sig: Signature, x: int, y: int, m: int) -> tuple[int, ...]:
    """Per-pool capacities (NUMA pools ascending, then the cross pool) of a node without
    oversold cores, from its signature alone (section 5.2's "for speed").

    Each used slot removes exactly one slot from its core and every converted core loses
    at least one slot (the conversions are the fewest), so the cross pool sees
    A' = sum(A_n - k_n - n_n * X) whole cores and S' = sum(S_n + k_n * q - n_n) slots.
    Cost O(pools) plus ``figures``; no plan is built.
    """
    p, memory, has_numa, pools = sig
    q = p // y if y else 0
    left = memory
    caps: list[int] = []
    if has_numa:
        a_cross = s_cross = 0
        for numa_memory, values in pools:
            a, s = figures(values, p, y)
            cap = closed_form(a, s, x, y, q)
            if m:
                budget = left if numa_memory is None or numa_memory > left else numa_memory
                if budget // m < cap:
                    cap = budget // m
            k = conversions(cap, s, y, q)
            a_cross += a - k - cap * x
            s_cross += s + k * q - cap if y else 0
            left -= cap * m
            caps.append(cap)
    else:
        a_cross, s_cross = figures(pools[0][1], p, y)
    cap = closed_form(a_cross, s_cross, x, y, q)
    if m and left // m < cap:
        cap = left // m
    caps.append(cap)
    return tuple(caps)


def fast_pool_plans(
    avail: dict[int, int],
    ids: Sequence[int],
    p: int,
    x: int,
    y: int,
    n: int,
    numa: int | None,
    m: int,
) -> list[Plan]:
    """Section 5.1's plans for n containers in a pool without oversold cores.

    1. C = the first k_n whole cores (ascending id) are converted, R = the rest;
    2. round i takes R[i*X : (i+1)*X] (without oversell every round takes consecutive ids);
    3. slots: each usable fragment core by (a asc, id), a // Y times, then each core of C,
       q times; plan i gets slot i at Y pieces.
    Precondition: n <= the pool's CPU capacity. Cost O(n * X + cores log cores).
    """
    if n <= 0:
        return []
    whole = [c for c in ids if avail[c] == p]
    if not y:
        return [Plan(dict.fromkeys(whole[i * x : i * x + x], p), numa, m) for i in range(n)]
    usable = sorted([(a, c) for c in ids if y <= (a := avail[c]) < p])
    s = sum([a // y for a, _ in usable])
    q = p // y
    k = conversions(n, s, y, q)
    slots: list[int] = []
    for a, c in usable:
        slots += [c] * (a // y)
        if len(slots) >= n:
            break
    for c in whole[:k]:
        slots += [c] * q
    rest = whole[k:]
    plans = []
    # Each plan's cores in ascending id order. A round's whole cores are ascending already
    # and a converted core's id is below all of R's, so only a fragment from E can land in
    # the middle; sorting every plan instead cost 1 us of the 5 us a plan takes (measured
    # on 1,000 distinct partly used nodes: plans phase 40 ms -> 34 ms).
    for i in range(n):
        frag = slots[i]
        wholes = rest[i * x : i * x + x]
        if not wholes or frag < wholes[0]:
            cores = {frag: y}
            cores.update(dict.fromkeys(wholes, p))
        elif frag > wholes[-1]:
            cores = dict.fromkeys(wholes, p)
            cores[frag] = y
        else:
            cores = dict(sorted([(frag, y), *((c, p) for c in wholes)]))
        plans.append(Plan(cores, numa, m, frag))
    return plans


# --- any pool: the general definition ---------------------------------------------------


def whole_rounds(units: Sequence[int], x: int) -> int:
    """T(V): the largest t with sum(min(v, t) for v in V) >= t * X (X >= 1). The condition
    holds for a set of t closed downwards (sum(min(v, t)) / t never rises), so bisect.
    Cost O(|V| log(sum V))."""
    lo, hi = 0, sum(units) // x
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum([v if v < mid else mid for v in units]) >= mid * x:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True, slots=True)
class _Pool:
    # One pool's cores classified (section 5.1): W by (u asc, id asc) with their units,
    # usable fragment cores E by (a asc, id asc), their slot count S.
    whole: list[tuple[int, int]]  # (u, core)
    usable: list[tuple[int, int]]  # (a, core)
    slots: int


def _classify(avail: dict[int, int], ids: Sequence[int], p: int, y: int) -> _Pool:
    whole: list[tuple[int, int]] = []
    usable: list[tuple[int, int]] = []
    for c in ids:
        a = avail[c]
        if a >= p and a % p == 0:
            whole.append((a // p, c))
        elif y and a >= y:
            usable.append((a, c))
    whole.sort()
    usable.sort()
    return _Pool(whole, usable, sum([a // y for a, _ in usable]) if y else 0)


def _values(pool: _Pool, p: int, x: int, y: int) -> list[int]:
    # value(k) = min(T(W[k:]), S + F_k) for k = 0..|W| (section 5.1's definition).
    units = [u for u, _ in pool.whole]
    if not y:
        return [whole_rounds(units, x)]
    out = []
    f = 0
    for k in range(len(units) + 1):
        out.append(pool.slots + f if not x else min(whole_rounds(units[k:], x), pool.slots + f))
        if k < len(units):
            f += units[k] * p // y
    return out


def general_pool_capacity(avail: dict[int, int], ids: Sequence[int], p: int, x: int, y: int) -> int:
    """CPU capacity of any pool: Y = 0: T(W); X = 0: S + F_|W|; else
    max over k of min(T(W[k:]), S + F_k). Cost O(|W|^2 log) -- oversold pools only."""
    return max(_values(_classify(avail, ids, p, y), p, x, y))


def general_pool_plans(
    avail: dict[int, int],
    ids: Sequence[int],
    p: int,
    x: int,
    y: int,
    n: int,
    numa: int | None,
    m: int,
) -> list[Plan]:
    """Section 5.1's plans for n <= capacity containers in any pool: the least k with
    value >= n; n rounds each taking the X cores of W[k:] with the most units left (ties:
    lower id); slots of E then W[:k], each core a // Y times. Cost O(n * |W| log X)."""
    if n <= 0:
        return []
    pool = _classify(avail, ids, p, y)
    values = _values(pool, p, x, y)
    k = next(k for k, v in enumerate(values) if v >= n) if y else 0
    left = {c: u for u, c in pool.whole[k:]}
    slots: list[int] = []
    if y:
        for a, c in pool.usable:
            slots += [c] * (a // y)
        for u, c in pool.whole[:k]:
            slots += [c] * (u * p // y)
    plans = []
    for i in range(n):
        cores: dict[int, int] = {}
        for c in nsmallest(x, left, key=lambda c: (-left[c], c)):
            left[c] -= 1
            cores[c] = p
        frag = slots[i] if y else None
        if frag is not None:
            cores[frag] = y
        plans.append(Plan(dict(sorted(cores.items())), numa, m, frag))
    return plans


# --- the walk over pools (section 5.2) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class PoolReport:
    """One pool of the walk: ``numa`` (None = cross pool), its CPU capacity, the memory
    budget it was offered (None: no memory bound) and how many it took."""

    numa: int | None
    cpu: int
    budget: int | None
    taken: int


class Taken:
    """The walk's accumulator: what is free, what is needed, what is taken so far.

    ``need``: containers wanted (None: as many as fit, the capacity walk); ``plans``: taken
    so far, in pool order; ``memory_left``: node memory after them; ``free()``: the
    availability after them, charged lazily -- the NUMA pools are disjoint, so only the
    cross pool (or an oversold walk) ever needs it, and a fast walk that ends in a NUMA
    pool copies nothing.
    """

    __slots__ = ("_charged", "_free", "memory_left", "need", "node", "plans")

    def __init__(self, node: Node, need: int | None) -> None:
        self.node = node
        self.need = need
        self.plans: list[Plan] = []
        self.memory_left = node.memory
        self._free: dict[int, int] | None = None
        self._charged = 0

    def room(self, cap: int) -> int:
        """How many a pool of capacity ``cap`` should take: all of it, or what is missing."""
        return cap if self.need is None else min(cap, self.need - len(self.plans))

    def take(self, plans: list[Plan], m: int) -> None:
        """Add a pool's plans (M bytes each of node memory)."""
        self.plans += plans
        self.memory_left -= len(plans) * m

    def is_satisfied(self) -> bool:
        return self.need is not None and len(self.plans) >= self.need

    def free(self) -> dict[int, int]:
        """Available pieces per core after every plan taken so far."""
        if self._free is None:
            self._free = dict(self.node.cores)
        free = self._free
        for plan in self.plans[self._charged :]:
            for c, pieces in plan.cores.items():
                free[c] -= pieces
        self._charged = len(self.plans)
        return free


def budget(node: Node, numa: int | None, memory_left: int) -> int:
    """A pool's memory budget (section 5.2): NUMA pool n -> min(numa_memory[n], node
    memory left), or node memory left when NUMA memory is not tracked; cross pool -> node
    memory left."""
    nm = node.numa_memory
    if numa is None or nm is None:
        return memory_left
    return min(nm[numa], memory_left)


def general_walk(
    node: Node, x: int, y: int, m: int, need: int | None
) -> tuple[list[PoolReport], list[Plan]]:
    """Section 5.2 on a running copy of the availability, any node (oversold included):
    per pool, in order (NUMA ids ascending, then cross):

    1. its CPU capacity on what is free now (``general_pool_capacity``);
    2. bounded by its memory budget // M when M > 0;
    3. its plans for all of that (need None: the capacity walk), or for what is still
       missing, taken -- charged to the availability and the memory left.

    Returns every pool's report and the plans. Cost: the pools' ``general_pool_*`` plus
    O(plans * cores)."""
    p = node.share_base
    taken = Taken(node, need)
    reports: list[PoolReport] = []
    pools: list[tuple[int | None, Sequence[int]]] = [*node.pools, (None, tuple(node.cores))]
    for numa, ids in pools:
        free = taken.free()
        cpu = general_pool_capacity(free, ids, p, x, y)  # 1.
        offered = budget(node, numa, taken.memory_left) if m else None
        cap = cpu if offered is None else min(cpu, offered // m)  # 2.
        room = taken.room(cap)
        taken.take(general_pool_plans(free, ids, p, x, y, room, numa, m), m)  # 3.
        reports.append(PoolReport(numa, cpu, offered, room))
    return reports, taken.plans


def fast_plans(node: Node, x: int, y: int, m: int, caps: Sequence[int], d: int) -> list[Plan]:
    """Plans for d <= sum(caps) containers on a node without oversold cores, caps from
    ``fast_caps``: pool by pool, each taking min(cap, what is missing). Every pool before
    the last one used is taken whole, exactly as in the capacity walk, so its cap (and
    the budget it was computed with) still holds. Cost O(d * (X + 1) + c log c)."""
    p = node.share_base
    taken = Taken(node, d)
    for (numa, ids), cap in zip(node.pools, caps, strict=False):
        # A NUMA pool's cores are untouched by the pools before it: plan on the view.
        taken.take(fast_pool_plans(node.cores, ids, p, x, y, taken.room(cap), numa, m), m)
        if taken.is_satisfied():
            return taken.plans
    cross = fast_pool_plans(taken.free(), tuple(node.cores), p, x, y, taken.room(caps[-1]), None, m)
    taken.take(cross, m)
    return taken.plans


def node_caps(node: Node, need: Normalized) -> tuple[int, ...]:
    """Per-pool capacities of a cpu-bind request (NUMA pools ascending, then cross), from
    the node's memo when this view was asked the same (X, Y, M) before (O(1)), else
    worked out (``fast_caps`` or, oversold, ``general_walk``) and remembered."""
    x, y = divmod(need.cpu_request, node.share_base)
    m = need.memory_request
    key = (x, y, m)
    known = node.memo.caps.get(key)
    if known is not None:
        return known[1]
    sig = kept_signature(node)
    if oversold(sig):
        caps = tuple(r.taken for r in general_walk(node, x, y, m, None)[0])
    else:
        caps = fast_caps(sig, x, y, m)
    return remember_caps(node, key, caps)[1]


# --- public -----------------------------------------------------------------------------


def memory_capacity(node: Node, need: Normalized) -> int:
    """Section 6, with the shared pool's CPU charged (``shared_cpu.py``): 0 if the CPU
    request exceeds the shared pool, else min(available memory // memory_request, the
    shared CPU still free // cpu_request). O(1)."""
    cpu = need.cpu_request
    if cpu > node.pool_cpu:
        return 0
    by_memory = node.memory // need.memory_request
    by_cpu = node.pool_free // cpu if cpu else by_memory
    return by_memory if by_memory < by_cpu else by_cpu


def pool_capacities(node: Node, request: AnyRequest) -> tuple[int, ...]:
    """Per-pool capacities of a cpu-bind request, in walk order: one entry per NUMA node
    (ascending id) then the cross pool (a node without a NUMA map: the cross pool only).
    ``sum`` of it is ``node_capacity``. Cost O(c log c) without oversold cores."""
    need = demand(request, node.share_base)
    if not need.cpu_bind:
        raise invalid_request("cpu_bind", False, "pool capacities are for cpu-bind requests")
    return node_caps(node, need)


def node_capacity(node: Node, request: AnyRequest) -> int:
    """How many more containers of ``request`` the node can take (section 5.2 for
    cpu-bind, section 6 for memory mode).

    Postcondition: ``len(cpu_plans(node, request, capacity)) == capacity`` and
    ``cpu_plans(node, request, capacity + 1)`` raises. Cost O(c log c) for c cores
    without oversold cores (closed form per pool, no plan built), O(1) in memory mode or
    for a view asked the same request before (``node_caps``).
    """
    need = demand(request, node.share_base)
    if not need.cpu_bind:
        return memory_capacity(node, need)
    return sum(node_caps(node, need))


def memory_plan(need: Normalized) -> Plan:
    """The plan of a memory-mode container: no cores, its memory request."""
    return Plan({}, None, need.memory_request, None)


def cpu_plans(node: Node, request: AnyRequest, count: int) -> list[Plan]:
    """``count`` plans for ``request`` on ``node`` (section 5.2): NUMA-local pools by
    ascending NUMA id, then cross-NUMA, each pool with the fewest conversions for its share.
    In memory mode: ``count`` times the one memory-mode plan (no cores).

    Postcondition: see the module invariants. ``count`` above the capacity raises
    ``insufficient_resource`` naming the node, the request, what was short (cpu or memory)
    and every pool's figures. Cost O(count * (X + 1) + c log c) without oversold cores.
    """
    if type(count) is not int or count < 0:
        raise invalid_request("count", count, "must be an integer >= 0")
    need = demand(request, node.share_base)
    if not need.cpu_bind:
        capacity = memory_capacity(node, need)
        if count > capacity:
            raise shortage(node, need, count, capacity)
        return [memory_plan(need)] * count
    x, y = divmod(need.cpu_request, node.share_base)
    if oversold(kept_signature(node)):
        plans = general_walk(node, x, y, need.memory_request, count)[1]
        if len(plans) < count:
            raise shortage(node, need, count, len(plans))
        return plans
    caps = node_caps(node, need)
    if count > sum(caps):
        raise shortage(node, need, count, sum(caps))
    return fast_plans(node, x, y, need.memory_request, caps, count)


def shortage(node: Node, need: Normalized, asked: int, capacity: int) -> PlacementError:
    """``insufficient_resource``: node, request, asked vs capacity, and what was short.

    cpu-bind: the last pool of the walk decides: "memory" when its memory budget bound it
    below its CPU capacity, else "cpu" (with its whole cores and usable fragment cores);
    every pool's figures are in ``details["pools"]``. Memory mode: "cpu" when the request
    exceeds the shared pool or its free CPU bounds the capacity, else "memory". Cost: one
    general walk (error path only).
    """
    what = describe(need.cpu_request, need.memory_request, need.share_base)
    head = f"node {node.name}: {asked} containers of {what} asked, {capacity} fit"
    if not need.cpu_bind:
        p = node.share_base
        shared, free = node.pool_cpu, node.pool_free
        if need.cpu_request > shared or free < asked * need.cpu_request:
            short = "cpu"
            text = (
                f"the shared pool (cores {','.join(map(str, node.shared_cores)) or 'none'})"
                f" offers {format_cpu(shared, share_base=p)} CPU,"
                f" {format_cpu(free, share_base=p)} of it free for unbound containers"
            )
        else:
            short, text = "memory", f"{format_memory(node.memory)} memory available"
        return PlacementError(
            "insufficient_resource",
            f"{head} (short of {short}: {text})",
            node=node.name,
            asked=asked,
            capacity=capacity,
            short=short,
            shared_cpu=shared,
            shared_free=free,
        )
    p = node.share_base
    x, y = divmod(need.cpu_request, p)
    reports, _ = general_walk(node, x, y, need.memory_request, None)
    last = reports[-1]
    short = (
        "memory"
        if last.budget is not None and last.budget // need.memory_request < last.cpu
        else "cpu"
    )
    parts = []
    for r in reports:
        name = "cross" if r.numa is None else f"NUMA {r.numa}"
        budget = "" if r.budget is None else f", {format_memory(r.budget)} memory budget"
        parts.append(f"{name}: {r.taken} (cpu room {r.cpu}{budget})")
    return PlacementError(
        "insufficient_resource",
        f"{head}, short of {short}; " + "; ".join(parts),
        node=node.name,
        asked=asked,
        capacity=capacity,
        short=short,
        pools=[
            {"numa": r.numa, "cpu": r.cpu, "memory_budget": r.budget, "taken": r.taken}
            for r in reports
        ],
    )
