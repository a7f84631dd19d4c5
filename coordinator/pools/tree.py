"""The pool tree and its fair-share update (spec section 3), fast version.

Invariants after every ``update`` (up to float rounding, within 1e-9):

- every pool's total T is at most its limit share L and its effective demand E
  (so at most its demand share D); the children's totals add up to at most the parent's,
  and the top-level totals to at most 1;
- ``Share.strong + integral + weight_proportional == total``, each >= 0;
- every integral pool's volume V is in [0, max(V_before, phi * P)];
- ``state()`` holds everything the next update reads, so
  ``PoolTree.from_config(config, tree.state())`` continues exactly where ``tree`` was.

    # prod: burst, flow 1000, burst 2000 cores; research: relaxed, flow 1000 cores
    tree = PoolTree.from_config(config, now=0.0)
    tree.update({"cpu": 2000}, {"research": {"cpu": 2000}}, now=43_200.0)["research"]
        -> Share(strong=0.0, integral=1.0, weight_proportional=0.0, total=1.0)
    tree.update({"cpu": 2000}, {"prod": {"cpu": 2000}, "research": {"cpu": 2000}},
                now=43_260.0)["prod"]
        -> Share(strong=0.0, integral=1.0, weight_proportional=0.0, total=1.0)
    tree.introspect("prod")["estimated_burst_usage_duration_seconds"]   -> 43260.0
    tree.state()  -> {"updated_at": 43260.0, "pools": {"prod": {"volume_ratio_s": 21630.0,
                      "last_integral_share": 1.0, "last_strong_share": 0.0}, ...}}
    PoolTree.from_config(config, tree.state())   # after a restart: continues exactly

Layout: pools live at positions 1..n of plain lists, parents before children (by
depth); position 0 is the root. One update is a fixed number of passes over those
lists plus the integral pools' ancestor paths, so its cost is O(n + m * h + input
amounts), with sorts only inside fills whose rooms bind (O(k log k) per node).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from operator import truediv
from typing import Final, NamedTuple

from coordinator.pools.config import (
    BURST,
    NONE,
    RELAXED,
    ROOT,
    ParsedConfig,
    PoolSpec,
    TreeSettings,
    parse_config,
)
from coordinator.pools.errors import PoolConfigError, PoolInputError
from coordinator.pools.filling import progressive_fill, raise_by_weight

EPS: Final = 1e-9  # the spec's comparison tolerance

GUARANTEE_OVERCOMMIT: Final = "guarantee_overcommit"
FLOW_OVERCOMMIT: Final = "flow_overcommit"


class Share(NamedTuple):
    """One pool's fair share, as ratios of the cluster (its dominant resource).
    ``strong + integral + weight_proportional == total``."""

    strong: float
    integral: float
    weight_proportional: float
    total: float

    def as_dict(self) -> dict[str, float]:
        return {
            "strong": self.strong,
            "integral": self.integral,
            "weight_proportional": self.weight_proportional,
            "total": self.total,
        }


ZERO_SHARE: Final = Share(0.0, 0.0, 0.0, 0.0)


class _Totals(dict[str, float]):
    """The cluster's positive totals; a resource it lacks divides to 0."""

    def __missing__(self, key: object) -> float:
        return math.inf


def _ratio(items: tuple[tuple[str, float], ...], total: _Totals) -> float:
    """max over r of amount_r / total_r for the resources with a positive total; 0 for
    none (spec: the dominant ratio). O(len(items))."""
    best = 0.0
    for name, amount in items:
        x = amount / total[name]
        if x > best:
            best = x
    return best


def _limit(items: tuple[tuple[str, float], ...], total: _Totals) -> float:
    """min(1, min over configured limits with a positive total of limit_r / total_r)."""
    low = 1.0
    for name, amount in items:
        if name in total:
            x = amount / total[name]
            if x < low:
                low = x
    return low


@dataclass(slots=True)
class _ConfigRatios:
    """The configuration's amounts as ratios of one total (recomputed when it changes)."""

    strong: list[float]  # s per position
    limit: list[float]  # L per position (1 without limits)
    flow: dict[int, float]  # phi per integral pool
    burst: dict[int, float]  # b per burst pool (specified, unscaled)
    total_flow: dict[int, float]  # phi summed over each subtree (pools with one below)
    total_burst: dict[int, float]  # b summed likewise


@dataclass(slots=True)
class _Snapshot:
    """What the last update computed, for ``introspect``."""

    total: dict[str, float]
    ratios: _ConfigRatios
    demand: list[float]
    usage: list[float] | None
    strong_guarantee: list[float]
    effective_burst: dict[int, float]
    shares: list[Share]


def _is_finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _seconds(value: object, what: str, *, stored: bool) -> float:
    """``value`` as a float time, or the error for a state (``stored``) or an input."""
    if not _is_finite(value):
        message = f"{what} = {value!r}: must be a finite number of seconds"
        if stored:
            raise PoolConfigError("invalid_state", message)
        raise PoolInputError("invalid_time", message)
    return float(value)  # type: ignore[arg-type]


class PoolTree:
    """A checked pool tree with its volumes; ``update`` computes the shares of one
    period. Build it with ``from_config``; it is not thread-safe (one updater)."""

    def __init__(
        self,
        config: ParsedConfig,
        state: Mapping[str, object] | None = None,
        now: float | None = None,
    ) -> None:
        self._config = config
        self._settings = config.settings
        specs = list(config.pools.values())
        self._names: list[str] = [ROOT, *config.pools]
        self._index: dict[str, int] = {name: i for i, name in enumerate(self._names)}
        n = len(self._names)
        self._n = n
        self._parent: list[int] = [-1] + [
            0 if spec.parent is None else self._index[spec.parent] for spec in specs
        ]
        self._children: list[list[int]] = [[] for _ in range(n)]
        for i in range(1, n):
            self._children[self._parent[i]].append(i)
        self._depth: list[int] = [0] * n
        for i in range(1, n):
            self._depth[i] = self._depth[self._parent[i]] + 1
        self._leaf: list[bool] = [not kids for kids in self._children]
        self._leaf[0] = False
        self._internal: list[int] = [i for i in range(n) if self._children[i]]
        self._child_weights: dict[int, list[float]] = {
            i: [specs[c - 1].weight for c in self._children[i]] for i in self._internal
        }
        self._kind: list[str] = [NONE] + [spec.guarantee_type for spec in specs]
        self._burst: list[int] = [i for i in range(n) if self._kind[i] == BURST]
        self._relaxed: list[int] = [i for i in range(n) if self._kind[i] == RELAXED]
        self._integral: list[int] = [i for i in range(n) if self._kind[i] != NONE]
        self._multiplier: dict[int, float] = {
            i: specs[i - 1].multiplier or 1.0 for i in self._relaxed
        }
        self._paths: dict[int, tuple[int, ...]] = {i: self._path(i) for i in self._integral}

        def items(amounts: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
            return tuple(amounts.items())

        self._strong_items = [
            (i, items(s.strong_guarantee_resources))
            for i, s in enumerate(specs, 1)
            if s.strong_guarantee_resources
        ]
        self._limit_items = [
            (i, items(s.resource_limits)) for i, s in enumerate(specs, 1) if s.resource_limits
        ]
        self._flow_items = {i: items(specs[i - 1].resource_flow) for i in self._integral}
        self._burst_items = {i: items(specs[i - 1].burst_guarantee_resources) for i in self._burst}
        # Step 1.2 only touches parents with a strong-guaranteed child: every other
        # child's SG is min(k * 0, L) = 0.
        strong = {i for i, _ in self._strong_items}
        self._strong_groups: list[tuple[int, list[int]]] = [
            (p, [c for c in self._children[p] if c in strong])
            for p in self._internal
            if any(c in strong for c in self._children[p])
        ]

        self._volume: dict[int, float] = dict.fromkeys(self._integral, 0.0)
        self._last_integral: dict[int, float] = dict.fromkeys(self._integral, 0.0)
        self._last_strong: dict[int, float] = dict.fromkeys(self._integral, 0.0)
        self._updated_at: float | None = None
        self._read_state(state)
        if now is not None:
            self._updated_at = _seconds(now, "now", stored=True)

        self._ratio_key: dict[str, float] | None = None
        self._ratios = self._config_ratios(_Totals())
        self._alerts: list[dict[str, object]] = []
        zeros = [0.0] * n
        self._last = _Snapshot({}, self._ratios, zeros, None, zeros, {}, [ZERO_SHARE] * n)

    # --- construction -------------------------------------------------------------------

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, object],
        state: Mapping[str, object] | None = None,
        now: float | None = None,
    ) -> PoolTree:
        """The tree of ``config`` (``PoolConfigError`` for the first broken rule; nothing
        else happens), continuing from ``state`` as ``state()`` returned it.

        ``now`` is the time of the previous update (default: ``state["updated_at"]``);
        with neither, the first update changes no volume. State of pools that are not
        integral (any more) or do not exist is ignored; integral pools it lacks start at
        V = 0 with nothing charged. Cost O(n * depth + n * r).
        """
        return cls(parse_config(config), state, now)

    def _path(self, i: int) -> tuple[int, ...]:
        path = []
        node = self._parent[i]
        while node >= 0:
            path.append(node)
            node = self._parent[node]
        return tuple(path)

    def _read_state(self, state: Mapping[str, object] | None) -> None:
        if state is None:
            return
        if not isinstance(state, Mapping):
            raise PoolConfigError("invalid_state", f"state = {state!r}: must be a map")
        updated = state.get("updated_at")
        if updated is not None:
            self._updated_at = _seconds(updated, "state.updated_at", stored=True)
        pools = state.get("pools") or {}
        if not isinstance(pools, Mapping):
            raise PoolConfigError("invalid_state", "state.pools must be a map of pool -> state")
        for name, entry in pools.items():
            i = self._index.get(name) if isinstance(name, str) else None
            if i is None or i not in self._volume:
                continue  # deleted, or no longer integral: its volume is dropped (5.2)
            if not isinstance(entry, Mapping):
                raise PoolConfigError(
                    "invalid_state", f"state of pool {name!r} must be a map", pool=name
                )
            values = []
            for key in ("volume_ratio_s", "last_integral_share", "last_strong_share"):
                value = entry.get(key, 0.0)
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not math.isfinite(value)
                    or value < 0
                ):
                    raise PoolConfigError(
                        "invalid_state",
                        f"pool {name!r}: state field {key!r} = {value!r}: must be a finite "
                        "number >= 0",
                        pool=name,
                        details={"field": key},
                    )
                values.append(float(value))
            self._volume[i], self._last_integral[i], self._last_strong[i] = values

    # --- read-only views ----------------------------------------------------------------

    @property
    def config(self) -> ParsedConfig:
        return self._config

    @property
    def settings(self) -> TreeSettings:
        return self._settings

    @property
    def pools(self) -> tuple[str, ...]:
        """Pool names, parents before children (the root is not included)."""
        return tuple(self._names[1:])

    @property
    def updated_at(self) -> float | None:
        """The time of the last update (or the one given to ``from_config``)."""
        return self._updated_at

    @property
    def alerts(self) -> list[str]:
        """The alert codes raised by the last update, in the spec's order:
        ``guarantee_overcommit``, ``flow_overcommit``."""
        return [str(alert["code"]) for alert in self._alerts]

    @property
    def alert_details(self) -> list[dict[str, object]]:
        """The last update's alerts with their numbers: ``{"code", "message", "sum"}`` and
        ``"factor"`` (k) for ``guarantee_overcommit``."""
        return [dict(alert) for alert in self._alerts]

    def spec(self, pool: str) -> PoolSpec:
        """The checked configuration of ``pool`` (``KeyError`` when unknown)."""
        return self._config.pools[pool]

    def is_leaf(self, pool: str) -> bool:
        """True when ``pool`` has no child pool (only leaves carry demand)."""
        return self._leaf[self._index[pool]]

    def volume(self, pool: str) -> float | None:
        """V of an integral pool in share * seconds, None for other pools."""
        return self._volume.get(self._index[pool])

    def shares(self) -> dict[str, Share]:
        """The last update's shares by pool (zeros before the first update). O(n)."""
        return dict(zip(self._names[1:], self._last.shares[1:], strict=True))

    def state(self) -> dict[str, object]:
        """What the next update reads, JSON-ready: ``{"updated_at": float | None,
        "pools": {name: {"volume_ratio_s", "last_integral_share", "last_strong_share"}}}``
        for every integral pool. O(m)."""
        return {
            "updated_at": self._updated_at,
            "pools": {
                self._names[i]: {
                    "volume_ratio_s": self._volume[i],
                    "last_integral_share": self._last_integral[i],
                    "last_strong_share": self._last_strong[i],
                }
                for i in self._integral
            },
        }

    # --- the update ---------------------------------------------------------------------

    def _check_total(self, total: object) -> _Totals:
        if not isinstance(total, Mapping):
            raise PoolInputError("invalid_total", f"total = {total!r}: must be a map")
        positive = _Totals()
        for name, amount in total.items():
            if (
                isinstance(amount, bool)
                or not isinstance(amount, int | float)
                or not math.isfinite(amount)
                or amount < 0
            ):
                raise PoolInputError(
                    "invalid_total",
                    f"total.{name} = {amount!r}: must be a finite number >= 0",
                    details={"resource": str(name)},
                )
            if amount > 0:
                positive[str(name)] = float(amount)
        return positive

    def _config_ratios(self, total: _Totals) -> _ConfigRatios:
        # Recomputed only when the total changes (nodes join or leave). The pass is
        # O(configured amounts): 1 ms on the benchmark tree, 12 ms when each of its
        # 10,000 leaves has limits on 10 resources -- a third of an update, saved on
        # every update with a steady total for one dict comparison.
        if self._ratio_key is not None and self._ratio_key == total:
            return self._ratios
        strong = [0.0] * self._n
        for i, amounts in self._strong_items:
            strong[i] = _ratio(amounts, total)
        limit = [1.0] * self._n
        for i, amounts in self._limit_items:
            limit[i] = _limit(amounts, total)
        flow = {i: _ratio(self._flow_items[i], total) for i in self._integral}
        burst = {i: _ratio(self._burst_items[i], total) for i in self._burst}
        total_flow: dict[int, float] = {}
        total_burst: dict[int, float] = {}
        for i in self._integral:
            for a in (i, *self._paths[i]):
                total_flow[a] = total_flow.get(a, 0.0) + flow[i]
                if i in burst:
                    total_burst[a] = total_burst.get(a, 0.0) + burst[i]
        self._ratio_key = dict(total)
        self._ratios = _ConfigRatios(strong, limit, flow, burst, total_flow, total_burst)
        return self._ratios

    # Demands are most of an update's input (100,000 amounts for 10,000 leaves). Each
    # pool's map is read by C loops: max(map(truediv, ...)) for the ratio, min and sum
    # for the check (sum, not fsum: NaN and infinities propagate alike). Measured on the
    # benchmark's 10,000 leaves x 10 resources: 17 ms; with fsum 20 ms; flattening every
    # amount into one list first (chain, one map, max per slice) 21 ms; a Python loop
    # over each amount 25 ms.
    def _leaf_ratios(self, by_pool: object, total: _Totals, what: str) -> list[float]:
        """Each leaf's dominant ratio of ``by_pool[leaf]`` (0 for leaves not given), or
        ``PoolInputError`` naming the first bad pool. O(number of amounts)."""
        code = f"invalid_{what}"
        if not isinstance(by_pool, Mapping):
            raise PoolInputError(code, f"{what}s must be a map of pool -> resources")
        out = [0.0] * self._n
        index, leaf = self._index, self._leaf
        divisor = total.__getitem__
        isfinite = math.isfinite
        for name, amounts in by_pool.items():
            i = index.get(name, 0) if isinstance(name, str) else 0
            if i == 0:
                raise PoolInputError(
                    "unknown_pool", f"{what} for unknown pool {name!r}", pool=str(name)
                )
            if not leaf[i]:
                raise PoolInputError(
                    "not_a_leaf",
                    f"{what} for pool {name!r}, which has child pools (only leaves hold "
                    "containers)",
                    pool=name,
                )
            try:
                values = amounts.values()
                if not values:
                    continue
                ratio = max(map(truediv, values, map(divisor, amounts)))
                ok = min(values) >= 0 and isfinite(sum(values))
            except (AttributeError, TypeError, ValueError, OverflowError):
                ok = False
            if not ok:
                raise PoolInputError(
                    code,
                    f"{what} of pool {name!r} = {amounts!r}: must be a map of resource -> "
                    "finite number >= 0",
                    pool=name,
                )
            out[i] = ratio
        return out

    def update(
        self,
        total: Mapping[str, float],
        demands: Mapping[str, Mapping[str, float]],
        now: float,
        usages: Mapping[str, Mapping[str, float]] | None = None,
    ) -> dict[str, Share]:
        """One period of the spec's update (steps 0-6) at time ``now``; returns every
        pool's share (the root is under ``introspect("<root>")``).

        ``total``: the cluster's resources; ``demands`` / ``usages``: leaf pools'
        resources (missing pools 0; a pool that is unknown or has children is a
        ``PoolInputError``, as is a negative or non-finite amount), in the units of
        ``total``. ``usages`` is the measured usage over the interval ending at ``now``;
        it is read only with ``charge_volume_by_usage`` (without it the full granted
        integral share is charged) and shown by ``introspect``. Volumes move by the time
        since the previous update (0 if ``now`` is earlier, at most one saturation
        period); with every total 0 all shares are 0 and volumes stay as they are.
        On an input error nothing changes.

        Cost O(n + a + m * h + sum k log k over nodes whose fill binds), for n pools,
        a input amounts, m integral pools at depth <= h.
        """
        now = _seconds(now, "now", stored=False)
        positive = self._check_total(total)
        demand = self._leaf_ratios(demands, positive, "demand")
        usage = None if usages is None else self._leaf_ratios(usages, positive, "usage")
        ratios = self._config_ratios(positive)
        settings = self._settings
        n = self._n
        parent, leaf = self._parent, self._leaf
        strong, limit, flow, burst = ratios.strong, ratios.limit, ratios.flow, ratios.burst
        top = self._children[0]

        # Step 0: D and U summed up the tree; E = min(L, D) at leaves, min(L, sum E) above.
        effective = [0.0] * n
        effective_sum = [0.0] * n
        for i in range(n - 1, 0, -1):
            p = parent[i]
            d = demand[i]
            demand[p] += d
            e = d if leaf[i] else effective_sum[i]
            if e > limit[i]:
                e = limit[i]
            effective[i] = e
            effective_sum[p] += e
        if usage is not None:
            for i in range(n - 1, 0, -1):
                usage[parent[i]] += usage[i]

        # Step 1: fit strong guarantees and bursts into the cluster, then into parents.
        alerts: list[dict[str, object]] = []
        top_strong = math.fsum(strong[c] for c in top)
        committed = top_strong + math.fsum(burst.values())
        k = 1.0
        if committed > 1.0 + EPS:
            k = 1.0 / committed
            alerts.append(
                {
                    "code": GUARANTEE_OVERCOMMIT,
                    "message": f"top-level strong guarantees plus bursts are {committed:.6g} "
                    f"of the cluster; all scaled by {k:.6g}",
                    "sum": committed,
                    "factor": k,
                }
            )
        flows = math.fsum(flow.values())
        if flows > 0 and top_strong + flows > 1.0 + EPS:
            alerts.append(
                {
                    "code": FLOW_OVERCOMMIT,
                    "message": f"top-level strong guarantees plus flows are "
                    f"{top_strong + flows:.6g} of the cluster; relaxed pools cannot all "
                    "receive their flow on average",
                    "sum": top_strong + flows,
                }
            )
        effective_burst = {i: k * b for i, b in burst.items()}
        guarantee = [0.0] * n
        guarantee[0] = 1.0
        for p, kids in self._strong_groups:
            values = [min(k * strong[c], limit[c]) for c in kids]
            summed = math.fsum(values)
            if summed > guarantee[p] + EPS:
                scale = guarantee[p] / summed
                values = [v * scale for v in values]
            for c, v in zip(kids, values, strict=True):
                guarantee[c] = v

        # Step 2: volumes, from the previous update's integral shares.
        volume = self._volume
        if self._updated_at is not None and positive:
            period = settings.pool_capacity_saturation_period
            dt = min(max(now - self._updated_at, 0.0), period)
            by_usage = settings.charge_volume_by_usage and usage is not None
            for i in self._integral:
                charged = self._last_integral[i]
                if by_usage:
                    assert usage is not None
                    charged = min(charged, max(0.0, usage[i] - self._last_strong[i]))
                before = volume[i]
                after = before + (flow[i] - charged) * dt
                ceiling = max(before, flow[i] * period)
                volume[i] = min(max(after, 0.0), ceiling)

        smooth = settings.smooth_period
        subtree_integral = [0.0] * n
        integral: dict[int, float] = dict.fromkeys(self._integral, 0.0)

        # Step 3: burst pools, weights b, rooms L_a - SG_a (1 - sum top SG at the root).
        caps, weights, members = [], [], []
        for i in self._burst:
            want = min(effective_burst[i], volume[i] / smooth, effective[i] - guarantee[i])
            if want > 0:
                caps.append(want)
                weights.append(effective_burst[i])
                members.append(i)
        if members:
            rooms: dict[int, float] = {0: 1.0 - math.fsum(guarantee[c] for c in top)}
            self._grant(members, caps, weights, rooms, limit, guarantee, subtree_integral)
            for i in members:
                integral[i] = subtree_integral[i]

        # Step 4: relaxed pools, weights V / T_s, rooms L_a - G_a, availability A at the root.
        caps, weights, members = [], [], []
        for i in self._relaxed:
            rate = volume[i] / smooth
            cap = min(rate, self._multiplier[i] * flow[i], effective[i] - guarantee[i])
            if cap > 0 and rate > 0:
                caps.append(cap)
                weights.append(rate)
                members.append(i)
        if members:
            claimed = math.fsum(min(guarantee[c] + subtree_integral[c], effective[c]) for c in top)
            rooms = {0: max(0.0, 1.0 - claimed)}
            self._grant(members, caps, weights, rooms, limit, guarantee, subtree_integral)
            for i in members:
                integral[i] = subtree_integral[i]

        # Step 5: the remainder by weight, top-down.
        totals = [0.0] * n
        totals[0] = min(1.0, effective_sum[0])
        children = self._children
        for node in self._internal:
            kids = children[node]
            budget = totals[node]
            if effective_sum[node] <= budget:
                for c in kids:
                    totals[c] = effective[c]
                continue
            if budget <= 0:
                continue
            floors = [min(guarantee[c] + subtree_integral[c], effective[c]) for c in kids]
            ceilings = [effective[c] for c in kids]
            granted = raise_by_weight(budget, floors, ceilings, self._child_weights[node])
            for c, t in zip(kids, granted, strict=True):
                totals[c] = t

        # Step 6: split and record.
        shares = [ZERO_SHARE] * n
        for i in range(1, n):
            t = totals[i]
            g = guarantee[i]
            firm = t if t < g else g
            rest = t - firm
            paid = subtree_integral[i]
            if paid > rest:
                paid = rest
            shares[i] = Share(firm, paid, rest - paid, t)
        shares[0] = Share(
            math.fsum(shares[c].strong for c in top),
            math.fsum(shares[c].integral for c in top),
            math.fsum(shares[c].weight_proportional for c in top),
            math.fsum(shares[c].total for c in top),
        )
        for i in self._integral:
            self._last_integral[i] = integral[i]
            self._last_strong[i] = guarantee[i]
        self._updated_at = now
        self._alerts = alerts
        self._last = _Snapshot(
            dict(positive), ratios, demand, usage, guarantee, effective_burst, shares
        )
        return dict(zip(self._names[1:], shares[1:], strict=True))

    def _grant(
        self,
        members: list[int],
        caps: list[float],
        weights: list[float],
        rooms: dict[int, float],
        limit: list[float],
        guarantee: list[float],
        subtree_integral: list[float],
    ) -> None:
        """Progressive filling of ``members`` (steps 3 and 4): rooms[0] is the root's;
        every other node's room is max(0, L_a - SG_a - integral granted below a so far).
        Adds each grant to ``subtree_integral`` of the pool and its ancestors. O(m * h)
        plus the sorts of binding nodes."""
        paths = [self._paths[i] for i in members]
        for path in paths:
            for a in path:
                if a not in rooms:
                    rooms[a] = max(0.0, limit[a] - guarantee[a] - subtree_integral[a])
        depth = {a: self._depth[a] for a in rooms}
        granted = progressive_fill(caps, weights, paths, rooms, depth)
        for i, path, x in zip(members, paths, granted, strict=True):
            if x <= 0:
                continue
            subtree_integral[i] += x
            for a in path:
                subtree_integral[a] += x

    # --- introspection ------------------------------------------------------------------

    def introspect(self, pool: str) -> dict[str, object]:
        """The spec's section 6 attributes of ``pool`` (or ``"<root>"``) after the last
        update, JSON-ready; ``KeyError`` for an unknown pool.

        Every pool: ``integral_guarantee_type``, ``specified_burst_ratio``,
        ``specified_resource_flow_ratio``, ``total_burst_ratio``,
        ``total_resource_flow_ratio``, ``effective_burst_ratio``,
        ``strong_guarantee_share``, ``limit_share``, ``demand_share``, ``usage_share``
        (None when the last update had no usages), ``fair_share`` ({strong, integral,
        weight_proportional, total}). Integral pools add
        ``accumulated_resource_ratio_volume``, ``accumulated_resource_volume`` and
        ``integral_pool_capacity`` (per resource of the last total, resource * s); burst
        pools add ``estimated_burst_usage_duration_seconds`` (V / (b - phi), None when
        b <= phi). The root has the type ``none``, the totals, ``fair_share`` (sums over
        top-level pools), ``limit_share`` 1, ``demand_share`` and ``usage_share``.
        Cost O(r) for r resources in the total.
        """
        i = self._index[pool]
        last = self._last
        ratios = last.ratios
        flow = ratios.flow.get(i, 0.0)
        burst = ratios.burst.get(i, 0.0)
        total_flow = ratios.total_flow.get(i, 0.0)
        total_burst = ratios.total_burst.get(i, 0.0)
        usage = None if last.usage is None else last.usage[i]
        if i == 0:
            return {
                "integral_guarantee_type": NONE,
                "total_burst_ratio": total_burst,
                "total_resource_flow_ratio": total_flow,
                "limit_share": 1.0,
                "demand_share": last.demand[0],
                "usage_share": usage,
                "fair_share": last.shares[0].as_dict(),
            }
        kind = self._kind[i]
        out: dict[str, object] = {"integral_guarantee_type": kind}
        if kind != NONE:
            volume = self._volume[i]
            period = self._settings.pool_capacity_saturation_period
            out["accumulated_resource_ratio_volume"] = volume
            out["accumulated_resource_volume"] = {r: volume * t for r, t in last.total.items()}
            out["integral_pool_capacity"] = {r: flow * period * t for r, t in last.total.items()}
        out |= {
            "specified_burst_ratio": burst,
            "specified_resource_flow_ratio": flow,
            "total_burst_ratio": total_burst,
            "total_resource_flow_ratio": total_flow,
        }
        if kind == BURST:
            out["estimated_burst_usage_duration_seconds"] = (
                self._volume[i] / (burst - flow) if burst > flow + EPS else None
            )
        out |= {
            "effective_burst_ratio": last.effective_burst.get(i, 0.0),
            "strong_guarantee_share": last.strong_guarantee[i],
            "limit_share": ratios.limit[i],
            "demand_share": last.demand[i],
            "usage_share": usage,
            "fair_share": last.shares[i].as_dict(),
        }
        return out
