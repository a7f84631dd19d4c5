"""New unbound containers prefer nodes that are not under CPU pressure: a rule over AUTO
(spec section 8's default strategy). Pure: which nodes are under pressure is given.

    columns = Columns(["a", "b"], caps=[4, 4], counts=[0, 0], usages=[0.0] * 2, rates=[0.0] * 2)
    prefer_calm(columns, 2, 0, pressured=frozenset({"a"}))   -> {"b": 2}
    prefer_calm(columns, 6, 0, pressured=frozenset({"a"}))   -> {"a": 2, "b": 4}

The rule is AUTO's one container at a time with "under pressure" put first in its key:
each container goes to the least ``(pressured, count, -capacity left, name)`` among the
nodes with room (and, with a limit, ``count < limit``). So a node under pressure takes a
container only when no calm node has room left, and among calm nodes, or among pressured
ones, the choice is AUTO's own. Bound containers (cpu-bind) and the other strategies do not
use it: their nodes are chosen by their cores, or by the strategy's own promise (EACH,
FILL, GLOBAL, DRAINED).

Computed in two AUTO calls, not one container at a time: AUTO over the calm nodes while
they have room for all; else every calm node filled to its room and AUTO over the
pressured ones for the rest. The tests compare it with the literal rule.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.placement.errors import PlacementError
from coordinator.placement.strategies import Columns, distribute


def prefer_calm(
    columns: Columns, need: int, limit: int, pressured: frozenset[str]
) -> dict[str, int]:
    """Containers to add per node, by the rule above.

    Postcondition: what AUTO gives with ``(pressured, count, -capacity left, name)`` as
    its key; equal to ``distribute("auto", columns, need, limit)`` when no node of
    ``columns`` is pressured; when the nodes cannot take ``need``, the very
    ``PlacementError`` that AUTO raises over all of them. Cost: AUTO's, O(n log n)."""
    if pressured.isdisjoint(columns.names):
        return distribute("auto", columns, need, limit)
    calm = _where(columns, lambda name: name not in pressured)
    hot = _where(columns, lambda name: name in pressured)
    rooms = {
        name: _room(capacity, count, limit)
        for name, capacity, count in zip(calm.names, calm.caps, calm.counts, strict=True)
    }
    calm_room = sum(rooms.values())
    if need <= calm_room:
        return distribute("auto", calm, need, limit)
    try:
        rest = distribute("auto", hot, need - calm_room, limit)
    except PlacementError:
        return distribute("auto", columns, need, limit)  # raises as the whole cluster would
    filled = {name: room for name, room in rooms.items() if room > 0}
    return dict(sorted((filled | rest).items()))


def _room(capacity: int, count: int, limit: int) -> int:
    """How many containers AUTO may add to a node: its capacity, within the limit."""
    return max(0, min(capacity, limit - count)) if limit else max(0, capacity)


def _where(columns: Columns, keep: Callable[[str], bool]) -> Columns:
    rows = [k for k, name in enumerate(columns.names) if keep(name)]
    return Columns(
        [columns.names[k] for k in rows],
        [columns.caps[k] for k in rows],
        [columns.counts[k] for k in rows],
        [columns.usages[k] for k in rows],
        [columns.rates[k] for k in rows],
    )
