"""The two filling problems of the update (spec sections 3 steps 3-5), as pure functions
over plain float lists.

``level(R, caps, weights)``: the common level of a weighted water-filling with caps --
the lam with sum_i min(c_i, lam * w_i) = R.

``progressive_fill``: the spec's progressive filling of integral pools below nested
rooms. Invariant of the result x: 0 <= x_i <= c_i; for every node a, the items below a
sum to at most R_a (up to float rounding); and x equals the spec's rising common level:
x_i = min(c_i, w_i * min(lam_a for a on i's path)), where lam_a is the level at which
the items below a, each already held by the nodes between it and a, fill a's room.

``raise_by_weight``: the remainder of step 5 -- children start at their guarantee g_c
and rise with slope w_c up to E_c until they add up to the parent's total.

    level(1.0, [0.5, 2.0], [1.0, 1.0])                       -> 0.5
    progressive_fill([0.6, 0.6], [1.0, 1.0], [(1, 0), (0,)], {0: 0.8, 1: 0.3}, {0: 0, 1: 1})
        -> [0.3, 0.5]
    raise_by_weight(1.0, [0.2, 0.0], [1.0, 0.3], [1.0, 1.0]) -> [0.7, 0.3]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def level(room: float, caps: Sequence[float], weights: Sequence[float]) -> float:
    """The smallest lam >= 0 with sum_i min(c_i, lam * w_i) >= ``room`` (items with
    w_i = 0 count 0), or ``math.inf`` when even every cap together stays below ``room``.
    Needs c_i >= 0, w_i >= 0, room >= 0. Cost O(k log k) for the sort by c_i / w_i."""
    if room <= 0:
        return 0.0
    order = sorted((c / w, c, w) for c, w in zip(caps, weights, strict=True) if w > 0 and c > 0)
    rest = room
    slope = math.fsum(w for _, _, w in order)
    for ratio, cap, weight in order:
        # Every item not yet capped holds lam * w; the level is reached before this one
        # caps when the uncapped ones fill ``rest`` at lam <= ratio.
        if ratio * slope >= rest:
            return rest / slope
        rest -= cap
        slope -= weight
    return math.inf


def progressive_fill(
    caps: Sequence[float],
    weights: Sequence[float],
    paths: Sequence[tuple[int, ...]],
    rooms: Mapping[int, float],
    depth: Mapping[int, int],
) -> list[float]:
    """Each item's share after the progressive filling of the spec.

    ``caps[k]``, ``weights[k]``: item k's cap c_k and weight w_k (c_k <= w_k is not
    needed); ``paths[k]``: the nodes above item k, nearest first, ending with the root;
    ``rooms[a]``: node a's room (>= 0) for every node on a path; ``depth[a]``: its depth.

    Postcondition: x_k = min(c_k, w_k * min over a in paths[k] of lam_a), where nodes are
    taken deepest first and lam_a = level(rooms[a], items below a as held so far) when
    those items exceed the room (else no limit). Equivalent to raising one common level
    and freezing the items under a node when they reach its room; the order of items
    does not matter. Cost O(m * h + sum over binding nodes of m_a log m_a) for m items
    on paths of length h.
    """
    # An item of weight 0 holds min(c, lam * 0) = 0 whatever the level.
    held = [c if c > 0 and w > 0 else 0.0 for c, w in zip(caps, weights, strict=True)]
    members: dict[int, list[int]] = {}
    for k, path in enumerate(paths):
        for node in path:
            members.setdefault(node, []).append(k)
    for node in sorted(members, key=depth.__getitem__, reverse=True):
        below = members[node]
        room = max(0.0, rooms[node])
        if math.fsum(held[k] for k in below) <= room:
            continue
        lam = level(room, [held[k] for k in below], [weights[k] for k in below])
        for k in below:
            reach = weights[k] * lam
            if reach < held[k]:
                held[k] = reach
    return held


def raise_by_weight(
    total: float, floors: Sequence[float], ceilings: Sequence[float], weights: Sequence[float]
) -> list[float]:
    """Children's totals T_c = min(E_c, g_c + mu * w_c) for the mu >= 0 at which they add
    up to min(``total``, sum E_c); g = ``floors`` (0 <= g_c <= E_c), E = ``ceilings``,
    w = ``weights`` (> 0).

    When the floors alone exceed ``total`` (only by float rounding after steps 1-4),
    they are scaled down to it. Cost O(k) when every child reaches E_c or none can
    rise, else O(k log k).
    """
    ceiling_sum = math.fsum(ceilings)
    if ceiling_sum <= total:
        return list(ceilings)
    floor_sum = math.fsum(floors)
    if floor_sum >= total:
        if floor_sum <= 0:
            return [0.0] * len(floors)
        scale = total / floor_sum
        return [g * scale for g in floors]
    headroom = [e - g for g, e in zip(floors, ceilings, strict=True)]
    mu = level(total - floor_sum, headroom, weights)
    return [
        g + (h if h < mu * w else mu * w) for g, h, w in zip(floors, headroom, weights, strict=True)
    ]
