"""Slow, literal version of one update (spec section 3), for the tests only.

Every quantity is an exact ``Fraction`` (the float inputs converted exactly); every
aggregate (demand, effective demand, the subtree's integral share, ...) is recomputed
from scratch by walking the tree each time it is needed; and both fillings are done the
way the spec tells them, by raising a level and stopping at each event:

- progressive filling (steps 3 and 4): lam rises from 0; at the next event an item
  reaches its cap, or the items under a node reach its room and freeze there;
- the remainder by weight (step 5): mu rises from 0; at the next event a child reaches
  its effective demand, or the children reach the parent's total.

The fast engine finds the same levels bottom-up with sorts (``filling.py``); the tests
compare the two on random trees:

    result = reference.update(config, tree.state(), total, demands, now)
    shares = tree.update(total, demands, now)
    float(result.shares["a"][3]) == approx(shares["a"].total)

Cost: polynomial and slow (O(n^2) tree walks, O(m^2 * h) per filling); small trees only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from coordinator.pools.config import BURST, RELAXED, ROOT, ParsedConfig, parse_config

F = Fraction
ZERO = F(0)
ONE = F(1)
EPS = F(1, 10**9)

Shares = tuple[Fraction, Fraction, Fraction, Fraction]  # strong, integral, weight_prop., total


@dataclass
class Result:
    """``shares``: name (and ``"<root>"``) -> (strong, integral, weight_proportional,
    total); ``state``: name -> (volume, last integral share, last strong share) of every
    integral pool; ``alerts``: codes in order."""

    shares: dict[str, Shares]
    state: dict[str, tuple[Fraction, Fraction, Fraction]]
    alerts: list[str]


def progressive_fill(
    items: dict[str, tuple[Fraction, Fraction]],
    nodes_above: Callable[[str], Sequence[Any]],
    room: Callable[[Any], Fraction],
) -> dict[str, Fraction]:
    """Progressive filling as the spec words it. ``items``: name -> (cap, weight);
    ``nodes_above(i)``: the nodes on i's path (any hashable names; the pool update uses
    None for the root); ``room(node)``: its room."""
    held = dict.fromkeys(items, ZERO)
    active = {i for i, (cap, weight) in items.items() if cap > 0 and weight > 0}
    fixed: dict[str, Fraction] = {i: ZERO for i in items if i not in active}
    lam = ZERO
    nodes = {a for i in items for a in nodes_above(i)}
    while active:
        events: list[tuple[Fraction, str, object]] = []
        for i in active:
            cap, weight = items[i]
            events.append((cap / weight, "cap", i))
        for a in nodes:
            under = [i for i in items if a in nodes_above(i)]
            rising = sum((items[i][1] for i in under if i in active), ZERO)
            if rising == 0:
                continue
            constant = sum((fixed[i] for i in under if i not in active), ZERO)
            events.append(((room(a) - constant) / rising, "room", a))
        lam = max(lam, min(e[0] for e in events))
        for at, kind, what in events:
            if at > lam:
                continue
            if kind == "cap" and what in active:
                assert isinstance(what, str)
                active.discard(what)
                fixed[what] = items[what][0]
            elif kind == "room":
                for i in [i for i in active if what in nodes_above(i)]:
                    active.discard(i)
                    fixed[i] = max(ZERO, items[i][1] * lam)
    for i in items:
        held[i] = fixed[i]
    return held


def raise_by_weight(
    budget: Fraction,
    floors: dict[str, Fraction],
    ceilings: dict[str, Fraction],
    weights: dict[str, Fraction],
) -> dict[str, Fraction]:
    """Step 5 at one node: T_c = min(E_c, g_c + mu * w_c) summing to min(budget, sum E)."""
    target = min(budget, sum(ceilings.values(), ZERO))
    floor_sum = sum(floors.values(), ZERO)
    if floor_sum >= target:
        if floor_sum == 0:
            return dict.fromkeys(floors, ZERO)
        return {c: g * target / floor_sum for c, g in floors.items()}
    mu = ZERO
    while True:
        held = {c: min(ceilings[c], floors[c] + mu * weights[c]) for c in floors}
        rising = [c for c in floors if held[c] < ceilings[c]]
        missing = target - sum(held.values(), ZERO)
        if missing <= 0 or not rising:
            return held
        next_cap = min((ceilings[c] - floors[c]) / weights[c] for c in rising)
        mu = min(next_cap, mu + missing / sum((weights[c] for c in rising), ZERO))


def update(
    config: Mapping[str, object] | ParsedConfig,
    state: Mapping[str, object] | None,
    total: Mapping[str, float],
    demands: Mapping[str, Mapping[str, float]],
    now: float,
    usages: Mapping[str, Mapping[str, float]] | None = None,
) -> Result:
    """The spec's steps 0-6 transcribed, from ``state`` (as ``PoolTree.state()`` gives
    it; its ``updated_at`` is the previous update's time). Inputs are trusted."""
    parsed = config if isinstance(config, ParsedConfig) else parse_config(config)
    settings = parsed.settings
    pools = parsed.pools
    names = list(pools)

    def kids(name: str | None) -> list[str]:
        return [c for c in names if pools[c].parent == name]

    def above(name: str) -> list[str | None]:
        path: list[str | None] = []
        node = pools[name].parent
        while node is not None:
            path.append(node)
            node = pools[node].parent
        path.append(None)
        return path

    tot = {r: F(v) for r, v in total.items() if v > 0}

    def ratio(amounts: Mapping[str, float]) -> Fraction:
        return max([F(v) / tot[r] for r, v in amounts.items() if r in tot], default=ZERO)

    def limit(name: str) -> Fraction:
        return min(
            [ONE, *(F(v) / tot[r] for r, v in pools[name].resource_limits.items() if r in tot)]
        )

    def leaf_share(by_pool: Mapping[str, Mapping[str, float]], name: str) -> Fraction:
        if kids(name):
            return sum((leaf_share(by_pool, c) for c in kids(name)), ZERO)
        return ratio(by_pool.get(name, {}))

    def effective(name: str) -> Fraction:
        if kids(name):
            return min(limit(name), sum((effective(c) for c in kids(name)), ZERO))
        return min(limit(name), leaf_share(demands, name))

    def strong(name: str) -> Fraction:
        return ratio(pools[name].strong_guarantee_resources)

    def flow(name: str) -> Fraction:
        return ratio(pools[name].resource_flow) if pools[name].is_integral else ZERO

    def burst(name: str) -> Fraction:
        spec = pools[name]
        return ratio(spec.burst_guarantee_resources) if spec.guarantee_type == BURST else ZERO

    integral_pools = [p for p in names if pools[p].is_integral]
    known: Mapping[str, Any] = state or {}
    old: Mapping[str, Mapping[str, float]] = known.get("pools") or {}

    def remembered(name: str, key: str) -> Fraction:
        return F(old.get(name, {}).get(key, 0.0))

    volume = {p: remembered(p, "volume_ratio_s") for p in integral_pools}
    last_integral = {p: remembered(p, "last_integral_share") for p in integral_pools}
    last_strong = {p: remembered(p, "last_strong_share") for p in integral_pools}
    previous = known.get("updated_at")

    # Step 1.
    alerts: list[str] = []
    top = kids(None)
    committed = sum((strong(c) for c in top), ZERO) + sum(
        (burst(p) for p in names if pools[p].guarantee_type == BURST), ZERO
    )
    k = ONE
    if committed > 1 + EPS:
        k = 1 / committed
        alerts.append("guarantee_overcommit")
    flows = sum((flow(p) for p in names), ZERO)
    if flows > 0 and sum((strong(c) for c in top), ZERO) + flows > 1 + EPS:
        alerts.append("flow_overcommit")
    guarantee: dict[str | None, Fraction] = {None: ONE}

    def fit(node: str | None) -> None:
        children = kids(node)
        values = {c: min(k * strong(c), limit(c)) for c in children}
        summed = sum(values.values(), ZERO)
        if summed > guarantee[node] + EPS:
            values = {c: v * guarantee[node] / summed for c, v in values.items()}
        for c in children:
            guarantee[c] = values[c]
            fit(c)

    fit(None)

    # Step 2.
    if previous is not None and tot:
        period = F(settings.pool_capacity_saturation_period)
        dt = min(max(F(now) - F(previous), ZERO), period)
        for p in integral_pools:
            charged = last_integral[p]
            if settings.charge_volume_by_usage and usages is not None:
                charged = min(charged, max(ZERO, leaf_share(usages, p) - last_strong[p]))
            v = volume[p]
            volume[p] = min(max(v + (flow(p) - charged) * dt, ZERO), max(v, flow(p) * period))

    smooth = F(settings.smooth_period)
    granted: dict[str, Fraction] = dict.fromkeys(integral_pools, ZERO)

    def below(node: str) -> list[str]:
        return [node, *(d for c in kids(node) for d in below(c))]

    def subtree_integral(node: str) -> Fraction:
        return sum((granted.get(d, ZERO) for d in below(node)), ZERO)

    # Step 3.
    wants = {}
    for p in integral_pools:
        if pools[p].guarantee_type == BURST:
            want = max(ZERO, min(k * burst(p), volume[p] / smooth, effective(p) - guarantee[p]))
            wants[p] = (want, k * burst(p))
    top_guarantee = sum((guarantee[c] for c in top), ZERO)

    def burst_room(a: str | None) -> Fraction:
        return 1 - top_guarantee if a is None else max(ZERO, limit(a) - guarantee[a])

    for p, x in progressive_fill(wants, above, burst_room).items():
        granted[p] = x

    # Step 4.
    available = max(
        ZERO,
        1 - sum((min(guarantee[c] + subtree_integral(c), effective(c)) for c in top), ZERO),
    )
    relaxed_rooms = {a: max(ZERO, limit(a) - guarantee[a] - subtree_integral(a)) for a in names}
    caps = {}
    for p in integral_pools:
        spec = pools[p]
        if spec.guarantee_type == RELAXED:
            assert spec.multiplier is not None
            cap = min(
                volume[p] / smooth,
                F(spec.multiplier) * flow(p),
                effective(p) - guarantee[p],
            )
            caps[p] = (max(ZERO, cap), volume[p] / smooth)

    def relaxed_room(a: str | None) -> Fraction:
        return available if a is None else relaxed_rooms[a]

    for p, x in progressive_fill(caps, above, relaxed_room).items():
        granted[p] = x

    # Step 5.
    totals: dict[str, Fraction] = {}

    def share_out(node: str | None, budget: Fraction) -> None:
        children = kids(node)
        if not children:
            return
        floors = {c: min(guarantee[c] + subtree_integral(c), effective(c)) for c in children}
        ceilings = {c: effective(c) for c in children}
        weights = {c: F(pools[c].weight) for c in children}
        for c, t in raise_by_weight(budget, floors, ceilings, weights).items():
            totals[c] = t
            share_out(c, t)

    share_out(None, min(ONE, sum((effective(c) for c in top), ZERO)))

    # Step 6.
    shares: dict[str, Shares] = {}
    for p in names:
        t = totals[p]
        firm = min(t, guarantee[p])
        paid = min(t - firm, subtree_integral(p))
        shares[p] = (firm, paid, t - firm - paid, t)
    shares[ROOT] = (
        sum((shares[c][0] for c in top), ZERO),
        sum((shares[c][1] for c in top), ZERO),
        sum((shares[c][2] for c in top), ZERO),
        sum((shares[c][3] for c in top), ZERO),
    )
    new_state = {p: (volume[p], granted[p], guarantee[p]) for p in integral_pools}
    return Result(shares, new_state, alerts)
